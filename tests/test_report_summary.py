"""The report's summary row and the verdict sentence (kit.figures), on known truth."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kit.figures import verdict as verdict_module
from kit.figures.baseline import best_baseline_name
from kit.figures.series import SeriesFigures
from kit.figures.text import format_ratio, format_size
from kit.fit import synth
from kit.fit.validate import validate_into
from kit.model import RegimeModel
from kit.outputs.report.summary import TERMS, summarise


@pytest.fixture(scope="module")
def fitted_and_validation() -> tuple[RegimeModel, dict[str, Any]]:
    size, time = synth.sample(synth.ethernet_like(), 3000, grid=40, seed=5)
    model = RegimeModel(random_state=0).fit(size, time)
    return model, validate_into(model, size, time, random_state=0)


def test_summary_of_a_known_series(
        fitted_and_validation: tuple[RegimeModel, dict[str, Any]]) -> None:
    fitted, validation = fitted_and_validation
    row_of_summary = {"size_min": 1, "size_max": 4 << 20, "latency_s": 11e-6,
                      "latency_s_lo": 10.9e-6, "latency_s_hi": 11.1e-6,
                      "bandwidth_Bps": 1.1e8, "bandwidth_Bps_lo": 1.09e8,
                      "bandwidth_Bps_hi": 1.11e8}
    figures = SeriesFigures.of(row_of_summary, validation)
    row = summarise(fitted, figures, title="t", slug="t", n_samples=3000)
    # Latency and bandwidth are the figures' text, word for word (one number everywhere).
    assert row.latency == figures.latency_text() == "11 µs [10.9–11.1]"
    assert row.bandwidth == figures.bandwidth_text() == "110 MB/s [109–111]"
    assert row.latency_size == "<= 64 B" and row.bandwidth_size == "2 MiB-4 MiB"
    assert "median" in TERMS["latency"] and "top octave" in TERMS["bandwidth"]
    # The 64 KiB jump is among the switch sizes (within a factor 1.5).
    switches = [float(b) for b in fitted.breakpoints_]
    assert any(65536 / 1.5 < b < 65536 * 1.5 for b in switches), switches
    assert "KiB" in row.switches
    # The score with its standard error, the best honest baseline named, a verdict.
    assert row.score == figures.score_text() and "±" in row.score
    best = best_baseline_name(validation)
    assert best in ("hockney_robust", "peak")
    assert row.baselines == figures.best_text()
    assert "textbook" not in row.verdict and "Hockney" in TERMS["textbook line"]
    assert row.verdict == figures.verdict and row.n_samples == "3,000"


def _validation(model: float, best: float, *, coverage: float = 0.9, diff_se: float = 0.0,
                version: int = 2) -> dict[str, Any]:
    return {"version": version, "summary": {
        "model": {"crps": model, "crps_over_floor": model, "crps_over_floor_se": 0.01,
                  "coverage": coverage},
        "hockney_robust": {"crps": best, "crps_over_floor": best, "vs_model_se": diff_se},
        "peak": {"crps": best * 3, "crps_over_floor": best * 3},
        "hockney": {"crps": 0.5, "crps_over_floor": 0.5}}}  # the textbook line: never named


def test_verdict_sentences() -> None:
    verdict = verdict_module.verdict
    assert verdict(_validation(1.0, 8.0)).startswith("at the floor; the regimes beat")
    tie = verdict(_validation(1.0, 1.03))
    assert "the regimes add nothing here: robust Hockney scores 1.03" in tie
    assert "add nothing" in verdict(_validation(1.0, 1.3, diff_se=0.2))  # within 2 SE
    assert "beat" in verdict(_validation(1.0, 1.3, diff_se=0.1))
    assert "add nothing" in verdict(_validation(1.5, 0.98))  # the baseline beats the model
    assert "textbook" not in verdict(_validation(1.0, 8.0))  # 0.5 but never in a verdict
    assert "too narrow" in verdict(_validation(1.0, 5.0, coverage=0.6))
    assert "over 2x the floor" in verdict(_validation(3.0, 30.0))
    assert "not validated" in verdict(None)
    assert "lookup" in verdict(_validation(0.5, 8.0, version=1))


def test_scores_below_the_floor_say_why() -> None:
    from kit.figures.score import Score, explanation, format_score

    assert explanation(Score(0.95, 0.01)) is None
    assert "sampling error" in str(explanation(Score(0.85, 0.1)))
    assert "more than its sampling error" in str(explanation(Score(0.5, 0.01)))
    assert "lookup" in str(explanation(Score(0.58, None, "lookup")))
    assert format_score(Score(1.0234, 0.0123)) == "1.02 ± 0.01"
    assert format_score(Score(0.58, None, "lookup")) == "0.58 (vs lookup)"
    assert format_score(Score(math.nan)) == "–"


def test_formats() -> None:
    assert format_ratio(19822.79) == "19,823" and format_ratio(1.234) == "1.23"
    assert format_size(65536) == "64 KiB" and format_size(1047966) == "1023 KiB"
    assert format_size(64) == "64 B"
