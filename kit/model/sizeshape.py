"""Each stored size's own distribution: its quantile function, pooled with its regime's by
cross-validation, stored only where it differs (per-size layer, format 2).

Why: on real clusters every message size has a distribution of its own (its floor, its
spread, its share of slow samples and its tail), and neighbouring sizes do not share it. On
the reference runs a size's own training samples predict its held-out samples better than
any smooth model does (W1 of a per-size lookup table is the floor), while pulling a size
towards its neighbours' or its regime's shape by a fixed amount made every decade worse
(x1.1-1.5). A model that moves medians only, or shrinks a few quantile levels by variances
read off its own density, stays 10-30 % above that floor in W1. Yet a synthetic truth
without size effects must not memorise sampling noise. So the amount of pooling is measured,
not assumed:

- the *base* of a size is what the model predicts at a size it has not seen (the regime's
  bands at their shares, the kernel mean of neighbouring sizes' location effects, the
  remaining between-size spread integrated out: kit.model.persize, kit.model.predictive);
- a size seen n times gets, at each level u of :data:`SHAPE_LEVELS`, the ln shift
  ``B·(ln Q̂(u) − ln Q_base(u))`` of its predictive empirical quantile Q̂ (order statistic
  u·(n+1)), with ``B = n / (n + α(u))``: its own samples count n against α pseudo-samples
  of the base (the posterior predictive of a Dirichlet process with the base as its mean);
- α per regime and level is chosen by two-fold cross-validation within the training
  samples: each size's samples split at random in halves, one half's shrunk quantiles
  scored on the other half by the pinball loss at u (whose integral over u is the CRPS),
  relative to the size's median, summed over sizes, on a grid of α from 0 (the size alone)
  to ∞ (the base alone);
- a level the count cannot inform (fewer than one sample expected beyond it) is the
  nearest level it can, plus the regime's *within-size* increments to it (the population's
  tail also holds the spread between sizes, which one size does not have: with it, a size
  seen 9 times had a [p05, p95] band holding 97-99 % of its held-out samples); sizes seen
  fewer than :data:`MIN_OWN` times get no shape (the median of two samples is their mean:
  one stall would move it by orders);
- the prior a size is pooled with is one size at its own location, spread and tails, each
  shrunk towards its regime's like the location (between-size variance against the
  sampling variance of that figure): the regime's within-size noise pools sizes whose tails
  differ, and a tight size pooled with it had 0.3 % of its held-out samples beyond its p99
  (reference runs). Whether a side's own tails enter is cross-validated per regime: on
  quantised or two-band samples a tail says less than its normal-theory variance claims;
- beyond the outermost level the base's tail continues, compressed by the ratio of the
  size's own spacing to the base's over the outermost step (at most 1): the base is the
  population of sizes, whose tail also holds the spread between sizes;
- what is stored is what differs: a size whose shifts are all within :data:`SHIFT_TOL`
  (0.1 % of its time) of none, or whose own samples weigh less than :data:`MIN_WEIGHT` at
  every level, is not stored (it is predicted as unseen, which is what its
  shifts say), and in a stored row a level whose shift lies within SHIFT_TOL of the line
  through its kept neighbours (in ln time) is dropped. The fitted model itself holds only
  those values, rounded to 1e-4, so a model read back from its file predicts exactly what
  the fitted one did.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kit.model.runs import predictive_quantiles
from kit.model.segmentation import robust_tau2

#: Quantile levels of the stored shapes (format 2): every 1/32. Fewer (15-21) levels lost
#: 2-10 % of W1 to the per-size floor on the shared reference runs between the levels.
SHAPE_LEVELS = np.arange(1, 32) / 32.0
#: Candidate pseudo-sample counts α of the base (∞: the base alone).
ALPHA_GRID = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
                       1024.0, 4096.0, math.inf])
#: How far (ln time) a size's stored quantiles may lie beyond both its own samples'
#: quantiles and the population's at the same level: a factor 2.
BEYOND_SEEN = math.log(2.0)
#: Fewest samples of a size for a shape of its own (two samples' median is their mean).
MIN_OWN = 3
#: Fewest sizes of a regime (each with >= 2 MIN_OWN samples) to cross-validate α.
MIN_CV_SIZES = 10
#: Folds of each size's samples in the cross-validation: fitting on 4/5 keeps the counts
#: near the size's own (with halves, a size seen 7 times was judged as one seen 3 times,
#: whose informed levels and tails are another matter).
CV_FOLDS = 5
#: Sizes per regime, and scored samples per size and fold, in the cross-validation (a
#: subsample: the loss sums over thousands of sizes, more adds time, not a different α).
MAX_CV_SIZES = 2000
MAX_CV_SAMPLES = 64
#: ln shift below which a size, or a level of its row, is not stored (0.1 % of its time).
SHIFT_TOL = 1e-3
#: A size whose own samples weigh less than this at every level (n/(n+α)) is predicted as
#: the population: with α in the hundreds (a smooth truth's cross-validation) a size seen
#: four times would otherwise be stored for a 1 % pull towards its noise.
MIN_WEIGHT = 0.05
#: A size is stored when one of its shifts exceeds this fraction of the sampling SD of its
#: median (σ/√n): below, what it says is within its own noise.
NOISE_FRACTION = 0.5
#: Sampling variance of a ln interquartile range times n (normal theory).
SPREAD_VAR = 1.36
#: A size is stored only where its own samples weigh at least this much against its
#: regime's, in its location, its spread or at one level they inform (:func:`own_weight`):
#: a smooth truth's sizes seen a few times, pooled a fifth towards their own noise at some
#: level, were 29,000 of a 1 M-sample log-uniform fit's rows.
MIN_WEIGHT = 0.5
#: Stored shifts are multiples of this (1e-4 of ln time: a tenth of SHIFT_TOL), written as
#: integers.
SHAPE_UNIT = 1e-4
#: A size's tails, as the (inner, outer) indices into SHAPE_LEVELS of their spacings:
#: lower 2/32 to p25, upper p75 to 30/32.
TAIL_PARTS = ((1, 7), (23, 29))
#: Sampling variance of a ln tail spacing over the size's own ln interquartile range, times
#: n (normal theory, simulated: 6.3-7.0 for n from 15 to 400).
TAIL_VAR = 6.5
#: Sampling variances times n of the body and the two tails' ln ratios, and the fewest
#: samples that measure each (a tail: one sample expected beyond 2/32).
PART_VAR = np.array([SPREAD_VAR, TAIL_VAR, TAIL_VAR])
PART_MIN_N = np.array([0.0, 15.0, 15.0])
#: Least compression of the base's tail beyond a size's outermost level.
MIN_TAIL_RATIO = 0.05

#: ln quantiles of the base: base_lnq(sizes, levels) -> (len(sizes), len(levels)).
BaseQuantiles = Callable[[NDArray, NDArray], NDArray]


def usable(n: NDArray, levels: NDArray) -> NDArray:
    """(len(n), len(levels)): levels a size seen n times informs (at least one sample
    expected beyond the level on either side)."""
    edge = np.minimum(levels, 1 - levels)[None, :]
    return (np.asarray(n, dtype=float)[:, None] + 1) * edge >= 1.0


def extend(own: NDArray, use: NDArray, scale: tuple[float, float] = (1.0, 1.0)) -> NDArray:
    """A size's own ln quantiles at every level: where its count informs a level, its own;
    beyond, its outermost informed level continued along the normal scores with the slope
    between that level and its median, times ``scale`` (lower, upper side; cross-validated,
    :func:`choose_pooling`).

    Why the size's own slope: the regime's within-size noise pools sizes whose spreads and
    tails differ (on 1 GbE some sizes within ±2 %, others ±20 %, a peaked body with heavy
    tails), and its increments put a tight size's p05 6 % below all its samples; the
    population's tail also holds the spread between sizes."""
    out = own.copy()
    L = out.shape[1]
    mid = L // 2
    z = _normal_scores(L)
    first = np.argmax(use, axis=1)
    last = L - 1 - np.argmax(use[:, ::-1], axis=1)
    rows = np.arange(len(out))
    lo_own, hi_own = own[rows, first], own[rows, last]
    with np.errstate(divide="ignore", invalid="ignore"):
        lo_slope = (own[:, mid] - lo_own) / (z[mid] - z[first])
        hi_slope = (hi_own - own[:, mid]) / (z[last] - z[mid])
    lo_slope = np.where(np.isfinite(lo_slope), lo_slope, 0.0)[:, None]
    hi_slope = np.where(np.isfinite(hi_slope), hi_slope, 0.0)[:, None]
    cols = np.arange(L)[None, :]
    below, above = cols < first[:, None], cols > last[:, None]
    zz = z[None, :]
    out = np.where(below, lo_own[:, None] + scale[0] * lo_slope * (zz - z[first][:, None]),
                   out)
    return np.where(above, hi_own[:, None] + scale[1] * hi_slope * (zz - z[last][:, None]),
                    out)


