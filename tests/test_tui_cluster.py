"""The TUI's cluster view: the pair matrix of a multi-pair campaign, flags marked, a cell
opens its pair's series (tui/clusterview.py + tui/screens/cluster.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.fitting import fit_arrays
from kit.fit.synthcluster import Effect, SynthCluster, draw, write_probe_runs
from tests.test_tui_pilot import settle, sync
from tui import clusterview
from tui.app import ExplorerApp
from tui.screens.browser import BrowserScreen
from tui.screens.cluster import ClusterScreen
from tui.screens.series import SeriesScreen

SIZE = (150, 44)


@pytest.fixture(scope="module")
def cluster_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six nodes; n3 adds half the typical latency to every pair, link n1-n5 loses 40 %."""
    root = tmp_path_factory.mktemp("tui-cluster")
    s, t = synth.sample(synth.ethernet_like(), 15000, 1, 4 * 2**20, seed=1)
    population = fit_arrays({"stat": "raw"}, s, t)
    cluster = SynthCluster(n_nodes=6, nodes_slow={2: Effect(latency=0.5)},
                           links_slow={(0, 4): Effect(bandwidth=0.4)}, samples=300)
    rows, _ = draw(cluster, population, seed=2)
    report = ingest(write_probe_runs(rows, root / "raw"), root / "ds", campaign="allpairs",
                    transport="tcp")
    assert report.ok
    return root / "ds"


def test_colour_scale_runs_from_blue_through_white_to_red() -> None:
    assert clusterview.colour(0.0) == "#f7f7f7"
    assert clusterview.colour(0.5) == clusterview.colour(2.0) == "#b2182b"
    assert clusterview.colour(-0.5) == "#2166ac"
    assert clusterview.colour(float("nan")) == "#555555"


@sync
async def test_cluster_view_marks_flags_and_opens_a_pair(cluster_dataset: Path,
                                                         tmp_path: Path) -> None:
    app = ExplorerApp(cluster_dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        await pilot.press("ctrl+k")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ClusterScreen) and screen.state is not None
        table = screen.query_one("#matrix", DataTable)
        assert table.row_count == 6
        # latency first: n3's row is marked as a flagged node
        names = [str(table.get_cell_at((i, 0))) for i in range(6)]
        assert names[2] == "n3 !" and all("!" not in n for k, n in enumerate(names) if k != 2)
        # the bandwidth matrix marks the slow link in both of its cells
        await pilot.press("f")
        await settle(pilot)
        assert screen.state.figure_name == "bandwidth"
        crossed = [(i, j) for i in range(6) for j in range(1, 7)
                   if str(table.get_cell_at((i, j))).startswith("×")]
        assert sorted(crossed) == [(0, 5), (4, 1)]
        table.move_cursor(row=0, column=5)
        await settle(pilot)
        info = str(screen.query_one("#cell-info", Static).render())
        assert "n1-n5" in info and "FLAGGED: link n1-n5 bandwidth (asymptotic) -" in info
        shots = Path(os.environ.get("PT2PT_SCREENSHOTS", str(tmp_path)))
        app.save_screenshot(filename="cluster-view.svg", path=str(shots))
        assert (shots / "cluster-view.svg").read_text().count("n1-n5") >= 1
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SeriesScreen)
        assert {app.screen.key.get("host_pair")} <= {"n1:n5", "n5:n1"}
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ClusterScreen)


@sync
async def test_cluster_view_refuses_a_series_that_is_not_one(tmp_path: Path) -> None:
    from tests.test_tui_pilot import build_synthetic_dataset

    app = ExplorerApp(build_synthetic_dataset(tmp_path, n=800))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+k")
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
