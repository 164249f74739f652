"""A median and its distribution-free interval: the statistic behind latency and bandwidth.

The number of samples below the true median is Binomial(n, 1/2), so the order statistics
``[x_(r), x_(n+1-r)]`` (1-based) cover it with probability about ``level`` for
``r = floor((n + 1 - z sqrt(n)) / 2)``, the normal approximation of the binomial (equal to
the exact rank for n = 6, 9, 100...; below 6 samples no 95 % interval exists). No assumption
on the shape of the noise: heavy tails are the rule in these measurements. The same rank is
computed in Python (:func:`median_interval`) and in a Polars query (:func:`median_exprs`,
the dataset's stored summary), so a figure and its interval are the same numbers whether a
listing or a report computes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

LEVEL = 0.95
#: The normal quantile of (1 + LEVEL) / 2.
Z = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """A figure with its interval (``lo``/``hi`` None when ``n`` is too small for one)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    @property
    def known(self) -> bool:
        return self.value is not None and math.isfinite(self.value)


def lower_rank(n: int) -> int:
    """The 1-based rank of the interval's lower end (0: no interval at :data:`LEVEL`)."""
    if n <= 0:
        return 0
    return max(0, math.floor((n + 1 - Z * math.sqrt(n)) / 2))


def median_interval(values: Sequence[float]) -> Estimate:
    """Median of the finite ``values`` with its interval (plain Python: a few thousand
    values at most reach here; the dataset's summary uses :func:`median_exprs`)."""
    x = sorted(v for v in values if math.isfinite(v))
    n = len(x)
    if n == 0:
        return Estimate(None, n=0)
    mid = n // 2
    median = x[mid] if n % 2 else (x[mid - 1] + x[mid]) / 2.0
    r = lower_rank(n)
    if r < 1:
        return Estimate(median, n=n)
    return Estimate(median, x[r - 1], x[n - r], n)


def median_exprs(x: pl.Expr, name: str) -> list[pl.Expr]:
    """``name``, ``name_lo``, ``name_hi``: :func:`median_interval` of ``x`` per group, as
    Polars aggregations (``x`` already filtered to the rows the figure uses)."""
    import polars as pl

    n = x.len().cast(pl.Float64)
    r = ((n + 1.0 - Z * n.sqrt()) / 2.0).floor().cast(pl.Int64)
    ordered = x.sort()
    lo = ordered.get((r - 1).clip(0), null_on_oob=True)
    hi = ordered.get((n.cast(pl.Int64) - r).clip(0), null_on_oob=True)
    ok = r >= 1
    return [x.median().alias(name),
            pl.when(ok).then(lo).otherwise(None).cast(pl.Float64).alias(f"{name}_lo"),
            pl.when(ok).then(hi).otherwise(None).cast(pl.Float64).alias(f"{name}_hi")]
