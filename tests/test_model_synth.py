"""The engine against synthetic data with a known truth (kit.fit.synth)."""

from __future__ import annotations

import numpy as np
import pytest

from kit.fit import synth as S
from kit.model import RegimeModel


def _close(found: float, true: float, tol: float) -> bool:
    return abs(found / true - 1) <= tol


def _aic_equivalent(noise, family: str, margin: float = 10.0) -> bool:
    """The true family is chosen, or its AIC is within ``margin`` of the winner's."""
    best = min(noise.aic.values())
    return noise.family == family or noise.aic.get(family, np.inf) - best <= margin


THREE = S.Truth([
    S.TrueRegime(1, "constant", {"a": 5e-6}, S.TrueNoise("gamma", 0.1)),
    S.TrueRegime(2048, "power", {"a": 1e-7, "b": 0.55}, S.TrueNoise("gamma", 0.1)),
    S.TrueRegime(131072, "linear", {"a": 3e-5, "b": 1 / 3e9}, S.TrueNoise("gamma", 0.1)),
])
FOUR = S.Truth([
    S.TrueRegime(1, "constant", {"a": 3e-6}),
    S.TrueRegime(512, "constant", {"a": 6e-6}),
    S.TrueRegime(16384, "linear", {"a": 8e-6, "b": 1 / 2e9}),
    S.TrueRegime(262144, "linear", {"a": 2e-4, "b": 1 / 5e9}),
])
GRID_TWO = S.Truth([
    S.TrueRegime(1, "constant", {"a": 20e-6}, S.TrueNoise("lognormal", 0.1)),
    S.TrueRegime(65537, "linear", {"a": 80e-6, "b": 1 / 1.2e9}, S.TrueNoise("lognormal", 0.1)),
])


@pytest.mark.parametrize(("truth", "n", "kw", "noise_family"), [
    pytest.param(GRID_TWO, 6000, {"grid": 150}, "lognormal", id="2-regimes-grid-lognormal"),
    pytest.param(THREE, 20000, {}, "gamma", id="3-regimes-loguniform-gamma"),
    pytest.param(FOUR, 20000, {"hi": 2**22}, "lognormal", id="4-regimes-loguniform-jumps"),
])
def test_regimes_breakpoints_params_and_noise_recovered(truth, n, kw, noise_family):
    s, t = S.sample(truth, n, seed=1, **kw)
    model = RegimeModel().fit(s, t)
    assert len(model.regimes_) == len(truth.regimes)
    for found, true in zip(model.breakpoints_, truth.breakpoints, strict=True):
        assert _close(found, true, 0.10), (model.breakpoints_, truth.breakpoints)
    for reg, true in zip(model.regimes_, truth.regimes, strict=True):
        assert not reg.is_mixture
        assert reg.family == true.family
        for key, value in true.params.items():
            # The latency term of a linear regime is small next to s/bandwidth over most of
            # the range; it is still pinned by the smallest sizes of the regime.
            assert _close(reg.params[key], value, 0.05), (reg.family, reg.params, true.params)
        assert _aic_equivalent(reg.noise, noise_family), reg.noise.aic


def test_overlap_window_and_shares_found():
    truth = S.Truth([S.TrueRegime(1, "constant", {"a": 10e-6}),
                     S.TrueRegime(8192, "constant", {"a": 30e-6})],
                    [S.TrueOverlap(0, 8192, 4.0)])
    s, t = S.sample(truth, 10000, hi=2**17, seed=1)
    model = RegimeModel().fit(s, t)
    assert len(model.regimes_) == 2
    ov = model.regimes_[0].overlap
    assert ov is not None
    assert _close(model.breakpoints_[0], 8192, 0.10)
    assert _close(ov.center, 8192, 0.10)
    # True window of 2-98 % shares: 8192 · e^(±ln(49)/4) = [3100, 21600].
    assert 1500 < ov.size_lo < 5000 and 13000 < ov.size_hi < 40000, ov
    assert 0.3 < ov.share_left < 0.7
    # Sampling mixes both levels inside the window, and only one outside it.
    draws = model.sample([8192, 1000, 100000], 4000, random_state=2)
    slow_mid = np.mean(draws[0] > 17e-6)
    assert 0.35 < slow_mid < 0.65
    assert np.mean(draws[1] > 17e-6) < 0.02 and np.mean(draws[2] > 17e-6) > 0.98
    assert _close(model.regimes_[0].params["a"], 10e-6, 0.05)
    assert np.all(np.abs(model.predict([30000, 100000]) / 30e-6 - 1) < 0.05)


def test_bimodal_noise_chosen_and_reproduced():
    truth = S.Truth([
        S.TrueRegime(1, "constant", {"a": 10e-6}, S.TrueNoise("bimodal", 0.05, 3.0, 0.3)),
        S.TrueRegime(32768, "linear", {"a": 2e-5, "b": 1e-9}),
    ])
    s, t = S.sample(truth, 10000, seed=1)
    model = RegimeModel().fit(s, t)
    assert len(model.regimes_) == 2
    assert _close(model.breakpoints_[0], 32768, 0.10)
    first = model.regimes_[0]
    # Two bands with a size-independent share: either a two-band regime or a Gaussian
    # mixture noise; both must reproduce the 30 % slow mode.
    assert first.is_mixture or first.noise.family == "gmm"
    draws = model.sample([100, 3000], 5000, random_state=3)
    assert np.all(np.abs(np.mean(draws > 18e-6, axis=1) - 0.3) < 0.05)


