"""The explorer's own drawing pieces: braille canvas, axis labels, per-bin summary."""

from __future__ import annotations

import numpy as np
import pytest

from tui.data import BAND_QUANTILES, Samples, SeriesKey, bin_samples
from tui.widgets.canvas import BrailleCanvas
from tui.widgets.plot import format_bytes, format_seconds


def test_canvas_sets_the_braille_dot_of_each_point() -> None:
    canvas = BrailleCanvas(2, 1)
    canvas.points(np.array([0, 1, 3, -1, 4]), np.array([0, 3, 1, 0, 0]), "red")
    row = canvas.rows()[0].plain
    # dot (0,0) is U+2801, dot (1,3) U+2880: same cell; dot (1,1) of cell 1 is U+2810.
    assert row == chr(0x2800 + 0x01 + 0x80) + chr(0x2800 + 0x10)


def test_canvas_polyline_is_connected_and_later_layers_win_the_colour() -> None:
    canvas = BrailleCanvas(10, 2)
    canvas.polyline(np.array([0.0, 19.0]), np.array([7.0, 0.0]), "blue")
    assert all(int(canvas.bits[:, c].sum()) > 0 for c in range(10))  # no gap in the line
    canvas.points(np.array([0]), np.array([7]), "red")
    spans = canvas.rows()[1].spans
    assert str(spans[0].style) == "red" and spans[0].start == 0


@pytest.mark.parametrize(("value", "text"), [(0, "0"), (1023, "1023"), (1024, "1K"),
                                             (1536, "1.5K"), (1048575, "1M"), (65536, "64K")])
def test_sizes_read_in_binary_units(value: float, text: str) -> None:
    assert format_bytes(value) == text


def test_durations_get_an_si_prefix() -> None:
    assert [format_seconds(v) for v in (2.5e-6, 3e-3, 1.5, 4e-8)] == ["2.5µs", "3ms", "1.5s",
                                                                     "40ns"]


def test_bin_summary_keeps_the_tails_and_bounds_the_points() -> None:
    rng = np.random.default_rng(3)
    size = np.repeat([8.0, 8192.0], 5000)
    time = np.where(size < 100, 1e-5, 1e-4) * rng.lognormal(0, 0.3, size.size)
    time[:60] = 1.0  # 1.2 % huge outliers at 8 B: the 1 % band must show them
    samples = Samples(SeriesKey(("c", "t", "x", "pingpong", "raw")), size, time)
    binned = bin_samples(samples, per_bin=100)
    assert list(binned.count) == [5000, 5000]
    assert binned.points_size.size <= 2 * 100 + 2
    small = time[size < 100]
    assert binned.quantiles[0.99][0] == pytest.approx(1.0)
    # Bands come from every sample of the bin, not from the drawn subsample.
    for q in BAND_QUANTILES:
        assert binned.quantiles[q][0] == pytest.approx(np.quantile(small, q), rel=1e-9)
    again = bin_samples(samples, per_bin=100)
    np.testing.assert_array_equal(again.points_time, binned.points_time)  # deterministic


def test_regime_views_carry_what_the_panel_shows() -> None:
    from kit.model import Component, RegimeModel
    from tui.data import regimes

    rng = np.random.default_rng(5)
    size = np.exp(rng.uniform(0, np.log(1 << 20), 6000))
    time = np.where(size < 4096, 2e-5, 1e-5 + size * 1e-9) * rng.lognormal(0, 0.05, size.size)
    model = RegimeModel(breakpoints=[4096.0], random_state=0).fit(size, time)
    views = regimes(model)
    assert [v.index for v in views] == [0, 1]
    assert views[0].size_max == pytest.approx(4096.0) == views[1].size_min
    assert views[0].family in ("constant", "linear", "power") and views[0].params
    assert views[0].noise_family == model.regimes_[0].noise.family
    assert views[0].bands == []
    # A two-band regime lists its bands with their shares.
    noise = model.regimes_[0].noise
    model.regimes_[0].components = [Component("constant", {"a": 2e-5}, noise, 0.7),
                                    Component("constant", {"a": 8e-5}, noise, 0.3)]
    assert regimes(model)[0].bands == [("constant", 0.7), ("constant", 0.3)]
