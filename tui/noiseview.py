"""The noise of one regime for its screen: ratios to the curve, the density, and every
candidate family's fitted quantiles beside the empirical ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kit.core.errors import ModelError
from tui.loading import Samples

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel


@dataclass(frozen=True)
class NoiseCandidate:
    family: str
    aic: float
    fitted: tuple[float, float, float]  # p50, p95, p99 of the fitted density
    empirical: tuple[float, float, float]
    chosen: bool


@dataclass(frozen=True)
class NoiseView:
    """The noise of one regime: samples of time / fitted median and the chosen density."""

    ratio: np.ndarray
    density_x: np.ndarray
    density_y: np.ndarray
    family: str
    candidates: list[NoiseCandidate]


def noise_view(model: RegimeModel, samples: Samples, index: int) -> NoiseView:
    """Ratios time / curve of the regime's samples, its density, and every candidate family.

    The model keeps only the AIC of the losing noise families; their fitted quantiles are
    recomputed here with kit's own ``fit_noise`` restricted to that family, so the table
    compares like with like.
    """
    from kit.model.noise import fit_noise

    reg = model.regimes_[index]
    size = samples.size
    in_regime = np.asarray(model.regime_index(size)) == index
    mask = model.outlier_mask_
    if mask is not None and len(mask) == len(size):
        in_regime &= ~np.asarray(mask, dtype=bool)
    s, t = size[in_regime], samples.time[in_regime]
    if s.size == 0:
        raise ModelError(f"regime {index} of {samples.key.label} holds no samples",
                         where="noise view", hint="move its breakpoints apart and refit")
    ratio = t / np.asarray(reg.curve(s), dtype=float)
    noise = reg.noise
    # Log-ratio axis over the whole range (a busy node reaches 10^4): the density shown is
    # that of ln(ratio), r * pdf(r), so the histogram of ln(ratio) and the line compare.
    lo, hi = max(float(ratio.min()), 1e-9), max(float(ratio.max()), 1e-9)
    grid = np.geomspace(lo, max(hi, lo * 1.01), 400)
    with np.errstate(all="ignore"):
        density = grid * np.exp(np.asarray(noise.logpdf(grid), dtype=float))
    candidates = []
    rng_seed = 0
    for fam, aic in sorted(noise.aic.items(), key=lambda kv: kv[1]):
        if fam == noise.family and noise.quantiles:
            report = noise.quantiles
        else:
            report = fit_noise(ratio, np.random.default_rng(rng_seed), (fam,)).quantiles
        candidates.append(NoiseCandidate(
            family=fam, aic=float(aic),
            fitted=tuple(float(report[p]["fitted"]) for p in ("p50", "p95", "p99")),  # type: ignore[arg-type]
            empirical=tuple(float(report[p]["empirical"]) for p in ("p50", "p95", "p99")),  # type: ignore[arg-type]
            chosen=fam == noise.family))
    return NoiseView(ratio=ratio, density_x=grid, density_y=density, family=noise.family,
                     candidates=candidates)