@cache
def _normal_scores(count: int) -> NDArray:
    """Standard normal quantiles at SHAPE_LEVELS (its length ``count``)."""
    from scipy.special import ndtri

    z = ndtri(SHAPE_LEVELS)
    assert len(z) == count
    z.setflags(write=False)
    return z


def pooled(own: NDArray, base: NDArray, n: NDArray, alpha: NDArray,
           levels: NDArray, scale: tuple[float, float] = (1.0, 1.0)) -> NDArray:
    """ln quantiles ``base + B·(own − base)`` with ``B = n/(n+α)`` per row and level (α per
    row and level, or per level), levels the count cannot inform extended by
    :func:`extend`, kept non-decreasing."""
    nn = np.asarray(n, dtype=float)[:, None]
    a = np.broadcast_to(alpha, own.shape)
    with np.errstate(invalid="ignore"):
        weight = np.where(np.isinf(a), 0.0, nn / (nn + np.where(np.isinf(a), 1.0, a)))
    use = usable(n, levels)
    # beyond its informed levels a size's own quantiles are an extrapolation: they weigh no
    # more than at its outermost informed level
    weight = np.minimum(weight, carry(np.where(use, weight, 0.0), use))
    full = extend(own, use, scale)
    return np.maximum.accumulate(base + weight * (full - base), axis=1)


