"""One series, one number: the latency, bandwidth, score and best baseline of a series read
the same on every surface (issue 59).

Before kit.figures, one series showed 9.7 GB/s in the TUI and ``pt2pt datasets`` and
12.5 GB/s in the demo and the report; the report's summary named the textbook line where the
terminal named robust Hockney. Here one series is fitted once (``pt2pt fit``) and shown by
``pt2pt datasets``, ``pt2pt fit``'s own output, the report, the demo summary, ``pt2pt diff``
and the TUI (browser and series view); each must contain the same text, the one
kit.figures.series.SeriesFigures writes.
"""

from __future__ import annotations

import asyncio
import html
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from kit.data import dataset as ds
from kit.data.figures import series_figures
from kit.data.ingest import ingest
from kit.figures.text import format_rate, format_time
from kit.model.io import read_model


@pytest.fixture(scope="module")
def one_series(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A dataset of one series, its model from ``pt2pt fit`` and what fit printed."""
    from kit.cli import main

    root = tmp_path_factory.mktemp("figures")
    rng = np.random.default_rng(7)
    size = np.floor(np.exp(rng.uniform(0, np.log(1 << 22), 3000)))
    time = np.where(size < 65536, 5e-6 + size / 3e9, 25e-6 + size / 6e9)
    time = time * rng.lognormal(0.0, 0.1, size.size)
    csv = root / "run.csv"
    csv.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                               for s, t in zip(size, time, strict=True)))
    dataset = root / "ds"
    assert not ingest([csv], dataset, campaign="same", transport="tcp").files_failed
    model = root / "models" / "tcp-pingpong-csv.json"
    model.parent.mkdir()
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        assert main(["fit", str(dataset), "--no-intervals", "-o", str(model)]) == 0
    return dataset, model, err.getvalue()


def _expected(dataset: Path, model: Path) -> dict[str, str]:
    fitted = read_model(model)
    cells = series_figures(dataset, fitted.series or {}, fitted.validation).cells()
    assert cells["score"] != "–" and "±" in cells["score"]
    assert cells["best baseline"].startswith(("robust Hockney", "peak"))
    return cells


def _contains_all(text: str, cells: dict[str, str], keys: tuple[str, ...], where: str) -> None:
    flat = re.sub(r"\s+", " ", text)
    for key in keys:
        assert cells[key] in flat, f"{where} does not show {key} {cells[key]!r}"


FIGURES = ("latency", "bandwidth")
SCORES = ("score", "best baseline")


def test_fit_and_datasets(one_series: tuple[Path, Path, str],
                          capsys: pytest.CaptureFixture[str]) -> None:
    from kit.cli import main

    dataset, model, fit_output = one_series
    cells = _expected(dataset, model)
    _contains_all(fit_output, cells, FIGURES + SCORES + ("verdict",), "pt2pt fit")
    assert main(["datasets", str(dataset)]) == 0
    _contains_all(capsys.readouterr().out, cells, FIGURES, "pt2pt datasets")


def test_report_and_diff(one_series: tuple[Path, Path, str], tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    from kit.cli import main
    from kit.outputs.report.build import report_model_file

    dataset, model, _ = one_series
    cells = _expected(dataset, model)
    page = html.unescape(report_model_file(model, tmp_path / "report").read_text("utf-8"))
    page = re.sub(r"<[^>]+>", " ", page)
    _contains_all(page, cells, FIGURES + SCORES + ("verdict",), "the report")
    assert "textbook line" not in cells["verdict"]
    assert main(["diff", str(model), str(model), "--no-params"]) in (0, 1)
    _contains_all(capsys.readouterr().out, cells, FIGURES + SCORES, "pt2pt diff")


def test_demo_summary(one_series: tuple[Path, Path, str], tmp_path: Path) -> None:
    from kit.outputs import demo

    dataset, model, _ = one_series
    cells = _expected(dataset, model)  # the demo fits with intervals: same validation
    (result,) = demo.fit_all(dataset, tmp_path / "models")
    console = Console(file=io.StringIO(), width=400)
    console.print(demo.summary_table([result]))
    for line in demo.verdicts_text([result]):
        console.print(line)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    _contains_all(out, cells, FIGURES + SCORES + ("verdict",), "the demo summary")


def test_tui_browser_and_series_view(one_series: tuple[Path, Path, str]) -> None:
    from textual.widgets import Static

    from tests.test_tui_pilot import settle
    from tui.app import ExplorerApp
    from tui.screens.browser import BrowserScreen
    from tui.screens.series import SeriesScreen

    dataset, model, _ = one_series
    cells = _expected(dataset, model)
    row = ds.series_table(dataset).row(0, named=True)
    listed = (format_time(row["latency_s"]), format_rate(row["bandwidth_Bps"]))
    assert cells["latency"].startswith(listed[0]) and cells["bandwidth"].startswith(listed[1])

    async def run() -> dict[str, Any]:
        app = ExplorerApp(dataset, models=[model.parent])
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            screen = app.screen  # one series: the explorer opens it at once
            assert isinstance(screen, SeriesScreen)
            detail = str(screen.query_one("#regime-detail", Static).render())
            (listing,) = [s for s in app.screen_stack if isinstance(s, BrowserScreen)]
            table = listing.query_one("DataTable")
            browser = " ".join(str(c) for c in table.get_row_at(0))  # type: ignore[attr-defined]
            return {"browser": browser, "detail": detail}

    seen = asyncio.run(run())
    for text in listed:
        assert text in seen["browser"], (text, seen["browser"])
    assert cells["score"].split(" ± ")[0] in seen["browser"]  # the model column: its score
    _contains_all(seen["detail"], cells, FIGURES + SCORES, "the TUI series view")
