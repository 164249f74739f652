"""Regime boundaries on log(size): an exact dynamic programme over per-bin summaries.

Raw samples are reduced to at most ``MAX_BINS`` bins (one per distinct size, or log-spaced
bins when sizes are drawn log-uniformly), each holding its sample count, median size and
median log time. Every bin range gets the closed-form cost of its best family (see
:func:`kit.model.families.segment_costs`), and the DP finds, for each number of regimes K,
the partition with the smallest total cost among those whose regimes all hold at least
``min_support`` samples; it is exact on the bins. K is then chosen by BIC with the
residual variance estimated from the fit, so a model that is only approximately right
(real data) is not pushed to the maximum number of regimes by sheer sample count.
Segments are fitted independently, so a jump between regimes (a protocol switch) costs
nothing extra: discontinuities are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from kit.model.families import FAMILIES, segment_costs
from kit.model.kernels import CURVES as _curves  # the between-size variance, in C
from kit.model.order_stats import median
from kit.model.outliers import group_quantiles
from kit.model.runs import run_ids, run_starts
from kit.model.special import use_scipy

MAX_BINS = 320
#: Up to this many distinct sizes each keep a bin of their own (fixed-size designs such as
#: the SimGrid calibration runs, ~500 sizes): only then can per-size effects be seen.
MAX_SIZE_BINS = 640
#: BIC parameters per regime: two curve coefficients and one boundary.
PARAMS_PER_REGIME = 4
#: Smallest share of the remaining weighted residual variance a further regime must explain.
MIN_GAIN = 0.15
#: A segmentation fits adequately when its weighted residual sum is below this quantile of
#: its chi-square distribution (conventional 5 % test of lack of fit).
ADEQUATE_LEVEL = 0.95


@dataclass
class Bins:
    """Per-bin summaries, bins ordered by size."""

    first: NDArray  # smallest size in the bin (bytes)
    size: NDArray  # median size (bytes, >= 1)
    median: NDArray  # median time (s)
    weight: NDArray  # weight of the bin's median in the fits
    count: NDArray  # samples in the bin
    #: Between-size variance of ln median beyond sampling noise (0 when bins pool sizes).
    tau2: float = 0.0
    #: Typical within-bin variance of ln time (robust).
    sigma2: float = 0.0
    #: One bin per distinct size (so ``tau2`` is a per-size variance component).
    per_size: bool = False
    #: Sampling variance of each bin's ln median.
    v: NDArray | None = None
    #: The families' cost tables of these bins (see :func:`cost_tables`), once computed.
    tables: dict[str, NDArray] | None = field(default=None, repr=False, compare=False)


def make_bins(size_sorted: NDArray, time_sorted: NDArray, max_bins: int = MAX_BINS,
              local: bool = True) -> Bins:
    """Summarise samples (sorted by size) into bins; one bin per size when there are few sizes.

    Where a slow band's share drifts with size the median jumps between bands and the DP
    cuts there; the raw-likelihood merge pass of the estimator undoes such cuts.
    """
    s_eff = np.maximum(size_sorted.astype(np.float64), 1.0)
    starts = run_starts(size_sorted)
    counts_per_size = np.diff(np.r_[starts, len(size_sorted)])
    # A bin per size when there are few sizes, and also up to MAX_SIZE_BINS sizes when
    # sizes are repeated (median >= 3 samples): only then is a size's spread measurable.
    per_size = len(starts) <= max_bins or (len(starts) <= MAX_SIZE_BINS
                                           and float(np.median(counts_per_size)) >= 3)
    ls = np.log(s_eff)
    if per_size:
        bid = np.repeat(np.arange(len(starts)), counts_per_size)
    else:
        edges = np.linspace(ls[0], ls[-1], max_bins + 1)[1:-1]
        bid = run_ids(np.searchsorted(edges, ls, side="right"))  # empty bins vanish
    lt = np.log(time_sorted)
    q = group_quantiles(bid, lt, (0.25, 0.5, 0.75), interpolate=True)
    counts = np.bincount(bid)
    bstart = run_starts(bid)
    first = size_sorted[bstart].astype(np.float64)
    med_size = np.exp(group_quantiles(bid, ls, (0.5,), interpolate=True,
                                      sorted_within=True)[:, 0])
    return summarise_bins(first, med_size, q, counts, per_size, local)


def summarise_bins(first: NDArray, med_size: NDArray, q: NDArray, counts: NDArray,
                   per_size: bool, local: bool = True) -> Bins:
    """:class:`Bins` from each bin's smallest and median size, ln-time quartiles ``q``
    (columns 0.25, 0.5, 0.75) and sample count: the weights of the fits, in one place for
    :func:`make_bins` and the bootstrap's re-weighted bins
    (:mod:`kit.model.resampled_bins`)."""
    # Weight = 1 / variance of the bin median ~ n / spread². The spread is floored at the
    # typical spread: estimated from few samples it is noisy, and noisy weights invent
    # breakpoints; above the floor, genuinely wide (two-band) bins count less.
    spread = (q[:, 2] - q[:, 0]) / 1.349
    floor = max(median(spread), 1e-3)
    # A spread measured on a handful of samples is itself noisy: pull it toward the
    # typical spread as if that were seen SPREAD_PRIOR times (empirical Bayes for variances).
    spread = np.sqrt((counts * spread**2 + SPREAD_PRIOR * floor**2) / (counts + SPREAD_PRIOR))
    # Sampling variance of a bin's ln median ~ (pi/2) sd^2 / n.
    v = (np.pi / 2) * np.maximum(spread, floor) ** 2 / counts
    tau2, tau2_local = (between_size_variance(np.log(med_size), q[:, 1], v, local)
                        if per_size else (0.0, np.zeros(len(v))))
    # Random-effects weights: a size's median is its true per-size value plus sampling
    # noise, and per-size values scatter by tau2 around any smooth curve. Repeating a
    # size more often shrinks only the sampling part, so a size never weighs more than
    # 1 / tau2, and repetitions cannot buy regimes. tau2 is local (sizes near this one):
    # where sizes scatter wildly (TCP window effects) a curve's misfit is no evidence of
    # a new regime, where they are quiet it is.
    weight = 1.0 / (tau2_local + v)
    return Bins(first, med_size, np.exp(q[:, 1]), weight, counts, tau2,
                median(np.maximum(spread, floor) ** 2), per_size, v)


#: Pseudo-samples of the typical spread added to each bin's own spread.
SPREAD_PRIOR = 10

#: Bins on each side for the local between-size variance.
LOCAL_HALF = 12
#: Bins on each side in the running median that stands in for "the smooth curve".
SMOOTH_HALF = 3


def between_size_variance(x: NDArray, y: NDArray, v: NDArray,
                          local: bool = True) -> tuple[float, NDArray]:
    """Variance of per-size ln medians around a local smooth curve, beyond sampling noise.

    Nonparametric on purpose (it is needed before any regime is fitted): each median is
    compared with the running median of its neighbours (+-SMOOTH_HALF sizes, itself
    excluded); a robust (MAD) variance of these differences, less the typical sampling
    variance of a median and the running median's own noise, is the per-size variance
    component (method of moments, :func:`robust_tau2`). Jumps between regimes touch a
    few sizes only and do not move it. Returns the overall value and a local one per bin.
    """
    B = len(y)
    if B < 2 * SMOOTH_HALF + 3:
        return 0.0, np.zeros(B)
    # var(d) = tau2 + v + var(ref); var(ref) ~ (pi/2)(tau2 + v) / (2 * SMOOTH_HALF).
    infl = 1.0 + (np.pi / 2) / (2 * SMOOTH_HALF)
    if _curves is not None:  # the same values from C (the bootstrap's bins, every resample)
        y64, v64 = (np.ascontiguousarray(a, dtype=np.float64) for a in (y, v))
        d = np.empty(B)
        glob_c = _curves.between_size(y64, v64, infl, SMOOTH_HALF, d)
        if glob_c is not None:
            return glob_c, (local_tau2(d, v64, infl) if local else np.full(B, glob_c))
    return _between_size_variance_numpy(y, v, infl, local)


def _between_size_variance_numpy(y: NDArray, v: NDArray, infl: float, local: bool
                                 ) -> tuple[float, NDArray]:
    """:func:`between_size_variance` in numpy: the reference the C kernel is held to, and
    the path for NaN/infinite variances (numpy's rules decide those)."""
    B = len(y)
    pad = np.r_[np.full(SMOOTH_HALF, np.nan), y, np.full(SMOOTH_HALF, np.nan)]
    win = np.lib.stride_tricks.sliding_window_view(pad, 2 * SMOOTH_HALF + 1).copy()
    win[:, SMOOTH_HALF] = np.nan
    ref = nanmedian_rows(win)
    d = y - ref
    ok = np.isfinite(d)
    d = d - median(d[ok])
    glob = robust_tau2(d[ok], v[ok], infl)
    return glob, (local_tau2(d, v, infl) if local else np.full(B, glob))


def nanmedian_rows(a: NDArray) -> NDArray:
    """``np.nanmedian(a, axis=1)`` for a 2-D array, same values, ~10x faster on the short
    rows used here (numpy takes a masked-array path for them); all-NaN rows give NaN.

    The bootstrap intervals spend most of their time in the window medians of
    :func:`local_tau2` (30 bisection steps x every resample's bins).
    """
    s = np.sort(a, axis=1)  # NaN sorts last
    count = a.shape[1] - np.count_nonzero(np.isnan(a), axis=1)
    rows = np.arange(a.shape[0])
    lo = s[rows, np.maximum((count - 1) // 2, 0)]
    hi = s[rows, np.maximum(count // 2, 0)]
    return np.where(count > 0, (lo + hi) / 2, np.nan)


def local_tau2(d: NDArray, v: NDArray, infl: float = 1.0, half: int | None = None) -> NDArray:
    """:func:`robust_tau2` on a window of +-``half`` bins around each bin (vectorised)."""
    half = LOCAL_HALF if half is None else half
    B = len(d)
    dp = np.r_[np.full(half, np.nan), d, np.full(half, np.nan)]
    vp = np.r_[np.full(half, np.nan), v, np.full(half, np.nan)]
    dw = np.lib.stride_tricks.sliding_window_view(dp, 2 * half + 1) ** 2
    vw = np.maximum(np.lib.stride_tricks.sliding_window_view(vp, 2 * half + 1), 1e-300)
    if B == 0:
        return np.zeros(0)
    with np.errstate(invalid="ignore"):
        lo = np.zeros(B)
        hi = np.nan_to_num(np.nanmax(dw, axis=1)) / infl + 1e-300
        for _ in range(30):
            mid = (lo + hi) / 2
            up = nanmedian_rows(dw / (infl * (mid[:, None] + vw))) > CHI2_1_MEDIAN
            lo = np.where(up, mid, lo)
            hi = np.where(up, hi, mid)
        zero = ~(nanmedian_rows(dw / (infl * vw)) > CHI2_1_MEDIAN)
    return np.where(zero, 0.0, (lo + hi) / 2)


#: Median of a chi-square with one degree of freedom.
CHI2_1_MEDIAN = 0.454936  # also in _curve_kernels.c


def robust_tau2(d: NDArray, v: NDArray, infl: float = 1.0) -> float:
    """Between-unit variance ``tau2`` of effects ``d`` (centred) with sampling variances ``v``.

    A robust method of moments: the ``tau2`` >= 0 at which the standardised squares
    d² / (infl·(tau2 + v)) have the median of a chi-square(1). Unlike a plain mean it
    ignores a few wild units, and unlike subtracting one typical ``v`` it respects that
    sizes measured 3 times and 300 times have very different sampling noise.
    """
    if len(d) < 3:
        return 0.0
    if _curves is not None:  # the same value from C; None: NaN or infinities, numpy decides
        tau2 = _curves.robust_tau2(np.ascontiguousarray(d, dtype=np.float64),
                                   np.ascontiguousarray(v, dtype=np.float64), float(infl))
        if tau2 is not None:
            return float(tau2)
    return _robust_tau2_numpy(d, v, infl)


def _robust_tau2_numpy(d: NDArray, v: NDArray, infl: float = 1.0) -> float:
    """:func:`robust_tau2` in numpy: the reference the C kernel is held to."""
    if len(d) < 3:
        return 0.0
    v = np.maximum(v, 1e-300)
    d2 = np.asarray(d, dtype=float) ** 2 / infl
    if float(np.median(d2 / v)) - CHI2_1_MEDIAN <= 0:
        return 0.0
    # Closed form (the bootstrap calls this thousands of times; 60 scalar bisection steps
    # were a third of its cost). Unit i's square exceeds the chi-square median exactly when
    # tau2 < r_i, so for an odd count the root is the median of r. For an even count np.median
    # averages the two middle squares: the root lies between the two middle r, where the top
    # half is fixed, and is narrowed there on a grid (32-fold per round).
    # Capped at max(d²), the top of the bracket the bisection this replaces searched (with
    # three to nine units the median's root can lie above it).
    cap = float(np.max(d2)) + 1e-300
    r = d2 / CHI2_1_MEDIAN - v
    n = len(r)
    if n % 2:
        return min(float(np.median(r)), cap)
    order = np.argsort(r)[::-1]
    top, rest = order[: n // 2], order[n // 2:]
    lo, hi = max(float(r[rest[0]]), 0.0), float(r[top[-1]])
    for _ in range(12):
        if hi - lo <= 1e-15 * hi:
            break
        grid = np.linspace(lo, hi, 33)[1:-1]
        mid = 0.5 * (np.min(d2[top, None] / (grid + v[top, None]), axis=0)
                     + np.max(d2[rest, None] / (grid + v[rest, None]), axis=0))
        above = np.flatnonzero(mid > CHI2_1_MEDIAN)
        j = int(above[-1]) + 1 if above.size else 0  # first grid point at or below the root
        lo, hi = (float(grid[j - 1]) if j else lo), (float(grid[j]) if j < grid.size else hi)
    return min((lo + hi) / 2, cap)


def refine_boundary(size: NDArray, log_time: NDArray, left: NDArray, right: NDArray,
                    weight: NDArray | None = None, starts: NDArray | None = None) -> int:
    """Index in ``size`` (sorted) where the right regime starts, to the sample.

    The DP places boundaries at bin edges; here the split between two fitted curves
    (``left``, ``right``: their ln values at each sample) is moved to the size that
    minimises the clipped squared log residuals of the raw samples around it.
    ``weight`` (>= 0) counts each sample that many times: the same split as on the
    samples repeated, without repeating them (the bootstrap's resamples). ``starts``:
    ``run_starts(size)``, when the caller keeps it. The first best split is returned.
    """
    clip = 1.0
    # min((lt - left)², clip) - min((lt - right)², clip), in place: the bootstrap runs this
    # on ~10^5 samples per boundary and resample, where temporaries cost as much as the math
    d = np.subtract(log_time, left)
    np.square(d, out=d)
    np.minimum(d, clip, out=d)
    e = np.subtract(log_time, right)
    np.square(e, out=e)
    np.minimum(e, clip, out=e)
    d -= e
    if weight is not None:
        d *= weight
    # Cost of splitting before sample i: left cost of [0, i) + right cost of [i, n), i.e.
    # the running sum of (left - right) costs up to i plus the constant right cost of all
    # (one running sum where two, one of them reversed, took 40 % of a bootstrap's search).
    # Only the sums at the splits are read: each size's sum, then their running sum (a
    # float running sum over samples is one dependent add each, 3x slower than reduceat's
    # sums over ~15 samples a size). Where a size adds nothing (every weight 0) the two
    # splits around it stay exactly equal.
    starts = run_starts(size) if starts is None else starts
    splits = np.r_[starts, len(size)]  # between sizes (and both ends)
    if len(d) == 0:
        return 0
    at = np.empty(len(splits))
    if len(starts) and starts[0] == 0:
        at[0] = 0.0
        np.cumsum(np.add.reduceat(d, starts), out=at[1:])
    else:  # a window cut inside its first size: that part's sum comes first
        np.cumsum(np.add.reduceat(d, np.r_[0, starts]), out=at)
    return int(splits[np.argmin(at)])


def cost_tables(bins: Bins, families: tuple[str, ...] = FAMILIES) -> dict[str, NDArray]:
    """Each family's segment cost table of ``bins``; the default set is kept on the bins
    (a fit asks for the same bins' tables three times: O(B^2) each)."""
    if families == FAMILIES and bins.tables is not None:
        return bins.tables
    x, y = np.log(bins.size), np.log(bins.median)
    out = {f: segment_costs(x, y, bins.weight, f) for f in families}
    if families == FAMILIES:
        bins.tables = out
    return out


def _dp_tables(costs: list[NDArray], counts: NDArray, min_support: int
               ) -> tuple[NDArray, NDArray]:
    """Forward pass of the segmentation DP: ``best[k, j]`` is the least cost of splitting
    bins [0, j) into k segments (segment k using ``costs[k - 1]``), ``arg`` where the last
    one starts. A cost shared by consecutive layers is masked for support once."""
    K, B = len(costs), len(counts)
    cum = np.r_[0, np.cumsum(counts)]
    support = cum[None, :] - cum[:, None]
    best = np.full((K + 1, B + 1), np.inf)
    arg = np.zeros((K + 1, B + 1), dtype=np.int64)
    best[0, 0] = 0.0
    cols = np.arange(B + 1)
    c, masked = np.empty(0), None
    for k in range(1, K + 1):
        if costs[k - 1] is not masked:
            masked = costs[k - 1]
            c = np.where(support >= min_support, masked, np.inf)  # [i, j]
        tot = best[k - 1][:, None] + c
        arg[k] = np.argmin(tot, axis=0)
        best[k] = tot[arg[k], cols]
    return best, arg


def dp_segment(costs: list[NDArray], counts: NDArray, min_support: int) -> tuple[float, list[int]]:
    """Exact DP: split bins into len(costs) consecutive segments, segment k using costs[k].

    Returns the total cost and the bin indices where segments 2..K start
    (``inf`` and [] when no partition meets ``min_support``).
    """
    K, B = len(costs), len(counts)
    best, arg = _dp_tables(costs, counts, min_support)
    if not np.isfinite(best[K, B]):
        return float("inf"), []
    return float(best[K, B]), _backtrack(arg, K, B)


def _backtrack(arg: NDArray, K: int, B: int) -> list[int]:
    """Bins where segments 2..K start, from a DP's argmin table (layer k, end bin j)."""
    cuts, j = [], B
    for k in range(K, 0, -1):
        i = int(arg[k, j])
        cuts.append(i)
        j = i
    return sorted(cuts)[1:]  # the first segment starts at bin 0


def dp_segment_all(cost: NDArray, counts: NDArray, min_support: int, k_max: int
                   ) -> list[tuple[float, list[int]]]:
    """:func:`dp_segment` with the same ``cost`` for every segment, for K = 1..k_max at once.

    Layer k of the DP table is the best split of every prefix into k segments, whatever
    the final K: one table of k_max layers answers every K (the same costs and cuts as
    k_max separate runs, at the cost of the largest one).
    """
    B = len(counts)
    best, arg = _dp_tables([cost] * k_max, counts, min_support)
    return [(float(best[K, B]), _backtrack(arg, K, B)) if np.isfinite(best[K, B])
            else (float("inf"), []) for K in range(1, k_max + 1)]


def bic(rss: float, bins: Bins, k_regimes: int, b_eff: float | None = None) -> float:
    """BIC of a K-regime fit with the residual variance estimated from the fit.

    ``b_eff`` is the number of *independent* bins: residuals that drift smoothly along
    size (structure no curve of the families follows) are autocorrelated, and counting
    each bin as independent evidence would buy a regime for every bump.
    """
    B = len(bins.count)
    n = float(B if b_eff is None else b_eff)
    wmean = float(np.mean(bins.weight))
    fit_term = n * float(np.log(max(rss / wmean, 1e-300) / B))
    return fit_term + PARAMS_PER_REGIME * k_regimes * float(np.log(max(n, 2.0)))


def segment_residuals(bins: Bins, cuts: list[int], tables: dict[str, NDArray],
                      standardise: bool = True) -> NDArray:
    """Standardised residuals (sqrt(weight) · error) of each bin under the best family of
    its segment, NaN at each segment's first bin (so lag-1 pairs never cross a boundary).
    ``standardise=False``: the plain ln errors, every bin."""
    x, y, w = np.log(bins.size), np.log(bins.median), bins.weight
    B = len(y)
    out = np.full(B, np.nan)
    for i, j in zip([0, *cuts], [*cuts, B], strict=True):
        fam = min(tables, key=lambda f: tables[f][i, j])
        xs, ys, ws = x[i:j], y[i:j], w[i:j]
        sw = np.sqrt(ws)
        if fam == "constant" or j - i < 3:
            e = ys - np.average(ys, weights=ws)
        elif fam == "power":
            A = np.stack([np.ones_like(xs), xs], axis=1) * sw[:, None]
            coef, *_ = np.linalg.lstsq(A, ys * sw, rcond=None)
            e = ys - (coef[0] + coef[1] * xs)
        else:  # linear: relative error of a + b s, the same regression as segment_costs
            m, s = np.exp(ys), np.exp(xs)
            A = np.stack([1 / m, s / m], axis=1) * sw[:, None]
            coef, *_ = np.linalg.lstsq(A, sw, rcond=None)
            e = 1 - (coef[0] / m + coef[1] * s / m)
        if standardise:
            r = e * sw
            r[0] = np.nan
        else:
            r = e
        out[i:j] = r
    return out


def effective_bins(resid: NDArray) -> float:
    """B·(1 − phi)/(1 + phi) with phi the lag-1 autocorrelation of the residuals (>= 0)."""
    B = len(resid)
    a, b = resid[:-1], resid[1:]
    ok = np.isfinite(a) & np.isfinite(b)
    den = float(np.nansum(resid**2))
    if ok.sum() < 10 or den <= 0:
        return float(B)
    phi = float(np.sum(a[ok] * b[ok])) / den * (np.isfinite(resid).sum() / ok.sum())
    phi = min(max(phi, 0.0), 0.95)
    return B * (1 - phi) / (1 + phi)


def choose_segmentation(bins: Bins, max_regimes: int, min_support: int,
                        families: list[str | None] | None = None,
                        extra: int = 0, chosen: list[int] | None = None) -> list[int] | None:
    """Bin indices where regimes 2..K start, K chosen by BIC (or fixed by ``families``).

    The BIC counts independent bins (see :func:`bic`): the residual autocorrelation of the
    most flexible fit tried measures how much of the leftover structure is smooth drift.
    None when ``families`` fixes a number of regimes that the data cannot support.
    ``extra``: propose that many more regimes than chosen (candidates for a later pass
    that sees more than medians, e.g. a change of band structure); ``chosen`` (a list)
    receives the number of regimes chosen before the extra ones.
    """
    tables = cost_tables(bins)
    best_any = np.minimum.reduce(list(tables.values()))

    def table(f: str | None) -> NDArray:
        return best_any if f is None else tables[f]

    if families is not None:
        rss, cuts = dp_segment([table(f) for f in families], bins.count, min_support)
        return cuts if np.isfinite(rss) else None
    fits: list[tuple[int, float, list[int]]] = []
    for k, (rss, cuts) in enumerate(dp_segment_all(best_any, bins.count, min_support,
                                                   max_regimes), start=1):
        if not np.isfinite(rss):
            break
        fits.append((k, rss, cuts))
    if not fits:
        return []
    b_eff = effective_bins(segment_residuals(bins, fits[-1][2], tables))
    best_bic, best_rss, best_k, best_cuts = np.inf, np.inf, 0, []
    for k, rss, cuts in fits:
        score = bic(rss, bins, k, b_eff)
        # Each regime beyond the chosen ones must also explain MIN_GAIN of the remaining
        # (random-effects weighted) variance: a boundary worth drawing, not one of many
        # small bumps that per-size effects describe better.
        gain = (1.0 - (rss / best_rss) ** (1.0 / max(k - best_k, 1))
                if best_k and best_rss > 0 else 1.0)
        if score < best_bic and gain >= MIN_GAIN:
            best_bic, best_rss, best_k, best_cuts = score, rss, k, cuts
    # Lack of fit: with random-effects weights 1/(tau2 + v) the weighted residual sum of a
    # segmentation whose curves are right is chi-square with B - p degrees of freedom
    # (sizes deviate only by their own effects and sampling noise). Once a K fits that
    # well, further regimes would only carry per-size effects, the per-size layer's job:
    # K never exceeds the first adequate one. The unit of this test is the size, so
    # repeating the sizes more often cannot move it.
    adequate = next((k for k, rss, _ in fits
                     if rss <= _chi2_ppf(ADEQUATE_LEVEL,
                                         max(len(bins.count) - PARAMS_PER_REGIME * k, 1))),
                    None)
    if adequate is not None and adequate < best_k:
        best_k, best_cuts = adequate, fits[adequate - 1][2]
    if chosen is not None:
        chosen.append(max(best_k, 1))
    if extra:
        return fits[min(best_k + extra, len(fits)) - 1][2]
    return best_cuts


def reweight(bins: Bins, cuts: list[int]) -> Bins:
    """Bins whose weights use the local between-size variance *around the curves* of a
    segmentation (second pass): where sizes scatter around any curve of the families by
    far more than their sampling noise, a segment boundary there explains per-size
    effects, not a regime change, and the per-size layer will carry them anyway."""
    if not bins.per_size or bins.v is None or len(bins.count) < 2 * LOCAL_HALF:
        return bins
    e = segment_residuals(bins, cuts, cost_tables(bins), standardise=False)
    t2 = local_tau2(e - float(np.nanmedian(e)), bins.v)
    w = 1.0 / (np.maximum(t2, 1.0 / bins.weight - bins.v) + bins.v)
    return Bins(bins.first, bins.size, bins.median, w, bins.count, bins.tau2, bins.sigma2,
                bins.per_size, bins.v)


def intra_size_correlation(bins: Bins, cuts: list[int] | None = None) -> NDArray:
    """Share of ln-time variance that is between sizes (0 when bins pool several sizes).

    With ``cuts`` (a segmentation), the between-size variance is that of the per-size
    medians around the segments' curves: what a regime model leaves to per-size effects,
    smooth misfit included (a curve family cannot follow every TCP-window bump, and those
    bumps are shared by all repetitions of a size, so they are no evidence for regimes).
    Local: one value per bin (per size), from the sizes around it (+-LOCAL_HALF), since
    sizes scatter far more in some decades (TCP windows) than in others.
    """
    B = len(bins.count)
    if not bins.per_size:
        return np.zeros(B)
    tau2 = np.full(B, bins.tau2)
    if cuts is not None and bins.v is not None:
        e = segment_residuals(bins, cuts, cost_tables(bins), standardise=False)
        tau2 = np.maximum(tau2, local_tau2(e - float(np.nanmedian(e)), bins.v))
    return tau2 / (tau2 + bins.sigma2)


def design_weights(size_sorted: NDArray, bins: Bins, rho: NDArray) -> NDArray:
    """Per-sample weight 1 / (1 + (n_z - 1)·rho_z): a size's n_z samples count as
    n_z / (1 + (n_z - 1)·rho_z) independent ones (Kish's design effect). ``rho`` is per bin
    of ``bins`` (made from the same sorted sizes); sizes outside it get rho 0."""
    n = len(size_sorted)
    if n == 0 or not np.any(rho > 0):
        return np.ones(n)
    starts = run_starts(size_sorted)
    counts = np.diff(np.r_[starts, n])
    b = np.clip(np.searchsorted(bins.first, size_sorted[starts], side="right") - 1, 0,
                len(rho) - 1)
    return np.repeat(1.0 / (1.0 + (counts - 1) * rho[b]), counts)


def _chi2_ppf(level: float, df: int) -> float:
    """``scipy.stats.chi2.ppf(level, df)``, the formula of its ``_ppf`` (the same value),
    without importing scipy.stats."""
    return float(2 * use_scipy().gammaincinv(df / 2, level))
