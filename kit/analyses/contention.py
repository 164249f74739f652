"""Latency and bandwidth against the number of concurrent pairs k (the probe's ``--pairs``).

The question a contention campaign asks is "what does one pair get when k pairs share the
network": the ideal link split fairly gives each pair 1/k of the bandwidth, so the ratio of
the per-pair bandwidth to k = 1 (``x k=1``) is printed beside 1/k, and the aggregate (k times
the per-pair figure) says whether the k pairs together fill more than one pair could.

Series that differ only in ``pairs`` form a group; each k is compared in the same size windows
(a quarter octave each): the smallest window every k measured densely (latency: median one-way
time) and the largest (per-pair effective bandwidth, kit.figures.bandwidth's definition: size /
one-way time per sample, its median). Without a window every k measured densely the group says
it cannot compare them.

Intervals: distribution-free, for the median (order statistics). The number of samples below
the true median is Binomial(n, 1/2), so [x_(r), x_(n+1-r)] covers it with probability
1 - 2 P(B <= r - 1); r is the largest rank with that >= the level. No assumption on the
shape of the noise (heavy tails are the rule here), exact for continuous data, conservative
otherwise. Below 6 samples no 95 % interval exists; the figure then says so.

Pure functions on frames (``pairs``, ``size``, ``time``); :func:`contention` is the one that
reads a dataset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

LEVEL = 0.95
#: The keys of a group: every series key but ``pairs``.
GROUP_KEYS = ("campaign", "tool", "transport", "placement", "host_pair", "op", "stat")


def median_interval(values: Any, level: float = LEVEL) -> dict[str, Any]:
    """Median of ``values`` and its distribution-free ``level`` interval (module doc).

    The dict format_interval prints: ``value``, ``lo``, ``hi`` (None with ``why`` when the
    sample is too small), plus ``n`` and ``level``.
    """
    from scipy.stats import binom

    x = np.sort(np.asarray(values, dtype=np.float64))
    x = x[np.isfinite(x)]
    n = int(x.size)
    out: dict[str, Any] = {"value": float(np.median(x)) if n else None, "lo": None, "hi": None,
                           "n": n, "level": level}
    if n == 0:
        out["why"] = "no samples"
        return out
    alpha = (1.0 - level) / 2.0
    j = int(binom.ppf(alpha, n, 0.5))  # smallest j with P(B <= j) >= alpha
    while j >= 0 and binom.cdf(j, n, 0.5) > alpha:
        j -= 1
    if j < 0:
        out["why"] = f"{n} samples are too few for a {level:.0%} interval (6 needed)"
        return out
    r = j + 1  # 1-based rank of the lower end; the upper end is rank n + 1 - r
    out["lo"], out["hi"] = float(x[r - 1]), float(x[n - r])
    return out


def min_samples(level: float = LEVEL) -> int:
    """The smallest n for which :func:`median_interval` gives an interval at ``level``."""
    from scipy.stats import binom

    n = 1
    while binom.cdf(0, n, 0.5) > (1.0 - level) / 2.0:
        n += 1
    return n


@dataclass
class KRow:
    """One k of a group: the figures and their intervals."""

    k: int
    latency: dict[str, Any]  # median one-way time at the small size, seconds, with interval
    bandwidth: dict[str, Any]  # per-pair effective bandwidth at the large size, B/s
    latency_ratio: float | None = None  # median time / k=1's
    bandwidth_ratio: float | None = None  # per-pair bandwidth / k=1's ("x k=1")
    ideal: float = 1.0  # 1/k, the fair share of one link

    @property
    def aggregate_Bps(self) -> float | None:
        """k times the per-pair median: what the k pairs move together."""
        value = self.bandwidth.get("value")
        return None if value is None else self.k * float(value)

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "latency_s": self.latency, "latency_x_k1": self.latency_ratio,
                "per_pair_bandwidth_Bps": self.bandwidth,
                "per_pair_bandwidth_x_k1": self.bandwidth_ratio, "ideal_x_k1": self.ideal,
                "aggregate_bandwidth_Bps": self.aggregate_Bps}


@dataclass
class Group:
    """Series that differ only in k, compared at common sizes."""

    keys: dict[str, str]
    #: the size windows [lo, hi) bytes compared: latency in the smallest, bandwidth in the
    #: largest every k measured densely
    small_size: tuple[int, int] | None = None
    large_size: tuple[int, int] | None = None
    rows: list[KRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        from kit.data.schema import UNKNOWN

        return " / ".join(v for k, v in self.keys.items() if v and v != UNKNOWN)

    def to_dict(self) -> dict[str, Any]:
        return {"series": self.keys,
                "small_sizes": list(self.small_size) if self.small_size else None,
                "large_sizes": list(self.large_size) if self.large_size else None,
                "level": LEVEL,
                "rows": [r.to_dict() for r in self.rows], "notes": self.notes}


def groups_of(table: pl.DataFrame) -> list[dict[str, str]]:
    """The groups (GROUP_KEYS values) of a series table that hold two or more values of k."""
    if table.height == 0 or "pairs" not in table.columns:
        return []
    keys = list(GROUP_KEYS)
    found = (table.select(*[pl.col(k).cast(pl.String) for k in keys],
                          pl.col("pairs").cast(pl.String))
             .group_by(keys).agg(n_k=pl.col("pairs").n_unique())
             .filter(pl.col("n_k") >= 2).sort(keys))
    return [{k: str(row[k]) for k in keys} for row in found.iter_rows(named=True)]


#: Size windows per octave: log-uniform plans rarely repeat a size, so the values of k are
#: compared on the samples of a window that every k measured densely, not at one exact size
#: (the largest size two log-uniform plans shared was 3 B: "per-pair bandwidth @3 B").
WINDOWS_PER_OCTAVE = 4
#: Samples every k needs in a window for it to count as densely measured.
DENSE = 10


def window_of(size: float) -> int:
    """The quarter-octave window of ``size`` (-1 for size 0)."""
    return -1 if size < 1 else math.floor(WINDOWS_PER_OCTAVE * math.log2(size) + 1e-9)


def window_bounds(w: int) -> tuple[int, int]:
    """[lo, hi) bytes of window ``w`` (integer bounds: sizes are whole bytes)."""
    if w < 0:
        return 0, 1
    return (math.ceil(2 ** (w / WINDOWS_PER_OCTAVE)),
            math.ceil(2 ** ((w + 1) / WINDOWS_PER_OCTAVE)))


def _common_window(by_k: Mapping[int, pl.DataFrame], *, largest: bool,
                   need: int) -> tuple[int, int] | None:
    """The smallest (or largest nonzero) size window where every k has ``need`` samples."""
    counts: dict[int, int] | None = None
    for frame in by_k.values():
        windows = [window_of(float(v)) for v in frame["size"].to_list()]
        here: dict[int, int] = {}
        for w in windows:
            here[w] = here.get(w, 0) + 1
        counts = here if counts is None else {w: min(c, here[w]) for w, c in counts.items()
                                              if w in here}
    dense = [w for w, c in (counts or {}).items() if c >= need and (not largest or w >= 0)]
    if not dense:
        return None
    return window_bounds(max(dense) if largest else min(dense))


def _seen(by_k: Mapping[int, pl.DataFrame], window: tuple[int, int]) -> tuple[int, int]:
    """The sizes measured in ``window``: [smallest, largest + 1) over every k (one exact size,
    as a grid or list plan gives, reads as that size)."""
    sizes = pl.concat([f["size"] for f in by_k.values()])
    inside = sizes.filter(sizes.is_between(window[0], window[1], closed="left"))
    return int(inside.min()), int(inside.max()) + 1  # type: ignore[arg-type]


def analyse(frame: pl.DataFrame, keys: Mapping[str, str] | None = None,
            level: float = LEVEL) -> Group:
    """One group's figures from its rows (columns ``pairs``, ``size``, ``time``)."""
    group = Group(dict(keys or {}))
    frame = frame.filter(pl.col("time").is_finite() & (pl.col("time") > 0))
    by_k = {int(k): part for (k,), part in frame.group_by("pairs")}
    if len(by_k) < 2:
        group.notes.append("fewer than two values of k: nothing to compare")
        return group
    need = max(min_samples(level), DENSE)
    small = _common_window(by_k, largest=False, need=need)
    large = _common_window(by_k, largest=True, need=need)
    if small is None or large is None:
        group.notes.append(f"no message size window (a quarter octave) holds {need} samples "
                           "of every k, so the values of k cannot be compared like for like: "
                           "measure each k with more samples or the same size plan (an "
                           "explicit list or a grid)")
        return group
    small, large = _seen(by_k, small), _seen(by_k, large)
    group.small_size, group.large_size = small, large
    if large == small:
        group.notes.append("one size window only is measured densely at every k: latency "
                           "and bandwidth are read in the same window")
    for k in sorted(by_k):
        part = by_k[k]
        in_small = part.filter(pl.col("size").is_between(small[0], small[1], closed="left"))
        in_large = part.filter(pl.col("size").is_between(large[0], large[1], closed="left"))
        latency = median_interval(in_small["time"].to_numpy(), level)
        # per sample: its size over its time (the window's sizes differ by up to 19 %)
        bandwidth = median_interval((in_large["size"] / in_large["time"]).to_numpy(), level)
        group.rows.append(KRow(k, latency, bandwidth, ideal=1.0 / k))
    base = next((r for r in group.rows if r.k == 1), None)
    if base is None:
        group.notes.append("no k = 1 series in this group: ratios to k = 1 are not given")
        return group
    for row in group.rows:  # a figure without an interval says why in its own cell
        row.latency_ratio = _ratio(row.latency, base.latency)
        row.bandwidth_ratio = _ratio(row.bandwidth, base.bandwidth)
    return group


