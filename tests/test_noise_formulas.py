"""The noise families without scipy.stats: the same values as scipy.stats, bit for bit.

kit.model.noise evaluates each family with the formulas of scipy.stats' private methods
(kit.model.noise._FAMILIES) and fits it with scipy's own closed forms and root search, so
that neither reading a model nor fitting one imports scipy.stats (0.6-0.9 CPU-s). With
scipy.special loaded (every fit loads it) the values must be scipy.stats' exactly; without
it (a model read by ``pt2pt predict``) they come from Python's math module and agree to a
few units in the last place. These tests hold both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from kit.model import special
from kit.model.noise import _FAMILIES, Noise, _brentq, _ml_fit

REPO = Path(__file__).resolve().parent.parent

SCIPY = {"lognormal": stats.lognorm, "gamma": stats.gamma, "weibull": stats.weibull_min,
         "invgauss": stats.invgauss, "fisk": stats.fisk}
PARAMS = {"lognormal": [0.05, 0.3, 1.2], "gamma": [0.8, 4.0, 400.0, 9e4],
          "weibull": [0.7, 2.5, 40.0], "invgauss": [0.002, 0.05, 0.9, 3.0],
          "fisk": [1.5, 6.0, 60.0]}
CASES = [(fam, v, scale) for fam, values in PARAMS.items() for v in values
         for scale in (1.0, 3.7e-6)]


def _noise(fam: str, v: float, scale: float) -> Noise:
    return Noise(fam, {_FAMILIES[fam].shapes[0]: v, "scale": scale})


@pytest.mark.parametrize("fam,v,scale", CASES)
def test_cdf_logpdf_ppf_rvs_are_scipy_stats_bit_for_bit(fam: str, v: float,
                                                        scale: float) -> None:
    """(test_noise_quantiles.py and test_noise_tails.py hold more points and parameters;
    here: the draws too, and the scalar median.)"""
    special.use_scipy()
    noise = _noise(fam, v, scale)
    dist = SCIPY[fam](v, loc=0.0, scale=scale)
    warnings.simplefilter("ignore", RuntimeWarning)  # scipy's own, at 0 and inf
    q = np.concatenate([[0.0, 1.0], np.linspace(0.001, 0.999, 41), [1e-9, 1 - 1e-9]])
    x = np.asarray(dist.ppf(np.linspace(0.0005, 0.9995, 60)))
    x = np.concatenate([x, [0.0, -scale, np.inf, np.nan]])
    cdf, logpdf = noise._scipy(x, "cdf", "logpdf")
    np.testing.assert_array_equal(cdf, dist.cdf(x))
    np.testing.assert_array_equal(logpdf, dist.logpdf(x))
    if fam == "invgauss" and v < 0.003:  # Boost gives up: Newton here, scipy's brentq
        # (to 2e-12 absolute, 1e-9 of these quantiles)
        np.testing.assert_allclose(noise.ppf(q), dist.ppf(q), rtol=2e-9)
    else:
        np.testing.assert_array_equal(noise.ppf(q), dist.ppf(q))
        assert noise.median() == float(dist.ppf(0.5))
    draws = noise.rvs(500, np.random.default_rng(3))
    np.testing.assert_array_equal(draws, dist.rvs(size=500, random_state=np.random.default_rng(3)))


@pytest.mark.parametrize("fam", ["gamma", "lognormal", "invgauss"])
def test_ml_fits_are_scipy_fits_bit_for_bit(fam: str) -> None:
    """gamma: the closed-form start and brentq, step for step; lognormal, invgauss: the
    closed forms (weibull and fisk are fitted on ln r by the kit's own ML, which
    test_curve_fits.py holds to scipy's optimum)."""
    special.use_scipy()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        shape = [0.3, 2.0, 30.0, 900.0][seed % 4] if fam == "gamma" else [0.02, 0.4][seed % 2]
        r = SCIPY[fam](shape).rvs(size=200 + 37 * seed, random_state=rng)
        assert _ml_fit(fam, r) == tuple(SCIPY[fam].fit(r, floc=0.0)), (fam, seed)


def test_brentq_is_scipys_on_awkward_functions() -> None:
    from scipy.optimize import brentq

    funcs = [(lambda x: x**3 - 2 * x - 5, 2.0, 3.0), (lambda x: np.cos(x) - x, 0.0, 1.0),
             (lambda x: np.exp(x) - 1e6, 0.0, 30.0), (lambda x: (x - 1.5)**5, 0.0, 4.0),
             (lambda x: np.log(x) - 3.0, 0.1, 100.0)]
    for f, a, b in funcs:
        assert _brentq(f, a, b) == brentq(f, a, b, disp=False)
    with pytest.raises(ValueError, match="different signs"):
        _brentq(lambda x: x * x + 1, -1.0, 1.0)


@pytest.mark.parametrize("fam,v,scale", CASES)
def test_without_scipy_special_the_values_agree_to_rounding(fam: str, v: float, scale: float,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """What ``pt2pt predict`` computes in a process that never loads SciPy."""
    special.use_scipy()
    exact = _noise(fam, v, scale)
    q = np.linspace(0.001, 0.999, 41)
    x = np.asarray(exact.ppf(np.linspace(0.01, 0.99, 30)))
    want_cdf, want_logpdf = exact._scipy(x, "cdf", "logpdf")
    want_ppf = exact.ppf(q)
    monkeypatch.setattr(special, "functions", lambda: special.LIGHT)
    light = _noise(fam, v, scale)
    cdf, logpdf = light._scipy(x, "cdf", "logpdf")
    np.testing.assert_allclose(cdf, want_cdf, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(logpdf, want_logpdf, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(light.ppf(q), want_ppf, rtol=1e-10)


def test_light_special_functions_match_scipy() -> None:
    import scipy.special as sc

    x = np.linspace(-37.0, 38.0, 3001)
    for name in ("ndtr", "log_ndtr", "expit"):
        got, want = getattr(special.LIGHT, name)(x), getattr(sc, name)(x)
        ok = np.abs(want) > 1e-300
        np.testing.assert_allclose(got[ok], want[ok], rtol=1e-13, err_msg=name)
    q = np.concatenate([np.logspace(-300, -1, 300), np.linspace(0.01, 0.99, 99),
                        1 - np.logspace(-15, -1, 100)])
    for name in ("ndtri", "logit"):
        np.testing.assert_allclose(getattr(special.LIGHT, name)(q), getattr(sc, name)(q),
                                   rtol=1e-14, err_msg=name)
    assert special.LIGHT.ndtri(np.array([0.0, 1.0])).tolist() == [-np.inf, np.inf]


_FIT = """
import hashlib, sys
from kit.model import RegimeModel
from kit.model.io import dumps, load_model
if len(sys.argv) > 1:  # read a model and predict first: the light functions run
    load_model(sys.argv[1]).predict_quantiles([1, 100, 10000], [0.05, 0.5, 0.95])
    assert "scipy.special" not in sys.modules
from kit.fit import synth  # (scipy.stats: it draws the synthetic truth)
s, t = synth.sample(synth.ethernet_like(), 2000, grid=30, seed=4)
print(hashlib.sha256(dumps(RegimeModel().fit(s, t)).encode()).hexdigest())
"""


def test_a_fit_is_the_same_whatever_the_process_read_before(tmp_path: Path) -> None:
    """A fit computes with scipy.special's functions from its first step: a model read and
    evaluated before (with the light functions) changes no bit of it."""
    from kit.fit import synth
    from kit.model import RegimeModel
    from kit.model.io import save_model

    s, t = synth.sample(synth.ethernet_like(), 1500, grid=20, seed=9)
    # lognormal noise only: a model read and evaluated without SciPy
    model = save_model(RegimeModel(noise=False, mixture=False).fit(s, t), tmp_path / "m.json")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [subprocess.run([sys.executable, "-c", _FIT, *extra], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
            for extra in ([], [str(model)])]
    assert runs[0] == runs[1] and len(runs[0]) == 64


@pytest.mark.parametrize("mu", [0.00187, *PARAMS["invgauss"]])
@pytest.mark.parametrize("light", [False, True])
def test_invgauss_cdf_far_in_the_left_tail_is_zero_not_inf(mu: float, light: bool,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Both terms of the log CDF underflow there (inf - inf); a per-size model's tail asked
    the CDF at a ratio of 5e-17 and got +inf, which the model gate refused as non-finite."""
    special.use_scipy()
    if light:
        monkeypatch.setattr(special, "functions", lambda: special.LIGHT)
    # the fitted noise of that model: mu 0.00187, scale 537 (ratios ~1e-19 below it)
    cdf = _noise("invgauss", mu, 537.0).cdf(np.array([5e-17, 1e-30, 1e-10, 1e6]))
    assert np.all(np.isfinite(cdf)) and np.all((cdf >= 0) & (cdf <= 1)), cdf
    assert cdf[0] == 0.0 and cdf[1] == 0.0 and cdf[3] == 1.0
