"""What "bandwidth" means in the kit: one definition, computed from the measured samples.

The demo summary once said 439 MB/s for a tcp ping-pong while ``pt2pt datasets`` and the
TUI said 3.95 GB/s for the same series; later 12.5 GB/s (the model's median at 4 MiB)
against 9.7 GB/s (the samples' top octave). There is one definition now:

    effective bandwidth = median of S / time over the series' largest octave of sizes
                          (S >= size_max / 2), in bytes per second

with the median's distribution-free 95 % interval (kit.figures.estimate). It is a ratio, not
a slope: it includes the latency, so the sizes it was taken over are part of the figure and
every label names them (:func:`label`). It is read off the samples, like the latency
(kit.figures.latency): the dataset's stored summary computes it with
:func:`bandwidth_exprs`, every surface reads that summary, and samples that are no dataset
series get the same figure from :func:`bandwidth_of`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kit.figures.estimate import Estimate, median_exprs, median_interval
from kit.figures.text import format_size

if TYPE_CHECKING:  # Polars only for the summary query; `pt2pt datasets` never needs it
    import polars as pl

LABEL = "eff. bw (top octave)"
DEFINITION = ("eff. bw (top octave) = median of size / time over the series' largest octave "
              "of sizes (size >= max / 2), 95 % interval of the median; MB/s = 10^6 B/s")


def large_bound(size_max: float) -> float:
    """The smallest size (bytes) whose samples make the bandwidth of a series ending at
    ``size_max``."""
    return float(size_max) / 2.0


def effective_bandwidth(size: float, time: float) -> float:
    """S / t in bytes per second (NaN when the time is not positive)."""
    return float(size) / float(time) if time > 0 else math.nan


def label(size_max: float) -> str:
    """``eff. bw 2 MiB-4 MiB``: the figure's label with the sizes it was taken over."""
    return f"eff. bw {format_size(large_bound(size_max))}-{format_size(size_max)}"


def bandwidth_of(size: Sequence[float], time: Sequence[float]) -> Estimate:
    """The bandwidth figure of samples given as arrays (sizes in bytes, times in seconds)."""
    if len(size) == 0:
        return Estimate(None)
    bound = large_bound(max(size))
    return median_interval([s / t for s, t in zip(size, time, strict=True)
                            if s >= bound and s > 0 and t > 0])


def bound_expr(size_max: pl.Expr) -> pl.Expr:
    """:func:`large_bound` as a Polars expression."""
    import polars as pl

    return size_max.cast(pl.Float64) / 2.0


def bandwidth_exprs(size: pl.Expr, time: pl.Expr, bound: pl.Expr) -> list[pl.Expr]:
    """``bandwidth_Bps``, ``bandwidth_Bps_lo``, ``bandwidth_Bps_hi`` per group (``bound``:
    the group's :func:`large_bound`, e.g. a joined column)."""
    import polars as pl

    rate = size.cast(pl.Float64) / time
    return median_exprs(rate.filter((size >= bound) & (size > 0) & (time > 0)), "bandwidth_Bps")
