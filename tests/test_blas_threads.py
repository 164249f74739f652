"""The engine runs its small linear algebra on one BLAS thread and gives the caller's
setting back (kit.core.blas): OpenBLAS's spinning helper threads cost CPU for nothing."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import kit.model.estimator as estimator
import kit.model.uncertainty as uncertainty
from kit.fit import synth
from kit.model import RegimeModel


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    if not _blas_threads():
        pytest.skip("no BLAS library reported by threadpoolctl")
    with threadpool_limits(2, user_api="blas"):
        yield


def test_fit_and_intervals_run_on_one_blas_thread_and_restore_it(two_blas_threads, monkeypatch):
    seen: dict[str, list[int]] = {}
    make_bins, estimate = estimator.make_bins, uncertainty._estimate

    def spy_bins(*a, **k):
        seen.setdefault("fit", _blas_threads())
        return make_bins(*a, **k)

    def spy_estimate(*a, **k):
        seen.setdefault("intervals", _blas_threads())
        return estimate(*a, **k)

    monkeypatch.setattr(estimator, "make_bins", spy_bins)
    monkeypatch.setattr(uncertainty, "_estimate", spy_estimate)
    s, t = synth.sample(synth.ethernet_like(), 3000, lo=1, hi=2**16, seed=4)
    before = _blas_threads()
    model = RegimeModel(per_size=False).fit(s, t)
    uncertainty.bootstrap_intervals(model, s, t, n_boot=3)
    assert set(seen["fit"]) == {1} and set(seen["intervals"]) == {1}
    assert _blas_threads() == before == [2] * len(before)


def test_a_failed_fit_restores_the_blas_threads_too(two_blas_threads):
    before = _blas_threads()
    with pytest.raises(Exception, match="times"):
        RegimeModel().fit(np.arange(1.0, 11.0), np.full(10, -1.0))
    assert _blas_threads() == before
