"""Terminal habits a new user brings to the explorer (issue 20), pressed as keys in a pilot.

``q`` quits where no text box has the focus, ``/`` starts the filter, ``ctrl+q`` quits from
anywhere, the footer names those keys, the export dialog shows its states by glyph and Enter
never toggles a box, exported files follow the umask, help titles are words, not class names.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import Input

from tests.test_tui_pilot import SIZE, build_synthetic_dataset, open_series, settle, sync
from tui.app import ExplorerApp
from tui.screens.browser import BrowserScreen
from tui.screens.common import HelpScreen
from tui.screens.export import ExportScreen, Tick
from tui.screens.series import SeriesScreen


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_synthetic_dataset(tmp_path_factory.mktemp("habits"), n=1500)


def footer_keys(app: ExplorerApp) -> dict[str, str]:
    """Key -> description of every binding the footer shows on the current screen."""
    return {key: b.description for key, (_node, b, enabled, _tip)
            in app.screen.active_bindings.items() if b.show and enabled}


@sync
async def test_q_quits_from_the_table_but_is_a_letter_in_the_filter(dataset: Path) -> None:
    app = ExplorerApp(dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        browser = app.screen
        assert isinstance(browser, BrowserScreen)
        flt = browser.query_one("#filter", Input)
        keys = footer_keys(app)
        assert keys.get("q") == "Quit" and keys.get("ctrl+q") == "Quit", keys
        assert keys.get("slash") == "Filter", keys

        await pilot.press("slash")
        assert browser.focused is flt
        await pilot.press("q")  # the user focused the filter: q is part of the query
        assert flt.value == "q" and app.is_running
        assert browser.shown == []  # no series has a q in it
        await pilot.press("escape")  # leaves and clears the filter
        assert flt.value == "" and browser.focused is not flt and len(browser.shown) == 2
        await pilot.press("t", "c")  # other letters still start the filter
        assert flt.value == "tc" and browser.focused is flt
        await pilot.press("escape", "q")
        await pilot.pause(0.1)
    assert not app.is_running


@sync
async def test_ctrl_q_quits_from_a_text_box_and_from_a_series(dataset: Path) -> None:
    app = ExplorerApp(dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", "x")
        await pilot.press("ctrl+q")
        await pilot.pause(0.1)
    assert not app.is_running

    app = ExplorerApp(dataset)
    async with app.run_test(size=SIZE) as pilot:
        await open_series(pilot, "shm")
        assert footer_keys(app).get("ctrl+q") == "Quit"
        await pilot.press("q")  # q on a sub-screen goes back, as in a pager
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SeriesScreen)
        await pilot.press("ctrl+q")
        await pilot.pause(0.1)
    assert not app.is_running


@sync
async def test_help_titles_are_words(dataset: Path) -> None:
    app = ExplorerApp(dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        assert help_screen._title == "Keys of the series list"
        assert "Screen" not in help_screen._title
        await pilot.press("escape")
        await open_series(pilot, "shm")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert app.screen._title == "Keys of the series view"


@sync
async def test_export_dialog_states_by_glyph_enter_saves_files_follow_umask(
        dataset: Path, tmp_path: Path) -> None:
    app = ExplorerApp(dataset)
    model_path = tmp_path / "shm.model.json"
    simgrid_dir = tmp_path / "simgrid"
    old = os.umask(0o027)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_series(pilot, "shm")
            await pilot.press("e")
            dialog = app.screen
            assert isinstance(dialog, ExportScreen)
            dialog.query_one("#model-path", Input).value = str(model_path)
            dialog.query_one("#simgrid-path", Input).value = str(simgrid_dir)
            box = dialog.query_one("#want-simgrid", Tick)
            ticked = box.render().plain
            box.focus()
            await pilot.press("space")  # space toggles: the glyph changes, not only the colour
            assert box.value is False
            unticked = box.render().plain
            assert Tick.ON in ticked and Tick.ON not in unticked, (ticked, unticked)
            assert dialog.query_one("#simgrid-path", Input).disabled
            await pilot.press("space")
            assert box.value is True
            await pilot.press("enter")  # Enter on a focused box saves; it does not toggle it
            await settle(pilot)
            assert box.value is True
            assert not isinstance(app.screen, ExportScreen)
    finally:
        os.umask(old)
    assert model_path.exists() and (simgrid_dir / "smpi-config.txt").exists()
    assert model_path.stat().st_mode & 0o777 == 0o640  # the umask's mode, not mkstemp's 0600
    assert (simgrid_dir / "smpi-config.txt").stat().st_mode & 0o777 == 0o640
