"""Quantiles and medians of one 1-D sample: numpy's values, without numpy's per-call cost.

``np.quantile`` and ``np.median`` validate, move axes and wrap their arguments on every call:
on the 60-2,500 values a fit hands them (a mixture's starting means, a noise's empirical
tails, a bin's spread) that is 30-200 us a call where sorting the values takes 1-13 us, and
a 33 k-sample fit makes a few hundred such calls. These take the same order statistics and
interpolate with numpy's own expressions (``linear``, its default; the mean of the two
middle values), so the results are numpy's bit for bit (tests/test_order_stats.py holds
them to it); anything else (another shape or dtype, NaN, levels outside [0, 1]) is handed
to numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: Up to this many values a full sort is cheaper than a partition at several ranks.
_SORT_UP_TO = 4096


def _plain(x: NDArray) -> bool:
    return x.ndim == 1 and x.dtype == np.float64 and len(x) > 0


@overload
def quantile(x: ArrayLike, q: float) -> np.float64: ...
@overload
def quantile(x: ArrayLike, q: NDArray[Any] | Sequence[float]) -> NDArray[np.float64]: ...
def quantile(x: ArrayLike, q: Any) -> Any:
    """``np.quantile(x, q)`` (method ``linear``) of a 1-D sample: the same values and shape."""
    xa, qa = np.asarray(x), np.asarray(q, dtype=float)
    if not _plain(xa) or qa.ndim > 1 or qa.size == 0 or not (
            float(qa.min()) >= 0.0 and float(qa.max()) <= 1.0):
        return np.quantile(xa, qa)
    n = len(xa)
    virt = (n - 1) * qa  # numpy's virtual index for `linear`
    prev = np.floor(virt)
    top = virt >= n - 1  # numpy takes the last value there, with gamma = virt - (-1)
    gamma = np.where(top, virt + 1.0, virt - prev)
    lo = np.where(top, n - 1, prev).astype(np.intp)
    hi = np.where(top, n - 1, prev + 1).astype(np.intp)
    if n <= _SORT_UP_TO:
        s = np.sort(xa)
    else:
        s = np.partition(xa, np.concatenate((lo.ravel(), hi.ravel(), [n - 1])))
    if np.isnan(s[-1]):  # NaN sorts last; numpy's answer is NaN, with its warnings
        return np.quantile(xa, qa)
    a, b = s[lo], s[hi]
    diff = b - a
    out = np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)
    return out if out.ndim else out[()]


def median(x: ArrayLike, overwrite_input: bool = False) -> float:
    """``float(np.median(x))`` of a 1-D sample. ``overwrite_input``: reorder ``x`` itself
    instead of a copy (a fit takes medians of a million ratios it no longer needs in order)."""
    xa = np.asarray(x)
    if not _plain(xa):
        return float(np.median(xa))
    n = len(xa)
    k = n // 2
    kth = [k, n - 1] if n % 2 else [k - 1, k, n - 1]
    if overwrite_input:
        xa.partition(kth)
        part = xa
    else:
        part = np.partition(xa, kth)
    if np.isnan(part[-1]):
        return float(np.median(part))
    if n % 2:
        return float(part[k])
    return float((part[k - 1] + part[k]) / 2)
