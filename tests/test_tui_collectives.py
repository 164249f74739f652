"""The TUI's collectives view (issue 61): a sweep folder ranked as the CLI ranks it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from kit.outputs.collsweep import JOURNAL, Point
from tui import collview


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A journal written as a sweep writes it: pair always best, bruck 3 % slower, ring 20 %
    slower, and ring's 1 MiB point at np 8 killed by the time limit."""
    out = tmp_path / "sweep"
    out.mkdir()
    lines = []
    for n in (2, 4, 8):
        for size in (1024, 1 << 20):
            base = 1e-5 * n * size / 1024
            for alg, factor in (("pair", 1.0), ("bruck", 1.03), ("ring", 1.2)):
                if (alg, n, size) == ("ring", 8, 1 << 20):
                    p = Point("alltoall", alg, n, size, "timeout", reason="killed after 1 s")
                else:
                    p = Point("alltoall", alg, n, size, "ok", times=[base * factor] * 3)
                lines.append(json.dumps(asdict(p)))
    (out / JOURNAL).write_text("\n".join(lines) + "\n")
    return out


def test_the_view_ranks_the_sweep_with_the_analysis_figures(sweep: Path) -> None:
    view = collview.load(sweep)
    assert len(view.ranking) == 6
    assert {row[3] for row in view.ranking} == {"pair"}
    last = next(r for r in view.ranking if r[1] == "8" and r[2] == str(1 << 20))
    assert "bruck 1.030" in last[5] and "ring not completed" in last[5]
    assert view.share_headers[-3:] == ["within 2 %", "within 5 %", "within 10 %"]
    shares = {row[1]: row for row in view.shares}
    # ring's killed point leaves its configuration out of every share, bounded in braces
    assert shares["pair"][3:5] == ["5", "1"]
    assert shares["pair"][5].startswith("1.00 [") and shares["pair"][5].endswith("{0.83-1.00}")
    assert shares["ring"][7].startswith("0.00 [") and shares["ring"][7].endswith("{0.00-0.17}")
    assert shares["bruck"][5].startswith("0.00") and shares["bruck"][6].startswith("1.00")
    assert "ring not completed (timeout)" in last[5] and "left out" in view.statistic
    # the study's figure of the shares: per range, a point, its interval and the bounds
    chart = view.share_chart("alltoall", 5.0, width=21).plain.splitlines()
    assert "within 5 %" in chart[0] and "numproc all" in chart[1]
    assert "5 configs, 1 left out" in chart[2]
    bars = {line.split()[0]: line for line in chart[3:-1]}
    assert set(bars) == {"bruck", "pair", "ring"}
    ring = bars["ring"][bars["ring"].index("│") + 1: bars["ring"].rindex("│")]
    # 0 with its exact upper bound ~0.52 (5 configurations); bounds 0-1/6 end at ╎
    assert ring[0] == "●" and ring[3] == "╎" and ring[4:10] == "━" * 6 and ring.endswith("·")
    pair = bars["pair"][bars["pair"].index("│") + 1: bars["pair"].rindex("│")]
    assert pair[-1] == "●" and pair[17] == "╎" and pair[10:17] == "━" * 7  # bounds 5/6-1
    assert "bootstrap" in view.statistic
    # the study's panel: time / size against numproc, ring's killed point left out
    assert view.curves[("alltoall", 1 << 20)]["ring"] == ([2, 4], [pytest.approx(1.2e-5 * n / 1024)
                                                                   for n in (2, 4)])
    spec, legend = view.plot("alltoall", 1 << 20)
    assert [a for a, _ in legend] == ["bruck", "pair", "ring"]
    assert len(spec.layers) == 6 and spec.x_log and spec.y_log


def test_a_folder_without_a_sweep_is_one_message(tmp_path: Path) -> None:
    from kit.core.errors import UserError

    with pytest.raises(UserError, match="no collective sweep"):
        collview.load(tmp_path)


def test_ctrl_l_opens_the_collectives_view(sweep: Path) -> None:
    from textual.widgets import DataTable

    from tui.app import ExplorerApp
    from tui.screens.collectives import CollectivesScreen

    async def explore() -> None:
        app = ExplorerApp(None, collectives=sweep)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause(0.2)
            await pilot.press("ctrl+l")
            await pilot.pause(0.3)
            assert isinstance(app.screen, CollectivesScreen)
            assert app.screen.query_one("#coll-ranking", DataTable).row_count == 6
            assert app.screen.query_one("#coll-shares", DataTable).row_count == 3
            from tui.widgets.plot import Plot

            assert len(app.screen.query_one("#coll-plot", Plot).spec.layers) == 6
            from textual.widgets import Static

            chart = app.screen.query_one("#coll-chart", Static)
            assert "within 2 %" in str(chart.render())
            await pilot.press("x")
            await pilot.pause(0.1)
            assert "within 5 %" in str(chart.render())
            app.save_screenshot("collectives.svg", str(sweep))
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert not isinstance(app.screen, CollectivesScreen)

    asyncio.run(explore())
    svg = (sweep / "collectives.svg").read_text().replace("&#160;", " ")
    assert "within 5 %" in svg and "ring not completed" in svg
