"""Noise quantiles: the inverse-Gaussian ppf where scipy's Boost call gives up.

Below mu ~0.003 (noise with a CV under 5.5 %) Boost finds no invgauss quantile and scipy
falls back to one brentq per value; the kit solves those with Newton on ln r. Where Boost
works the kit's ppf is scipy's, bit for bit. So are the other families' ppf, CDF and
log-density, which the kit computes without scipy's freezing and argument parsing.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from kit.model.noise import Noise

LEVELS = np.r_[1e-12, 1e-6, np.linspace(0.001, 0.999, 199), 1 - 1e-6, 1 - 1e-12]


FAMILY_PARAMS = [
    ("lognormal", {"s": 0.1, "scale": 2.0}), ("lognormal", {"s": 3.0, "scale": 1e-5}),
    ("lognormal", {"s": 1e-6, "scale": 1.0}),
    ("gamma", {"a": 0.5, "scale": 1.0}), ("gamma", {"a": 50.0, "scale": 3.0}),
    ("weibull", {"c": 0.7, "scale": 1.0}), ("weibull", {"c": 12.0, "scale": 5.0}),
    ("fisk", {"c": 1.5, "scale": 1.0}), ("fisk", {"c": 30.0, "scale": 2.0}),
    ("invgauss", {"mu": 0.05, "scale": 3.0}),
    ("gamma", {"a": -1.0, "scale": 1.0}), ("lognormal", {"s": 0.5, "scale": -1.0}),
]
SCIPY = {"lognormal": (stats.lognorm, "s"), "gamma": (stats.gamma, "a"),
         "weibull": (stats.weibull_min, "c"), "fisk": (stats.fisk, "c"),
         "invgauss": (stats.invgauss, "mu")}


@pytest.mark.parametrize(("family", "params"), FAMILY_PARAMS)
def test_family_densities_and_cdfs_are_scipys_bit_for_bit(family: str, params: dict) -> None:
    rng = np.random.default_rng(0)
    r = np.concatenate([np.exp(3 * rng.normal(size=2000)),
                        [0.0, np.inf, np.nan, -1.0, 1e-300, 1e300]])
    dist, shape = SCIPY[family]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want_pdf = dist.logpdf(r, params[shape], 0.0, params["scale"])
        want_cdf = dist.cdf(r, params[shape], 0.0, params["scale"])
        noise = Noise(family, dict(params))
        assert np.array_equal(noise.logpdf(r), want_pdf, equal_nan=True)
        assert np.array_equal(noise.cdf(r), want_cdf, equal_nan=True)


@pytest.mark.parametrize(("family", "params"),
                         [fp for fp in FAMILY_PARAMS if fp[0] != "invgauss"])
def test_family_quantiles_without_freezing_are_scipys(family: str, params: dict) -> None:
    q = np.concatenate([[0.0, 1.0, 0.5, 0.95, 0.99, 1e-12, 1 - 1e-12, -0.1, 1.1, np.nan],
                        np.random.default_rng(0).uniform(size=50)])
    got = Noise(family, dict(params))._scipy_ppf(q)
    dist, shape = SCIPY[family]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = np.asarray(dist.ppf(q, params[shape], 0.0, params["scale"]))
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(Noise(family, dict(params))._scipy_ppf(q.reshape(6, 10)),
                          want.reshape(6, 10), equal_nan=True)


@pytest.mark.parametrize("mu", [1e-5, 1e-4, 1e-3, 0.0025])
@pytest.mark.parametrize("scale", [1.0, 403.06])
def test_invgauss_quantiles_where_boost_gives_up_solve_the_cdf(mu: float, scale: float) -> None:
    noise = Noise("invgauss", {"mu": mu, "scale": scale})
    truth = stats.invgauss(mu, scale=scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Boost's "unable to locate" stays inside
        ours = noise.ppf(LEVELS)
    assert np.all(np.isfinite(ours)) and np.all(np.diff(ours) > 0)
    assert np.max(np.abs(truth.cdf(ours) - LEVELS)) < 1e-9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(ours, truth.ppf(LEVELS), rtol=1e-6)


@pytest.mark.parametrize("mu", [0.003, 0.01, 0.5, 5.0])
def test_invgauss_quantiles_are_scipys_where_boost_finds_them(mu: float) -> None:
    noise = Noise("invgauss", {"mu": mu, "scale": 7.5})
    np.testing.assert_array_equal(noise.ppf(LEVELS), stats.invgauss(mu, scale=7.5).ppf(LEVELS))


def test_invgauss_quantile_edges_and_shapes_are_scipys() -> None:
    for mu in (1e-4, 0.5):
        noise = Noise("invgauss", {"mu": mu, "scale": 2.0})
        q = np.array([[0.0, 1.0, -0.1], [1.1, np.nan, 0.5]])
        got = noise.ppf(q)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = stats.invgauss(mu, scale=2.0).ppf(q)
        assert got.shape == (2, 3)
        assert got[0, 0] == 0.0 and got[0, 1] == np.inf
        assert np.isnan(got[0, 2]) and np.isnan(got[1, 0]) and np.isnan(got[1, 1])
        np.testing.assert_allclose(got[1, 2], want[1, 2], rtol=1e-6)
        assert np.shape(noise.ppf(0.5)) == ()


@pytest.mark.parametrize("family,params", [
    ("gmm", {"weights": [0.7, 0.3], "means": [0.0, 0.5], "sds": [0.05, 0.2]}),
    ("lognormal", {"s": 0.1, "scale": 1.0}),
    ("invgauss", {"mu": 0.02, "scale": 50.0}),
])
def test_kept_quantiles_are_the_computed_ones_and_follow_the_parameters(
        family: str, params: dict) -> None:
    """ppf keeps small level sets (the per-size layer asks the same ones at every size):
    what it returns is what it computes, a caller writing into the result does not change
    the next answer, and new parameters are not answered from the old ones."""
    noise = Noise(family, dict(params))
    q = np.array([0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98])
    fresh = noise._ppf(q)
    first = noise.ppf(q)
    assert np.array_equal(first, fresh)
    first[:] = -1.0
    assert np.array_equal(noise.ppf(q), fresh)
    assert np.array_equal(noise.ppf(q[:3]), noise._ppf(q[:3]))
    assert noise.ppf(np.array(0.5)).shape == ()
    key = "sds" if family == "gmm" else "scale" if family != "invgauss" else "mu"
    noise.params[key] = ([0.1, 0.3] if family == "gmm" else noise.params[key] * 1.5)
    assert np.array_equal(noise.ppf(q), noise._ppf(q))
    assert not np.array_equal(noise.ppf(q), fresh)