def own_weight(n: NDArray, alpha: NDArray, levels: NDArray) -> NDArray:
    """Per size, the most its own samples weigh (n/(n+α)) at a level its count informs."""
    nn = np.asarray(n, dtype=float)[:, None]
    with np.errstate(invalid="ignore"):
        w = np.where(np.isinf(alpha), 0.0, nn / (nn + np.where(np.isinf(alpha), 1.0, alpha)))
    return np.asarray(np.where(usable(n, levels), w, 0.0).max(axis=1))


def carry(values: NDArray, use: NDArray) -> NDArray:
    """``values`` with each level outside ``use`` given the value of the nearest level inside
    it on its side of the median."""
    out = values.copy()
    mid = out.shape[1] // 2
    for j in range(mid - 1, -1, -1):
        out[:, j] = np.where(use[:, j], out[:, j], out[:, j + 1])
    for j in range(mid + 1, out.shape[1]):
        out[:, j] = np.where(use[:, j], out[:, j], out[:, j - 1])
    return out


def spread_ratio(own: NDArray, one: NDArray) -> NDArray:
    """(len, 3) ln ratios of a size's own spread over one typical size's (``one``): its body
    (p25 to p75), then its lower and upper tails (:data:`TAIL_PARTS`: the spacing from a
    quartile out to 2/32 or 30/32) each over the size's own body, i.e. how heavy its tails
    are for its spread."""
    lo, hi = np.searchsorted(SHAPE_LEVELS, [0.25, 0.75])
    (a, b), (c, d) = TAIL_PARTS
    with np.errstate(divide="ignore", invalid="ignore"):
        body = np.log((own[:, hi] - own[:, lo]) / (one[:, hi] - one[:, lo]))
        low = np.log((own[:, b] - own[:, a]) / (one[:, b] - one[:, a])) - body
        high = np.log((own[:, d] - own[:, c]) / (one[:, d] - one[:, c])) - body
    r = np.stack([body, low, high], axis=1)
    return np.where(np.isfinite(r), r, 0.0)


def shrink_spread(ratio: NDArray, n: NDArray) -> tuple[NDArray, dict[str, list[float]]]:
    """Each size's ln spread ratios (:func:`spread_ratio`) shrunk towards their regime's
    medians like the location: sampling variance :data:`SPREAD_VAR`/n of the body and
    :data:`TAIL_VAR`/n of a tail (normal theory; a tail only where n informs its outer
    level, elsewhere the median), between-size variance by the robust method of moments,
    ``B = τ²/(τ² + v)``. Returns (the shrunk ratios, {median, tau} per part)."""
    nn = np.asarray(n, dtype=float)
    out = np.zeros_like(ratio)
    info: dict[str, list[float]] = {"median": [], "tau": []}
    for j, (var, least) in enumerate(zip(PART_VAR, PART_MIN_N, strict=True)):
        ok = nn >= least
        r, v = ratio[ok, j], var / nn[ok]
        m = float(np.median(r)) if len(r) else 0.0
        t2 = robust_tau2(r - m, v) if len(r) >= MIN_CV_SIZES else 0.0
        out[:, j] = m
        if t2 > 0:
            out[ok, j] = m + t2 / (t2 + v) * (r - m)
        info["median"].append(m)
        info["tau"].append(math.sqrt(t2))
    return out, info


