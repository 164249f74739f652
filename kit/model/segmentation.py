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

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kit.model.families import FAMILIES, segment_costs
from kit.model.outliers import group_quantiles

MAX_BINS = 320
#: BIC parameters per regime: two curve coefficients and one boundary.
PARAMS_PER_REGIME = 4


@dataclass
class Bins:
    """Per-bin summaries, bins ordered by size."""

    first: NDArray  # smallest size in the bin (bytes)
    size: NDArray  # median size (bytes, >= 1)
    median: NDArray  # median time (s)
    weight: NDArray  # weight of the bin's median in the fits
    count: NDArray  # samples in the bin


def make_bins(size_sorted: NDArray, time_sorted: NDArray, max_bins: int = MAX_BINS) -> Bins:
    """Summarise samples (sorted by size) into bins; one bin per size when there are few sizes.

    Where a slow band's share drifts with size the median jumps between bands and the DP
    cuts there; the raw-likelihood merge pass of the estimator undoes such cuts.
    """
    s_eff = np.maximum(size_sorted.astype(np.float64), 1.0)
    starts = np.flatnonzero(np.r_[True, size_sorted[1:] != size_sorted[:-1]])
    if len(starts) <= max_bins:
        bid = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(size_sorted)]))
    else:
        ls = np.log(s_eff)
        edges = np.linspace(ls[0], ls[-1], max_bins + 1)[1:-1]
        raw = np.searchsorted(edges, ls, side="right")
        # Renumber so that empty bins vanish.
        _, bid = np.unique(raw, return_inverse=True)
    lt = np.log(time_sorted)
    q = group_quantiles(bid, lt, (0.25, 0.5, 0.75))
    counts = np.bincount(bid)
    bstart = np.flatnonzero(np.r_[True, bid[1:] != bid[:-1]])
    first = size_sorted[bstart].astype(np.float64)
    med_size = np.exp(group_quantiles(bid, np.log(s_eff), (0.5,))[:, 0])
    # Weight = 1 / variance of the bin median ~ n / spread². The spread is floored at the
    # typical spread: estimated from few samples it is noisy, and noisy weights invent
    # breakpoints; above the floor, genuinely wide (two-band) bins count less.
    spread = (q[:, 2] - q[:, 0]) / 1.349
    floor = max(float(np.median(spread)), 1e-3)
    weight = counts / np.maximum(spread, floor) ** 2
    return Bins(first, med_size, np.exp(q[:, 1]), weight, counts)


def refine_boundary(size: NDArray, log_time: NDArray, left: NDArray, right: NDArray) -> int:
    """Index in ``size`` (sorted) where the right regime starts, to the sample.

    The DP places boundaries at bin edges; here the split between two fitted curves
    (``left``, ``right``: their ln values at each sample) is moved to the size that
    minimises the clipped squared log residuals of the raw samples around it.
    """
    clip = 1.0
    cl = np.minimum((log_time - left) ** 2, clip)
    cr = np.minimum((log_time - right) ** 2, clip)
    # cost of splitting before sample i: left cost of [0, i) + right cost of [i, n)
    total = np.r_[0.0, np.cumsum(cl)] + np.r_[np.cumsum(cr[::-1])[::-1], 0.0]
    starts = np.flatnonzero(np.r_[True, size[1:] != size[:-1], True])  # splits between sizes
    return int(starts[np.argmin(total[starts])])


def cost_tables(bins: Bins, families: tuple[str, ...] = FAMILIES) -> dict[str, NDArray]:
    x, y = np.log(bins.size), np.log(bins.median)
    return {f: segment_costs(x, y, bins.weight, f) for f in families}


def dp_segment(costs: list[NDArray], counts: NDArray, min_support: int) -> tuple[float, list[int]]:
    """Exact DP: split bins into len(costs) consecutive segments, segment k using costs[k].

    Returns the total cost and the bin indices where segments 2..K start
    (``inf`` and [] when no partition meets ``min_support``).
    """
    K, B = len(costs), len(counts)
    cum = np.r_[0, np.cumsum(counts)]
    support = cum[None, :] - cum[:, None]
    best = np.full((K + 1, B + 1), np.inf)
    arg = np.zeros((K + 1, B + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for k in range(1, K + 1):
        c = np.where(support >= min_support, costs[k - 1], np.inf)  # [i, j]
        tot = best[k - 1][:, None] + c
        arg[k] = np.argmin(tot, axis=0)
        best[k] = tot[arg[k], np.arange(B + 1)]
    if not np.isfinite(best[K, B]):
        return float("inf"), []
    cuts, j = [], B
    for k in range(K, 0, -1):
        i = int(arg[k, j])
        cuts.append(i)
        j = i
    cuts = sorted(cuts)[1:]  # the first segment starts at bin 0
    return float(best[K, B]), cuts


def bic(rss: float, bins: Bins, k_regimes: int) -> float:
    B = len(bins.count)
    wmean = float(np.mean(bins.weight))
    fit_term = B * float(np.log(max(rss / wmean, 1e-300) / B))
    return fit_term + PARAMS_PER_REGIME * k_regimes * float(np.log(B))


def choose_segmentation(bins: Bins, max_regimes: int, min_support: int,
                        families: list[str | None] | None = None) -> list[int] | None:
    """Bin indices where regimes 2..K start, K chosen by BIC (or fixed by ``families``).

    None when ``families`` fixes a number of regimes that the data cannot support.
    """
    tables = cost_tables(bins)
    best_any = np.minimum.reduce(list(tables.values()))

    def table(f: str | None) -> NDArray:
        return best_any if f is None else tables[f]

    if families is not None:
        rss, cuts = dp_segment([table(f) for f in families], bins.count, min_support)
        return cuts if np.isfinite(rss) else None
    best_bic, best_cuts = np.inf, []
    for k in range(1, max_regimes + 1):
        rss, cuts = dp_segment([best_any] * k, bins.count, min_support)
        if not np.isfinite(rss):
            break
        score = bic(rss, bins, k)
        if score < best_bic:
            best_bic, best_cuts = score, cuts
    return best_cuts