def test_ethernet_bands_reproduced():
    """Two bands whose slow share grows with size, as on 10 GbE: both bands and their
    proportions come back from sample()."""
    truth = S.ethernet_like()
    s, t = S.sample(truth, 30000, seed=1)
    model = RegimeModel().fit(s, t)
    assert [_close(b, tb, 0.10) for b, tb in zip(model.breakpoints_, truth.breakpoints,
                                                  strict=True)] == [True, True]
    mid = model.regimes_[1]
    assert mid.is_mixture
    fast, slow = mid.components
    assert _close(fast.params["a"], 4e-6, 0.15) and _close(slow.params["a"], 16e-6, 0.15)
    band = truth.regimes[1].band
    assert band is not None
    rng = np.random.default_rng(5)
    for size in (512.0, 4096.0, 32768.0):
        true_share = 1 / (1 + np.exp(-(band.intercept + band.slope * np.log(size))))
        draws = model.sample([size], 4000, random_state=rng)[0]
        threshold = 2 * 4e-6 * size**0.3  # between the bands (4x apart)
        assert abs(np.mean(draws > threshold) - true_share) < 0.08, size


@pytest.mark.parametrize("shape", ["lognormal", "gamma", "weibull", "invgauss", "fisk"])
def test_noise_family_identified(shape):
    from kit.model.noise import fit_noise

    rng = np.random.default_rng(11)
    ratio = S.TrueNoise(shape, 0.2).draw(6000, rng)
    noise = fit_noise(ratio, rng)
    assert _aic_equivalent(noise, shape), noise.aic
    q = noise.quantiles
    assert abs(q["p50"]["fitted"] / q["p50"]["empirical"] - 1) < 0.01
    assert abs(q["p95"]["fitted"] / q["p95"]["empirical"] - 1) < 0.05


def test_a_slow_band_of_a_few_percent_is_kept_and_sets_the_p99():
    """Ethernet's slow band holds 1.5-5 % of each size's samples at 134-432 B (4x slower):
    with 5,000 samples per size it is part of the distribution, not outliers, and the
    model's p99 there is the data's (it was the fast band's, 3.5x below, when the outlier
    threshold was scaled by the p95 alone). 1000x stalls in 0.2 % are still flagged (below
    4 KiB: where the bands hold similar shares the spread between them hides some stalls,
    under either rule)."""
    s, t = S.sample(S.ethernet_like(), 200_000, lo=1, hi=2**22, seed=3, grid=40)
    t = t.copy()
    stalls = np.flatnonzero(s < 4096)[7::500]
    t[stalls] *= 1000.0
    model = RegimeModel().fit(s, t)
    assert set(np.flatnonzero(model.outlier_mask_)) >= set(stalls)
    assert model.n_outliers_ < 1.5 * len(stalls)  # the band's samples are not among them
    sizes = np.unique(s)
    band = sizes[(sizes >= 134) & (sizes <= 432)]
    assert len(band) >= 3
    keep = ~model.outlier_mask_
    emp = np.array([np.quantile(t[keep & (s == z)], 0.99) for z in band])
    assert np.allclose(model.predict_quantiles(band, [0.99])[:, 0], emp, rtol=0.1)


def test_outlier_thresholds_of_small_neighbourhoods_are_the_p05_p95_rule():
    """Up to 100 samples per neighbourhood (the reference runs' 50 repetitions) the flags
    are those of thresholds scaled by the fixed p05/p95; beyond, by quantiles with at least
    5 samples past them, down to p01/p99."""
    from kit.model.outliers import flag_outliers, group_quantiles, neighbourhoods, tail_mass

    def fixed_rule(size, lt, k=6.0):
        order = np.argsort(size, kind="stable")
        grp = neighbourhoods(size[order])
        v = lt[order]
        q = group_quantiles(grp, v, (0.05, 0.25, 0.5, 0.75, 0.95))
        med = q[grp, 2]
        sd = (q[grp, 3] - q[grp, 1]) / 1.349
        up = np.maximum.reduce([k * sd, 2 * (q[grp, 4] - med), np.full(len(v), np.log(2))])
        down = np.maximum.reduce([k * sd, 2 * (med - q[grp, 0]), np.full(len(v), np.log(2))])
        out = np.zeros(len(v), dtype=bool)
        out[order] = (v - med > up) | (med - v > down)
        return out

    rng = np.random.default_rng(5)
    for reps in (30, 50, 100):
        size = np.repeat(np.arange(1, 41) * 64.0, reps)
        lt = rng.normal(-10, 0.1, len(size)) + np.where(rng.random(len(size)) < 0.03, 1.4, 0)
        assert np.array_equal(flag_outliers(size, lt), fixed_rule(size, lt))
    assert np.array_equal(tail_mass(np.array([30, 100, 250, 500, 40_000])),
                          [0.05, 0.05, 0.02, 0.01, 0.01])


def test_outliers_flagged_counted_not_dropped():
    s, t = S.sample(GRID_TWO, 6000, grid=150, seed=4)
    t = t.copy()
    idx = np.arange(0, 6000, 500)
    t[idx] *= 1000.0  # stalls
    model = RegimeModel().fit(s, t)
    assert model.outlier_mask_.shape == t.shape
    assert set(np.flatnonzero(model.outlier_mask_)) >= set(idx)
    assert model.n_outliers_ == int(model.outlier_mask_.sum()) < 40
    assert sum(r.n_outliers for r in model.regimes_) == model.n_outliers_
    # Excluded from the fits: the first regime's constant is unaffected.
    assert _close(model.regimes_[0].params["a"], 20e-6, 0.03)
