"""Hockney and peak baselines: the lines they fit and their predictive interface."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from kit.core.errors import ModelError
from kit.fit.baselines import HockneyModel, HockneyRawModel, PeakModel, RobustHockneyModel


def _line_data(alpha: float = 5e-6, beta: float = 1e9, n: int = 3000, seed: int = 0):
    rng = np.random.default_rng(seed)
    size = np.floor(np.exp(rng.uniform(0, np.log(2**22), n)))
    time = (alpha + size / beta) * rng.lognormal(0.0, 0.02, n)
    return size, time


def test_hockney_recovers_a_line() -> None:
    size, time = _line_data()
    m = HockneyModel().fit(size, time)
    assert m.alpha_ == pytest.approx(5e-6, rel=0.05)
    assert m.beta_ == pytest.approx(1e9, rel=0.02)


def test_hockney_never_returns_a_negative_start_up_time() -> None:
    # Convex data: ordinary least squares through these points has a negative intercept.
    size = np.repeat(np.array([1.0, 10.0, 1e3, 1e5, 1e6]), 20)
    time = 1e-6 + (size / 1e9) ** 1.3
    ols_intercept = np.polyfit(size, time, 1)[1]
    assert ols_intercept < 0
    m = HockneyModel().fit(size, time)
    assert m.alpha_ >= 0.0
    assert np.all(m.predict(size) > 0)


def test_peak_is_best_latency_and_best_bandwidth() -> None:
    size, time = _line_data(seed=1)
    m = PeakModel().fit(size, time)
    assert m.alpha_ == pytest.approx(time.min())
    assert m.beta_ == pytest.approx((size / time).max())
    # An optimistic bound: its line is below the median of the data for large messages.
    big = size > 1e6
    assert np.median(m._line(size[big]) / time[big]) < 1.0


@pytest.mark.parametrize("cls", [HockneyModel, RobustHockneyModel, HockneyRawModel, PeakModel])
def test_predictive_interface_shapes_and_consistency(cls: type) -> None:
    size, time = _line_data(seed=2)
    m = cls().fit(size, time)
    grid = np.array([1.0, 1e3, 1e6])
    q = m.predict_quantiles(grid, [0.05, 0.5, 0.95])
    assert q.shape == (3, 3)
    assert np.all(np.diff(q, axis=1) > 0)
    assert np.allclose(m.predict(grid), q[:, 1])
    draws = m.sample(grid, 4000, random_state=0)
    assert draws.shape == (3, 4000)
    assert np.all(draws > 0)
    emp = np.quantile(draws, [0.05, 0.5, 0.95], axis=1).T
    assert np.allclose(emp, q, rtol=0.02)
    assert m.sample(1e3, 5, random_state=0).shape == (5,)
    assert np.array_equal(m.sample(grid, 5, random_state=7), m.sample(grid, 5, random_state=7))


def test_sklearn_contract_and_errors() -> None:
    m = HockneyModel()
    assert clone(m).get_params() == {}
    with pytest.raises(ModelError, match="not fitted"):
        m.predict([1.0])
    with pytest.raises(ModelError, match="no usable samples"):
        HockneyModel().fit([1.0, 2.0], [np.nan, -1.0])
    with pytest.raises(ModelError, match="differ in length"):
        PeakModel().fit([1.0, 2.0], [1.0])


def test_robust_hockney_is_not_pulled_by_preempted_samples() -> None:
    """A few preempted samples at large sizes: the raw-sample fit's intercept leaves the data,
    the per-size-median fit keeps the small-message latency."""
    rng = np.random.default_rng(4)
    size = np.repeat(np.geomspace(1, 2**22, 23).round(), 100)
    time = (2e-6 + size / 5e9) * rng.lognormal(0.0, 0.05, size.size)
    big = np.flatnonzero(size > 1e6)
    hit = rng.choice(big, 30, replace=False)
    time[hit] += rng.uniform(5e-3, 2e-2, hit.size)  # preempted by the scheduler
    small = size <= 64
    med_small = float(np.median(time[small]))
    raw = HockneyRawModel().fit(size, time)
    robust = RobustHockneyModel().fit(size, time)
    assert raw.predict(np.array([1.0]))[0] > 10 * med_small  # the strawman misses by 10x+
    assert robust.predict(np.array([1.0]))[0] == pytest.approx(med_small, rel=0.1)
    assert robust.beta_ == pytest.approx(5e9, rel=0.1)


def test_hockney_on_means_uses_one_point_per_size() -> None:
    size, time = _line_data(seed=3)
    m = HockneyModel().fit(size, time)  # log-uniform sizes: grouped into log cells
    assert m.beta_ == pytest.approx(1e9, rel=0.05)
