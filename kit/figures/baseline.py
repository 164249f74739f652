"""The baselines a model is judged against: their names, and which is the best honest one.

Honest baselines are what a user would otherwise use: robust Hockney (t = a + s / b fitted
by relative least squares to per-size medians, kit.fit.baselines) and peak (best latency +
size / best bandwidth). The least-squares Hockney line on per-size means is the *textbook
line*: shown in tables, as a reference, never in a verdict (a line pulled by stalls can miss
the median by orders of magnitude, and beating it says nothing). The lookup table (each
size's training samples as its distribution) is a reference too, not a baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kit.figures.score import Score, score_of, summary_of

#: The baselines a verdict compares with, in kit.fit.baselines' names.
HONEST: tuple[str, ...] = ("hockney_robust", "peak")
TEXTBOOK = "hockney"
LOOKUP = "lookup"

#: Short names (a table cell, a verdict).
NAMES: dict[str, str] = {
    "model": "regime model",
    "hockney_robust": "robust Hockney",
    "peak": "peak",
    "hockney": "textbook line",
    "hockney_raw": "raw Hockney",
    "lookup": "lookup table",
    "floor": "floor",
    "truth": "truth",
}

#: One line each: what the row is.
LABELS: dict[str, str] = {
    "model": "regime model",
    "hockney_robust": "robust Hockney: relative least squares on per-size medians",
    "peak": "peak: best latency + size / best bandwidth",
    "hockney": "textbook line: Hockney by least squares on per-size means (a reference, "
               "never in a verdict)",
    "hockney_raw": "Hockney, least squares on raw samples (strawman)",
    "lookup": "lookup table: each size's training samples (a reference, not a floor)",
    "floor": "floor: the held-out samples' own expected CRPS",
}


def name(key: str) -> str:
    return NAMES.get(key, key)


def label(key: str) -> str:
    return LABELS.get(key, key)


def best_baseline_name(validation: Mapping[str, Any] | None) -> str | None:
    """The honest baseline with the lowest held-out CRPS (None when none was scored)."""
    scored = [(float(part["crps"]), k) for k in HONEST
              if isinstance((part := summary_of(validation, k)).get("crps"), int | float)]
    return min(scored)[1] if scored else None


def best_baseline(validation: Mapping[str, Any] | None) -> tuple[str, Score] | None:
    """The best honest baseline's key and score."""
    key = best_baseline_name(validation)
    score = score_of(validation, key) if key else None
    return (key, score) if key and score else None
