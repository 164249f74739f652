"""Each size's own tails in its per-size prior (kit.model.sizeshape, issue 60 item 1).

The regime's within-size noise pools sizes whose tails differ; a size's prior is scaled to
its own spread and, where the cross-validation says its samples inform them, its own tails.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from kit.model import RegimeModel
from kit.model.sizeshape import (
    PART_MIN_N,
    SHAPE_LEVELS,
    TAIL_PARTS,
    scale_shape,
    shrink_spread,
    spread_ratio,
)

Z = ndtri(SHAPE_LEVELS)


def _lnq(sigma: float, h: float) -> np.ndarray:
    """ln quantiles at SHAPE_LEVELS of sigma·Z with an upper Tukey-h tail."""
    return sigma * Z * np.exp(h * np.maximum(Z, 0.0) ** 2 / 2)


def test_spread_ratio_reads_the_upper_tail_apart_from_the_body() -> None:
    one = _lnq(0.05, 0.0)[None, :]
    own = np.stack([_lnq(0.05, 0.0), _lnq(0.05, 0.4), _lnq(0.10, 0.0)])
    r = spread_ratio(own, np.repeat(one, 3, axis=0))
    assert np.allclose(r[0], 0.0, atol=1e-12)
    # a heavy upper tail; its lower tail is the typical size's (ratios are over the body)
    assert r[1, 2] > 0.2 and abs(r[1, 0]) < 0.05 and abs(r[1, 1] + r[1, 0]) < 1e-9
    assert abs(r[2, 0] - np.log(2)) < 1e-9 and np.allclose(r[2, 1:], 0.0, atol=1e-9)  # wider


def test_scale_shape_gives_one_size_the_tails_it_was_measured_with() -> None:
    one = np.repeat(_lnq(0.05, 0.0)[None, :], 2, axis=0)
    own = np.stack([_lnq(0.08, 0.0), _lnq(0.05, 0.3)])
    out = scale_shape(one, spread_ratio(own, one))
    assert np.all(np.diff(out, axis=1) >= 0)
    for inner, outer in TAIL_PARTS:
        assert np.allclose(out[:, outer] - out[:, inner], own[:, outer] - own[:, inner])


def test_tails_of_sizes_too_rare_to_inform_them_stay_at_the_regimes() -> None:
    rng = np.random.default_rng(0)
    n = np.where(np.arange(60) % 2 == 0, 10.0, 200.0)  # 10 < PART_MIN_N: tails unmeasured
    assert PART_MIN_N[1] > 10
    ratio = np.stack([rng.normal(0, 0.2, 60), rng.normal(0, 0.5, 60),
                      rng.normal(0, 0.5, 60)], axis=1)
    shrunk, info = shrink_spread(ratio, n)
    few = n < PART_MIN_N[1]
    assert np.allclose(shrunk[few, 1:], np.asarray(info["median"])[None, 1:])
    assert np.ptp(shrunk[~few, 2]) > 0.5  # measured tails that vary keep most of it
    assert len(info["tau"]) == 3 and info["tau"][2] > 0.2


def test_per_size_tails_on_synthetic_truth_bring_the_model_closer_to_it() -> None:
    """Sizes with their own location, spread and upper tail (known quantiles): the fit
    chooses the sizes' own upper tails, and its quantiles at the seen sizes are closer to
    the truth's than the sizes' own empirical quantiles (the lookup table) are."""
    rng = np.random.default_rng(1)
    grid = np.unique(np.round(np.geomspace(64, 2**16, 120)))
    loc = rng.normal(0, 0.05, len(grid))
    sig = 0.05 * np.exp(rng.normal(0, 0.4, len(grid)))
    h = rng.uniform(0, 0.3, len(grid))

    def q(i: np.ndarray, z: np.ndarray) -> np.ndarray:
        return 10e-6 * np.exp(loc[i] + sig[i] * z * np.exp(h[i] * np.maximum(z, 0) ** 2 / 2))

    gi = np.repeat(np.arange(len(grid)), 40)
    rng.shuffle(gi)
    t = q(gi, rng.standard_normal(len(gi)))
    model = RegimeModel().fit(grid[gi], t)
    layer = model.per_size_
    assert layer is not None
    assert any(c["spread"]["tails"][1] for c in layer.components if "spread" in c)
    u = (np.arange(50) + 0.5) / 50
    pred = model.predict_quantiles(grid, u)
    err_model, err_table = [], []
    for i in range(len(grid)):
        truth = q(np.full(len(u), i), ndtri(u))
        own = np.quantile(t[gi == i], u, method="weibull")
        err_model.append(np.mean(np.abs(pred[i] / truth - 1)))
        err_table.append(np.mean(np.abs(own / truth - 1)))
    assert np.mean(err_model) < 0.95 * np.mean(err_table)
