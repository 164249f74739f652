"""The held-out score: what "1" means, how sure a score is, and when it needs explaining.

    score = held-out CRPS of the model / floor

CRPS (continuous ranked probability score) compares a predicted distribution with the
held-out samples at each size, on time relative to the held-out median (kit.fit.validate).
The floor is the expected CRPS of the data's own distribution, estimated from the held-out
samples themselves (half their mean absolute difference at each size): the CRPS is a proper
score, so no model has a lower expected CRPS than the truth, and a score below 1 can only
be sampling error. Each score carries its standard error (delta method over the held-out
samples; kit.fit.validate), printed as ``1.02 ± 0.01``.

Validations written before the floor was this (``version`` 1) divided by the CRPS of the
training samples' per-size lookup table, which a pooled model beats wherever sizes have few
samples: their scores (0.58, 0.02...) are shown against "lookup" and say so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LABEL = "score"
LEGEND = ("score = held-out CRPS / floor ± its standard error; floor = the held-out samples' "
          "own expected CRPS (half their mean absolute difference at each size): 1 is as "
          "good as the data allow, below 1 only by sampling error")
#: A score below this is shown with the reason (sampling error, or an old reference).
EXPLAIN_BELOW = 0.9
#: The validation version whose reference is the floor above.
FLOOR_VERSION = 2


@dataclass(frozen=True)
class Score:
    """One model's score: CRPS / reference, its standard error, and which reference."""

    value: float
    se: float | None = None
    #: ``floor`` (a bound) or ``lookup`` (old validations: the training samples' table)
    reference: str = "floor"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def summary_of(validation: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    """``name``'s whole-series numbers in a validation result; empty when there are none (a
    model file's validation is free-form JSON: a block of another shape counts as none)."""
    summary = validation.get("summary") if isinstance(validation, Mapping) else None
    part = summary.get(name) if isinstance(summary, Mapping) else None
    return part if isinstance(part, Mapping) else {}


def score_of(validation: Mapping[str, Any] | None, name: str = "model") -> Score | None:
    """``name``'s score in a validation result (kit.fit.validate), None when not scored."""
    part = summary_of(validation, name)
    if not part or validation is None:
        return None
    value = _num(part.get("crps_over_floor"))
    if value is None:
        return None
    version = _num(validation.get("version")) or 1.0
    reference = "floor" if version >= FLOOR_VERSION else "lookup"
    return Score(value, _num(part.get("crps_over_floor_se")), reference)


def format_score(score: Score | None) -> str:
    """``1.02 ± 0.01``; ``0.58 (vs lookup)`` for an old validation; ``–`` when not scored."""
    if score is None or not math.isfinite(score.value):
        return "–"
    text = f"{score.value:.2f}" if score.value < 100 else f"{score.value:,.0f}"
    if score.se is not None and score.reference == "floor":
        text += f" ± {score.se:.2f}" if score.se >= 0.005 else " ± <0.01"
    if score.reference != "floor":
        text += " (vs lookup)"
    return text


def explanation(score: Score | None) -> str | None:
    """Why a score below :data:`EXPLAIN_BELOW` is shown (None when it needs no reason)."""
    if score is None or score.value >= EXPLAIN_BELOW:
        return None
    if score.reference != "floor":
        return ("old validation: scored against the training samples' per-size lookup table, "
                "which a model beats where sizes have few samples; run 'pt2pt validate' for "
                "the floor")
    se = score.se or 0.0
    if score.value + 2.0 * se >= 1.0:
        return f"below 1 by sampling error (standard error {se:.2f}): few held-out samples"
    return ("below the floor by more than its sampling error: sizes pooled in one cell differ "
            "(the floor then counts their differences); treat the score as about 1")
