"""The TUI's adapter to ``kit.analyses.diff``: two loaded series in, rows to show out.

Screens show; this module decides what a diff of two series means on screen (which rows,
which are highlighted), so it can be tested without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kit.analyses.diff import DiffResult, Side, diff, human_size
from tui.loading import Samples, run_conditions


@dataclass(frozen=True)
class DiffRow:
    """One line of the diff table: a size band and statistic, its change and interval."""

    sizes: str
    stat: str
    change: str
    interval: str
    changed: bool
    slower: bool


def diff_series(a: Samples, b: Samples, dataset: str | Path | None = None, *,
                seed: int = 0) -> DiffResult:
    """B against A (see ``pt2pt diff``), on the samples the explorer already holds (the rows
    ``pt2pt fit`` fits, so the comparison is ``pt2pt diff``'s on the same series); with
    ``dataset``, the runs' recorded conditions too (no verdict on a disturbed side)."""
    def side(s: Samples) -> Side:
        found = run_conditions(dataset, s.key) if dataset is not None else []
        return Side.of(s.key.label, s.fit_rows(), conditions=found)

    return diff(side(a), side(b), seed=seed)


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}" if abs(x) < 0.1 else f"{100 * x:+.0f}"


def rows(result: DiffResult) -> list[DiffRow]:
    """Table rows: every band's p05/p50/p95 change, changed ones flagged for highlighting."""
    out = []
    for c in result.bands:
        sizes = f"{human_size(c.size_lo)}–{human_size(c.size_hi)}"
        if c.kind != "regime":
            sizes += " *"
        out.append(DiffRow(sizes, c.stat, f"{_pct(c.change)} %",
                           f"[{_pct(c.ci_lo)}, {_pct(c.ci_hi)}]",
                           c.significant, c.change > 0))
    return out
