"""Pilot tests of the explorer: real kit dataset, real engine, keys as a user presses them."""

from __future__ import annotations

import asyncio
import csv
import functools
import math
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from kit.data.ingest import ingest
from kit.model.io import load_model
from tui.app import ExplorerApp
from tui.screens.browser import BrowserScreen
from tui.screens.common import Confirm, HelpScreen
from tui.screens.export import ExportScreen
from tui.screens.series import SeriesScreen

SIZE = (140, 40)
#: Where the synthetic series change regime (bytes): a step at 1 KiB, a jump at 64 KiB.
TRUE_BREAKS = (1024.0, 65536.0)


def synthetic_csv(path: Path, scale: float, n: int, seed: int) -> Path:
    """Ping-pong one-way times with three regimes and lognormal noise (fixed seed)."""
    rng = np.random.default_rng(seed)
    size = np.floor(np.exp(rng.uniform(0.0, math.log(1 << 20), n))).astype(np.int64)
    base = np.where(size < 1024, 20e-6, np.where(size < 65536, 30e-6 + size * 2e-9,
                                                  90e-6 + size * 1e-9))
    time = base * scale * rng.lognormal(0.0, 0.08, n)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["size", "duration"])
        out.writerows(zip(size.tolist(), (f"{t:.9e}" for t in time), strict=True))
    return path


def build_synthetic_dataset(root: Path, n: int = 4000) -> Path:
    """Two series (tcp, shm) ingested through kit.data.ingest, as a user would build them."""
    dataset = root / "dataset"
    for transport, scale, seed in (("tcp", 1.0, 1), ("shm", 0.25, 2)):
        raw = synthetic_csv(root / f"pingpong-{transport}.csv", scale, n, seed)
        report = ingest([raw], dataset, campaign="synth", transport=transport)
        assert report.files_failed == [], report.files_failed
    return dataset


@pytest.fixture(scope="module")
def synthetic_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_synthetic_dataset(tmp_path_factory.mktemp("tui"))


def sync(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async pilot test with asyncio (no async pytest plugin is installed)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


async def settle(pilot: Pilot, rounds: int = 400) -> None:
    """Wait until no worker runs and no refit is pending (fits take a while under load)."""
    app = pilot.app
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause(0.05)
        screen = app.screen
        busy = any(w.is_running for w in app.workers)
        working = isinstance(screen, SeriesScreen) and screen.busy
        if not (busy or working):
            # Let reactive updates (footer bindings after a focus change) reach the screen.
            await pilot.wait_for_scheduled_animations()
            await pilot.pause(0.2)
            return
    raise AssertionError("the explorer did not settle")


async def open_series(pilot: Pilot, query: str) -> SeriesScreen:
    await settle(pilot)
    assert isinstance(pilot.app.screen, BrowserScreen)
    await pilot.press(*query, "enter")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SeriesScreen)
    return screen


