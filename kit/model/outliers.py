"""Robust outlier flags per size neighbourhood.

A sample is an outlier when its log time is far from the median of its size neighbourhood
(the samples of the same size, or of the nearest sizes when a size has few samples). "Far"
scales with the neighbourhood's own spread, measured both by the IQR and by the distance
from the median to a tail quantile (the 1st/99th percentile where 5 samples lie beyond it,
the 5th/95th in neighbourhoods of up to 100: :func:`tail_mass`), so that a genuine second
band holding a few percent of the samples (Ethernet fast/slow bands) is not mistaken for
outliers while a 1000x stall is. Flags are returned, never applied to the data.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kit.model.runs import run_starts

#: Minimum samples per neighbourhood; sizes with fewer are pooled with their neighbours.
MIN_NEIGHBOURHOOD = 30
#: Smallest factor from the local median that can count as an outlier.
MIN_FACTOR = 2.0
#: Samples a neighbourhood must hold beyond the quantiles that scale its thresholds
#: (:func:`tail_mass`), and the range of that tail mass.
TAIL_SAMPLES = 5
TAIL_MASS = (0.01, 0.05)
#: The rule as model files state it (``outliers.rule``).
RULE = (f"ln time beyond max(k*IQR/1.349, 2*(q[1-m]-p50) or 2*(p50-q[m]), ln {MIN_FACTOR:g}) of "
        f"the median of its size neighbourhood (>= {MIN_NEIGHBOURHOOD} samples), the tail mass "
        f"m = {TAIL_SAMPLES}/n within [{TAIL_MASS[0]}, {TAIL_MASS[1]}] for its n samples")


def neighbourhoods(size_sorted: NDArray, min_count: int = MIN_NEIGHBOURHOOD) -> NDArray:
    """Group ids for samples sorted by size: one group per size, small sizes pooled."""
    n = len(size_sorted)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = run_starts(size_sorted)
    counts = np.diff(np.r_[starts, n])
    if counts.min() >= min_count:
        return np.repeat(np.arange(len(starts)), counts)
    # Greedy pooling of consecutive sizes until each group holds min_count samples.
    gid = np.empty(len(starts), dtype=np.int64)
    cur, acc = 0, 0
    for i, c in enumerate(counts.tolist()):
        gid[i] = cur
        acc += c
        if acc >= min_count:
            cur, acc = cur + 1, 0
    if acc and cur > 0:  # a short tail joins the previous group
        gid[gid == cur] = cur - 1
    return np.repeat(gid, counts)


def group_order(group: NDArray, values: NDArray) -> NDArray:
    """Order by (group, value) with one float argsort: 5-10x faster than lexsort at 1e6+.

    Values are mapped into [0, 0.5] and added to the integer group id; doubles keep ~1e-9
    relative resolution for a million groups, far below any timer's.
    """
    lo, hi = float(values.min()), float(values.max())
    scaled = (values - lo) / ((hi - lo) * 2.0 or 1.0)
    # Not stable: equal keys hold equal values, so their order changes no quantile, and
    # numpy's SIMD quicksort is 2-4x faster than its merge sort here.
    return np.argsort(group.astype(np.float64) + scaled)


def stable_argsort(x: NDArray) -> NDArray:
    """``np.argsort(x, kind="stable")``, faster for integer-valued sizes.

    The stable order is the order of the unique keys ``x · 2^k + index`` (``2^k >= n``);
    for integer sizes that fit, sorting those int64 keys with numpy's SIMD sort and reading
    the indices off their low bits is ~3x faster than its merge sort on the floats (the two
    sorts of a fit took most of its time at 1-10 M), and sorting the keys themselves is
    faster again than argsorting them.
    """
    n = len(x)
    if n < 2:
        return np.arange(n)
    lo, hi = float(x.min()), float(x.max())
    k = (n - 1).bit_length()
    if lo >= 0 and hi * 2.0**k < 2.0**62 and np.array_equal(x, np.floor(x)):
        return index_sort(np.left_shift(x.astype(np.int64), k), k)
    return np.argsort(x, kind="stable")


def index_sort(keys: NDArray, k: int) -> NDArray:
    """The order of ``keys`` (int64 or uint64, their low ``k`` bits zero, ``2^k`` at least
    their number), ties by index: each key's index goes into its low bits, the keys are
    sorted (numpy's SIMD sort, faster than an argsort of them) and the indices read back.
    Sorts ``keys`` in place; the order is a view of them."""
    keys |= np.arange(len(keys), dtype=keys.dtype)
    keys.sort()
    keys &= keys.dtype.type((1 << k) - 1)
    return keys.view(np.int64)


def group_medians(values: NDArray, group: NDArray, counts: NDArray) -> NDArray:
    """``np.median`` of each group's ``values`` (``group``: each value's group, 0..k-1, in
    any order; ``counts``: the groups' sizes, none zero), with one sort: the same middle
    order statistics and the same mean of the two. Validation takes one per cell and model
    (a median each was a tenth of its cost), diff one per size. Not :func:`group_quantiles`:
    that orders by a rounded key, which can swap two values an ulp apart, and the fit's
    results are pinned to it."""
    v = values[np.lexsort((values, group))]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    return (v[starts + (counts - 1) // 2] + v[starts + counts // 2]) / 2


def group_quantiles(group: NDArray, values: NDArray, qs: tuple[float | NDArray, ...],
                    interpolate: bool = False, *, sorted_within: bool = False) -> NDArray:
    """Per-group quantiles without a Python loop: (n_groups, len(qs)).

    The lower order statistic by default; ``interpolate`` gives numpy's linear interpolation,
    which matters for small groups (the lower statistic of 2-5 samples is biased low, and
    groups that shrink with size would tilt every curve fitted to them).

    A level may be an array with one level per group.

    ``sorted_within``: ``group`` is non-decreasing and the values ascend within each group
    (sizes, when the samples are sorted by size): the order statistics are read off without
    a sort.

    Tried and dropped: ``np.partition`` per group for a few large groups (size bins). Alone
    it was 2-3x faster than the argsort, in fits and bootstraps no faster, and its exact
    order statistics differ by an ulp from the argsort's rounded keys, which moved the
    reference models by up to 1e-4.
    """
    if sorted_within:
        g, v = group, values
    else:
        order = group_order(group, values)
        g, v = group[order], values[order]
    starts = run_starts(g)
    counts = np.diff(np.r_[starts, len(g)])
    out = np.empty((len(starts), len(qs)))
    for k, q in enumerate(qs):
        pos = q * (counts - 1)
        lo = np.floor(pos).astype(np.int64)
        if interpolate:
            hi = np.minimum(lo + 1, counts - 1)
            frac = pos - lo
            out[:, k] = v[starts + lo] * (1 - frac) + v[starts + hi] * frac
        else:
            out[:, k] = v[starts + lo]
    return out


def tail_mass(count: NDArray) -> NDArray:
    """Per neighbourhood of ``count`` samples, the tail mass p whose quantiles (p and 1 - p)
    scale its outlier thresholds: ``TAIL_SAMPLES / count`` within ``TAIL_MASS``.

    Why not a fixed p05/p95: a slow band holding 1-5 % of a size's samples (Ethernet's, whose
    share grows with size) then lies past the threshold and was flagged as outliers, so the
    model's p99 there was the fast band's, 3.5x below the data's (the benchmark diary,
    git show 1da3baf:BENCHMARKS.md, "Bounded memory"). The model reports p99: what holds at
    least 1 % of a size's samples decides it, so it is kept. The mass is 1 % only where
    TAIL_SAMPLES samples lie beyond the quantile (500 in the neighbourhood): a few samples
    cannot tell a band from stalls, and up to 100 samples (most sizes of the reference runs:
    50 repetitions) the rule is the p05/p95 it always was.
    """
    return np.clip(TAIL_SAMPLES / np.asarray(count, dtype=float), *TAIL_MASS)


def flag_outliers(size: NDArray, log_time: NDArray, k: float = 6.0) -> NDArray:
    """Boolean mask (input order) of samples far from their size neighbourhood."""
    n = len(size)
    if n < MIN_NEIGHBOURHOOD:
        return np.zeros(n, dtype=bool)
    order = np.argsort(size, kind="stable")
    grp = neighbourhoods(np.asarray(size)[order])
    lt = log_time[order]
    p = tail_mass(np.bincount(grp))
    q = group_quantiles(grp, lt, (p, 0.25, 0.5, 0.75, 1.0 - p))
    med = q[grp, 2]
    iqr_sd = (q[grp, 3] - q[grp, 1]) / 1.349
    up = np.maximum.reduce([k * iqr_sd, 2.0 * (q[grp, 4] - med), np.full(n, np.log(MIN_FACTOR))])
    down = np.maximum.reduce([k * iqr_sd, 2.0 * (med - q[grp, 0]), np.full(n, np.log(MIN_FACTOR))])
    bad = (lt - med > up) | (med - lt > down)
    mask = np.zeros(n, dtype=bool)
    mask[order] = bad
    return mask
