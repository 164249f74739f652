"""How sure a fitted :class:`RegimeModel` is: bootstrap intervals on what it reports.

Every number a model prints (a breakpoint, a latency, a bandwidth, a slope, a band's
share, the noise p50/p95/p99) would come out differently from another run of the same
campaign. The bootstrap measures that: resample the data the way it could have come out
differently, redo the estimate, and read the spread of the estimates.

What is resampled (``resample``):

``runs``
    whole runs with replacement, when there are five or more: run-to-run variation
    (another node state, another day) is usually the largest and only this sees it;
``seq blocks``
    one run (or fewer than five): consecutive stretches of its samples in measurement
    order (``seq``), each kept 0, 1, 2.. times (Poisson). Sizes were drawn in random
    order, so every stretch covers the size range, and slow stretches stay together;
``samples``
    without ``seq``: every sample kept 0, 1, 2.. times (Poisson bootstrap), i.e.
    resampling inside each block of neighbouring sizes.

What is redone per resample, made cheap so that the default costs less than twice a fit:
the regimes keep their families (chosen on the full data); each boundary is searched again
on the resampled raw samples within a factor ``SEARCH_FACTOR`` of the fitted one (the
estimator's own refinement step, :func:`kit.model.segmentation.refine_boundary`); each
regime's curve is refitted to the resampled per-bin medians with the estimator's robust
fit; the noise quantiles are the resampled ratios' empirical quantiles; a two-band regime's
band shares are the resampled share of samples each band explains best (the bands' curves
are kept, so this is the sampling part of their uncertainty). Overlap windows are not
refitted: samples are split at the boundaries.

A resample is never copied: it is the full data with each sample counted 0, 1, 2.. times
(:class:`kit.model.resampled_bins.RegimeBins` reads the resampled bins' order statistics
off running sums of the counts). Two things follow. The bins are those of the full data
(with one bin per size, the same as a resample's own; log-spaced edges would otherwise move
by a fraction of a bin). Above ``MAX_RATIO_SAMPLES`` samples in a regime, every k-th ratio
stands for the k next to it (neighbours in size, then time) with their summed counts, so
the noise quantiles vary as those of all n samples do, which is what the model reports.

The interval of a quantity is the percentile interval of its bootstrap estimates (its
ends read by Harrell-Davis, :func:`percentiles`), re-centred on the value the model
reports (the cheap re-estimate on the full data gives the centre the spread is measured
from): in log scale for positive quantities, linear for slopes and shares. A quantity that
could not be estimated (too few samples in a regime, too few resamples that held it) gets
``null`` and a reason, never a number.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kit.core.blas import one_blas_thread
from kit.core.cost import charged
from kit.model.families import evaluate, fit_family, ln_evaluate
from kit.model.outliers import group_order
from kit.model.resampled_bins import Counts, RegimeBins, running_sum, weighted_quantiles
from kit.model.runs import dense_codes, run_starts
from kit.model.segmentation import refine_boundary
from kit.model.special import use_scipy

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

#: Resamples by default (percentile 2.5/97.5 intervals are stable from about 100 on).
N_BOOT = 120
#: A boundary is searched again within [bp / F, bp * F] on each resample.
SEARCH_FACTOR = 2.0
#: Fewest runs for resampling whole runs.
MIN_RUNS = 5
#: Blocks of consecutive samples for a single run.
N_BLOCKS = 40
#: Resampled ratios used per regime for the noise quantiles (more adds time, not accuracy).
MAX_RATIO_SAMPLES = 20000
NOISE_QS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
#: Fewest samples in a regime for a p99 (below it the p99 is the maximum, not a quantile).
MIN_P99 = 100


def _poisson_table() -> NDArray:
    """Poisson(1) by inverse CDF over 2^16 equal steps: each count's probability within
    1.5e-5 of the exact one, 14x faster than numpy's Poisson sampler (which was a quarter of
    the bootstrap's time at 1 M samples)."""
    cdf = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(12)])
    u = (np.arange(2**16) + 0.5) / 2**16
    return np.searchsorted(cdf, u, side="left").astype(np.uint8)


_POISSON_1 = _poisson_table()


