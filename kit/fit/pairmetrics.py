"""How far each node pair's samples sit from a population curve, per visit, with how sure.

The cluster model compares every pair with the population (one curve for the whole machine)
on three figures, each a robust statistic of the pair's samples in one visit (run) against
the population's median ``m(size)``:

* **latency**: the median of ``time - m(size)`` over the sizes in the latency window (the
  smallest sizes, up to 1 KiB or eight times the smallest measured size): seconds the pair
  adds, because delays add (a ln ratio would change with ``m`` across the window);
* **bandwidth**: the asymptotic bandwidth, ``1 / slope`` of time over size in the
  bandwidth window (the top two octaves of the sizes, from 64 KiB up), by Theil-Sen (the
  median of the pairwise slopes), as ``ln`` of bytes per second. A slope, not a ratio
  ``size / time``: a per-message time that does not grow with the size cancels, whatever
  it is per pair (a loaded host's scheduling; a token bucket's burst, which makes it
  negative and rate-dependent), so a link shaped to half the rate reads as -50 %, which
  the effective bandwidth at one size, or a ratio to the population's transfer time,
  would dilute;
* **noise**: the width of the upper tail, ``q95 - q50`` of the ln residuals in each size
  band (one per decade; a shift of the pair's location does not change it), as a ln ratio
  to the typical unit's width in that band, averaged over the bands with inverse-variance
  weights (a band whose median jumps between a fast and a slow mode gets little weight).

Each comes with its sampling variance from order statistics (the distribution-free
binomial interval of a sample quantile, turned into a standard error), because the noise
of message times is heavy-tailed and often two-banded, where a normal-theory variance of a
median is wrong. Medians and tail quantiles are used, not means, so a preempted message or
a short disturbed window cannot make a pair look slow.

Pure numpy on arrays: :mod:`kit.fit.clustermodel` calls it per visit and per half-visit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: z of the two-sided 95 % interval the order-statistic standard errors are read from.
Z95 = 1.959963984540054
#: Largest size of the latency window (also at least 8x the smallest measured size).
LATENCY_WINDOW_MAX = 1024.0
#: Smallest size whose time is mostly transfer: no bandwidth window below it.
BANDWIDTH_WINDOW_MIN = 65536.0
#: Size bands per decade of the noise figure, and the fewest samples a band needs in a unit.
NOISE_BANDS_PER_DECADE = 1
NOISE_MIN_SAMPLES = 20
#: Floor of the tail width (ln units) before its log is taken (a pair without noise).
MIN_TAIL = 1e-4
METRICS = ("latency", "bandwidth", "noise")


@dataclass(frozen=True)
class Windows:
    """The size windows of the latency and bandwidth figures, and where they are quoted."""

    latency_max: float
    latency_at: float
    bandwidth_min: float | None
    bandwidth_at: float | None
    size_min: float
    size_max: float

    def to_dict(self) -> dict[str, float | None]:
        return {"latency_max": self.latency_max, "latency_at": self.latency_at,
                "bandwidth_min": self.bandwidth_min, "bandwidth_at": self.bandwidth_at,
                "size_min": self.size_min, "size_max": self.size_max}

    @classmethod
    def from_dict(cls, d: dict[str, float | None]) -> Windows:
        def num(key: str) -> float | None:
            v = d.get(key)
            return None if v is None else float(v)

        return cls(latency_max=float(d["latency_max"] or 0), latency_at=float(d["latency_at"] or 0),
                   bandwidth_min=num("bandwidth_min"), bandwidth_at=num("bandwidth_at"),
                   size_min=float(d["size_min"] or 0), size_max=float(d["size_max"] or 0))


def windows_for(size: NDArray) -> Windows:
    """The windows of a campaign's sizes (the same for every pair: quoted at one size each).

    Latency is quoted at 64 B (the report's summary size) when measured, else at the
    window's geometric middle; bandwidth at the largest size.
    """
    lo, hi = float(np.min(size)), float(np.max(size))
    lat_max = min(max(LATENCY_WINDOW_MAX, 8.0 * max(lo, 1.0)), hi)
    lat_at = 64.0 if lo <= 64.0 <= lat_max else math.sqrt(max(lo, 1.0) * lat_max)
    # the top of the range: a random plan's largest draw (3.99 MiB) is read as 4 MiB
    top = 2.0 ** round(math.log2(hi))
    at = top if abs(top / hi - 1) < 0.01 else hi
    if hi < BANDWIDTH_WINDOW_MIN:
        return Windows(lat_max, lat_at, None, None, lo, hi)
    return Windows(lat_max, lat_at, max(at / 4.0, BANDWIDTH_WINDOW_MIN), at, lo, hi)


@dataclass(frozen=True)
class GroupQuantiles:
    """Per-group sample quantiles ``value[g, j]`` of ``qs[j]``, their standard errors, counts."""

    value: NDArray[np.float64]
    se: NDArray[np.float64]
    count: NDArray[np.int64]


def group_quantiles(codes: NDArray, values: NDArray, n_groups: int,
                    qs: tuple[float, ...]) -> GroupQuantiles:
    """Quantiles of ``values`` per group ``codes`` (0..n_groups-1) with order-statistic errors.

    The value is numpy's linear-interpolation quantile; the standard error is the width of
    the distribution-free 95 % interval ``[x_(l), x_(u)]`` (ranks ``n q -+ z sqrt(n q (1-q))``)
    over ``2 z``. Groups of fewer than 3 values get NaN (no interval).
    """
    codes = np.asarray(codes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    order = np.lexsort((values, codes))
    v = values[order]
    count = np.bincount(codes, minlength=n_groups).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    value = np.full((n_groups, len(qs)), np.nan)
    se = np.full((n_groups, len(qs)), np.nan)
    ok = count >= 3
    n = count[ok].astype(np.float64)
    s0 = start[ok]
    for j, q in enumerate(qs):
        pos = q * (n - 1)
        lo_i = np.floor(pos).astype(np.int64)
        hi_i = np.minimum(lo_i + 1, count[ok] - 1)
        frac = pos - lo_i
        value[ok, j] = v[s0 + lo_i] * (1 - frac) + v[s0 + hi_i] * frac
        half = Z95 * np.sqrt(n * q * (1 - q))
        lo_r = np.clip(np.floor(n * q - half), 0, n - 1).astype(np.int64)
        hi_r = np.clip(np.ceil(n * q + half), 0, n - 1).astype(np.int64)
        se[ok, j] = (v[s0 + hi_r] - v[s0 + lo_r]) / (2 * Z95)
    return GroupQuantiles(value, se, count)


@dataclass(frozen=True)
class UnitMetrics:
    """The three figures per unit (a visit, or half of one): ``y[m]``, variance ``w[m]``.

    ``y["latency"]`` is seconds added, ``y["bandwidth"]`` ln of the asymptotic bandwidth
    (B/s), ``y["noise"]`` the log tail-width ratio; NaN where the unit has too few samples
    in the window (its variance then infinite). ``n[m]`` samples used.
    """

    y: dict[str, NDArray[np.float64]]
    w: dict[str, NDArray[np.float64]]
    n: dict[str, NDArray[np.int64]]


def _median_in(mask: NDArray, unit: NDArray, r: NDArray, n_units: int
               ) -> tuple[NDArray, NDArray, NDArray]:
    g = group_quantiles(unit[mask], r[mask], n_units, (0.5,))
    return g.value[:, 0], g.se[:, 0] ** 2, g.count


def unit_metrics(unit: NDArray, n_units: int, size: NDArray, time: NDArray, median: NDArray,
                 windows: Windows) -> UnitMetrics:
    """The figures of every unit from its samples' sizes, times and population medians."""
    y: dict[str, NDArray] = {}
    w: dict[str, NDArray] = {}
    n: dict[str, NDArray] = {}
    r = np.log(time) - np.log(median)
    y["latency"], w["latency"], n["latency"] = _median_in(size <= windows.latency_max, unit,
                                                          time - median, n_units)
    if windows.bandwidth_min is not None:
        y["bandwidth"], w["bandwidth"], n["bandwidth"] = _slope_bandwidth(
            size >= windows.bandwidth_min, unit, size, time, n_units)
    else:
        y["bandwidth"] = np.full(n_units, np.nan)
        w["bandwidth"] = np.full(n_units, np.inf)
        n["bandwidth"] = np.zeros(n_units, dtype=np.int64)
    y["noise"], w["noise"], n["noise"] = _tail_width(unit, n_units, size, r)
    for m in METRICS:
        # a floor for tied order statistics (a coarse timer): 1 ns, or 1e-6 in ln units
        floor = 1e-18 if m == "latency" else 1e-12
        w[m] = np.where(np.isfinite(y[m]) & np.isfinite(w[m]), np.maximum(w[m], floor), np.inf)
    return UnitMetrics(y, w, n)


def _slope_bandwidth(mask: NDArray, unit: NDArray, size: NDArray, time: NDArray,
                     n_units: int) -> tuple[NDArray, NDArray, NDArray]:
    """Per unit: ln(1 / Theil-Sen slope) of time over size in the window, its variance
    from Sen's distribution-free interval of the slope, and the samples used."""
    y = np.full(n_units, np.nan)
    w = np.full(n_units, np.inf)
    count = np.zeros(n_units, dtype=np.int64)
    u, s, t = unit[mask], size[mask], time[mask]
    order = np.argsort(u, kind="stable")
    u, s, t = u[order], s[order], t[order]
    bounds = np.searchsorted(u, np.arange(n_units + 1))
    for k in range(n_units):
        a, b = bounds[k], bounds[k + 1]
        n = b - a
        count[k] = n
        if n < 6:
            continue
        ss, tt = s[a:b], t[a:b]
        i, j = np.triu_indices(n, 1)
        ds = ss[j] - ss[i]
        ok = ds != 0
        slopes = np.sort((tt[j] - tt[i])[ok] / ds[ok])
        m = len(slopes)
        if m < 3:
            continue
        slope = float(np.median(slopes))
        half = Z95 * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)
        lo = slopes[int(np.clip(np.floor((m - half) / 2), 0, m - 1))]
        hi = slopes[int(np.clip(np.ceil((m + half) / 2), 0, m - 1))]
        if slope <= 0 or not math.isfinite(slope):
            continue
        y[k] = -math.log(slope)
        w[k] = max(((hi - lo) / (2 * Z95) / slope) ** 2, 1e-12)
    return y, w, count


