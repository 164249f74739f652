"""Order statistics of grouped samples (kit.model.runs): the same sorted runs as sorting each
run on its own, NaN last, for every run length; and the per-size medians and predictive
quantiles built on them equal a plain per-group numpy computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.model.persize import _group_stats
from kit.model.runs import (
    dense_codes,
    order_position,
    predictive_quantiles,
    run_ids,
    run_starts,
    runs_of,
    sort_within_runs,
)

values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.sampled_from([0.0, -0.0, 1.0, 1.0 + 2**-52]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), values), min_size=1, max_size=300))
def test_each_run_comes_out_as_np_sort_orders_it(pairs: list[tuple[int, float]]) -> None:
    key = np.array([k for k, _ in pairs], dtype=np.int64)
    val = np.array([v for _, v in pairs], dtype=float)
    order, starts, counts = runs_of(key)
    assert np.array_equal(key[order], np.sort(key, kind="stable"))
    assert np.array_equal(np.arange(len(key))[order], np.argsort(key, kind="stable"))
    got = sort_within_runs(val[order], starts, counts)
    for s, c in zip(starts.tolist(), counts.tolist(), strict=True):
        want = np.sort(val[order][s:s + c])
        assert np.array_equal(got[s:s + c], want, equal_nan=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, 1e9, np.inf]), max_size=60))
def test_run_starts_are_where_a_value_differs_from_the_one_before(xs: list[float]) -> None:
    x = np.array(xs, dtype=float)
    starts = run_starts(x)
    assert starts.tolist() == [i for i in range(len(x)) if i == 0 or x[i] != x[i - 1]]
    assert starts.dtype.kind == "i"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=4), min_size=1, max_size=80), st.booleans())
def test_dense_codes_are_np_uniques_inverse(labels: list[str], as_objects: bool) -> None:
    """Run ids come as Python strings (an object array): coded like np.unique codes them."""
    values = np.array(labels, dtype=object if as_objects else None)
    assert dense_codes(values).tolist() == np.unique(values, return_inverse=True)[1].tolist()
    ints = np.array([len(v) for v in labels])
    assert dense_codes(ints).tolist() == np.unique(ints, return_inverse=True)[1].tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=60).map(sorted))
def test_run_ids_number_the_runs_as_np_uniques_inverse_does(xs: list[int]) -> None:
    x = np.array(xs, dtype=np.int64)
    ids = run_ids(x)
    assert ids.tolist() == np.unique(x, return_inverse=True)[1].tolist()
    assert ids.dtype == np.int64
    assert np.array_equal(run_starts(ids), run_starts(x))


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1000])
@pytest.mark.parametrize("shuffled", [False, True])
def test_runs_of_every_length_beside_each_other(length: int, shuffled: bool) -> None:
    rng = np.random.default_rng(length)
    key = np.repeat(np.arange(5), [length, 1, length + 1, 2, length])
    if shuffled:
        key = rng.permutation(key)
    val = rng.normal(size=len(key))
    val[rng.integers(0, len(val), 2)] = np.nan
    order, starts, counts = runs_of(key)
    got = sort_within_runs(val[order], starts, counts)
    for s, c in zip(starts.tolist(), counts.tolist(), strict=True):
        assert np.array_equal(got[s:s + c], np.sort(val[order][s:s + c]), equal_nan=True)


def test_group_stats_and_quantiles_equal_per_group_numpy() -> None:
    """Sorted sizes with a band bit within each size (how the per-size layer keys them)."""
    rng = np.random.default_rng(3)
    n_sizes = 300
    size_id = np.sort(rng.integers(0, n_sizes, 5000))
    key = size_id * 2 + rng.integers(0, 2, len(size_id))
    val = rng.lognormal(size=len(key))
    med, mad, cnt = _group_stats(key, val, 2 * n_sizes)
    levels = np.array([0.05, 0.5, 0.95])
    pq = predictive_quantiles(key, val, levels)
    for row, g in enumerate(np.unique(key).tolist()):
        v = val[key == g]
        assert cnt[g] == len(v)
        assert med[g] == np.median(v)
        assert mad[g] == pytest.approx(1.4826 * np.median(np.abs(v - np.median(v))), rel=1e-15)
        s = np.sort(v)
        for k, u in enumerate(levels.tolist()):
            lo, hi, f = order_position(u, np.array([len(v)]))
            assert pq[row, k] == s[lo[0]] * (1 - f[0]) + s[hi[0]] * f[0]
    assert np.isnan(med[cnt == 0]).all() and np.isnan(mad[cnt == 0]).all()