def prior_base(pop: NDArray, one: NDArray, own_median: NDArray, n: NDArray, tau: NDArray,
               sigma: NDArray, spread: NDArray | None = None) -> tuple[NDArray, NDArray]:
    """(ln quantiles a size's own quantiles are pooled with, the weight of its own median).

    ``pop``: the population at the size (its location unknown, N(0, τ²) around the kernel
    mean); ``one``: one size at the kernel mean's location (no spread between sizes). A
    size seen n times knows its location up to the sampling variance of its median,
    ``v = (π/2)·σ²/n``: the posterior moves the location by ``B = τ²/(τ² + v)`` of its
    median's deviation and leaves ``(1 − B)·τ²`` of the spread, here by interpolating the
    quantiles between ``one`` (B = 1) and ``pop`` (B = 0). ``spread``: the size's own ln
    spread ratio (:func:`shrink_spread`), which scales ``one`` around its median first:
    sizes differ in spread too, and the regime's within-size noise pools them all.
    Shrinking a size's quantiles towards the population's instead mixed the spread between
    sizes into its own tails (on
    1 GbE, with sizes 8 % apart and within ±2 % each, p05 at 0.92 of the median where the
    size's samples sat at 0.98)."""
    nn = np.asarray(n, dtype=float)
    t2 = np.nan_to_num(np.asarray(tau, dtype=float)) ** 2
    v = (np.pi / 2) * np.nan_to_num(np.asarray(sigma, dtype=float)) ** 2 / nn
    with np.errstate(invalid="ignore", divide="ignore"):
        B = np.where(t2 > 0, t2 / (t2 + v), 0.0)
    mid = one.shape[1] // 2
    if spread is not None:  # one size of this size's own (shrunk) spread and tails
        one = scale_shape(one, spread)
    delta = B * (own_median - one[:, mid])
    return delta[:, None] + one + (1 - B)[:, None] * (pop - one), B


def scale_shape(one: NDArray, spread: NDArray) -> NDArray:
    """``one``'s ln quantiles with the body scaled around the median by exp(spread[:, 0])
    and each tail beyond its quartile by exp(spread[:, 1 or 2]) more (non-decreasing)."""
    mid = one.shape[1] // 2
    lo, hi = np.searchsorted(SHAPE_LEVELS, [0.25, 0.75])
    f = np.exp(spread)
    out = one[:, mid:mid + 1] + f[:, :1] * (one - one[:, mid:mid + 1])
    q25, q75 = out[:, lo:lo + 1], out[:, hi:hi + 1]
    cols = np.arange(one.shape[1])[None, :]
    out = np.where(cols < lo, q25 - f[:, 1:2] * (q25 - out), out)
    return np.where(cols > hi, q75 + f[:, 2:3] * (out - q75), out)