def _ratio(a: Mapping[str, Any], b: Mapping[str, Any]) -> float | None:
    if a.get("value") is None or not b.get("value"):
        return None
    return float(a["value"]) / float(b["value"])


def contention(dataset: str | Path, series: Mapping[str, str] | None = None, *,
               level: float = LEVEL) -> list[Group]:
    """Every group of ``dataset`` (matching ``series``) whose series differ only in k."""
    from kit.data import dataset as ds

    table = ds.series_table(dataset)
    for k, v in (series or {}).items():
        table = table.filter(pl.col(k).cast(pl.String) == str(v))
    out = []
    for keys in groups_of(table):
        rows = (ds.series_rows(dataset, keys, aggregates=keys.get("stat") != ds.RAW)
                .select("pairs", "size", "time").collect())
        out.append(analyse(rows, keys, level))
    return out


# --------------------------------------------------------------------------- formatting

def fmt_seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def fmt_rate(value: float) -> str:
    return f"{value / 1e6:.4g} MB/s"


def fmt_size(size: int) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} B"


def fmt_window(window: tuple[int, int] | None) -> str:
    """``[724 B, 861 B)``: the sizes a figure was read in."""
    if window is None:
        return "–"
    lo, hi = window
    return f"{fmt_size(lo)}" if hi - lo <= 1 else f"[{fmt_size(lo)}, {fmt_size(hi)})"


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.3f}"


