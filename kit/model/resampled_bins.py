"""A regime's bins, placed once on the full data, summarised again for re-weighted samples.

The bootstrap (:mod:`kit.model.uncertainty`) refits every regime's curve on every
resample. A resample is the full data with each sample counted 0, 1, 2.. times, so
nothing needs to be copied: with each bin's samples sorted by time once, the order
statistics of the resampled bin are read off the running sum of the counts (one
``searchsorted`` per quantile). Copying every sample, sorting within every bin and
taking logs, once per resample, was ~85 % of the bootstrap's time at 1 M samples.

The bins are the ones :func:`kit.model.segmentation.make_bins` puts on the full data's
regime (one per size, or log-spaced), extended at the same spacing over the range a
refined boundary can move the regime to. A resample keeps the full data's bins instead
of placing its own on the sizes it happens to hold, which would move log-spaced edges by
a fraction of a bin; with one bin per size the two are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kit.model.outliers import group_order, index_sort
from kit.model.runs import run_ids, run_starts
from kit.model.segmentation import MAX_BINS, MAX_SIZE_BINS, Bins, summarise_bins

QUARTILES = (0.25, 0.5, 0.75)
_QUARTILES = np.asarray(QUARTILES)


def order_statistics(incl: NDArray, base: NDArray, count: NDArray, q: float | NDArray,
                     values: NDArray) -> NDArray:
    """numpy's linearly interpolated ``q`` quantile of each group of a multiset; for an
    array of quantiles, one row per quantile (one ``searchsorted`` for all of them).

    Group ``j``'s members are ``values`` (ascending within the group) each counted by its
    weight; ``incl`` is the inclusive running sum of the weights, ``base`` the running sum
    before the group, ``count`` its total (> 0). The ``r``-th smallest member is the first
    value whose running sum exceeds ``base + r``.
    """
    i_lo, i_hi, frac = order_positions(incl, base, count, q)
    return values[i_lo] * (1 - frac) + values[i_hi] * frac


def order_positions(incl: NDArray, base: NDArray, count: NDArray, q: float | NDArray
                    ) -> tuple[NDArray, NDArray, NDArray]:
    """(i_lo, i_hi, frac) of :func:`order_statistics`: its quantiles lie ``frac`` of the way
    from ``values[i_lo]`` to ``values[i_hi]`` (the same arguments); for a caller that must
    interpolate exactly as ``np.quantile`` rounds
    (:func:`kit.analyses.diff._multiset_quantiles`)."""
    pos = np.multiply.outer(q, count - 1)
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    target = base + lo
    i_lo = np.searchsorted(incl, target, side="right")
    # The next order statistic is the same sample when it is counted more than once.
    i_hi = i_lo.copy()
    up = (frac > 0) & (incl[i_lo] <= target + 1)
    if up.any():
        i_hi[up] = np.searchsorted(incl, target[up] + 1, side="right")
    return i_lo, i_hi, frac


def weighted_quantiles(values: NDArray, weight: NDArray, qs: tuple[float, ...],
                       ascending: bool = False) -> NDArray:
    """np.quantile of ``values`` each repeated ``weight`` times (total > 0), at ``qs``;
    ``ascending``: the values come sorted (a bin's sizes), so no sort is needed."""
    if ascending:
        incl = np.cumsum(weight, dtype=np.int64)
    else:
        order, values = sort_order(values)
        incl = np.cumsum(weight.take(order), dtype=np.int64)
    one, total = np.zeros(1, dtype=np.int64), incl[-1:]
    return order_statistics(incl, one, total, np.asarray(qs, dtype=float), values).ravel()


def sort_order(values: NDArray) -> tuple[NDArray, NDArray]:
    """(an order that sorts ``values``, the sorted values), ties in any order.

    For positive floats, one sort of 64-bit keys (:func:`kit.model.outliers.index_sort`): a
    positive double's bits sort as its value does, so its low bits are replaced by the
    index, and the indices come out in sorted order; values equal in all but those low
    bits can come out swapped, which the check on the sorted values catches (then
    argsort). Twice as fast as argsort: the bootstrap sorts ~10^4 noise ratios per regime
    and resample.
    """
    n = len(values)
    v = np.ascontiguousarray(values, dtype=np.float64)
    if n > 1 and n < 2**32 and float(v.min()) > 0 and bool(np.isfinite(v.max())):
        k = (n - 1).bit_length()
        order = index_sort(v.view(np.uint64) & ~np.uint64((1 << k) - 1), k)
        out = v.take(order)
        if bool((out[1:] >= out[:-1]).all()):
            return order, out
    order = np.argsort(v)
    return order, v.take(order)


@dataclass
class Counts:
    """A resample's counts over one :class:`RegimeBins` slice, with running sums."""

    size_order: NDArray  # count of each sample, in size order
    #: Running sum in size order, from ``cum_size[0]`` (the counts before the slice when it
    #: is a view of the whole resample's running sum): only differences are read off it.
    cum_size: NDArray
    #: Bins' summaries (first size, median size, quartiles, count), filled in as fits ask
    #: for them (``done``): the fits before and after the boundaries are refined share all
    #: uncut bins, and the bins beyond both are never summarised.
    whole: tuple[NDArray, NDArray, NDArray, NDArray] | None = None
    done: NDArray | None = None


def running_sum(w: NDArray, out: NDArray | None = None) -> NDArray:
    """Running sum of counts from 0: ``out[i]`` counts ``w[:i]``. ``out``: an int64 array of
    ``len(w) + 1`` to write it to; the bootstrap passes the same one for every resample: an
    8 MB array at 1 M samples that the allocator hands back to the system costs page faults
    and zeroing, 2.7 ms where the sum costs 0.44 (in the bootstrap's loop, where it mostly
    does not, 4 % of the bootstrap at 1 M samples)."""
    if out is None:
        out = np.empty(len(w) + 1, dtype=np.int64)  # not zeros: calloc's zeroing is a pass
    out[0] = 0
    np.cumsum(w, out=out[1:])
    return out


@dataclass
class RegimeBins:
    """One regime's bins over samples ``[lo, hi)`` (sorted by size, then time)."""

    lo: int
    hi: int
    per_size: bool
    #: Order of the slice by (bin, ln time); None when that is its own order (a bin per size).
    perm: NDArray | None
    #: Bin j holds slice positions [start[j], start[j + 1]) in both orders.
    start: NDArray
    lt: NDArray  # ln time, in bin-then-time order
    lt_size_order: NDArray  # ln time, in size order
    ls: NDArray  # ln size, in size order
    size: NDArray  # size, in size order

    @classmethod
    def place(cls, size: NDArray, ln_size: NDArray, ln_time: NDArray, centre: tuple[int, int],
              extended: tuple[int, int]) -> RegimeBins:
        """make_bins' bins of samples ``centre`` (a regime on the full data), extended over
        ``extended`` (which holds it) at the same spacing."""
        lo, hi = extended
        c_lo, c_hi = centre
        if c_hi <= c_lo:
            c_lo, c_hi = lo, hi
        s, ls = size[lo:hi], ln_size[lo:hi]
        starts = run_starts(size[c_lo:c_hi])
        counts = np.diff(np.r_[starts, c_hi - c_lo])
        per_size = len(starts) <= MAX_BINS or (len(starts) <= MAX_SIZE_BINS
                                               and float(np.median(counts)) >= 3)
        if per_size or len(s) == 0:
            per_size = True
            start = run_starts(s)
            perm = None
            lt = ln_time[lo:hi]
        else:
            x0, x1 = float(ln_size[c_lo]), float(ln_size[c_hi - 1])
            step = (x1 - x0) / MAX_BINS
            below = np.ceil((x0 - float(ls[0])) / step)
            above = np.ceil((float(ls[-1]) - x1) / step)
            # make_bins' interior edges, its outer bins closed at both data ends, then
            # the same spacing outwards.
            edges = np.r_[x0 - step * np.arange(below, 0, -1), x0,
                          np.linspace(x0, x1, MAX_BINS + 1)[1:-1], np.nextafter(x1, np.inf),
                          x1 + step * np.arange(1, above + 1)]
            bid = run_ids(np.searchsorted(edges, ls, side="right"))
            start = run_starts(bid)
            perm = group_order(bid, ln_time[lo:hi])
            lt = ln_time[lo:hi][perm]
        return cls(lo, hi, per_size, perm, np.r_[start, hi - lo], lt, ln_time[lo:hi], ls, s)

    def gather(self, mult: NDArray, total: NDArray) -> Counts:
        """The resample's counts of this slice (``mult``: of every sample; ``total``: their
        running sum, ``running_sum(mult)``: the regimes' slices overlap, and one running
        sum over all samples serves them all)."""
        return Counts(mult[self.lo:self.hi], cum_size=total[self.lo:self.hi + 1])

    def summarise(self, lo: int, hi: int, counts: Counts) -> Bins | None:
        """:class:`Bins` of the resample's samples ``[lo, hi)`` (a range of sizes inside
        the slice), as make_bins(local=False) computes them; None if it holds none."""
        a, b = max(lo - self.lo, 0), min(hi - self.lo, self.hi - self.lo)
        if b <= a:
            return None
        start = self.start
        j0 = int(np.searchsorted(start, a, side="right")) - 1
        j1 = int(np.searchsorted(start, b, side="left"))
        # Log-spaced bins the range cuts (at most the first and the last) are summarised
        # from their samples inside it; the others from the running sums.
        cut_lo = int(start[j0]) < a
        cut_hi = int(start[j1]) > b
        f0, f1 = j0 + cut_lo, j1 - cut_hi
        rows: list[tuple[NDArray, ...]] = []
        if cut_lo:
            rows.append(self._cut(int(start[j0]), a, b, counts.size_order))
        if f1 > f0:
            rows.append(self._whole(counts, f0, f1))
        if cut_hi and (f1 >= f0 or not cut_lo):
            rows.append(self._cut(int(start[j1 - 1]), a, b, counts.size_order))
        first, med, q, count = (np.concatenate(col) for col in zip(*rows, strict=True))
        keep = count > 0
        if not keep.any():
            return None
        return summarise_bins(first[keep], med[keep], q[keep], count[keep], self.per_size,
                              local=False)

    def _whole(self, counts: Counts, f0: int, f1: int) -> tuple[NDArray, ...]:
        """Summaries of bins ``[f0, f1)``, computed where not yet; NaN where the resample
        holds none of a bin's samples."""
        nb = len(self.start) - 1
        if counts.whole is None or counts.done is None:
            counts.whole = (np.full(nb, np.nan), np.full(nb, np.nan), np.full((nb, 3), np.nan),
                            np.zeros(nb, dtype=np.int64))
            counts.done = np.zeros(nb, dtype=bool)
        done = counts.done
        todo = np.flatnonzero(~done[f0:f1]) + f0
        if len(todo):
            # runs of consecutive bins not yet summarised (one, or two around the done ones)
            cut = np.flatnonzero(np.diff(todo) != 1) + 1
            for run in np.split(todo, cut):
                self._summarise_run(counts, counts.whole, int(run[0]), int(run[-1]) + 1)
            done[f0:f1] = True
        return tuple(col[f0:f1] for col in counts.whole)

    def _summarise_run(self, counts: Counts, whole: tuple[NDArray, ...], j0: int,
                       j1: int) -> None:
        """Fill in the summaries of bins ``[j0, j1)`` (in ``whole``, ``counts.whole``)."""
        first, med, q, count = whole
        cs = counts.cum_size
        p0, p1 = int(self.start[j0]), int(self.start[j1])
        ends = cs[self.start[j0:j1 + 1]]
        base, cnt = ends[:-1], np.diff(ends)
        count[j0:j1] = cnt
        ok = cnt > 0
        if not ok.any():
            return
        b, c = base[ok], cnt[ok]
        rows = np.flatnonzero(ok) + j0
        # In bin-then-time order the bins are the same stretches, so the same sums end them;
        # that order's running sum is taken over these bins only, from 0.
        size_incl = cs[p0 + 1:p1 + 1]
        if self.perm is None:
            q[rows] = order_statistics(size_incl, b, c, _QUARTILES, self.lt[p0:p1]).T
        else:
            time_incl = running_sum(counts.size_order.take(self.perm[p0:p1]))[1:]
            q[rows] = order_statistics(time_incl, b - int(cs[p0]), c, _QUARTILES,
                                       self.lt[p0:p1]).T
        med[rows] = np.exp(order_statistics(size_incl, b, c, 0.5, self.ls[p0:p1]))
        first[rows] = self.size[p0:p1][np.searchsorted(size_incl, b, side="right")]

    def _cut(self, bin_start: int, a: int, b: int, w_all: NDArray) -> tuple[NDArray, ...]:
        """The part of the bin starting at ``bin_start`` that lies in ``[a, b)``."""
        end = int(self.start[np.searchsorted(self.start, bin_start, side="right")])
        p, r = max(bin_start, a), min(end, b)
        w = w_all[p:r]
        total = int(w.sum())
        if total == 0:
            return np.zeros(0), np.zeros(0), np.zeros((0, 3)), np.zeros(0, dtype=np.int64)
        q = weighted_quantiles(self.lt_size_order[p:r], w, QUARTILES)[None, :]
        med = np.exp(weighted_quantiles(self.ls[p:r], w, (0.5,), ascending=True))
        first = self.size[p:r][np.flatnonzero(w)[:1]].astype(np.float64)
        return first, med, q, np.asarray([total])
