"""Every command-palette entry opens without crashing, on every screen that has one.

The screens used to declare their extra help rows as ``HELP`` (a dict), which shadows
Textual's ``Screen.HELP`` (markdown for the help panel): ctrl+p → "keys" then crashed the
explorer. The rows are ``KEY_HELP`` now; this drives the real palette for each entry.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot

from kit.data.ingest import ingest
from tests.test_ingest_probe import META, write_run
from tests.test_tui_pilot import SIZE, open_series, settle, sync, synthetic_dataset  # noqa: F401
from tui.app import ExplorerApp
from tui.screens.browser import BrowserScreen

#: "Quit" ends the app (its own tests cover it); every other entry must open and close.
SKIPPED = ("Quit",)


async def _run_every_command(pilot: Pilot) -> list[str]:
    app = pilot.app
    home = app.screen
    titles = [c.title for c in app.get_system_commands(home) if c.title not in SKIPPED]
    assert "Keys" in titles
    for title in titles:
        await pilot.press("ctrl+p")
        await settle(pilot)
        assert isinstance(app.screen, CommandPalette), title
        await pilot.press(*title.lower(), "enter")
        await settle(pilot)
        assert app.is_running, f"the explorer stopped after the {title!r} command"
        # Close whatever the command opened (theme picker, help panel) and go home.
        for _ in range(3):
            if app.screen is home:
                break
            await pilot.press("escape")
            await settle(pilot)
        assert app.screen is home, f"{title!r} left {app.screen!r} open"
        if title == "Keys":
            assert home.query("HelpPanel"), "the keys panel did not open"
            await pilot.press("ctrl+p")  # toggles it closed again
            await settle(pilot)
            await pilot.press(*"keys", "enter")
            await settle(pilot)
    return titles


@sync
async def test_every_palette_command_on_every_screen(synthetic_dataset: Path,  # noqa: F811
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # "Screenshot" writes its SVG into the working folder
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        titles = await _run_every_command(pilot)
        assert {"Keys", "Theme"} <= set(titles)
        await open_series(pilot, "tcp")
        await _run_every_command(pilot)


@sync
async def test_browser_shows_placement_when_known(tmp_path: Path) -> None:
    """Two runs of one transport, inside a node and across nodes: two rows, placement shown."""
    rng = np.random.default_rng(0)
    for name, hosts in (("intra", ["n1", "n1"]), ("inter", ["n1", "n2"])):
        sizes = np.exp(rng.uniform(0, 12, 300)).astype(int)
        lines = [f"{i},pingpong,{s},1,{4e-5 + s * 1e-9:.9e},,0" for i, s in enumerate(sizes)]
        run = write_run(tmp_path / name, "run", lines, {**META, "hosts": hosts})
        ingest([run], tmp_path / "ds", campaign="c", transport="tcp")
    app = ExplorerApp(tmp_path / "ds")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        browser = app.screen
        assert isinstance(browser, BrowserScreen)
        assert "placement" in browser._columns
        assert sorted(r.key.where for r in browser.shown) == ["inter-node n1:n2",
                                                               "intra-node n1:n1"]
        await pilot.press(*"inter")
        assert [r.key.get("host_pair") for r in browser.shown] == ["n1:n2"]


@sync
async def test_an_aggregate_series_says_so(tmp_path: Path, fixtures_dir: Path) -> None:
    """OSU prints a mean per size: the TUI fits it (as `pt2pt fit --aggregates` does) and the
    side panel says the points are the tool's statistic, with the messages' noise unknown."""
    ingest([fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt"], tmp_path / "ds", campaign="osu")
    app = ExplorerApp(tmp_path / "ds")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        if isinstance(screen, BrowserScreen):  # several statistics: open the mean
            screen = await open_series(pilot, "mean")
        detail = str(screen.query_one("#regime-detail").render())
        assert "aggregates: the tool's mean per size" in detail
        assert "unknown" in detail
