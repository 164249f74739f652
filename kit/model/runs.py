"""Order statistics of groups held as runs: a stable sort of integer keys, then a sort of
each run's values (exact: the per-size layer's medians and predictive quantiles).

Why not one sort by (group, value): at 10^6 samples in 10^5-10^6 groups a lexsort was most
of the per-size layer's own cost, while its keys come sorted or nearly so (sizes sorted, a
band bit within a size) and most of its runs hold one or two samples. (The outlier flags
and bins use one argsort of a combined float key instead, as fast for their few large
groups, at ~1e-9 relative resolution: see kit.model.outliers.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def run_starts(x: NDArray) -> NDArray:
    """Index of the first element of each run of equal values in ``x`` (sorted or grouped
    values; empty for an empty ``x``): the one place the kit finds where sizes, bins or
    groups change."""
    edge = np.empty(len(x), dtype=bool)
    edge[:1] = True
    np.not_equal(x[1:], x[:-1], out=edge[1:])
    return np.flatnonzero(edge)


def dense_codes(values: NDArray) -> NDArray:
    """``np.unique(values, return_inverse=True)[1]``: each value's rank among the distinct
    values. Group labels such as run ids come as Python strings, one per sample; sorting a
    million of them took np.unique a second for a handful of runs, so object arrays are
    coded through a dict of their few distinct values instead (same codes)."""
    values = np.asarray(values).ravel()
    if values.dtype != object:
        return np.unique(values, return_inverse=True)[1].ravel()
    labels = values.tolist()
    code = {v: i for i, v in enumerate(sorted(dict.fromkeys(labels)))}
    return np.fromiter(map(code.__getitem__, labels), dtype=np.intp, count=len(labels))


def string_codes(values: Any) -> tuple[list[str], NDArray]:
    """``np.unique(values.astype(str), return_inverse=True)``: the labels as the strings
    ``astype(str)`` makes of them, sorted, and each value's index into them. Run ids come as
    Python strings, one per sample: an object array is coded through a dict of its few
    distinct values (converting a million to a numpy string array and sorting it cost
    run quality and the diff most of their time); the same names and codes."""
    raw = np.asarray(values).ravel()
    if raw.dtype == object:
        labels = raw.tolist()
        try:
            distinct = dict.fromkeys(labels)
        except TypeError:  # unhashable labels: numpy's way
            pass
        else:
            text = {v: str(v) for v in distinct}
            names = sorted(set(text.values()))
            index = {name: i for i, name in enumerate(names)}
            code = {v: index[t] for v, t in text.items()}
            return names, np.fromiter(map(code.__getitem__, labels), dtype=np.intp,
                                      count=len(labels))
    uniq, inverse = np.unique(raw.astype(str), return_inverse=True)
    return [str(v) for v in uniq.tolist()], inverse.ravel().astype(np.intp)


def run_ids(x: NDArray) -> NDArray:
    """The run of each element of ``x`` (sorted or grouped values), numbered 0, 1, ... in
    order: how bins are renumbered so that empty ones vanish (np.unique's inverse without
    its sort)."""
    ids = np.zeros(len(x), dtype=np.int64)
    if len(x) > 1:
        np.cumsum(x[1:] != x[:-1], out=ids[1:])
    return ids


def stable_order(key: NDArray) -> NDArray:
    """``np.argsort(key, kind="stable")`` of integer keys; keys spanning fewer than 2^16
    values (bins, cells, runs) are sorted as uint16, which numpy sorts by radix: the same
    order, 5-7x faster than its merge sort of int64 at 10^6 keys."""
    if key.dtype.kind in "iu" and len(key) > 1:
        lo, hi = int(key.min()), int(key.max())
        if hi - lo < 2**16:
            return np.argsort((key - lo).astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


def runs_of(key: NDArray) -> tuple[NDArray | slice, NDArray, NDArray]:
    """Stable order of integer ``key`` and the start and length of each key's run in it:
    each key's members, in their own order, are ``np.arange(n)[order][start:start + length]``.

    Keys that come sorted need no sort (the order is then ``slice(None)``: no copy); keys
    sorted but for a band bit within a size take a stable sort of one pass over a few runs.
    """
    n = len(key)
    order: NDArray | slice = slice(None)
    if n > 1 and not bool(np.all(key[1:] >= key[:-1])):
        order = stable_order(key)
    starts = run_starts(key[order])
    return order, starts, np.diff(starts, append=n)


def sort_within_runs(v: NDArray, starts: NDArray, counts: NDArray) -> NDArray:
    """``v`` with each run ``v[starts[i]:starts[i] + counts[i]]`` sorted (runs contiguous,
    counts > 0, covering ``v``).

    Runs of one sample need nothing, runs of two a swap; longer runs are sorted as the rows
    of a NaN-padded matrix, one matrix per power-of-two width (NaN sorts last, after any
    value, so a row's first ``count`` entries are its run as a sort of the run orders it).
    """
    out = v.copy()
    two = starts[counts == 2]
    first, second = v[two], v[two + 1]
    swap = (first > second) | np.isnan(first)  # NaN last, as np.sort puts it
    out[two[swap]], out[two[swap] + 1] = second[swap], first[swap]
    more = np.flatnonzero(counts > 2)
    if not len(more):
        return out
    width = 1 << np.ceil(np.log2(counts[more])).astype(np.int64)
    for w in np.unique(width).tolist():
        rows = more[width == w]
        c = counts[rows]
        col = np.arange(w)
        inside = col < c[:, None]
        idx = starts[rows][:, None] + col
        block = np.where(inside, v[np.minimum(idx, len(v) - 1)], np.nan)
        block.sort(axis=1)
        out[idx[inside]] = block[inside]
    return out


def predictive_quantiles(group: NDArray, values: NDArray, levels: NDArray) -> NDArray:
    """Per-group (n_groups, len(levels)) quantiles at order statistic ``u·(n+1)`` (1-based,
    interpolated, clipped to the sample).

    A new draw falls below the k-th of n samples with probability k/(n+1), whatever the
    distribution, so these are the plug-in quantiles of a *predictive* band: numpy's default
    (u·(n−1)+1) gives a [p05, p95] band that holds only (n−1)/(n+1)·0.9 of new samples
    (0.86 for n = 47).
    """
    order, starts, counts = runs_of(group)
    v = sort_within_runs(values[order], starts, counts)
    out = np.empty((len(starts), len(levels)))
    for k, u in enumerate(levels):
        lo, hi, f = order_position(u, counts)
        out[:, k] = v[starts + lo] * (1 - f) + v[starts + hi] * f
    return out


def order_position(u: float, counts: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """0-based order statistics (lo, hi) and weight f of hi for the predictive u-quantile
    of samples of each count: position u·(n+1) (1-based), interpolated, clipped."""
    p = np.clip(u * (counts + 1) - 1.0, 0.0, counts - 1.0)
    lo = np.floor(p).astype(np.int64)
    return lo, np.minimum(lo + 1, counts - 1), p - lo
