"""kit.model.order_stats: numpy's quantiles and medians, bit for bit, at a fraction of the cost."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kit.model.order_stats import median, quantile

_values = hnp.arrays(np.float64, st.integers(1, 300),
                     elements=st.floats(-1e300, 1e300, allow_nan=False) | st.sampled_from(
                         [0.0, -0.0, 1.0, 1.5, np.inf, -np.inf]))
_levels = st.one_of(st.floats(0.0, 1.0), hnp.arrays(np.float64, st.integers(1, 5),
                                                     elements=st.floats(0.0, 1.0)))


def _same(a: object, b: object) -> bool:
    return (type(a) is type(b) and np.shape(a) == np.shape(b)
            and np.array_equal(a, b, equal_nan=True))  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(_values, _levels)
def test_quantiles_are_numpys_bit_for_bit(x: np.ndarray, q: object) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = np.quantile(x, q)  # type: ignore[call-overload]
        got = quantile(x, q)  # type: ignore[arg-type]
    assert _same(got, want)
    assert np.array_equal(x, x.copy())  # the sample is not reordered


@settings(max_examples=400, deadline=None)
@given(_values)
def test_medians_are_numpys_bit_for_bit(x: np.ndarray) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = float(np.median(x))
        before = x.copy()
        assert _same(median(x), want)
        assert np.array_equal(x, before)
        assert _same(median(x, overwrite_input=True), want)
        assert np.array_equal(np.sort(x), np.sort(before))  # reordered, not changed


@pytest.mark.parametrize("n", [4095, 4096, 4097, 100_001])
def test_large_samples_partition_and_agree(n: int) -> None:
    x = np.random.default_rng(n).lognormal(size=n)
    x[::7] = x[0]  # ties
    q = np.array([0.0, 1e-9, 0.25, 0.5, 0.95, 0.99, 1 - 1e-12, 1.0])
    assert _same(quantile(x, q), np.quantile(x, q))
    assert _same(median(x), float(np.median(x)))


def test_what_numpy_refuses_or_warns_about_is_left_to_numpy() -> None:
    x = np.array([1.0, np.nan, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(quantile(x, 0.5)) and np.isnan(median(x))
        assert np.isnan(median(x.copy(), overwrite_input=True))
    with pytest.raises(ValueError, match="Quantiles must be in the range"):
        quantile(np.arange(5.0), 1.5)
    with pytest.raises(IndexError):
        quantile(np.array([]), 0.5)  # numpy's own error for an empty sample
    two_d = np.arange(12.0).reshape(3, 4)
    assert _same(quantile(two_d, [0.1, 0.9]), np.quantile(two_d, [0.1, 0.9]))
    ints = np.arange(10)
    assert _same(quantile(ints, 0.33), np.quantile(ints, 0.33))
    assert _same(median(ints), float(np.median(ints)))