def estimate_shape(sizes_all: NDArray, counts: NDArray, si_lt: NDArray, regime_of: NDArray,
                   location: list[tuple[float, float]], pop_lnq: BaseQuantiles,
                   one_lnq: BaseQuantiles, rng: np.random.Generator,
                   edges: NDArray | None = None
                   ) -> tuple[NDArray, NDArray, list[dict[str, Any]]]:
    """The stored sizes' shapes.

    ``sizes_all``/``counts``: every distinct size of the (inlier, size-sorted) samples and
    its count; ``si_lt``: the samples' ln times in that order; ``regime_of``: each distinct
    size's regime; ``location``: per regime (τ, σ), the location's between-size SD left at
    an unseen size and the within-size SD of ln time (NaN: not estimated); ``pop_lnq`` /
    ``one_lnq``: ln quantiles of the population at sizes / of one size at the kernel mean
    (:func:`prior_base`); ``edges``: sizes where those are not smooth (breakpoints, overlap
    windows' ends; :func:`base_on_grid`). Returns (stored sizes' indices into sizes_all,
    their ln shifts from the population (len, L) with NaN at dropped levels, per regime
    {alpha (per level, None for ∞), tail_scale, spread ({median, tau} of the body's and
    the tails' ln ratios, and tails: whether each side's own tails entered), n_candidates,
    n_stored}).
    """
    levels = SHAPE_LEVELS
    L = len(levels)
    n_regimes = len(location)
    gid = np.repeat(np.arange(len(sizes_all)), counts)
    cand = np.flatnonzero(counts >= MIN_OWN)
    info: list[dict[str, Any]] = [{"alpha": None, "n_candidates": 0, "n_stored": 0}
                                  for _ in range(n_regimes)]
    if not len(cand):
        return cand, np.zeros((0, L)), info
    pick = (counts >= MIN_OWN)[gid]
    local = np.searchsorted(cand, gid[pick])  # candidate index of each of their samples
    lt = si_lt[pick]
    own = predictive_quantiles(local, lt, levels)
    pop = base_on_grid(sizes_all[cand], levels, pop_lnq, edges)
    one = base_on_grid(sizes_all[cand], levels, one_lnq, edges)
    n = counts[cand].astype(float)
    reg = regime_of[cand]
    tau = np.array([location[k][0] for k in reg])
    sigma = np.array([location[k][1] for k in reg])
    ratio = spread_ratio(own, one)
    final = pop.copy()
    alpha = np.full((len(cand), L), math.inf)
    prior_weight = np.zeros(len(cand))
    for k in range(n_regimes):
        mine = np.flatnonzero(reg == k)
        info[k]["n_candidates"] = len(mine)
        if not len(mine):
            continue
        spread, spread_info = shrink_spread(ratio[mine], n[mine])
        a_k, scale, tails = choose_pooling(mine, n, local, lt, pop, one, tau, sigma,
                                           spread_info, rng)
        spread[:, 1:] *= np.asarray(tails, dtype=float)[None, :]
        base, located = prior_base(pop[mine], one[mine], own[mine, L // 2], n[mine],
                                   tau[mine], sigma[mine], spread)
        # what the size's own samples weigh in its prior: its location, and its spread
        used = np.r_[True, tails]
        prior_weight[mine] = np.maximum(
            located, _spread_weight(spread_info, n[mine])[:, used].max(axis=1))
        # a size's spread scales the typical size's tail (prior_base): a size whose own
        # quartiles span two bands (a busy run's 10 ms hiccups beside its 5 us body) would
        # scale that tail by ~e^7, to p97 of 10^9 s; no level of it goes beyond both what
        # the size's samples and the population say by more than BEYOND_SEEN
        lo = np.minimum(pop[mine], own[mine]) - BEYOND_SEEN
        hi = np.maximum(pop[mine], own[mine]) + BEYOND_SEEN
        base = np.clip(base, lo, hi)
        alpha[mine] = a_k
        final[mine] = np.clip(pooled(own[mine], base, n[mine], a_k, levels, scale), lo, hi)
        info[k]["spread"] = spread_info | {"tails": list(tails)}
        info[k]["alpha"] = [None if math.isinf(a) else float(a) for a in a_k]
        info[k]["tail_scale"] = list(scale)
    # what differs beyond the noise: half the sampling SD of a median of n
    noise = NOISE_FRACTION * np.nan_to_num(sigma, nan=0.0) / np.sqrt(n)
    shift = final - pop
    keep = np.flatnonzero((np.max(np.abs(shift), axis=1) >= np.maximum(SHIFT_TOL, noise))
                          & (np.maximum(own_weight(n, alpha, levels), prior_weight)
                             >= MIN_WEIGHT))
    # a row is kept to within a quarter of its own noise (at least SHIFT_TOL): finer knots
    # would only describe the noise
    kept = thin_rows(pop[keep], shift[keep], np.maximum(SHIFT_TOL, noise[keep] / 2))
    rows = np.where(kept, np.rint(shift[keep] / SHAPE_UNIT) * SHAPE_UNIT, np.nan)
    for k in range(n_regimes):
        info[k]["n_stored"] = int(np.sum(reg[keep] == k))
    return cand[keep], rows, info


#: Step in ln size of the nodes the base is computed at when sizes are many (0.5 %).
GRID_STEP = 0.005


def base_on_grid(sizes: NDArray, levels: NDArray, base_lnq: BaseQuantiles,
                 edges: NDArray | None) -> NDArray:
    """``base_lnq(sizes, levels)``, with the quantiles of many sizes interpolated (linear in
    ln size) between nodes GRID_STEP apart inside each stretch between ``edges``.

    Why: the base at a size is a root of a mixture of up to ten terms per level, and a
    log-uniform run of 1 M samples has ~30,000 sizes seen three times or more, which made
    these roots 3/4 of the fit. Inside a stretch the base changes smoothly with size (curves,
    logistic shares, kernel tables h/4 apart), by at most ~0.5 % of time per node step, so
    the interpolation is within ~1e-5 of ln time; across a breakpoint or an overlap window's
    end it jumps, and sizes within a step of those are computed exactly."""
    x = np.log(np.maximum(np.asarray(sizes, dtype=float), 1.0))
    if len(x) < 2:
        return base_lnq(sizes, levels)
    ln_edges = np.log(np.maximum(np.sort(np.asarray(edges if edges is not None else [],
                                                    dtype=float)), 1.0))
    near = np.zeros(len(x), dtype=bool)
    if len(ln_edges):
        j = np.clip(np.searchsorted(ln_edges, x), 1, len(ln_edges)) - 1
        k = np.clip(j + 1, 0, len(ln_edges) - 1)
        near = ((np.abs(x - ln_edges[j]) <= 2 * GRID_STEP)
                | (np.abs(x - ln_edges[k]) <= 2 * GRID_STEP))
    seg = np.searchsorted(ln_edges, x, side="right")
    exact = near.copy()
    node_x: list[NDArray] = []
    for g in np.unique(seg[~near]):
        mine = np.flatnonzero((seg == g) & ~near)
        lo, hi = x[mine].min(), x[mine].max()
        count = int(np.ceil((hi - lo) / GRID_STEP)) + 1
        if count >= len(mine) // 2:
            exact[mine] = True  # sizes sparse here: as cheap to take them all
        else:
            node_x.append(np.linspace(lo, hi, count))
    out = np.empty((len(x), len(levels)))
    todo = [np.asarray(sizes, dtype=float)[exact]] + [np.exp(n) for n in node_x]
    values = base_lnq(np.concatenate(todo), levels) if sum(map(len, todo)) else None
    if values is None:
        return out
    out[exact] = values[:int(exact.sum())]
    at = int(exact.sum())
    for nodes in node_x:
        vals = values[at:at + len(nodes)]
        at += len(nodes)
        mine = np.flatnonzero(~exact & (x >= nodes[0]) & (x <= nodes[-1]))
        for j in range(len(levels)):
            out[mine, j] = np.interp(x[mine], nodes, vals[:, j])
    return out


#: Candidate scales of the within-size increments beyond a size's informed levels.
TAIL_SCALES = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0])


