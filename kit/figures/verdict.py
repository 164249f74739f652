"""The one sentence that says what the held-out numbers mean for a series.

It compares the model with the best *honest* baseline (kit.figures.baseline: robust Hockney,
peak; never the textbook line) and says so when the baseline ties or beats the model: "the
regimes add nothing here". A tie is a difference within 5 % of the model's score or two
standard errors of the difference (kit.fit.validate's ``vs_model_se``), whichever is larger.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kit.figures.baseline import best_baseline, name
from kit.figures.score import Score, score_of, summary_of

#: A baseline within this share of the model's score ties with it.
TIE_RELATIVE = 0.05
#: Coverage of the p05..p95 band below which the noise is called too narrow.
COVERAGE_LOW = 0.8


def ties(model: Score, baseline: Score, diff_se: float | None) -> bool:
    """The baseline scores as well as the model, or better, within the tie margin."""
    margin = max(TIE_RELATIVE * model.value, 2.0 * (diff_se or 0.0))
    return baseline.value <= model.value + margin


def _quality(score: Score) -> str:
    if score.reference != "floor":
        return f"score {score.value:.2f} against the old lookup reference"
    if score.value <= 1.1:
        return "at the floor"
    if score.value <= 1.5:
        return "close to the floor"
    if score.value <= 2.0:
        return "within 2x of the floor"
    return "over 2x the floor: check the regimes"


def verdict(validation: Mapping[str, Any] | None) -> str:
    """One sentence from a validation result (kit.fit.validate)."""
    model = score_of(validation)
    if model is None:
        return "not validated: run 'pt2pt validate' on the model to score it"
    parts = [_quality(model)]
    best = best_baseline(validation)
    if best is not None:
        key, score = best
        diff_se = summary_of(validation, key).get("vs_model_se")
        if ties(model, score, diff_se if isinstance(diff_se, float) else None):
            parts.append(f"the regimes add nothing here: {name(key)} scores "
                         f"{score.value:.2f} against the model's {model.value:.2f}")
        else:
            parts.append(f"the regimes beat the best honest baseline ({name(key)} "
                         f"{score.value:.2f} against {model.value:.2f})")
    coverage = summary_of(validation, "model").get("coverage")
    if isinstance(coverage, float) and math.isfinite(coverage) and coverage < COVERAGE_LOW:
        parts.append(f"noise band too narrow (coverage {coverage:.2f}, 0.90 ideal)")
    return "; ".join(parts)
