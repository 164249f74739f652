"""Each regime of the series view shows its own numbers (issue 59).

The side panel read the bootstrap intervals of regime ``index - 1`` on a 0-based index:
regime 0 of graphene showed a = 371 µs and 115 MB/s, regime 3's numbers (and the last
regime showed none). Here a model saved with its intervals is opened, every regime is
selected in turn, and the panel must show that regime's own parameter intervals and the
breakpoints around it, and no other regime's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Static

from kit.model.io import read_model
from kit.model.uncertainty import format_interval
from tests.test_tui_pilot import build_synthetic_dataset, open_series, settle
from tui.app import ExplorerApp
from tui.widgets.plot import format_bytes


@pytest.fixture(scope="module")
def saved_with_intervals(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from kit.fit.fitting import FitOptions, fit_series
    from kit.model.io import write_model

    root = tmp_path_factory.mktemp("regimes")
    dataset = build_synthetic_dataset(root)
    models = root / "models"
    models.mkdir()
    opts = FitOptions(breakpoints=(1024.0, 65536.0), validate=False)
    fitted = fit_series(dataset, {"transport": "tcp"}, opts).fitted
    assert len(fitted.intervals["regimes"]) == 3
    write_model(fitted, models / "tcp-pingpong-csv.json")
    return dataset, models


def _shown(text: str, interval: dict) -> bool:
    return format_interval(interval) in text


def test_every_regime_shows_its_own_intervals(saved_with_intervals: tuple[Path, Path]) -> None:
    dataset, models = saved_with_intervals
    fitted = read_model(next(models.glob("*.json")))
    intervals = fitted.intervals
    n = len(fitted.model.regimes_)

    async def run() -> list[str]:
        app = ExplorerApp(dataset, models=[models])
        async with app.run_test(size=(160, 60)) as pilot:
            screen = await open_series(pilot, "tcp")
            panels = []
            for k in range(n):
                assert screen.sel_regime == k
                panels.append(str(screen.query_one("#regime-detail", Static).render()))
                await pilot.press("down")
                await settle(pilot)
            return panels

    panels = asyncio.run(run())
    bps = intervals["breakpoints"]
    for k, panel in enumerate(panels):
        assert f"regime {k} " in panel
        own = intervals["regimes"][k]["params"]
        assert own and all(_shown(panel, iv) for iv in own.values()), (k, panel)
        for other in range(n):
            if other != k:  # another regime's intervals are not on this panel
                theirs = intervals["regimes"][other]["params"]
                assert not any(_shown(panel, iv) for iv in theirs.values()), (k, other)
        # the breakpoints that bound regime k, and only those
        around = {b for b in (k - 1, k) if 0 <= b < len(bps)}
        for b, iv in enumerate(bps):
            line = f"breakpoint {b + 1}"
            assert (line in panel) == (b in around), (k, b, panel)
            if b in around:
                assert format_interval(iv, format_bytes) in panel
