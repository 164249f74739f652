"""Memoised EMs (kit.model.memo) change a fit's cost, never its result."""

from __future__ import annotations

import numpy as np
import pytest

from kit import synth
from kit.model import RegimeModel
from kit.model.memo import ContentMemo


def test_a_stored_result_cannot_be_altered_through_a_copy() -> None:
    memo = ContentMemo(size=2)
    a = np.arange(5.0)
    key = memo.key(a, extra=("x",))
    memo.put(key, {"means": [1.0, 2.0]})
    hit, value = memo.get(key)
    assert hit
    value["means"][0] = 99.0
    assert memo.get(key)[1] == {"means": [1.0, 2.0]}
    assert memo.key(a, extra=("y",)) != key and memo.key(a + 1e-12, extra=("x",)) != key
    memo.put(memo.key(a + 1), 1)
    memo.put(memo.key(a + 2), 2)
    assert not memo.get(key)[0]  # least recently used, evicted at size 2


def test_fits_with_and_without_the_memo_are_the_same_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    size, time = synth.sample(synth.ethernet_like(), 6000, 1, 2**20, grid=40, seed=5)
    grid = np.geomspace(1, 2**20, 60)
    q = [0.05, 0.5, 0.95]
    memoised = RegimeModel(random_state=0).fit(size, time)
    again = RegimeModel(random_state=0).fit(size, time)  # a second fit in the same process
    monkeypatch.setattr(ContentMemo, "get", lambda self, key: (False, None))
    plain = RegimeModel(random_state=0).fit(size, time)
    expected = plain.predict_quantiles(grid, q)
    np.testing.assert_array_equal(memoised.predict_quantiles(grid, q), expected)
    np.testing.assert_array_equal(again.predict_quantiles(grid, q), expected)
    assert memoised.breakpoints_ == plain.breakpoints_


def test_a_regime_fit_depends_on_its_samples_and_the_seed_not_on_fits_before_it() -> None:
    # 12 k samples: above the noise subsample (2,500) and band subsample (8,000) sizes,
    # where the regime draws random subsamples.
    size, time = synth.sample(synth.ethernet_like(), 12000, 1, 1400, grid=30, seed=9)
    order = np.argsort(size, kind="stable")
    s, t = size[order], time[order]
    model = RegimeModel(random_state=3).fit(size, time)  # sets up the fit's state
    first = model._fit_regime(s, t, None, quick=False)
    model._fit_regime(s[: len(s) // 2], t[: len(t) // 2], None, quick=True)  # another fit between
    second = model._fit_regime(s, t, None, quick=False)
    assert first.noise.params == second.noise.params
    assert [c.params for c in first.components] == [c.params for c in second.components]
    other = RegimeModel(random_state=4).fit(size, time)._fit_regime(s, t, None, quick=False)
    assert other.noise.params != first.noise.params  # the seed still matters
