"""kit.fit.synth produces the truth it describes (the engine tests rely on it)."""

from __future__ import annotations

import numpy as np
import pytest

from kit.fit import synth as S


@pytest.mark.parametrize("shape", [s for s in S.SHAPES if s != "bimodal"])
def test_noise_shapes_have_median_one(shape):
    ratio = S.TrueNoise(shape, 0.2).draw(20000, np.random.default_rng(1))
    assert np.all(ratio > 0)
    assert abs(np.median(ratio) - 1) < 0.02


def test_regimes_medians_grid_and_bands():
    truth = S.ethernet_like()
    s, t = S.sample(truth, 60000, lo=1, hi=2**20, seed=2)
    assert s.min() >= 1 and s.max() <= 2**20 + 1
    # Below the band region the median follows the first regime's curve.
    small = s < 64
    assert abs(np.median(t[small]) / 11e-6 - 1) < 0.02
    # Large messages: the linear regime.
    big = (s > 500000) & (s < 600000)
    assert abs(np.median(t[big] / truth.median(s[big])) - 1) < 0.03
    # In the band region the slow share follows the logistic of ln size.
    band = truth.regimes[1].band
    assert band is not None
    mid = (s > 3000) & (s < 5000)
    share = 1 / (1 + np.exp(-(band.intercept + band.slope * np.log(4000))))
    slow = t[mid] > 2 * 4e-6 * s[mid] ** 0.3
    assert abs(slow.mean() - share) < 0.05


def test_grid_sampling_repeats_each_size_evenly():
    rng = np.random.default_rng(0)
    s = S.sizes(1000, 1, 1024, grid=11, rng=rng)
    values, counts = np.unique(s, return_counts=True)
    assert values.tolist() == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert counts.max() - counts.min() <= 1
    assert not np.all(np.diff(s) >= 0)  # shuffled, as a campaign plans it


def test_overlap_mixes_neighbours():
    truth = S.Truth([S.TrueRegime(1, "constant", {"a": 1e-5}),
                     S.TrueRegime(1000, "constant", {"a": 3e-5})], [S.TrueOverlap(0, 1000, 3.0)])
    rng = np.random.default_rng(3)
    t = S.generate(truth, np.full(4000, 1000.0), rng)
    assert 0.4 < np.mean(t > 2e-5) < 0.6