def tail_width_of(codes: NDArray, r: NDArray, n_groups: int) -> tuple[NDArray, NDArray]:
    """(width, count) per group: ``q95 - q50`` of the ln residuals, the noise figure's
    statistic of one unit in one size band.

    Why the upper tail and not a more efficient scale (the SD, a winsorized mean absolute
    deviation, the MAD): a noisier link is one whose slow messages are slower or more
    frequent, i.e. a longer upper tail; a two-sided scale also reads the fast side, which on
    real links is bounded by the wire and does not widen. On the reference runs' noise a
    two-sided spread (the mean ``|r - median|`` winsorized at its p95) has 1.2-1.7x less
    standard error, but reads a 20 % wider upper tail as about +10 % (+9 to +18 % by size
    decade) and a 20 % wider fast side (faster fast messages) as +2 to +10 % noisier, and
    still misses 20 % noise links at 800 samples per pair
    (``benchmarks/bench_noise_statistic.py``, BENCHMARKS.md).
    """
    g = group_quantiles(codes, r, n_groups, (0.5, 0.95))
    return g.value[:, 1] - g.value[:, 0], g.count


def _tail_width(unit: NDArray, n_units: int, size: NDArray, r: NDArray
                ) -> tuple[NDArray, NDArray, NDArray]:
    """Per unit: ln ratio of its upper-tail width to the typical unit's, band by band.

    A band's variance is taken across the units (robustly, scaled by each unit's count),
    not from one unit's order statistics: where a slow mode holds about 5 % of a band's
    samples, q95 jumps between the modes from unit to unit, which only the spread across
    units shows. Each band's deviation is clipped at 3 of its standard deviations around
    the unit's median deviation over the bands: a pair whose noise really grew is wider in
    every band and keeps it, one band's jump cannot make a pair noisy.
    """
    band = np.floor(np.log10(np.maximum(size, 1.0)) * NOISE_BANDS_PER_DECADE).astype(np.int64)
    band -= int(band.min()) if band.size else 0
    n_bands = int(band.max()) + 1 if band.size else 1
    width, cnt = tail_width_of(unit * n_bands + band, r, n_units * n_bands)
    count = cnt.reshape(n_units, n_bands)
    width = np.maximum(width, MIN_TAIL).reshape(n_units, n_bands)
    ok = (count >= NOISE_MIN_SAMPLES) & np.isfinite(width)
    lw = np.where(ok, np.log(width), np.nan)
    d = np.full((n_units, n_bands), np.nan)
    var = np.full((n_units, n_bands), np.inf)
    sd = np.zeros(n_bands)
    for b in range(n_bands):
        have = ok[:, b]
        if have.sum() < 3:
            continue
        db = lw[have, b] - float(np.median(lw[have, b]))
        sd[b] = 1.4826 * float(np.median(np.abs(db)))
        if sd[b] > 0:
            d[have, b] = db
            var[have, b] = sd[b] ** 2 * float(np.median(count[have, b])) / count[have, b]
    use = np.isfinite(d)
    with np.errstate(all="ignore"):
        own = np.nanmedian(np.where(use, d, np.nan), axis=1)
    own = np.nan_to_num(own)
    # clip each band around the unit's own median deviation: a shared shift stays whole
    d = np.clip(d, own[:, None] - 3 * sd[None, :], own[:, None] + 3 * sd[None, :])
    prec = np.where(use, 1.0 / var, 0.0)
    prec_sum = prec.sum(axis=1)
    total = (np.where(use, d, 0.0) * prec).sum(axis=1)
    y = np.where(prec_sum > 0, total / np.where(prec_sum > 0, prec_sum, 1.0), np.nan)
    w = np.where(prec_sum > 0, 1.0 / np.where(prec_sum > 0, prec_sum, 1.0), np.inf)
    counts = np.where(ok, count, 0).sum(axis=1)
    return y, w, counts.astype(np.int64)
