"""Progress bars for the long stages (run-local, large ingests, fits), and ``--quiet``.

A bar is drawn on stderr only when stderr is a terminal and the user did not ask for quiet
(``pt2pt --quiet ...`` or ``PT2PT_QUIET=1``): a script's stdout stays the results, its stderr
the errors, and a CI log gets no carriage-return noise. Everything here is a no-op otherwise,
so the stages call it unconditionally.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

QUIET_ENV = "PT2PT_QUIET"
_quiet = False


def set_quiet(quiet: bool) -> None:
    """Set by the CLI from the global ``--quiet``: no bars, no progress lines."""
    global _quiet
    _quiet = quiet


def quiet() -> bool:
    return _quiet or os.environ.get(QUIET_ENV, "") not in ("", "0")


def bars_enabled() -> bool:
    """A bar is worth drawing: not quiet, and stderr is a terminal a person watches."""
    return not quiet() and sys.stderr.isatty()


class Bar:
    """One task of a rich progress display, or nothing (not a terminal, or quiet)."""

    def __init__(self, progress: Any | None, task: Any | None) -> None:
        self._progress = progress
        self._task = task

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def update(self, *, description: str | None = None, total: float | None = None,
               completed: float | None = None, advance: float | None = None) -> None:
        if self._progress is None:
            return
        fields: dict[str, Any] = {}
        if description is not None:
            fields["description"] = description
        if total is not None:
            fields["total"] = total
        if completed is not None:
            fields["completed"] = completed
        if advance is not None:
            fields["advance"] = advance
        self._progress.update(self._task, **fields)

    def print(self, text: str) -> None:
        """A line above the bar (or on stderr without one), unless quiet."""
        if quiet():
            return
        if self._progress is not None:
            self._progress.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=sys.stderr, flush=True)


def track(items: Iterable[T], label: str, total: int,
          describe: Callable[[T], str] = str) -> Iterator[T]:
    """``for x in track(xs, "report", len(xs)):`` a bar over a loop, the loop body unchanged."""
    with bar(label, total=total) as shown:
        for index, item in enumerate(items):
            shown.update(completed=index, description=describe(item))
            yield item
        shown.update(completed=total)


@contextmanager
def bar(label: str, total: float | None = None, *, description: str = "",
        transient: bool = True, count: bool = True) -> Iterator[Bar]:
    """``with bar("ingest", total=n) as b: ... b.update(advance=1)``.

    ``total=None`` draws a pulsing bar with the elapsed time (a fit has no count to show).
    ``transient``: the bar disappears when done, leaving the log to the results.
    ``count``: show "done/total" (jobs, series); else a percentage (bytes).
    """
    if not bars_enabled():
        yield Bar(None, None)
        return
    from rich import progress as rp
    from rich.console import Console

    columns = [rp.TextColumn(f"[bold]{label}"), rp.BarColumn(),
               rp.MofNCompleteColumn() if count else rp.TaskProgressColumn(),
               rp.TimeElapsedColumn(), rp.TextColumn("{task.description}")]
    with rp.Progress(*columns, console=Console(stderr=True), transient=transient) as progress:
        task = progress.add_task(description, total=total)
        yield Bar(progress, task)
