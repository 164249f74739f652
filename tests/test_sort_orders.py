"""The sorts that read indices off the low bits of packed keys give numpy's own orders."""

from __future__ import annotations

import numpy as np
import pytest

from kit.model.outliers import stable_argsort
from kit.model.resampled_bins import sort_order


@pytest.mark.parametrize("n", [2, 3, 5, 64, 1000, 200_000])
def test_stable_argsort_is_numpys_stable_argsort_of_integer_sizes(n: int) -> None:
    rng = np.random.default_rng(n)
    for sizes in (np.floor(np.exp(rng.uniform(0, 15, n))),  # mostly distinct
                  rng.integers(0, 4, n).astype(np.float64),  # mostly ties
                  np.full(n, 2.0**40)):  # large: the keys no longer fit, numpy's path
        assert np.array_equal(stable_argsort(sizes), np.argsort(sizes, kind="stable"))
    odd = rng.uniform(0, 10, n)  # not integers
    assert np.array_equal(stable_argsort(odd), np.argsort(odd, kind="stable"))


@pytest.mark.parametrize("seed", range(6))
def test_sort_order_sorts_and_pairs_each_value_with_its_index(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30_000))
    base = rng.lognormal(0, 1, n)
    cases = [
        base,
        np.round(base, 2),  # many exact ties
        # values equal in all but their last bits: the packed keys tie, the check sorts
        1.0 + rng.integers(0, 3, n) * np.finfo(float).eps,
        np.r_[base[:-1], -1.0],  # a negative value: argsort's path
        np.r_[base[:-1], np.nan],
    ]
    for values in cases:
        order, out = sort_order(values)
        assert sorted(order.tolist()) == list(range(n))
        assert np.array_equal(out, values[order], equal_nan=True)
        assert np.array_equal(out, np.sort(values), equal_nan=True)
