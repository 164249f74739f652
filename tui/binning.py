"""Summaries for drawing: quantile bands per size bin and a spread subset of samples.

The only computation of the TUI's own: a terminal canvas is a few hundred dots wide, so
millions of samples are summarised before they are drawn."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tui.loading import Samples

#: Quantiles drawn as bands under the sample cloud, so tails stay visible after downsampling.
BAND_QUANTILES: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


@dataclass(frozen=True)
class Binned:
    """Per size bin: a representative size, quantiles of time, and a few samples to draw."""

    size: np.ndarray  # median size of each bin
    count: np.ndarray
    quantiles: dict[float, np.ndarray]  # BAND_QUANTILES -> time per bin
    points_size: np.ndarray  # downsampled samples (at most per_bin per bin)
    points_time: np.ndarray


#: Samples the drawing summary is computed from; quantile bands of a larger series are
#: indistinguishable at terminal resolution and cost seconds to compute.
DRAW_MAX_SAMPLES = 1_000_000


#: Samples per drawing bin: enough for stable 1 %/99 % bands (``BIN_COUNT_MAX``), relaxed
#: down to ``BIN_COUNT_MIN`` for small series so they still get ``BIN_TARGET`` bins.
BIN_COUNT_MAX = 100


BIN_COUNT_MIN = 30


BIN_TARGET = 40


#: A series is a grid (drawn per exact size) when it has at most this many distinct sizes
#: and ``GRID_SHARE`` of its samples sit on sizes holding the minimum bin count each.
GRID_MAX_SIZES = 1024


GRID_SHARE = 0.9


def min_bin_count(n: int) -> int:
    """The fewest samples a drawing bin of an ``n``-sample series holds."""
    return min(max(n // BIN_TARGET, BIN_COUNT_MIN), BIN_COUNT_MAX)


def _grid_bins(size: np.ndarray, min_count: int) -> np.ndarray | None:
    """Bin = exact size, if the series is a grid (many samples per size); else ``None``.

    A subsample decides cheaply for the common dense case: if a few thousand samples
    already hold more distinct sizes than a grid may, the whole series does too.
    """
    probe = size[:: max(size.size // 20_000, 1)]
    if pl.Series(probe).n_unique() > GRID_MAX_SIZES:
        return None
    sizes = np.sort(pl.Series(size).unique().to_numpy())
    if sizes.size > GRID_MAX_SIZES:
        return None
    index = np.searchsorted(sizes, size)
    counts = np.bincount(index, minlength=sizes.size)
    if counts[counts >= min_count].sum() < GRID_SHARE * size.size:
        return None
    return index.astype(np.int32)


def _log_base(size: np.ndarray, bins_per_octave: int) -> np.ndarray:
    """Quarter-octave (by default) bin of each sample, numbered from 0.

    float32 is plenty for a bin index and its log2 is several times faster than float64's:
    this runs on up to ``DRAW_MAX_SAMPLES`` samples every time a series opens.
    """
    t = size.astype(np.float32)
    np.maximum(t, 1.0, out=t)
    np.log2(t, out=t)
    t *= bins_per_octave
    base = np.floor(t, out=t).astype(np.int32)
    base -= base.min()
    return base


def _merge_lut(counts: np.ndarray, bins_per_octave: int, min_count: int) -> np.ndarray:
    """Merged bin id per base bin: neighbours joined until each holds ``min_count`` samples.

    Merging never crosses more than an octave without samples, so sizes far apart (8 B and
    1 MiB) never share a bin; an island of fewer samples than ``min_count`` is one bin.
    """
    nonempty = np.flatnonzero(counts)
    islands = np.split(nonempty, np.flatnonzero(np.diff(nonempty) > bins_per_octave + 1) + 1)
    lut = np.zeros(counts.size, dtype=np.int32)
    group = 0  # next free bin id
    for island in islands:
        first, filled = group, 0
        for i in island.tolist():
            lut[i] = group
            filled += int(counts[i])
            if filled >= min_count:
                group, filled = group + 1, 0
        if filled and group > first:  # an under-filled tail joins the island's last bin
            lut[island[lut[island] == group]] = group - 1
        elif filled:  # the whole island is smaller than one bin
            group += 1
    return lut


def _bin_ids(size: np.ndarray, bins_per_octave: int, min_count: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """(narrow, merged) drawing bin of each sample; the same array when nothing merges.

    A grid series gets its exact sizes in both; otherwise narrow bins are log-size bins
    and merged ones join them until each holds ``min_count`` samples.
    """
    if size.size == 0:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty
    grid = _grid_bins(size, min_count)
    if grid is not None:
        return grid, grid
    base = _log_base(size, bins_per_octave)
    counts = np.bincount(base)
    lut = _merge_lut(counts, bins_per_octave, min_count)
    if int(lut.max()) + 1 == np.count_nonzero(counts):  # every bin already holds enough
        return base, base
    return base, lut[base]


def _summarise(size: np.ndarray, time: np.ndarray, bins: np.ndarray, per_bin: int) -> Binned:
    df = pl.DataFrame({"size": size, "time": time, "bin": bins}).lazy()
    stats = (df.group_by("bin")
             .agg(pl.col("size").median().alias("size"), pl.len().alias("count"),
                  *[pl.col("time").quantile(q, interpolation="linear").alias(f"q{q}")
                    for q in BAND_QUANTILES])
             .sort("bin"))
    points = (df.with_columns(pos=pl.int_range(pl.len()).over("bin"),
                              cnt=pl.len().over("bin"))
              .filter(pl.col("pos") % (pl.col("cnt") // per_bin).clip(1) == 0)
              .select("size", "time"))
    st, pts = pl.collect_all([stats, points])
    return Binned(
        size=st["size"].to_numpy(),
        count=st["count"].to_numpy(),
        quantiles={q: st[f"q{q}"].to_numpy() for q in BAND_QUANTILES},
        points_size=pts["size"].to_numpy(),
        points_time=pts["time"].to_numpy(),
    )


def _drawn(size: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every k-th sample, copied once into contiguous arrays (Polars then needs no copy)."""
    step = max(size.shape[0] // DRAW_MAX_SAMPLES, 1)
    return np.ascontiguousarray(size[::step]), np.ascontiguousarray(time[::step])


def bin_samples(samples: Samples, *, bins_per_octave: int = 4, per_bin: int = 160,
                min_count: int | None = None, merge: bool = True) -> Binned:
    """Quantiles of time per size bin and an evenly spread subset of samples per bin.

    Drawing millions of points is pointless on a 200-dot-wide canvas; quantile bands per
    bin keep the tails visible that a subsample would hide. A grid series (many samples
    per exact size) gets one bin per size. Otherwise bins are ``1/bins_per_octave`` of an
    octave and, with ``merge`` (the raw view), merged with their neighbours until each
    holds ``min_count`` samples (default :func:`min_bin_count`): a sparse log-uniform
    series has a handful of samples per size, and 1 %/99 % bands through so few jump from
    bin to bin. Without ``merge`` (per-bin medians, compare) bins stay narrow, so a step
    between regimes stays sharp. The subset takes every k-th sample of a bin in run order
    (sizes are shuffled in time, so this spreads over the run) which is deterministic, so
    snapshots are too.
    """
    size, time = _drawn(samples.size, samples.time)
    wanted = min_bin_count(size.size) if min_count is None else max(int(min_count), 1)
    narrow, merged = _bin_ids(size, bins_per_octave, wanted)
    return _summarise(size, time, merged if merge else narrow, per_bin)


def draw_summaries(samples: Samples) -> tuple[Binned, Binned]:
    """(raw view, median view) summaries; one computation when merging changes nothing.

    Dense series (where open time matters) already hold enough samples per log bin, so
    they pay for one summary; only sparse, hence small, series are summarised twice.
    """
    return draw_summaries_of(samples.size, samples.time)


def draw_summaries_of(size: np.ndarray, time: np.ndarray) -> tuple[Binned, Binned]:
    """:func:`draw_summaries` of bare arrays (tui.drawcache's preview of rows not yet
    judged by run quality)."""
    size, time = _drawn(size, time)
    narrow, merged = _bin_ids(size, 4, min_bin_count(size.size))
    median = _summarise(size, time, narrow, 160)
    return (median if merged is narrow else _summarise(size, time, merged, 160)), median