@sync
async def test_browser_lists_and_filters_series(synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        browser = app.screen
        assert isinstance(browser, BrowserScreen)
        assert sorted(r.key.get("transport") for r in browser.shown) == ["shm", "tcp"]
        await pilot.press("s", "h", "m")  # typing in the table goes to the filter
        assert [r.key.get("transport") for r in browser.shown] == ["shm"]
        await pilot.press("escape")
        assert len(browser.shown) == 2


@sync
async def test_browser_cells_are_text_and_columns_fit_them(tmp_path: Path,
                                                           osu_dir: Path) -> None:
    """OSU's four latency statistics are four rows that say which is which (the op cell
    "pingpong [p50]" was once read as markup and shown as "pingpong "), and every column is
    as wide as its widest cell from the first frame, not after the table's own measuring."""
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt", osu_dir / "osu_latency_tcp_7.4_z.txt"],
           dataset, campaign="osu")
    app = ExplorerApp(dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        labels = [c.label.plain for c in table.ordered_columns]
        ops = [table.get_row_at(i)[labels.index("op")].plain for i in range(table.row_count)]
        assert sorted(ops) == ["pingpong [mean]", "pingpong [p50]", "pingpong [p90]",
                               "pingpong [p99]"]
        for k, column in enumerate(table.ordered_columns):
            widest = max([column.label.cell_len]
                         + [table.get_row_at(i)[k].cell_len for i in range(table.row_count)])
            assert not column.auto_width and column.width == widest, column.label
        before = [c.width for c in table.ordered_columns]
        await pilot.press("p", "9", "9")  # the filter keeps the widths
        assert table.row_count == 1
        assert [c.width for c in table.ordered_columns] == before


@sync
async def test_move_breakpoint_and_refit_changes_the_model(synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        state = screen.state
        assert state is not None and state.model is not None
        found = list(state.model.breakpoints_)
        # The automatic fit finds both true breaks (wide band: this test checks the TUI).
        for want in TRUE_BREAKS:
            assert any(want / 1.5 < got < want * 1.5 for got in found), found
        i = min(range(len(found)), key=lambda k: abs(math.log(found[k] / 65536)))
        n_before = state.model.regimes_[i].n_samples

        await pilot.press(*["right"] * (i + 1))  # select the breakpoint near 64 KiB
        assert screen.sel_bp == i
        await pilot.press("H", "H")  # two half-octave steps down
        # The edit held (the screen's own refit, 0.6 s after the last key, may already have
        # landed on a slow machine and cleared ``edited``: check the breakpoint instead).
        assert state.breakpoints[i] == pytest.approx(found[i] / 2, rel=0.02)
        await pilot.press("r")
        await settle(pilot)

        model = screen.state.model
        assert not screen.state.edited
        moved = list(model.breakpoints_)
        assert moved[i] == pytest.approx(found[i] / 2, rel=0.02)
        assert moved[:i] + moved[i + 1:] == pytest.approx(found[:i] + found[i + 1:])
        assert model.regimes_[i].size_max == pytest.approx(moved[i])
        assert model.regimes_[i].n_samples < n_before  # the regime below gave up samples


@sync
async def test_family_cycle_add_and_delete_breakpoints(synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "shm")
        state = screen.state
        assert state is not None
        n_regimes = len(state.model.regimes_)
        # Cycle regime 0's family to "constant" (auto -> constant -> linear -> power).
        while state.families[0] != "constant":
            await pilot.press("f")
        await pilot.press("r")
        await settle(pilot)
        assert screen.state.model.regimes_[0].family == "constant"

        await pilot.press("down", "a", "r")  # split regime 1 in two
        await settle(pilot)
        assert len(screen.state.model.regimes_) == n_regimes + 1
        assert screen.state.model.regimes_[0].family == "constant"

        await pilot.press("d", "r")  # delete the breakpoint just added (still selected)
        await settle(pilot)
        assert len(screen.state.model.regimes_) == n_regimes


@sync
async def test_edit_refits_by_itself_after_a_pause(synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        before = list(screen.state.model.breakpoints_)
        await pilot.press("right", "right", "H")  # second breakpoint, half an octave down
        await settle(pilot)  # no 'r': the debounced refit runs
        after = screen.state.model.breakpoints_
        assert after[0] == pytest.approx(before[0])
        assert after[1] == pytest.approx(before[1] / math.sqrt(2), rel=0.02)


@sync
async def test_fit_failure_is_a_notification_and_the_app_keeps_running(
        synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        good = screen.state.model
        # Breakpoints so close that the middle regime holds almost nothing: kit refuses.
        screen.state.breakpoints[:] = [100.0, 101.0]
        screen.state.families[:] = [None, None, None]
        screen.start_fit()
        await settle(pilot)
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors and "breakpoints" in errors[-1].message
        assert screen.state.model is good  # the last good model stays
        await pilot.press("R")  # an automatic fit still works afterwards
        await settle(pilot)
        assert len(screen.state.model.regimes_) >= 2
        assert app.is_running


@sync
async def test_export_writes_files_kit_loads_back(synthetic_dataset: Path,
                                                  tmp_path: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    model_path = tmp_path / "out" / "tcp.model.json"
    simgrid_dir = tmp_path / "out" / "simgrid"
    model_path.parent.mkdir()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        await pilot.press("e")
        dialog = app.screen
        assert isinstance(dialog, ExportScreen)
        dialog.query_one("#model-path").value = str(model_path)
        dialog.query_one("#simgrid-path").value = str(simgrid_dir)
        await pilot.click("#save")
        await settle(pilot)
        assert not isinstance(app.screen, ExportScreen)

        loaded = load_model(model_path)
        sizes = np.array([8.0, 4096.0, 1 << 18])
        np.testing.assert_allclose(loaded.predict(sizes), screen.state.model.predict(sizes),
                                   rtol=1e-9)
        assert loaded.breakpoints_ == pytest.approx(screen.state.model.breakpoints_)
        assert (simgrid_dir / "smpi-config.txt").read_text().count("--cfg=") >= 2

        # Exporting again asks before overwriting; "n" keeps the file untouched.
        model_path.write_text("keep me")
        await pilot.press("e")
        app.screen.query_one("#model-path").value = str(model_path)
        app.screen.query_one("#simgrid-path").value = str(simgrid_dir)
        await pilot.click("#save")
        await pilot.pause(0.1)
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")
        await settle(pilot)
        assert model_path.read_text() == "keep me"
        await pilot.click("#save")
        await pilot.pause(0.1)
        await pilot.press("y")
        await settle(pilot)
        assert load_model(model_path).breakpoints_ == pytest.approx(loaded.breakpoints_)


@pytest.mark.parametrize("kind", ["missing", "not-a-dataset"])
@sync
async def test_bad_path_shows_error_and_keeps_running(kind: str, tmp_path: Path,
                                                      synthetic_dataset: Path) -> None:
    bad = tmp_path / "nowhere"
    if kind == "not-a-dataset":
        bad.mkdir()
        (bad / "notes.txt").write_text("hello")
    app = ExplorerApp(bad)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors and str(bad) in errors[0].message
        assert isinstance(app.screen, BrowserScreen)
        # Still usable: open a real dataset from the path prompt.
        await pilot.press("ctrl+o")
        app.screen.query_one("#path").value = str(synthetic_dataset)
        await pilot.press("enter")
        await settle(pilot)
        assert len(app.screen.shown) == 2


@sync
async def test_help_lists_every_key_of_the_series_view(synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        await pilot.press("question_mark")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        listed = {row[0] for row in help_screen._rows}
        for binding in SeriesScreen.BINDINGS:
            assert any(binding.key.split(",")[0] in k or k in ("?",) for k in listed) or \
                binding.description == ""
        assert len(help_screen._rows) >= len(SeriesScreen.BINDINGS)
        await pilot.press("escape")
        assert app.screen is screen


@sync
async def test_model_file_is_shown_without_refitting(synthetic_dataset: Path,
                                                     tmp_path: Path) -> None:
    """`pt2pt tui --model M.json` opens the model's dataset and shows the model, not a new fit."""
    from kit.model import RegimeModel
    from kit.model.io import save_model
    from tui import data

    key = next(r.key for r in data.series_rows(synthetic_dataset) if r.key.get("transport")
               == "tcp")
    samples = data.load_samples(synthetic_dataset, key)
    fixed = RegimeModel(breakpoints=[3000.0], random_state=0).fit(samples.size, samples.time)
    path = tmp_path / "given.json"
    save_model(fixed, path, provenance={"series": key.as_dict(),
                                        "dataset": str(synthetic_dataset)})
    app = ExplorerApp(None, model=path)  # the model names its dataset
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        assert screen.state.model.breakpoints_ == pytest.approx([3000.0])


@sync
async def test_compare_view_ranks_the_faster_transport(synthetic_dataset: Path) -> None:
    from textual.widgets import DataTable

    from tui.screens.compare import CompareScreen

    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g")  # nothing marked and only two series: compares both
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert [k.get("transport") for k in screen.keys] == ["shm", "tcp"]
        table = screen.query_one("#best", DataTable)
        assert table.row_count >= 20
        # shm (A) is 4x faster at every size: best everywhere, and tcp never within 5 %.
        bests = {table.get_row_at(i)[1] for i in range(table.row_count)}
        withins = {table.get_row_at(i)[3] for i in range(table.row_count)}
        assert bests == {"A"} and withins == {"A"}
        await pilot.press("plus")
        assert "10 %" in str(table.columns[list(table.columns)[3]].label)
        await pilot.press("escape")
        assert isinstance(app.screen, BrowserScreen)


@sync
async def test_series_too_small_to_fit_is_a_notification(refdata_dir: Path,
                                                          tmp_path: Path) -> None:
    """The calibration run's MPI_Wtime series holds one sample: kit cannot fit it."""
    dataset = tmp_path / "graphene"
    ingest([refdata_dir / "platform-calibration" / "graphene_eth_example"], dataset)
    app = ExplorerApp(dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "wtime")
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors and "samples" in errors[-1].message
        assert screen.state is not None and screen.state.model is None
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("escape", *"pingpong", "enter")  # another series still opens
        await settle(pilot)
        assert isinstance(app.screen, SeriesScreen)
        assert app.screen.state.model is not None


@sync
async def test_leaving_a_series_while_it_loads_is_harmless(synthetic_dataset: Path) -> None:
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(*"tcp", "enter", "escape")  # leave before load and fit finish
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        await pilot.press("enter")  # coming back fits what was loaded meanwhile
        await settle(pilot)
        assert isinstance(app.screen, SeriesScreen)
        assert app.screen.state.model is not None


@sync
async def test_large_series_show_a_preview_then_the_full_fit(
        synthetic_dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui import fitting

    monkeypatch.setattr(fitting, "PREVIEW_MIN_SAMPLES", 1000)  # the 4000-sample series is "large"
    monkeypatch.setattr(fitting, "PREVIEW_SAMPLES", 1000)
    shown: list[bool] = []
    fitted = SeriesScreen._fitted

    def record(self: SeriesScreen, generation: int, model: object, final: bool = True) -> None:
        # what the user is shown: a fit superseded by a newer edit is dropped (on a loaded
        # machine the 'H' edit's own scheduled refit can start before 'r' is pressed)
        if generation == self._generation:
            shown.append(final)
        fitted(self, generation, model, final)

    monkeypatch.setattr(SeriesScreen, "_fitted", record)
    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_series(pilot, "tcp")
        assert shown == [False, True]  # preview first, then the full fit replaced it
        assert not screen.preview
        await pilot.press("left", "H", "r")
        await settle(pilot)
        # After the edit: a preview first and the full fit last; the 'H' edit's own refit may
        # show its pair too before 'r' supersedes it (or only its preview), depending on how
        # fast fits run against the key presses. No full fit is shown without its preview.
        after = shown[2:]
        assert after and after[0] is False and after[-1] is True, shown
        assert all(not after[i - 1] for i, final in enumerate(after) if final), shown
        assert len(after) <= 4, shown  # at most the two fits asked for
        params = screen.state.model.get_params()  # the full fit, not the quick preview
        assert params["noise"] and params["overlap"] and params["mixture"]


#: Breakpoints the model files are fitted with: far from what an automatic fit finds, so
#: seeing them on screen proves the file was shown and not refitted.
FILE_BREAKPOINTS = {"tcp": [3000.0], "shm": [2000.0, 50000.0]}


@pytest.fixture(scope="module")
def models_dir(synthetic_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model per series, fitted and saved the way `pt2pt demo` does (kit.fit.fitting)."""
    from kit.fit.fitting import FitOptions, fit_series
    from kit.model.io import write_model

    out = tmp_path_factory.mktemp("models")
    for transport, bps in FILE_BREAKPOINTS.items():
        opts = FitOptions(breakpoints=tuple(bps), validate=False, intervals=False)
        fitted = fit_series(synthetic_dataset, {"transport": transport}, opts).fitted
        write_model(fitted, out / f"{transport}-pingpong-csv.json")
    (out / ".dataset-fingerprint").write_text("not a model")  # the demo keeps one here
    return out


def fitted_column(browser: BrowserScreen) -> dict[str, str]:
    from textual.widgets import DataTable

    table = browser.query_one("#series", DataTable)
    return {row.key.get("transport"): str(table.get_row_at(i)[-1])
            for i, row in enumerate(browser.shown)}


def no_fits(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record every fit the explorer starts (the loaded models must not need one)."""
    from tui import fitting

    calls: list[object] = []
    real = fitting.fit

    def fit(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1:])
        return real(*args, **kwargs)

    monkeypatch.setattr(fitting, "fit", fit)
    return calls


@sync
async def test_models_directory_shows_each_model_on_its_series_without_refitting(
        synthetic_dataset: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    fits = no_fits(monkeypatch)
    app = ExplorerApp(synthetic_dataset, models=[models_dir])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        browser = app.screen
        assert isinstance(browser, BrowserScreen)
        assert fitted_column(browser) == {"shm": "yes", "tcp": "yes"}
        assert not [n for n in app._notifications if n.severity in ("error", "warning")]

        screen = await open_series(pilot, "tcp")
        state = screen.state
        assert state is not None and fits == []  # shown as loaded, no fit started
        saved = json.loads((models_dir / "tcp-pingpong-csv.json").read_text())
        assert state.model.breakpoints_ == saved["breakpoints"] == FILE_BREAKPOINTS["tcp"]
        assert [r.to_dict() for r in state.model.regimes_] == saved["regimes"]
        assert state.breakpoints == FILE_BREAKPOINTS["tcp"]
        assert state.source == "tcp-pingpong-csv.json"
        assert "loaded: tcp-pingpong-csv.json" in str(
            screen.query_one("#model-status").render())

        await pilot.press("R")  # the automatic refit still works, and replaces the file's
        await settle(pilot)
        assert len(fits) >= 1 and state.source is None
        assert state.model.breakpoints_ != FILE_BREAKPOINTS["tcp"]

        await pilot.press("escape", "escape", *"shm", "enter")
        await settle(pilot)
        assert app.screen.state.model.breakpoints_ == FILE_BREAKPOINTS["shm"]


@sync
async def test_model_for_a_missing_series_and_a_corrupt_file_are_notifications(
        synthetic_dataset: Path, models_dir: Path, tmp_path: Path) -> None:
    import json

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    tcp = (models_dir / "tcp-pingpong-csv.json").read_text()
    (mixed / "tcp.json").write_text(tcp)
    other = json.loads(tcp)
    other["provenance"]["series"]["transport"] = "ib"  # a series this dataset lacks
    (mixed / "ib.json").write_text(json.dumps(other))
    (mixed / "broken.json").write_text('{"format": "pt2pt-model", "regimes": [')
    app = ExplorerApp(synthetic_dataset, models=[mixed], model=tmp_path / "absent.json")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        errors = [n.message for n in app._notifications if n.severity == "error"]
        warnings = [n.message for n in app._notifications if n.severity == "warning"]
        assert any("broken.json" in m for m in errors), errors
        assert any("absent.json" in m for m in errors), errors
        assert any("ib.json" in m and "transport=ib" in m for m in warnings), warnings
        browser = app.screen
        assert isinstance(browser, BrowserScreen) and app.is_running
        assert fitted_column(browser) == {"shm": "no", "tcp": "yes"}
        screen = await open_series(pilot, "tcp")
        assert screen.state.model.breakpoints_ == FILE_BREAKPOINTS["tcp"]


def test_tui_command_takes_several_models_and_model_directories() -> None:
    from kit.cli import build_parser

    args = build_parser().parse_args(["tui", "ds", "--model", "a.json", "--model", "b.json",
                                      "--models", "demo-out/models"])
    assert args.dataset == "ds"
    assert args.model == ["a.json", "b.json"] and args.models == ["demo-out/models"]
    assert build_parser().parse_args(["tui"]).model == []


@sync
async def test_compare_view_diff_highlights_what_changed(synthetic_dataset: Path) -> None:
    from textual.widgets import DataTable, Static

    from tui.screens.compare import CompareScreen

    app = ExplorerApp(synthetic_dataset)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await pilot.press("d")
        await settle(pilot)
        for _ in range(100):  # the diff runs in a worker
            if screen.showing_diff:
                break
            await pilot.pause(0.1)
        assert screen.showing_diff
        legend = str(screen.query_one("#legend", Static).render())
        # B (tcp) is 4x slower than A (shm) everywhere.
        assert "p50 slower in every size band" in legend
        table = screen.query_one("#best", DataTable)
        cells = [table.get_row_at(i) for i in range(table.row_count)]
        assert cells and all(str(c[4]) == "changed" for c in cells if c[1] == "p50")
        await pilot.press("d")  # back to the best-within table
        assert not screen.showing_diff
        assert "within" in str(table.columns[list(table.columns)[3]].label)
