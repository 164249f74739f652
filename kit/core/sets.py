"""Set operations on sorted float arrays without numpy's ``np.unique`` family.

Why: ``np.unique`` (and ``np.setdiff1d``/``np.isin``, which call it) asks
``np.ma.is_masked`` and so imports numpy.ma, ~10-20 ms of a command that reads a model and
exports it (``pt2pt predict``/``export``). For finite values the answers are numpy's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def unique_sorted(values: ArrayLike) -> NDArray[np.float64]:
    """The distinct values, sorted (``np.unique`` of finite floats)."""
    s = np.sort(np.asarray(values, dtype=np.float64).ravel())
    return s[np.r_[True, np.diff(s) > 0]] if s.size else s


def member(values: ArrayLike, sorted_set: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Whether each value is in ``sorted_set`` (sorted; ``np.isin``)."""
    v = np.asarray(values, dtype=np.float64)
    if not sorted_set.size:
        return np.zeros(v.shape, dtype=bool)
    i = np.minimum(np.searchsorted(sorted_set, v), sorted_set.size - 1)
    return np.asarray(sorted_set[i] == v)


def setdiff_sorted(values: ArrayLike, remove: ArrayLike) -> NDArray[np.float64]:
    """The distinct values not in ``remove``, sorted (``np.setdiff1d``)."""
    u = unique_sorted(values)
    return u[~member(u, unique_sorted(remove))]
