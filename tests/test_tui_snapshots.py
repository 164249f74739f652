"""Snapshot tests of every screen at a fixed terminal size (pytest-textual-snapshot).

Two datasets: the small synthetic one of the pilot tests and the Grid'5000 graphene 1 GbE
calibration run from ../shared/reference-data, both built with kit.data.ingest. Fits use a fixed
seed and the UI shows no clock or absolute path, so the pictures are reproducible.
Update after an intended change with ``pytest tests/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from kit.data.ingest import ingest
from tests.test_tui_pilot import build_synthetic_dataset, settle
from tui.app import ExplorerApp

TERMINAL = (120, 36)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_synthetic_dataset(tmp_path_factory.mktemp("snap"))


@pytest.fixture(scope="module")
def graphene(refdata_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dataset = tmp_path_factory.mktemp("snapref") / "graphene"
    report = ingest([refdata_dir / "platform-calibration" / "graphene_eth_example"], dataset)
    assert report.files_failed == []
    return dataset


def keys(*presses: str) -> Callable[[Pilot], Awaitable[None]]:
    """Settle, then press each key group and settle again (fits finish before the picture)."""

    async def run(pilot: Pilot) -> None:
        await settle(pilot)
        for press in presses:
            await pilot.press(*press.split())
            await settle(pilot)
        # On a loaded machine the footer can still be redrawing after a focus change when
        # the workers are done: one more quiet round before the picture.
        await pilot.pause(0.5)
        await settle(pilot)

    return run


SYNTH_SCREENS = {
    "browser": (),
    "series_raw": ("t c p enter",),
    "series_median_selected": ("t c p enter", "m right"),
    "noise": ("t c p enter", "n"),
    "compare": ("space down space ctrl+g",),
    "help": ("t c p enter", "question_mark"),
    "export": ("s h m enter", "e"),
}


@pytest.mark.parametrize("screen", list(SYNTH_SCREENS))
def test_synthetic_screens(screen: str, synth: Path, snap_compare: Callable[..., bool]) -> None:
    assert snap_compare(ExplorerApp(synth), terminal_size=TERMINAL,
                        run_before=keys(*SYNTH_SCREENS[screen]))


REF_SCREENS = {
    "browser": (),
    "series": ("p i n g enter",),
    "noise": ("p i n g enter", "n"),
}


@pytest.mark.parametrize("screen", list(REF_SCREENS))
def test_reference_data_screens(screen: str, graphene: Path,
                                snap_compare: Callable[..., bool]) -> None:
    assert snap_compare(ExplorerApp(graphene), terminal_size=TERMINAL,
                        run_before=keys(*REF_SCREENS[screen]))


@pytest.fixture(scope="module")
def synth_models(synth: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model for the tcp series only, fitted and saved as `pt2pt fit`/`pt2pt demo` do."""
    from kit.fit.fitting import FitOptions, fit_series
    from kit.model.io import write_model

    out = tmp_path_factory.mktemp("snapmodels")
    opts = FitOptions(breakpoints=(3000.0,), validate=False, intervals=False)
    write_model(fit_series(synth, {"transport": "tcp"}, opts).fitted,
                out / "tcp-pingpong-csv.json")
    return out


MODEL_SCREENS = {
    "browser": (),
    "series_loaded": ("t c p enter",),
}


@pytest.mark.parametrize("screen", list(MODEL_SCREENS))
def test_screens_with_a_models_directory(screen: str, synth: Path, synth_models: Path,
                                         snap_compare: Callable[..., bool]) -> None:
    """`pt2pt tui DATASET --models DIR`: the fitted column and a loaded (not refitted) model."""
    assert snap_compare(ExplorerApp(synth, models=[synth_models]), terminal_size=TERMINAL,
                        run_before=keys(*MODEL_SCREENS[screen]))
