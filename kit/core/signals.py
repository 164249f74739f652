"""SIGTERM as an exception, from the first moment of every ``pt2pt`` command.

Python's default for SIGTERM is to die on the spot: ``pt2pt ingest`` killed in its first
seconds (while it imported Polars) exited -15 without a word, and a command stopped later
could leave a child running. :func:`install` is the first thing :func:`kit.cli.main` does:
SIGTERM (and SIGHUP, a closed terminal) then raise :class:`Stopped`, which unwinds like
KeyboardInterrupt does for SIGINT: every output being written is removed whole
(kit.core.atomicwrite), children are stopped by their owners, and the CLI prints one line
and exits 128 + the signal. Commands that must hold a signal at a critical moment (ingest's
commit) install their own handlers for that stretch and put these back afterwards.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

#: The signals that stop a command this way (SIGINT stays Python's KeyboardInterrupt).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """A stop signal arrived (a BaseException: no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def install() -> Callable[[], None]:
    """Make the stop signals raise :class:`Stopped` (main thread only; a no-op elsewhere).
    Returns what puts the previous handlers back (a program calling the CLI in-process,
    such as the tests, keeps its own)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {sig: signal.signal(sig, _raise) for sig in STOP_SIGNALS}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore
