"""The accelerated EMs (SQUAREM) reach the likelihood plain EM reaches only after many steps.

Both EMs stopped early used to leave real fits short of their optimum (a slow band's share
of 0.24 where the optimum is 0.34); acceleration must reach at least what a long plain EM
reaches, never less, and keep each fit a valid one.
"""

from __future__ import annotations

import numpy as np

from kit.model.mixture import fit_bands
from kit.model.noise import _em_gmm
from kit.model.squarem import accelerate


def _plain(step, theta, n):
    for _ in range(n):
        theta, _ = step(theta)
    return theta


def test_accelerate_reaches_the_fixed_point_of_a_slow_linear_map() -> None:
    # EM-like contraction with rate 0.99: plain iteration needs ~2,000 steps for 1e-9.
    target = np.array([1.0, -2.0, 3.0])
    a = np.diag([0.99, 0.9, 0.5])

    def step(th: np.ndarray) -> tuple[np.ndarray, float]:
        return target + a @ (th - target), -float(np.sum((th - target) ** 2))

    theta, evals = accelerate(step, np.zeros(3), 60, 1e-14)
    assert evals <= 60
    assert np.allclose(theta, target, atol=1e-6)
    slow = _plain(step, np.zeros(3), 60)
    assert np.abs(slow - target).max() > 0.5  # plain EM would still be far


def test_band_em_is_at_least_as_good_as_a_long_plain_em() -> None:
    # Overlapping bands (0.15 apart in ln time, sigmas 0.08 and 0.12): plain EM stopped at
    # 60 steps was 6.6 log-likelihood units short here (5281.85 vs 5288.47).
    rng = np.random.default_rng(1)
    x = np.log(np.repeat(np.exp(rng.uniform(0, 9, 120)).round(), 50))
    share = 0.35 / (1 + np.exp(-(x - 4)))
    slow = rng.random(len(x)) < share
    spread = rng.normal(0, 0.08, len(x)) * np.where(slow, 1.5, 1)
    y = -11 + 0.1 * x + np.where(slow, 0.15, 0.0) + spread
    fit = fit_bands(x, y)
    long = fit_bands(x, y, iters=3000)
    assert fit is not None and long is not None
    assert fit.loglik >= long.loglik - 1.0
    assert 0 < fit.resp.mean() < 1 and np.all(fit.sigmas > 0)
    assert fit.lines[0, 0] + fit.lines[0, 1] * 4 < fit.lines[1, 0] + fit.lines[1, 1] * 4


def test_gmm_em_is_at_least_as_good_as_a_long_plain_em() -> None:
    rng = np.random.default_rng(4)
    lr = np.where(rng.random(1200) < 0.3, rng.normal(0.3, 0.15, 1200), rng.normal(0, 0.12, 1200))
    for k in (2, 3):
        w, mu, sd, ll = _em_gmm(lr, k)
        _, _, _, ll_long = _em_gmm(lr, k, iters=5000)
        assert ll >= ll_long - 0.5
        assert np.isclose(w.sum(), 1.0) and np.all(sd >= 1e-4) and np.all(np.isfinite(mu))


def _gmm_loglik(th: np.ndarray, x: np.ndarray, k: int) -> float:
    """ln L of a 1-D mixture written out independently of the engine (scipy's normal pdf)."""
    from scipy.stats import norm

    a = np.r_[0.0, th[:k - 1]]
    w = np.exp(a - np.logaddexp.reduce(a))
    mu, sd = th[k - 1:2 * k - 1], np.exp(th[2 * k - 1:])
    return float(np.sum(np.log(np.sum(w[:, None] * norm.pdf(x[None, :], mu[:, None],
                                                                sd[:, None]), axis=0))))


def _fd_gradient(th: np.ndarray, x: np.ndarray, k: int, h: float = 1e-5) -> np.ndarray:
    return np.array([(_gmm_loglik(th + h * e, x, k) - _gmm_loglik(th - h * e, x, k)) / (2 * h)
                     for e in np.eye(len(th))])


def test_gmm_fit_is_a_likelihood_maximum_where_em_creeps() -> None:
    # A narrow minority component inside a wide one: EM stopped when a step gained less
    # than 1e-5·n here was 21 log-likelihood units short (-91.7 vs -70.7), gradient 17.7.
    rng = np.random.default_rng(7)
    minority = rng.random(1250) < 0.1
    lr = np.where(minority, rng.normal(-0.45, 0.08, 1250), rng.normal(0.06, 0.23, 1250))
    for k in (2, 3):
        w, mu, sd, ll = _em_gmm(lr, k)
        th = np.r_[np.log(w[1:] / w[0]), mu, np.log(sd)]
        assert np.isclose(ll, _gmm_loglik(th, lr, k), atol=1e-6)
        assert np.abs(_fd_gradient(th, lr, k)).max() < 1e-2  # a stationary point ...
        for _ in range(20):  # ... and no nearby point is better
            assert _gmm_loglik(th + rng.normal(0, 1e-3, len(th)), lr, k) <= ll + 1e-9
    w, mu, sd, _ = _em_gmm(lr, 2)
    assert abs(w.min() - 0.1) < 0.03 and abs(mu.min() + 0.45) < 0.03


def test_gmm_newton_terms_match_finite_differences() -> None:
    from kit.model.noise import _gmm_newton_terms

    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.3, 400)
    th = np.array([0.3, -0.4, -0.2, 0.05, 0.3, np.log(0.15), np.log(0.2), np.log(0.4)])
    ll, g, h = _gmm_newton_terms(x, th, 3)
    assert np.isclose(ll, _gmm_loglik(th, x, 3), atol=1e-8)
    assert np.allclose(g, _fd_gradient(th, x, 3), atol=1e-4)
    step = 1e-5
    fd_h = np.array([(_gmm_newton_terms(x, th + step * e, 3)[1]
                      - _gmm_newton_terms(x, th - step * e, 3)[1]) / (2 * step)
                     for e in np.eye(len(th))])
    assert np.allclose(h, fd_h, atol=1e-3 * max(1.0, float(np.abs(h).max())))


def test_share_slope_prior_keeps_a_step_share_finite() -> None:
    # A share that is a step in size (every sample below the step in one band, above it in
    # the other) is a boundary, not two bands: without a prior its maximum-likelihood slope
    # is infinite, and on real runs EM walked that ridge for 90-133 evaluations. With the
    # share-slope prior the Newton steps settle on a finite slope.
    from kit.model.mixture import SLOPE_PRECISION, logistic_step

    x = np.linspace(-2.0, 2.0, 81)
    n = np.full_like(x, 40.0)
    r = np.where(x > 0, n, 0.0)  # targets: all slow above the step, none below
    free = logistic_step(x, r, np.zeros(2), steps=60, n=n)
    prior = logistic_step(x, r, np.zeros(2), steps=60, n=n, slope_precision=SLOPE_PRECISION)
    again = logistic_step(x, r, prior, steps=1, n=n, slope_precision=SLOPE_PRECISION)
    assert abs(free[1]) > 200  # the ridge: still climbing
    assert 10 < abs(prior[1]) < 200 and np.allclose(again, prior, rtol=1e-9, atol=1e-9)
    # A genuine smooth share (slope 1.5) is left where the data put it.
    smooth = n * (1 / (1 + np.exp(-1.5 * x)))
    got = logistic_step(x, smooth, np.zeros(2), steps=30, n=n, slope_precision=SLOPE_PRECISION)
    assert abs(got[1] - 1.5) < 0.01
