"""What the optional parts of a command cost, in CPU seconds, for the line that says so.

``pt2pt fit`` validates on held-out samples and draws bootstrap intervals by default; a
user who waits should see what each costs next to the flag that skips it
(``--no-validate``, ``--no-intervals``). The parts charge their CPU time here as they run
(:func:`charged`); the command reads it (:func:`spent`). Nothing of this goes into a
model file: a file must not differ from one run to the next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

_SPENT: dict[str, float] = {}


@contextmanager
def charged(part: str) -> Iterator[None]:
    """Add the CPU seconds of the ``with`` block (this process, all its threads) to ``part``."""
    start = time.process_time()
    try:
        yield
    finally:
        _SPENT[part] = _SPENT.get(part, 0.0) + time.process_time() - start


def spent(part: str) -> float | None:
    """CPU seconds charged to ``part`` in this process so far (None: it did not run)."""
    return _SPENT.get(part)


__all__ = ["charged", "spent"]