def headers(group: Group) -> list[str]:
    """Column headers that say what each figure is (statistic, size, interval)."""
    pct = f"{LEVEL:.0%}"
    small = fmt_window(group.small_size)
    large = fmt_window(group.large_size)
    return ["k", f"median one-way time @{small} [{pct} CI]", "time x k=1",
            f"per-pair eff. bw @{large} (median) [{pct} CI]", "bw x k=1", "ideal 1/k",
            "aggregate bw (k x per-pair)"]


def table_rows(group: Group) -> list[list[str]]:
    """The cells of :func:`headers`, formatted (format_interval: ``value [lo, hi]``)."""
    from kit.model.uncertainty import format_interval

    return [[str(r.k), format_interval(r.latency, fmt_seconds), fmt_ratio(r.latency_ratio),
             format_interval(r.bandwidth, fmt_rate), fmt_ratio(r.bandwidth_ratio),
             f"{r.ideal:.3f}",
             fmt_rate(r.aggregate_Bps) if r.aggregate_Bps is not None else "–"]
            for r in group.rows]


NO_CONTENTION = ("no contention runs to compare: no series differ only in the number of "
                 "concurrent pairs (pairs)")
NO_CONTENTION_HINT = ("measure with the probe's --pairs K (a campaign's concurrent_pairs: "
                      "[1, 2, 4]) and ingest the runs into this dataset")
