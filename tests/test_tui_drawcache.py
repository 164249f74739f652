"""The series plot from stored drawing summaries (tui.drawcache): used, and invalidated.

The second open of a series draws from the summaries the first open stored beside the
dataset, without binning the samples again; an ingest that adds data changes the dataset's
stamp and the summaries are computed anew; a damaged file is ignored.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from textual.widgets import Static

from kit.data.ingest import ingest
from tests.test_tui_pilot import SIZE, settle, sync, synthetic_csv
from tui import drawcache, loading, session
from tui.app import ExplorerApp
from tui.binning import BAND_QUANTILES, Binned, draw_summaries
from tui.loading import load_samples, series_rows
from tui.screens.series import SeriesScreen
from tui.widgets.plot import Plot


def _dataset(root: Path, n: int = 3000) -> Path:
    dataset = root / "dataset"
    raw = synthetic_csv(root / "pingpong-tcp.csv", 1.0, n, 1)
    assert ingest([raw], dataset, campaign="synth", transport="tcp").files_failed == []
    return dataset


def _equal(a: Binned, b: Binned) -> bool:
    return (all(np.array_equal(getattr(a, f), getattr(b, f))
                for f in ("size", "count", "points_size", "points_time"))
            and all(np.array_equal(a.quantiles[q], b.quantiles[q]) for q in BAND_QUANTILES))


def test_stored_summaries_round_trip_and_follow_the_dataset(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    key = series_rows(dataset)[0].key
    stamp = drawcache.stamp(dataset)
    assert drawcache.load(dataset, key, stamp) is None  # nothing stored yet
    samples = load_samples(dataset, key)
    raw, median = draw_summaries(samples)
    assert drawcache.store(dataset, key, stamp, raw, median, len(samples))
    got = drawcache.load(dataset, key, stamp)
    assert got is not None and got.n_samples == len(samples)
    assert _equal(got.raw, raw) and _equal(got.median, median)
    assert (got.raw is got.median) == (raw is median)
    # another run of the same series: a new stamp, the stored summaries are stale
    more = synthetic_csv(tmp_path / "more-tcp.csv", 1.0, 500, 9)
    ingest([more], dataset, campaign="synth", transport="tcp")
    new = drawcache.stamp(dataset)
    assert new != stamp and drawcache.load(dataset, key, new) is None
    # a damaged file is not shown
    drawcache.path_for(dataset, key).write_bytes(b"not an npz")
    assert drawcache.load(dataset, key, stamp) is None


def test_a_read_only_dataset_opens_without_a_cache(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = _dataset(tmp_path, 500)
    key = series_rows(dataset)[0].key
    samples = load_samples(dataset, key)
    raw, median = draw_summaries(samples)

    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "read-only")

    monkeypatch.setattr(Path, "mkdir", refuse)
    assert not drawcache.store(dataset, key, drawcache.stamp(dataset), raw, median, len(samples))
    assert not (dataset / drawcache.CACHE_DIR).exists()


@sync
async def test_the_second_open_draws_from_the_stored_summaries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = _dataset(tmp_path)
    calls: list[int] = []
    original = session.draw_summaries

    def counting(samples: object) -> tuple[Binned, Binned]:
        calls.append(1)
        return original(samples)  # type: ignore[arg-type]

    monkeypatch.setattr(session, "draw_summaries", counting)
    specs = []
    for _ in range(2):
        app = ExplorerApp(dataset)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, SeriesScreen) and screen.state is not None
            assert screen.state.model is not None
            specs.append(len(screen.query_one(Plot).spec.layers))
    assert calls == [1]  # binned once, on the first open; the second open read the cache
    assert (dataset / drawcache.CACHE_DIR).is_dir() and specs[0] == specs[1] > 0


def test_a_preview_is_every_kth_row_of_the_series_and_is_not_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without stored summaries a large series is previewed from every k-th row of its
    query (nothing stored); a small one gets no preview (its samples are read at once)."""
    from kit.data.dataset import series_frame

    dataset = _dataset(tmp_path)
    row = series_rows(dataset)[0]
    size, time, step = loading.preview_rows(dataset, row.key, row.n_samples, 700)
    frame = series_frame(dataset, row.key.as_dict())  # one run: file order is seq order
    assert step == row.n_samples // 700 > 1
    assert np.array_equal(size, frame["size"].to_numpy()[::step])
    assert np.array_equal(time, frame["time"].to_numpy()[::step])
    assert drawcache.first_plot(dataset, row.key, row.n_samples)[1] is None  # too small
    monkeypatch.setattr(drawcache, "PREVIEW_MIN_ROWS", 1000)
    stamp, got = drawcache.first_plot(dataset, row.key, row.n_samples)
    assert stamp == drawcache.stamp(dataset) and got is not None
    assert got.preview_step == 1 and got.n_samples == row.n_samples
    assert "preview" in got.describe()[0] and got.raw.count.sum() == row.n_samples
    assert not (dataset / drawcache.CACHE_DIR).exists()


@sync
async def test_the_first_open_of_a_large_series_draws_before_its_samples_are_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The preview is on screen, said to be one, while the samples are still being read;
    the exact summaries (the fit's rows) then replace it and are stored, not the preview."""
    dataset = _dataset(tmp_path)
    monkeypatch.setattr(drawcache, "PREVIEW_MIN_ROWS", 1000)
    release = threading.Event()
    original = loading.load_samples

    def gated(*args: object, **kwargs: object) -> object:
        assert release.wait(120), "the test never let the samples be read"
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loading, "load_samples", gated)
    app = ExplorerApp(dataset)
    try:
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(600):
                await pilot.pause(0.05)
                screen = app.screen
                if isinstance(screen, SeriesScreen) and screen.query(Plot) and \
                        screen.query_one(Plot).spec.layers:
                    break
            assert isinstance(screen, SeriesScreen) and screen.state is None
            assert "preview of" in str(screen.query_one("#model-status", Static).render())
            release.set()
            await settle(pilot)
            assert screen.state is not None and screen.state.model is not None
            samples = screen.state.samples
    finally:
        release.set()
    stored = drawcache.load(dataset, samples.key, drawcache.stamp(dataset))
    assert stored is not None and not stored.preview_step and stored.n_samples == len(samples)
    raw, median = draw_summaries(samples)
    assert _equal(stored.raw, raw) and _equal(stored.median, median)
