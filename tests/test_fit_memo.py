"""Memoised EMs (kit.model.memo) change a fit's cost, never its result."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from kit.fit import synth
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


def test_overlap_rounds_reuse_a_boundary_only_while_both_its_regimes_are_the_same(
        refdata_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlap rounds refit some regimes; a boundary between two regimes that were not
    refitted keeps its overlap fit (deterministic), and the model is the one computed
    without that reuse (taurus loopback: overlaps at two of five boundaries)."""
    from kit.model import estimator
    from tests.test_model_persize import CAL, RUNS, _read

    s, t = _read(refdata_dir / CAL / RUNS["taurus-loopback"])
    calls: list[float] = []
    real = estimator.fit_overlap

    def counted(left, right, boundary, size, time):  # type: ignore[no-untyped-def]
        calls.append(boundary)
        return real(left, right, boundary, size, time)

    monkeypatch.setattr(estimator, "fit_overlap", counted)
    reused = RegimeModel(random_state=0).fit(s, t)
    with_reuse = len(calls)
    calls.clear()
    fresh = estimator.RegimeModel._overlaps
    monkeypatch.setattr(estimator.RegimeModel, "_overlaps", staticmethod(
        lambda regimes, bps, si, ti, seen=None: fresh(regimes, bps, si, ti)))
    plain = RegimeModel(random_state=0).fit(s, t)
    assert with_reuse < len(calls), (with_reuse, len(calls))
    assert reused.breakpoints_ == plain.breakpoints_
    assert ([r.overlap for r in reused.regimes_] == [r.overlap for r in plain.regimes_])
    grid = np.geomspace(1, 1e6, 80)
    np.testing.assert_array_equal(reused.predict_quantiles(grid, [0.05, 0.5, 0.95]),
                                  plain.predict_quantiles(grid, [0.05, 0.5, 0.95]))

    # Directly: a second call fits nothing; a refitted (new) regime refits its two boundaries.
    model = reused
    si, ti = np.sort(s), t[np.argsort(s, kind="stable")]
    seen: dict = {}  # type: ignore[type-arg]
    calls.clear()
    first = fresh(model.regimes_, model.breakpoints_, si, ti, seen)
    n_boundaries = len(calls)
    again = fresh(model.regimes_, model.breakpoints_, si, ti, seen)
    assert len(calls) == n_boundaries and again == first
    regimes = list(model.regimes_)
    regimes[2] = copy.deepcopy(regimes[2])
    fresh(regimes, model.breakpoints_, si, ti, seen)
    assert calls[n_boundaries:] == model.breakpoints_[1:3]
