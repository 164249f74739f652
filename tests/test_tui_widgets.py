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


def _log_uniform(n: int, seed: int, top: float = 4 * 2**20) -> Samples:
    rng = np.random.default_rng(seed)
    size = np.floor(np.exp(rng.uniform(0.0, np.log(top), n)))
    time = (2e-5 + size * 1e-9) * rng.lognormal(0.0, 0.3, n)
    return Samples(SeriesKey(("c", "probe", "tcp", "pingpong", "raw")), size, time)


@pytest.mark.parametrize("n", [500, 4000])
def test_sparse_log_uniform_bins_hold_enough_samples_for_smooth_bands(n: int) -> None:
    from tui.data import min_bin_count

    samples = _log_uniform(n, seed=n)
    assert len(np.unique(samples.size)) > n // 2  # few samples per distinct size
    binned = bin_samples(samples)
    wanted = min_bin_count(n)
    assert wanted >= 30
    assert binned.count.min() >= wanted and binned.count.sum() == n
    assert len(binned.size) >= 5  # still a curve, not one blob
    assert np.all(np.diff(binned.size) > 0)  # bins in size order
    bands = np.vstack([binned.quantiles[q] for q in BAND_QUANTILES])
    assert np.all(np.diff(bands, axis=0) >= 0)  # p01 <= p05 <= ... <= p99 in every bin
    assert binned.points_size.size == n  # small bins: every sample is drawn
    # Smooth bands: relative to the true curve, the 1 % and 99 % bands move by less than
    # 60 % from one bin to the next (quarter-octave bins of a few samples jump by 2x).
    for q in (0.01, 0.99):
        rel = np.log(binned.quantiles[q] / (2e-5 + binned.size * 1e-9))
        assert np.exp(np.abs(np.diff(rel)).max()) < 1.6, q
    coarse = bin_samples(samples, min_count=2)  # about the old per-quarter-octave bins
    rel = np.log(coarse.quantiles[0.99] / (2e-5 + coarse.size * 1e-9))
    assert np.exp(np.abs(np.diff(rel)).max()) > 1.6
    explicit = bin_samples(samples, min_count=80)
    assert explicit.count.min() >= 80


def test_grid_series_keep_their_exact_sizes() -> None:
    rng = np.random.default_rng(1)
    grid = 2.0 ** np.arange(0, 23)  # OSU-style powers of two, 200 samples each
    size = np.repeat(grid, 200)[rng.permutation(grid.size * 200)]
    time = (2e-5 + size * 1e-9) * rng.lognormal(0.0, 0.2, size.size)
    binned = bin_samples(Samples(SeriesKey(("c", "osu", "tcp", "pingpong", "raw")), size, time))
    np.testing.assert_array_equal(binned.size, grid)
    assert list(binned.count) == [200] * grid.size
    # A finer grid (several sizes inside one quarter octave) is not merged either.
    fine = np.repeat([1000.0, 1024.0, 1100.0], 300)
    binned = bin_samples(Samples(SeriesKey(("c", "t", "x", "pingpong", "raw")), fine,
                                 np.full(fine.size, 1e-5)))
    np.testing.assert_array_equal(binned.size, [1000.0, 1024.0, 1100.0])


def test_sparse_bins_never_merge_across_an_empty_stretch() -> None:
    rng = np.random.default_rng(2)
    size = np.concatenate([rng.uniform(8, 16, 10), rng.uniform(2**20, 2**21, 500)])
    time = np.where(size < 100, 1e-6, 1e-3)
    binned = bin_samples(Samples(SeriesKey(("c", "t", "x", "pingpong", "raw")), size, time),
                         min_count=50)
    assert binned.count[0] == 10 and binned.size[0] < 16  # the small island stays alone
    assert binned.quantiles[0.99][0] == pytest.approx(1e-6)
    assert binned.count[1:].min() >= 50


def test_only_the_raw_view_merges_bins_and_dense_series_are_summarised_once() -> None:
    from tui.data import draw_summaries, min_bin_count

    sparse = _log_uniform(500, seed=9)
    raw, median = draw_summaries(sparse)
    assert raw.count.min() >= min_bin_count(500)
    assert len(median.size) > 2 * len(raw.size)  # medians keep quarter-octave bins: sharp steps
    assert median.count.sum() == raw.count.sum() == 500
    dense = _log_uniform(200_000, seed=10, top=2**16)
    raw, median = draw_summaries(dense)
    assert raw is median  # every quarter octave already holds enough samples
