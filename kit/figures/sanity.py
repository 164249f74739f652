"""What physics allows a printed figure to be: the checks every output passes through.

A kit people trust never prints a number physics forbids as if it were a measurement. Every
surface (printed tables, the report, the TUI, model files, SimGrid exports, diff, LogGP,
contention) asks these pure functions about a figure before it shows it, and either refuses it
with the reason or prints it flagged (:func:`flag`) with why. The rules:

- a time (latency, overhead, one-way time, gap) is finite and >= 0 (:func:`time_problem`);
  a per-byte cost likewise;
- a bandwidth is finite, > 0 and below :data:`CEILING_BPS` (:func:`bandwidth_problem`);
- a SimGrid factor is finite, > 0 and at most :data:`MAX_FACTOR`, and the latency it makes
  of the nominal one is a time (:func:`factor_problem`);
- an interval is finite, holds its value, and for a positive quantity or a ratio lives on
  the log scale: its ends are > 0 and span at most :data:`MAX_SPAN` (beyond that it is no
  estimate: "between 0 and 5e30 %" says nothing) (:func:`interval_problem`);
- a regime's median time does not fall with size (:func:`steps_down`): a larger message
  faster than a smaller one happens only at a protocol switch the data shows.

Pure functions of numbers: no dataset, model or I/O (kit/figures is below them all).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The fastest data rate the kit accepts as a point-to-point bandwidth, B/s: 4 TB/s, above
#: the memory bandwidth of any node MPI runs on (HBM3 GPUs: ~3.3 TB/s) and ~80x a 400 Gb/s
#: link. A figure above it is a fit's artefact (a flat curve over a wide size range).
CEILING_BPS = 4e12
#: The slowest one-way time the kit prints as a message time: an hour.
MAX_TIME_S = 3600.0
#: Widest ratio hi/lo an interval of a positive quantity may span and still be an estimate.
MAX_SPAN = 1e3
#: Largest SimGrid factor the kit writes: a factor multiplies the nominal latency or bandwidth
#: of the route; a million times it describes no network (a fit's flat stretch).
MAX_FACTOR = 1e6
#: A regime's median may dip this much (relative) with size before it "steps down": fitted
#: curves wiggle by rounding, a protocol switch moves them by far more.
STEP_TOLERANCE = 0.02

#: What a flagged figure carries in printed output (tests look for it).
FLAG = "[not physical:"


def flag(text: str, why: str) -> str:
    """``text`` printed flagged: the figure, then why it cannot be taken as measured."""
    return f"{text} {FLAG} {why}]"


def _finite(value: float | None) -> bool:
    return value is not None and isinstance(value, int | float) and math.isfinite(value)


def time_problem(value: float | None, what: str = "time") -> str | None:
    """Why ``value`` (seconds) cannot be a time, or None."""
    if not _finite(value):
        return f"{what} is not a finite number ({value})"
    assert value is not None
    if value < 0:
        return f"{what} {value:.4g} s is negative: no message takes less than no time"
    if value > MAX_TIME_S:
        return f"{what} {value:.4g} s is over an hour: a stall or a unit error, not a message"
    return None


def per_byte_problem(value: float | None, what: str = "per-byte cost") -> str | None:
    """Why ``value`` (seconds per byte) cannot be a per-byte cost, or None."""
    if not _finite(value):
        return f"{what} is not a finite number ({value})"
    assert value is not None
    if value < 0:
        return f"{what} {value:.4g} s/B is negative: more bytes cannot take less time"
    return None


def bandwidth_problem(value: float | None, what: str = "bandwidth") -> str | None:
    """Why ``value`` (B/s) cannot be a bandwidth, or None."""
    if not _finite(value):
        return f"{what} is not a finite number ({value})"
    assert value is not None
    if value <= 0:
        return f"{what} {value:.4g} B/s is not positive"
    if value > CEILING_BPS:
        return (f"{what} {value:.4g} B/s is above {CEILING_BPS:.0e} B/s, faster than any "
                "memory bus: a fit's artefact")
    return None


def factor_problem(value: float | None, what: str, nominal: float | None = None,
                   kind: str = "latency") -> str | None:
    """Why a SimGrid factor cannot be written, or None. ``nominal``: the latency (s) a
    latency factor multiplies; the product must be a time."""
    if not _finite(value):
        return f"{what} is not a finite number ({value})"
    assert value is not None
    if value <= 0:
        return (f"{what} is {value:.4g}: a factor <= 0 makes the "
                f"{'latency vanish' if kind == 'latency' else 'bandwidth vanish'}, "
                "nothing a network does")
    if value > MAX_FACTOR:
        return f"{what} is {value:.4g}, above {MAX_FACTOR:.0e} times the route's nominal value"
    if kind == "latency" and nominal is not None and _finite(nominal):
        # (a bandwidth factor's product is not checked: at a few bytes the per-byte cost is
        # nothing, and a flat piece writes the largest factor allowed)
        return time_problem(value * nominal, f"{what} x nominal latency")
    return None


def interval_problem(value: float | None, lo: float | None, hi: float | None, *,
                     positive: bool = True) -> str | None:
    """Why ``[lo, hi]`` is no interval for ``value``, or None (absent ends are not a
    problem: they are printed as "no interval" with their own reason)."""
    if lo is None or hi is None:
        return None
    if not (_finite(lo) and _finite(hi)):
        return f"interval [{lo}, {hi}] is not finite"
    if value is not None and _finite(value) and not lo <= value <= hi:
        return f"interval [{lo:.4g}, {hi:.4g}] does not hold its value {value:.4g}"
    if positive:
        if lo <= 0:
            return (f"interval [{lo:.4g}, {hi:.4g}] of a positive quantity reaches "
                    f"{'zero' if lo == 0 else 'below zero'}: the data cannot bound it")
        if hi / lo > MAX_SPAN:
            return (f"interval spans a factor {hi / lo:.3g} (more than {MAX_SPAN:.0e}): "
                    "too little data to bound it")
    return None


def ratio_interval_problem(change: float, lo: float, hi: float) -> str | None:
    """A relative change B/A - 1 with its interval, checked on the ratio's (log) scale."""
    return interval_problem(1 + change, 1 + lo, 1 + hi, positive=True)


def steps_down(sizes: Sequence[float], medians: Sequence[float],
               tolerance: float = STEP_TOLERANCE) -> list[tuple[float, float]]:
    """(size, relative drop) where the median falls with size by more than ``tolerance``,
    sizes in increasing order."""
    out = []
    for i in range(1, len(sizes)):
        before, after = medians[i - 1], medians[i]
        if before > 0 and after < before * (1 - tolerance):
            out.append((sizes[i], 1 - after / before))
    return out
