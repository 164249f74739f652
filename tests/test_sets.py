"""kit.core.sets: numpy's set answers without importing numpy.ma (pt2pt export's path)."""

from __future__ import annotations

import numpy as np

from kit.core.sets import member, setdiff_sorted, unique_sorted


def test_set_helpers_answer_as_numpy() -> None:
    """np.unique / np.isin / np.setdiff1d's answers, empty arrays included."""
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 500):
        a = np.round(rng.geometric(0.01, n) * 1.0)
        b = np.round(rng.geometric(0.02, n // 2) * 1.0)
        assert np.array_equal(unique_sorted(a), np.unique(a))
        assert np.array_equal(setdiff_sorted(a, b), np.setdiff1d(a, b))
        assert np.array_equal(member(a, np.unique(b)), np.isin(a, b))