def _uint16s(rng: np.random.Generator, n: int) -> NDArray:
    """``rng.integers(0, 2**16, n, dtype=np.uint16)``: the same numbers, and the generator
    left in the same state, at twice the speed (it was a third of drawing a resample).

    numpy draws full-range 16-bit integers four to a 64-bit output of the bit generator,
    low bits first (two 32-bit halves, each split in two), so the raw outputs viewed as
    uint16 are those numbers; a half left over from the last call comes first, and the
    last one to three numbers are drawn as before. ``tests/test_uncertainty.py`` pins the
    equality; another bit generator or byte order takes numpy's own path.
    """
    bg = rng.bit_generator
    if not isinstance(bg, np.random.PCG64) or sys.byteorder != "little" or n < 4:
        return rng.integers(0, 2**16, n, dtype=np.uint16)
    parts = []
    state = bg.state
    if state["has_uint32"]:
        half = int(state["uinteger"])
        parts.append(np.array([half & 0xFFFF, half >> 16], dtype=np.uint16))
        bg.state = {**state, "has_uint32": 0, "uinteger": 0}
        n -= 2
    parts.append(bg.random_raw(n // 4).view(np.uint16))
    if n % 4:
        parts.append(rng.integers(0, 2**16, n % 4, dtype=np.uint16))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _weights(n: int, groups: NDArray | None, seq: NDArray | None,
             rng: np.random.Generator) -> tuple[str, int, Callable[[], NDArray]]:
    """The resampling scheme: (name, number of units, draw() -> per-sample multiplicity)."""
    gid = None if groups is None else dense_codes(groups)
    if gid is not None:
        ng = int(gid.max()) + 1
        if ng >= MIN_RUNS:
            small = np.uint8 if ng < 256 else np.uint32  # a run counted at most ng times
            return "runs", ng, lambda: rng.multinomial(ng, np.full(ng, 1.0 / ng)).astype(
                small).take(gid)
    if seq is not None and n >= 4 * N_BLOCKS:
        # Position of each sample in measurement order (run, then seq), cut into blocks.
        keys = (gid, seq) if gid is not None else (seq,)  # codes sort as the labels do
        order = np.lexsort(keys[::-1])
        block = np.empty(n, dtype=np.int64)
        block[order] = np.arange(n) * N_BLOCKS // n
        # Poisson(1) counts fit a byte; take() gathers 2x faster than indexing
        return "seq blocks", N_BLOCKS, lambda: rng.poisson(1.0, N_BLOCKS).astype(
            np.uint8).take(block)
    return "samples", n, lambda: _POISSON_1.take(_uint16s(rng, n))


@dataclass
class _Data:
    """The samples (sorted by size, then time) and each regime's bins, set up once."""

    s: NDArray
    t: NDArray
    lt: NDArray
    ls: NDArray  # ln size (sizes below 1 B as 1 B, as the curves take them)
    #: Where each size's samples start (``run_starts(s)``): the splits a boundary search
    #: considers.
    size_starts: NDArray
    families: list[str]
    bps0: list[float]
    bins: list[RegimeBins]
    #: Per mixture regime: (its first sample, whether each of its samples is best explained
    #: by the slow band), on the full data.
    band_of: list[tuple[int, NDArray] | None]
    #: Where each resample's curve fits start: the model's own curves.
    start: list[dict[str, float] | None]

    @classmethod
    def build(cls, model: RegimeModel, s: NDArray, t: NDArray) -> _Data:
        lt, ls = np.log(t), np.log(np.maximum(s, 1.0))
        bps0 = [float(b) for b in model.breakpoints_]
        at = np.r_[0, np.searchsorted(s, bps0, side="left"), len(s)]
        # A refined boundary stays within SEARCH_FACTOR of its fitted place: regime k's
        # bins cover [bp_k-1 / F, bp_k * F).
        down = np.r_[0, np.searchsorted(s, np.divide(bps0, SEARCH_FACTOR), side="left")]
        up = np.r_[np.searchsorted(s, np.multiply(bps0, SEARCH_FACTOR), side="left"), len(s)]
        bins = [RegimeBins.place(s, ls, lt, (int(at[k]), int(at[k + 1])),
                                 (int(down[k]), int(up[k])))
                for k in range(len(bps0) + 1)]
        return cls(s, t, lt, ls, run_starts(s), [r.family for r in model.regimes_], bps0, bins,
                   _band_assignment(model, s, t), [_start(r) for r in model.regimes_])


def _start(regime: Any) -> dict[str, float] | None:
    """A regime's curve as a start for refits, if it is usable as one."""
    p = getattr(regime, "params", None) or {}
    need = {"constant": ("a",), "linear": ("a", "b"), "power": ("a", "b")}.get(regime.family, ())
    if need and all(math.isfinite(float(p.get(k, math.nan))) for k in need) and p["a"] > 0:
        return {k: float(p[k]) for k in need}
    return None


def _held(data: _Data, counts: list[Counts], k: int, lo: int, hi: int) -> int:
    """Samples ``[lo, hi)`` (inside regime k's bins) the resample holds, with repeats."""
    cs, at = counts[k].cum_size, data.bins[k].lo
    return int(cs[hi - at] - cs[lo - at])


def _bounds(data: _Data, bps: list[float]) -> NDArray:
    """Each regime's first sample and the next regime's, for boundaries ``bps``."""
    return np.r_[0, np.searchsorted(data.s, bps, side="left"), len(data.s)]


def _fit_curves(data: _Data, bps: list[float], counts: list[Counts],
                start: list[dict[str, float] | None],
                done: tuple[NDArray, list[dict[str, float] | None]] | None = None
                ) -> list[dict[str, float] | None]:
    """Each regime's curve refitted to the resample's per-bin medians between ``bps``,
    its iterations started from ``start`` (curves of nearly the same bins). ``done``:
    (bounds, curves) of a fit on this resample already made; a regime whose samples are
    the same there keeps its curve (the same bins give the same fit)."""
    bounds = _bounds(data, bps)
    out: list[dict[str, float] | None] = []
    for k, fam in enumerate(data.families):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        if done is not None and lo == done[0][k] and hi == done[0][k + 1]:
            out.append(done[1][k])
            continue
        if _held(data, counts, k, lo, hi) < 3:
            out.append(None)
            continue
        # as the estimator fits a regime's curve: its overall between-size variance only
        # (the local scan places boundaries, which _refine does on raw samples)
        bins = data.bins[k].summarise(lo, hi, counts[k])
        if bins is None or (fam != "constant" and len(bins.size) < 3):
            out.append(None)
            continue
        params, _ = fit_family(fam, bins.size, bins.median, bins.weight, start[k])
        out.append(params)
    return out


def _refine(data: _Data, curves: list[dict[str, float] | None], mult: NDArray,
            counts: list[Counts]) -> tuple[list[float], list[tuple[float, float]]]:
    """Boundaries searched again near the fitted ones, and the gap each one sits in: the
    last sample size left of it and the first right of it (any split in between fits
    alike)."""
    bps, s, families = data.bps0, data.s, data.families
    out = list(bps)
    gaps = [(math.nan, math.nan)] * len(bps)
    for k, bp in enumerate(bps):
        left, right = curves[k], curves[k + 1]
        if left is None or right is None:
            continue
        lo_s = max(bp / SEARCH_FACTOR, out[k - 1] if k else 0.0)
        hi_s = min(bp * SEARCH_FACTOR, bps[k + 1] if k + 1 < len(bps) else math.inf)
        lo, hi = (int(v) for v in np.searchsorted(s, [lo_s, hi_s], side="left"))
        if _held(data, counts, k, lo, hi) < 4:
            continue
        # Every sample of the window, each counted w times (0 for the ones this resample
        # lacks): a sample counted 0 times adds nothing to the split costs, so the best
        # split is the one on the held samples alone, and the window's sizes, ln sizes
        # and splits are the full data's (copying out the held samples was half the cost).
        w = mult[lo:hi]
        ss, ls = s[lo:hi], data.ls[lo:hi]
        st = data.size_starts
        starts = st[np.searchsorted(st, lo):np.searchsorted(st, hi)] - lo
        i = refine_boundary(ss, data.lt[lo:hi], ln_evaluate(families[k], left, ss, ls),
                            ln_evaluate(families[k + 1], right, ss, ls), w, starts)
        before, after = _last_held(w, i), _first_held(w, i)
        if before >= 0 and after >= 0:
            below, above = float(ss[before]), float(ss[after])
            # Midway (in log size) between the last sample left and the first right of the
            # split: a resample missing the samples next to it would otherwise only ever
            # move the boundary up.
            out[k] = float(np.sqrt(max(below, 1.0) * above))
            gaps[k] = (below, above)
    return out, gaps


#: Samples next to a split looked at first for a held one (a resample lacks a sample with
#: probability 1/e: 64 in a row, e^-64).
_NEAR = 64


def _last_held(w: NDArray, i: int) -> int:
    """Index of the last sample before ``i`` with a count, or -1."""
    for lo in (max(i - _NEAR, 0), 0):
        near = np.flatnonzero(w[lo:i] != 0)  # nonzero is 8x faster on booleans
        if len(near):
            return lo + int(near[-1])
    return -1


def _first_held(w: NDArray, i: int) -> int:
    """Index of the first sample from ``i`` on with a count, or -1."""
    for hi in (min(i + _NEAR, len(w)), len(w)):
        near = np.flatnonzero(w[i:hi] != 0)
        if len(near):
            return i + int(near[0])
    return -1


def _estimate(data: _Data, mult: NDArray, total: NDArray, at: NDArray | None = None
              ) -> dict[str, float]:
    """Flat dict of every quantity on the resample that counts sample i ``mult[i]`` times
    (``total``: their running sum); NaN where not estimable. ``at``: sizes whose median
    (the regime's curve times its noise median) is estimated too (``m0``, ``m1``, ..)."""
    out: dict[str, float] = {}
    s, t, families = data.s, data.t, data.families
    counts = [rb.gather(mult, total) for rb in data.bins]
    curves = _fit_curves(data, data.bps0, counts, data.start)
    bps, gaps = _refine(data, curves, mult, counts)
    if bps != data.bps0:
        curves = _fit_curves(data, bps, counts, [c or p for c, p in zip(curves, data.start,
                                                                     strict=True)],
                             (_bounds(data, data.bps0), curves))
    for k, bp in enumerate(bps):
        out[f"bp{k}"] = bp
        out[f"bp{k}.left"], out[f"bp{k}.right"] = gaps[k]
    edges = _bounds(data, bps)
    for k, fam in enumerate(families):
        p = curves[k]
        for name in _param_names(fam):
            out[f"r{k}.{name}"] = math.nan if p is None else _param_value(fam, p, name)
        lo, hi = int(edges[k]), int(edges[k + 1])
        n = _held(data, counts, k, lo, hi)
        if p is not None and n >= 3:
            # Every step-th sample stands for the step samples from it on (neighbours in
            # size, then time), counted as often as the resample holds them: the spread of
            # the quantiles is that of all n samples, not of the ones used.
            step = max(math.ceil((hi - lo) / MAX_RATIO_SAMPLES), 1)
            sl = slice(lo, hi, step)
            if step == 1:
                w = mult[lo:hi]
            else:  # each block's count off the regime's running sum
                cs, first = counts[k].cum_size, data.bins[k].lo
                cuts = np.r_[np.arange(lo, hi, step), hi] - first
                w = np.diff(cs[cuts])
            ratio = t[sl] / evaluate(fam, p, s[sl], data.ls[sl])
            qv = weighted_quantiles(ratio, w, tuple(NOISE_QS.values()))
            for q, v in zip(NOISE_QS, qv, strict=True):
                out[f"r{k}.noise.{q}"] = float(v)
            if n < MIN_P99:
                out[f"r{k}.noise.p99"] = math.nan
        else:
            for q in NOISE_QS:
                out[f"r{k}.noise.{q}"] = math.nan
        if at is not None:
            mine = np.flatnonzero(np.searchsorted(bps, at, side="right") == k)
            p50 = out.get(f"r{k}.noise.p50", math.nan)
            for i in mine.tolist():
                out[f"m{i}"] = (math.nan if p is None or not math.isfinite(p50) else
                                float(evaluate(fam, p, at[i:i + 1])[0]) * p50)
        bands = data.band_of[k]
        if bands is not None:
            a, slow = bands
            wb = mult[a:a + len(slow)]
            tot = int(wb.sum())
            n_slow = int((wb * slow).sum())
            for c, held in enumerate((tot - n_slow, n_slow)):
                out[f"r{k}.share{c}"] = held / tot if tot > 0 else math.nan
    return out


def _param_names(family: str) -> list[str]:
    if family == "constant":
        return ["a"]
    if family == "linear":
        return ["a", "b", "bandwidth_Bps"]
    return ["a", "b"]


def _param_value(family: str, params: dict[str, float], name: str) -> float:
    if name == "bandwidth_Bps":
        b = params.get("b", 0.0)
        return 1.0 / b if b > 0 else math.inf
    return float(params[name])


def _linear_quantity(key: str, family: str) -> bool:
    """Quantities whose intervals are re-centred linearly (slopes, shares); others in log."""
    return ".share" in key or (family == "power" and key.endswith(".b"))


def _band_assignment(model: RegimeModel, s: NDArray, t: NDArray
                     ) -> list[tuple[int, NDArray] | None]:
    """Per mixture regime: (its first sample, 1 where band 1 explains a sample best, else 0),
    on the full data."""
    out: list[tuple[int, NDArray] | None] = []
    edges = np.r_[0, np.searchsorted(s, model.breakpoints_, side="left"), len(s)]
    for k, reg in enumerate(model.regimes_):
        lo, hi = int(edges[k]), int(edges[k + 1])
        if not getattr(reg, "is_mixture", False) or hi <= lo:
            out.append(None)
            continue
        dens = np.stack([np.log(np.maximum(w, 1e-300)) + noise.logpdf(t[lo:hi] / scale)
                         - np.log(scale) for w, scale, noise in reg.terms(s[lo:hi])], axis=1)
        out.append((lo, (np.argmax(dens, axis=1) == 1).astype(np.uint8)))
    return out


def _size_time_order(s: NDArray, t: NDArray) -> NDArray:
    """Order by size, then time. Integer sizes below 2^26 take group_order's one float
    sort (7x faster than lexsort at 1 M; times are resolved to 3e-8 of their range, so
    only near-equal times can swap), others lexsort."""
    if len(s) and float(s.min()) >= 0 and float(s.max()) < 2.0**26 \
            and np.array_equal(s, np.floor(s)):
        return group_order(s, t)
    return np.lexsort((t, s))


def bootstrap_intervals(model: RegimeModel, size: ArrayLike, time: ArrayLike, *,
                        groups: ArrayLike | None = None, seq: ArrayLike | None = None,
                        n_boot: int = N_BOOT, level: float = 0.95,
                        random_state: int | None = 0,
                        at: ArrayLike | None = None) -> dict[str, Any]:
    """Intervals on every breakpoint, regime parameter, band share and noise quantile.

    ``model`` is fitted on ``size``/``time`` (after outliers/disturbed windows were handled
    the same way); ``groups`` are run ids, ``seq`` the measurement order within a run.
    ``at``: sizes at which the median (the regime's curve times its noise median) gets an
    interval too (``medians``: one per size, in order; what an adaptive design watches).
    The result is JSON-ready (``null`` where not estimable, with the reason in
    ``not_estimated``).
    """
    use_scipy()  # as a fit: scipy.special's functions, whatever ran before
    with one_blas_thread(), charged("intervals"):
        return _intervals(model, size, time, groups, seq, n_boot, level, random_state,
                          None if at is None else np.asarray(at, dtype=np.float64).ravel())


def _intervals(model: RegimeModel, size: ArrayLike, time: ArrayLike, groups: ArrayLike | None,
               seq: ArrayLike | None, n_boot: int, level: float,
               random_state: int | None, at: NDArray | None = None) -> dict[str, Any]:
    s0 = np.asarray(size, dtype=np.float64).ravel()
    t0 = np.asarray(time, dtype=np.float64).ravel()
    # By size, then time: where the bins are the sizes, their time order is the samples' own.
    order = _size_time_order(s0, t0)
    s, t = s0[order], t0[order]
    g = None if groups is None else np.asarray(groups).ravel()[order]
    q = None if seq is None else np.asarray(seq).ravel()[order]
    mask = getattr(model, "outlier_mask_", None)
    if mask is not None and len(mask) == len(s0):
        keep = ~np.asarray(mask)[order]
        s, t = s[keep], t[keep]
        g = None if g is None else g[keep]
        q = None if q is None else q[keep]
    rng = np.random.default_rng(random_state)
    data = _Data.build(model, s, t)
    families = data.families
    scheme, n_units, draw = _weights(len(s), g, q, rng)
    ones = np.ones(len(s), dtype=np.uint8)
    centre = _estimate(data, ones, running_sum(ones), at)
    draws: dict[str, list[float]] = {k: [] for k in centre}
    # one running sum's memory for every resample: nothing of a resample outlives its
    # _estimate, and a fresh array of a million sums is a pass of page faults
    total_buf = np.empty(len(s) + 1, dtype=np.int64)
    for _ in range(int(n_boot)):
        mult = draw()
        total = running_sum(mult, out=total_buf)
        if int(total[-1]) < 5:
            continue
        est = _estimate(data, mult, total, at)
        for k in centre:
            draws[k].append(est.get(k, math.nan))
    reported = _reported(model, s, t, at)
    alpha = (1.0 - level) / 2.0
    intervals: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for key, c in centre.items():
        if key.endswith((".left", ".right")):
            continue
        fam = families[int(key[1:].split(".")[0])] if key.startswith("r") else ""
        value = reported.get(key, c)
        arr = np.asarray(draws[key], dtype=float)
        arr = arr[np.isfinite(arr)]
        why = None
        if not math.isfinite(value) or not math.isfinite(c):
            why = "not estimable on the full data"
        elif arr.size < max(20, 0.8 * int(n_boot)):
            why = f"only {arr.size} of {n_boot} resamples could estimate it"
        if why:
            intervals[key] = {"value": value if math.isfinite(value) else None,
                              "lo": None, "hi": None, "why": why}
            missing.append(f"{_describe(key, families)}: {why}")
            continue
        lo_q, hi_q = percentiles(arr, alpha)
        if _linear_quantity(key, fam):
            lo, hi = value + (lo_q - c), value + (hi_q - c)
            if ".share" in key:
                lo, hi = max(lo, 0.0), min(hi, 1.0)
        elif c > 0 and value > 0 and lo_q > 0:
            lo, hi = value * lo_q / c, value * hi_q / c
        else:
            lo, hi = value + (lo_q - c), value + (hi_q - c)
        if key.startswith("bp"):
            # Sizes between two observed sizes are equally good boundaries: the interval
            # holds the gaps the boundary fell in, not only where it was put inside them.
            left = np.asarray([centre[f"{key}.left"], *draws[f"{key}.left"]], dtype=float)
            right = np.asarray([centre[f"{key}.right"], *draws[f"{key}.right"]], dtype=float)
            left, right = left[np.isfinite(left)], right[np.isfinite(right)]
            if left.size:
                lo = min(lo, float(np.quantile(left, alpha)))
            if right.size:
                hi = max(hi, float(np.quantile(right, 1.0 - alpha)))
        intervals[key] = {"value": float(value), "lo": float(min(lo, value)),
                          "hi": float(max(hi, value))}
    out = _structure(intervals, model, families, scheme, n_units, int(n_boot), level, missing)
    if at is not None:
        out["medians"] = [{"size": float(x), **intervals.get(
            f"m{i}", {"value": None, "lo": None, "hi": None, "why": "no regime holds it"})}
            for i, x in enumerate(at)]
    return out


#: How the interval's ends are read off the resampled estimates: "harrell-davis", or
#: "linear" (numpy's default, as before issue 60's coverage check; kept to compare).
PERCENTILES = "harrell-davis"


def percentiles(draws: NDArray, alpha: float) -> tuple[float, float]:
    """The ``alpha`` and ``1 - alpha`` points of the resampled estimates ``draws``.

    Harrell-Davis (a Beta-weighted mean of all order statistics) rather than numpy's
    linear interpolation between two: from ~120 resamples the latter reads the 2.5 % point
    from the 3rd and 4th smallest draw, whose expected place is about 1.88 σ out rather
    than 1.96 (intervals ~4 % narrow) and which jump from one resample set to the next;
    the weighted mean sits where the percentile is and varies less.
    """
    if PERCENTILES != "harrell-davis":
        lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
        return float(lo), float(hi)
    from scipy.special import betainc

    x = np.sort(draws)
    n = len(x)
    grid = np.arange(n + 1) / n
    out = []
    for p in (alpha, 1.0 - alpha):
        w = np.diff(betainc(p * (n + 1), (1.0 - p) * (n + 1), grid))
        out.append(float(w @ x))
    return out[0], out[1]


def _reported(model: RegimeModel, s: NDArray, t: NDArray, at: NDArray | None = None
              ) -> dict[str, float]:
    """The values the model itself reports, where they exist (else the cheap estimate)."""
    out: dict[str, float] = {}
    if at is not None:  # the regime's curve times its noise's empirical median
        for i, k in enumerate(np.asarray(model.regime_index(at)).tolist()):
            reg = model.regimes_[k]
            emp = ((getattr(reg.noise, "quantiles", None) or {}).get("p50") or {}).get(
                "empirical")
            if emp is not None and math.isfinite(float(emp)):
                out[f"m{i}"] = float(reg.curve(at[i:i + 1])[0]) * float(emp)
    for k, bp in enumerate(model.breakpoints_):
        out[f"bp{k}"] = float(bp)
    for k, reg in enumerate(model.regimes_):
        for name in _param_names(reg.family):
            out[f"r{k}.{name}"] = _param_value(reg.family, reg.params, name)
        q = getattr(reg.noise, "quantiles", None) or {}
        for name in NOISE_QS:
            emp = (q.get(name) or {}).get("empirical")
            if emp is not None and math.isfinite(float(emp)):
                out[f"r{k}.noise.{name}"] = float(emp)
        for c, comp in enumerate(getattr(reg, "components", None) or []):
            out[f"r{k}.share{c}"] = float(comp.share)
    return out


def _describe(key: str, families: list[str]) -> str:
    if key.startswith("bp"):
        return f"breakpoint {int(key[2:]) + 1}"
    if key.startswith("m"):
        return f"median at the {int(key[1:]) + 1}th size asked"
    k, _, rest = key[1:].partition(".")
    return f"regime {int(k) + 1} ({families[int(k)]}) {rest}"


def _structure(flat: dict[str, dict[str, Any]], model: RegimeModel, families: list[str],
               scheme: str, n_units: int, n_boot: int, level: float,
               missing: list[str]) -> dict[str, Any]:
    """The JSON-ready intervals; nothing in it depends on the machine or its load (a model
    file is the same bytes whichever surface fitted it: no wall-clock time here)."""
    regimes = []
    for k, fam in enumerate(families):
        pre = f"r{k}."
        entry: dict[str, Any] = {"family": fam, "params": {}, "noise": {}, "band_shares": []}
        for key, iv in flat.items():
            if not key.startswith(pre):
                continue
            name = key[len(pre):]
            if name.startswith("noise."):
                entry["noise"][name[6:]] = iv
            elif name.startswith("share"):
                entry["band_shares"].append(iv)
            else:
                entry["params"][name] = iv
        regimes.append(entry)
    return {
        "method": "bootstrap, percentile intervals re-centred on the reported values",
        "level": level, "n_boot": n_boot, "resample": scheme, "n_units": n_units,
        "breakpoints": [flat[f"bp{k}"] for k in range(len(model.breakpoints_))],
        "regimes": regimes,
        "not_estimated": missing,
    }


def format_interval(iv: dict[str, Any] | None, fmt: Callable[[float], str] = "{:.4g}".format
                    ) -> str:
    """``value [lo, hi]``, or ``value (no interval: why)``; never prints a NaN as a number."""
    if not iv or iv.get("value") is None:
        return "not estimated" + (f" ({iv['why']})" if iv and iv.get("why") else "")
    text = fmt(float(iv["value"]))
    if iv.get("lo") is None or iv.get("hi") is None:
        return f"{text} (no interval: {iv.get('why', 'not estimable')})"
    note = f" ({iv['note']})" if iv.get("note") else ""
    return f"{text} [{fmt(float(iv['lo']))}, {fmt(float(iv['hi']))}]{note}"


def summary_lines(intervals: dict[str, Any]) -> list[str]:
    """One line per breakpoint and regime for the CLI summary."""
    lines = [f"{int(intervals['level'] * 100)} % intervals ({intervals['resample']} bootstrap, "
             f"{intervals['n_boot']} resamples of {intervals['n_units']} units):"]
    for k, iv in enumerate(intervals["breakpoints"]):
        lines.append(f"  breakpoint {k + 1}: {format_interval(iv, '{:,.0f}'.format)} B")
    for k, reg in enumerate(intervals["regimes"]):
        parts = [f"{n}={format_interval(iv)}" for n, iv in reg["params"].items()]
        parts += [f"noise {n}={format_interval(iv, '{:.3g}'.format)}"
                  for n, iv in reg["noise"].items()]
        parts += [f"band {c + 1} share={format_interval(iv, '{:.2f}'.format)}"
                  for c, iv in enumerate(reg["band_shares"])]
        lines.append(f"  regime {k + 1} ({reg['family']}): " + "; ".join(parts))
    for why in intervals.get("not_estimated", []):
        lines.append(f"  not estimated: {why}")
    return lines
