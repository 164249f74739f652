"""One bandwidth definition (kit.figures.bandwidth), and every figure shown says which it is."""

from __future__ import annotations

import numpy as np
import pytest

from kit.figures.bandwidth import (
    DEFINITION,
    TOP_OCTAVE_LABEL,
    asymptotic_bandwidth,
    effective_bandwidth,
    effective_bandwidth_at,
    label_at,
)
from kit.model import RegimeModel


@pytest.fixture(scope="module")
def line_model() -> RegimeModel:
    """t = 10 µs + s / 1 GB/s with 2 % noise: one linear regime."""
    rng = np.random.default_rng(0)
    size = np.exp(rng.uniform(np.log(64 * 1024), np.log(8 << 20), 1500))
    time = (1e-5 + size / 1e9) * rng.lognormal(0.0, 0.02, size.size)
    return RegimeModel(max_regimes=1, mixture=False, overlap=False).fit(size, time)


def test_effective_and_asymptotic(line_model: RegimeModel) -> None:
    s = float(4 << 20)
    assert effective_bandwidth(s, 1e-5 + s / 1e9) == pytest.approx(s / (1e-5 + s / 1e9))
    assert effective_bandwidth(1.0, 0.0) != effective_bandwidth(1.0, 0.0)  # NaN
    # The model's median at S, within the noise of the fit.
    assert effective_bandwidth_at(line_model, s) == pytest.approx(s / (1e-5 + s / 1e9), rel=0.03)
    # The slope of the last regime gives the large-message limit, above any effective figure.
    assert asymptotic_bandwidth(line_model) == pytest.approx(1e9, rel=0.05)
    assert asymptotic_bandwidth(line_model) > effective_bandwidth_at(line_model, s)


def test_labels_name_the_size() -> None:
    assert label_at(4 << 20) == "eff. bw @4 MiB"
    assert label_at(512) == "eff. bw @512 B"
    assert "S / median one-way time at S" in DEFINITION
    assert "top octave" in TOP_OCTAVE_LABEL
