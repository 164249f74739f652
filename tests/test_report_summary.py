"""The report's summary row: numbers read off the model, with their definitions, on known truth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from kit.fit import synth
from kit.fit.validate import validate_into
from kit.model import RegimeModel
from kit.outputs.report.summary import (
    LARGE,
    SMALL,
    TERMS,
    _verdict,
    format_ratio,
    format_size,
    summarise,
)


@pytest.fixture(scope="module")
def fitted_and_validation() -> tuple[RegimeModel, dict[str, Any]]:
    size, time = synth.sample(synth.ethernet_like(), 3000, grid=40, seed=5)
    model = RegimeModel(random_state=0).fit(size, time)
    return model, validate_into(model, size, time, random_state=0)


def test_summary_of_a_known_series(
        fitted_and_validation: tuple[RegimeModel, dict[str, Any]]) -> None:
    fitted, validation = fitted_and_validation
    row = summarise(fitted, title="t", slug="t", n_samples=3000, validation=validation)
    v = row.values
    # Latency: the model's median at 64 B; the truth there is the 11 µs constant regime.
    assert v["latency_size"] == SMALL and 9e-6 < v["latency_s"] < 13e-6
    # Bandwidth: LARGE (or the top size) over the median time there, the definition in TERMS.
    top = float(fitted.regimes_[-1].size_max)
    assert v["bandwidth_size"] == min(LARGE, top)
    median = float(fitted.predict(np.array([v["bandwidth_size"]]))[0])
    assert v["bandwidth_Bps"] == pytest.approx(v["bandwidth_size"] / median)
    assert "median one-way time" in TERMS["bandwidth"] and "MB/s" in TERMS["bandwidth"]
    # The 64 KiB jump is among the switch sizes (within a factor 1.5).
    switches = [float(b) for b in fitted.breakpoints_]
    assert any(65536 / 1.5 < b < 65536 * 1.5 for b in switches), switches
    assert "KiB" in row.switches
    assert "[" in row.latency and "[" in row.bandwidth  # the p05..p95 interval
    assert math.isfinite(v["score"]) and "Hockney" in row.baselines
    assert row.verdict  # one sentence, never empty
    assert row.n_samples == "3,000"


def test_verdict_and_formats() -> None:
    assert _verdict(1.0, 8.0, 0.9).startswith("good") and "8.00× closer than Hockney" in \
        _verdict(1.0, 8.0, 0.9)
    assert "poor" in _verdict(3.0, 3.1, 0.9) and "no better than Hockney" in _verdict(3.0, 3.1, 0.9)
    assert "peak baseline scores as well" in _verdict(0.6, 100.0, 0.9, peak=0.55)
    assert "too narrow" in _verdict(1.0, 5.0, 0.6)
    assert "not validated" in _verdict(math.nan, math.nan, math.nan)
    assert format_ratio(19822.79) == "19,823" and format_ratio(1.234) == "1.23"
    assert format_size(65536) == "64 KiB" and format_size(1047966) == "1023 KiB"
    assert format_size(64) == "64 B"
