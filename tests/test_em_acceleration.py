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
    fit = fit_bands(x, y, rng)
    long = fit_bands(x, y, rng, iters=3000)
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
