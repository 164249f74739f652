"""Data warnings of kit (:class:`kit.core.errors.DataWarning`) as the explorer's notifications.

The CLI prints a data warning (a damaged or missing part of a dataset, left out of every
result) on stderr; while the explorer owns the terminal, Textual captures stderr and drops it,
so a user browsing a damaged dataset was never told that samples were missing. While the app
runs, data warnings become warning notifications instead (from whichever thread the dataset
was read in); other warnings keep their usual route.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any, TextIO

from textual.app import App

from kit.core.errors import DataWarning

#: Long enough to read a paragraph naming a part file and its run.
TIMEOUT_S = 20


def notify_data_warnings(app: App[Any]) -> Callable[[], None]:
    """Route data warnings to ``app.notify`` (call it on the app's event loop); returns what
    puts the previous route back."""
    loop = asyncio.get_running_loop()
    previous = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if not issubclass(category, DataWarning):
            previous(message, category, filename, lineno, file, line)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(lambda: app.notify(str(message), title="Data",
                                                         severity="warning",
                                                         timeout=TIMEOUT_S))

    warnings.showwarning = show

    def restore() -> None:
        if warnings.showwarning is show:
            warnings.showwarning = previous

    return restore
