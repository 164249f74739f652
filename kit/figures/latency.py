"""What "latency" means in the kit: one definition, computed from the measured samples.

    latency = median time of the series' messages of at most 64 B

(when the series starts above 64 B: of its smallest octave of sizes, ``size <= 2 x
size_min``), with the median's distribution-free 95 % interval (kit.figures.estimate). The
time is what the series' op measures: one way (half the round trip) for pingpong, the call's
duration for send/recv, the per-message gap for stream. It is read off the samples, not a
model, so ``pt2pt datasets`` (no model) and the report (a model) show the same number: both
read the dataset's stored summary (kit.data.dataset.series_table), which computes it with
:func:`latency_exprs`; a set of samples that is no dataset series (a half of one in
``pt2pt diff --halves``) gets the same figure from :func:`latency_of`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kit.figures.estimate import Estimate, median_exprs, median_interval

if TYPE_CHECKING:
    import polars as pl

#: Messages of at most this many bytes are "small".
SMALL_SIZE = 64
LABEL = "latency"
DEFINITION = (f"latency = median time of messages <= {SMALL_SIZE} B (a series starting above "
              f"{SMALL_SIZE} B: of its smallest octave of sizes), 95 % interval of the median")


def small_bound(size_min: float) -> float:
    """The largest size (bytes) whose samples make the latency of a series starting at
    ``size_min``."""
    return float(SMALL_SIZE) if size_min <= SMALL_SIZE else 2.0 * float(size_min)


def latency_of(size: Sequence[float], time: Sequence[float]) -> Estimate:
    """The latency figure of samples given as arrays (sizes in bytes, times in seconds)."""
    if len(size) == 0:
        return Estimate(None)
    bound = small_bound(min(size))
    return median_interval([t for s, t in zip(size, time, strict=True) if s <= bound])


def latency_exprs(size: pl.Expr, time: pl.Expr, bound: pl.Expr) -> list[pl.Expr]:
    """``latency_s``, ``latency_s_lo``, ``latency_s_hi`` per group (``bound``: the group's
    :func:`small_bound`, e.g. a joined column)."""
    return median_exprs(time.filter(size <= bound), "latency_s")


def bound_expr(size_min: pl.Expr) -> pl.Expr:
    """:func:`small_bound` as a Polars expression."""
    import polars as pl

    return (pl.when(size_min.cast(pl.Float64) <= SMALL_SIZE).then(pl.lit(float(SMALL_SIZE)))
            .otherwise(2.0 * size_min.cast(pl.Float64)))