def choose_pooling(mine: NDArray, n: NDArray, local: NDArray, lt: NDArray, pop: NDArray,
                   one: NDArray, tau: NDArray, sigma: NDArray, spread: dict[str, Any],
                   rng: np.random.Generator
                   ) -> tuple[NDArray, tuple[float, float], tuple[bool, bool]]:
    """(α per level, tail scale (lower, upper), whether the sizes' own tails enter their
    prior (lower, upper)) for the candidate sizes ``mine`` of one regime, by CV_FOLDS-fold
    cross-validation of the pinball loss (module docstring): first the tail scales with each
    fold's own quantiles alone (α = 0: where a size's own samples rule, how far beyond them
    its tail reaches), then α with them, for a prior with and one without the sizes' own
    tails (:func:`scale_shape`); each side takes the better. α = ∞ and scale 1 where
    fewer than MIN_CV_SIZES sizes have 2·MIN_OWN samples."""
    levels = SHAPE_LEVELS
    L = len(levels)
    cv = mine[n[mine] >= 2 * MIN_OWN]
    if len(cv) < MIN_CV_SIZES:
        return np.full(L, math.inf), (1.0, 1.0), (False, False)
    if len(cv) > MAX_CV_SIZES:
        cv = np.sort(rng.choice(cv, MAX_CV_SIZES, replace=False))
    is_cv = np.zeros(len(n), dtype=bool)
    is_cv[cv] = True
    sel = np.flatnonzero(is_cv[local])
    g = np.searchsorted(cv, local[sel])  # 0..len(cv)-1, ascending (samples size-sorted)
    v = lt[sel]
    # K folds of each size's samples: a random rank within the size, modulo K
    order = np.lexsort((rng.random(len(g)), g))
    cnt = np.bincount(g, minlength=len(cv))
    start = np.r_[0, np.cumsum(cnt)[:-1]]
    rank = np.empty(len(g), dtype=np.int64)
    rank[order] = np.arange(len(g)) - start[g[order]]
    # a prior with the sizes' own tails differs only where the tails vary between sizes
    measured = bool(np.any(np.asarray(spread["tau"][1:]) > 0))
    ln_med = predictive_quantiles(g, v, np.array([0.5]))[:, 0]
    folds = []
    for f in range(CV_FOLDS):
        held = rank % CV_FOLDS == f
        fold = ~held
        fit_g, fit_v = g[fold], v[fold]
        n_fit = np.bincount(fit_g, minlength=len(cv)).astype(float)
        est = predictive_quantiles(fit_g, fit_v, levels)
        # the fold's own spread, shrunk with the regime's spread variance
        r = spread_ratio(est, one[cv])
        m = np.asarray(spread["median"])[None, :]
        shrunk = m + _spread_weight(spread, n_fit) * (r - m)
        bases = []
        for with_tails in (False, True)[:1 + measured]:
            parts = shrunk.copy()
            parts[:, 1:] *= with_tails
            bases.append(prior_base(pop[cv], one[cv], est[:, L // 2], n_fit, tau[cv],
                                    sigma[cv], parts)[0])
        # the held-out fold scores, at most MAX_CV_SAMPLES of it per size (a random subset)
        other = held & (rank // CV_FOLDS < MAX_CV_SAMPLES)
        folds.append((n_fit, est, bases, _PinballSums(
            g[other], np.exp(v[other] - ln_med[g[other]]), len(cv))))

    def losses(alpha: float, scale: tuple[float, float], tails: int = 0) -> NDArray:
        out = np.zeros((len(cv), L))
        for n_fit, est, bases, scorer in folds:
            q = pooled(est, bases[tails], n_fit, np.full(L, alpha), levels, scale)
            out += scorer.loss(np.exp(q - ln_med[:, None]), levels)
        return out

    by_scale = np.stack([losses(0.0, (c, c)) for c in TAIL_SCALES])  # (scale, size, level)
    mid = L // 2
    scale = (_one_se(by_scale[:, :, :mid].sum(axis=2), TAIL_SCALES),
             _one_se(by_scale[:, :, mid + 1:].sum(axis=2), TAIL_SCALES))
    # the sizes' own tails in their prior (:func:`prior_base`) or the regime's, per side,
    # whichever scores better at its own α (a tail measured on quantised or two-band
    # samples can say less than its normal-theory variance claims)
    loss = [np.stack([losses(a, scale, t) for a in ALPHA_GRID])
            for t in (0, 1)[:1 + measured]]
    alphas = [one_se_choice(x) for x in loss]
    at = [x[np.searchsorted(ALPHA_GRID, a), :, np.arange(L)].sum(axis=1)
          for x, a in zip(loss, alphas, strict=True)]  # (level,) loss at the chosen α
    sides = (np.arange(L) < mid, np.arange(L) > mid)
    tails = tuple(bool(spread["tau"][1 + j] > 0 and at[-1][side].sum() < at[0][side].sum())
                  for j, side in enumerate(sides))
    alpha = np.where(sides[0], alphas[int(tails[0])],
                     np.where(sides[1], alphas[int(tails[1])], alphas[0]))
    return alpha, scale, (tails[0], tails[1])


def _spread_weight(spread: dict[str, Any], n: NDArray) -> NDArray:
    """(len(n), 3) weight of a size's own spread ratios against their regime's medians
    (:func:`shrink_spread`; 0 where n does not inform a part)."""
    nn = np.asarray(n, dtype=float)[:, None]
    t2 = np.asarray(spread["tau"], dtype=float)[None, :] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(t2 > 0, t2 / (t2 + PART_VAR[None, :] / nn), 0.0)
    return np.where(nn >= PART_MIN_N[None, :], w, 0.0)


def _one_se(loss: NDArray, grid: NDArray) -> float:
    """The largest grid value whose mean loss over sizes (``loss``: (grid, size)) is within
    one standard error of the best's."""
    mean = loss.mean(axis=1)
    diff = loss - loss[int(np.argmin(mean))]
    se = diff.std(axis=1) / math.sqrt(max(loss.shape[1] - 1, 1))
    ok = np.flatnonzero(diff.mean(axis=1) <= se + 1e-12 * np.abs(mean))
    return float(grid[ok[-1]])


def one_se_choice(loss: NDArray) -> NDArray:
    """α per level from per-size losses (α, size, level), each level with its two
    neighbours: the largest α whose mean loss is within one standard error (over sizes) of
    the best α's. The one-SE rule: pool with the base unless the sizes' own samples are
    better by more than the cross-validation's own noise (with a few sizes of a smooth
    truth, the best α alone often fell on a finite value by chance)."""
    smooth = loss.copy()
    smooth[:, :, 1:-1] = loss[:, :, :-2] + loss[:, :, 1:-1] + loss[:, :, 2:]
    n_sizes = smooth.shape[1]
    mean = smooth.mean(axis=1)  # (α, level)
    best = np.argmin(mean, axis=0)
    diff = smooth - smooth[best, :, np.arange(smooth.shape[2])].T[None, :, :]
    se = diff.std(axis=1) / math.sqrt(max(n_sizes - 1, 1))
    ok = diff.mean(axis=1) <= se + 1e-12 * np.abs(mean)
    last = len(ALPHA_GRID) - 1 - np.argmax(ok[::-1], axis=0)
    return np.asarray(ALPHA_GRID[last])


class _PinballSums:
    """Sums over each group's values y of the pinball loss ρ_u(y − q) = (y − q)(u − 1{y<q}),
    for a q per group and level, from one sort of the values and their running sums."""

    def __init__(self, group: NDArray, values: NDArray, n_groups: int) -> None:
        # values > 0: y/(1+y) keeps their order inside [group, group + 1)
        key = group + values / (1.0 + values)
        order = np.argsort(key, kind="stable")
        self.key = key[order]
        self.cum = np.r_[0.0, np.cumsum(values[order])]
        self.count = np.bincount(group, minlength=n_groups).astype(float)
        self.start = np.r_[0, np.cumsum(self.count)[:-1]].astype(np.int64)
        self.total = self.cum[self.start + self.count.astype(np.int64)] - self.cum[self.start]

    def loss(self, q: NDArray, levels: NDArray) -> NDArray:
        """(n_groups, L) each group's loss summed over its values; ``q`` (n_groups, L) > 0."""
        rows = np.arange(q.shape[0])[:, None]
        pos = np.searchsorted(self.key, rows + q / (1.0 + q))
        below = pos - self.start[:, None]
        s_below = self.cum[pos] - self.cum[self.start][:, None]
        c, s = self.count[:, None], self.total[:, None]
        u = levels[None, :]
        out = u * (s - s_below) - u * q * (c - below) + (1 - u) * (q * below - s_below)
        return np.asarray(out)


def thin_rows(x: NDArray, shift: NDArray, tol: float | NDArray) -> NDArray:
    """(rows, L) mask of the levels to keep so that the piecewise-linear map through the
    kept (x, shift) of each row reproduces every level's shift within ``tol``: the map
    between kept levels is linear in ln time, so a level on the line through its kept
    neighbours carries nothing. Ends always kept; in rounds, the level farthest from the
    line in each stretch (a local maximum of the error beyond ``tol``) joins, as in
    Douglas-Peucker, all rows at once."""
    R, L = shift.shape
    keep = np.zeros((R, L), dtype=bool)
    if R == 0:
        return keep
    keep[:, 0] = keep[:, -1] = True
    cols = np.arange(L)
    rows = np.arange(R)[:, None]
    for _ in range(L):
        left = np.maximum.accumulate(np.where(keep, cols, 0), axis=1)
        right = np.minimum.accumulate(np.where(keep, cols, L - 1)[:, ::-1], axis=1)[:, ::-1]
        xl, xr = x[rows, left], x[rows, right]
        yl, yr = shift[rows, left], shift[rows, right]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(xr > xl, (x - xl) / (xr - xl), 0.0)
        err = np.where(keep, 0.0, np.abs(shift - (yl + frac * (yr - yl))))
        # the largest error of its stretch: each kept level starts a stretch (row-major,
        # so a stretch is a run of the flat array)
        flat, kept = err.ravel(), keep.ravel()
        stretch = np.cumsum(kept) - 1
        top = flat == np.maximum.reduceat(flat, np.flatnonzero(kept))[stretch]
        add = top.reshape(R, L) & (err > np.reshape(tol, (-1, 1)))
        if not add.any():
            break
        keep |= add
    return keep


def fill_rows(x: NDArray, rows: NDArray) -> NDArray:
    """Stored rows (NaN at dropped levels) with every level's shift: linear in ln time
    ``x`` (the base's knots) between the kept levels, as the map is."""
    out = np.array(rows, dtype=float)
    gaps = np.isnan(out)
    if not gaps.any():
        return out
    for r in np.flatnonzero(gaps.any(axis=1)):
        ok = ~gaps[r]
        out[r, gaps[r]] = np.interp(x[r, gaps[r]], x[r, ok], out[r, ok])
    return out


def tail_ratios(x: NDArray, y: NDArray) -> tuple[NDArray, NDArray]:
    """Per row, how much of the base's tail a size keeps beyond its lowest and highest
    level: the size's own spacing over the base's across the outermost step, within
    [MIN_TAIL_RATIO, 1]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = (y[:, 1] - y[:, 0]) / (x[:, 1] - x[:, 0])
        hi = (y[:, -1] - y[:, -2]) / (x[:, -1] - x[:, -2])
    def clip(r: NDArray) -> NDArray:
        return np.clip(np.where(np.isfinite(r), r, 1.0), MIN_TAIL_RATIO, 1.0)
    return clip(lo), clip(hi)
