"""`pt2pt demo` end to end on this machine (real MPI, real probe): the README's first command."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.model.io import read_model
from tests.conftest import mpi_env

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


def _demo(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kit", "demo", "--quick", "--no-tui",
                           "-o", str(out), *extra],
                          env=mpi_env(), capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory, probe_bin: Path
             ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("demo")
    return out, _demo(out)


def test_demo_produces_models_report_and_simgrid(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = {p.stem: read_model(p) for p in (out / "models").glob("*.json")}
    models = {name: mf.model for name, mf in files.items()}
    assert {"shm-pingpong-probe", "tcp-pingpong-probe"} <= set(models)
    tcp = [m for name, m in models.items() if name.startswith("tcp-")]
    assert max(len(m.regimes_) for m in tcp) >= 2, "no tcp series has two regimes"
    for mf in files.values():
        assert mf.validation["summary"]["model"]["crps_over_floor"] > 0
    index = out / "report" / "index.html"
    html = index.read_text(encoding="utf-8")
    pngs = list((out / "report").glob("*.png"))
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    assert all(p.name in html for p in pngs)
    written = sorted((out / "simgrid").glob("*/smpi-config.txt"))
    flat = " ".join(proc.stdout.split())  # the summary's notes are wrapped to the terminal
    refused = [(m.group(1), flat[m.end():m.end() + 400])
               for m in re.finditer(r"SimGrid export of (\w+)/probe refused:", flat)]
    # Every transport is exported, or its refusal is said, naming the regime at fault (a
    # quick demo on a busy machine can fit a curve SimGrid cannot follow physically).
    exported = {p.parent.name.split("-")[0] for p in written}
    assert exported | {t for t, _ in refused} >= {"shm", "tcp"}, proc.stdout[-3000:]
    assert all("regime" in why or "overhead" in why for _, why in refused), refused
    for cfg_path in written:
        cfg = cfg_path.read_text(encoding="utf-8")
        # The factor option's name follows the installed SimGrid (3.32: smpi/lat-factor).
        assert ("--cfg=network/latency-factor:" in cfg or "--cfg=smpi/lat-factor:" in cfg)
        # The overheads are written, or the summary says why not (they exceed the
        # ping-pong: shared memory); never both the whole time in the network and them.
        transport = cfg_path.parent.name.split("-")[0]
        dropped = f"SimGrid export of {transport}/probe: send/recv models not exported" in flat
        assert ("--cfg=smpi/os:" in cfg) != dropped, (transport, flat[-3000:])


@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid is not installed "
                    "(apt-get install libsimgrid-dev g++); CI installs it")
def test_hand_run_smpi_over_the_demo_exports_is_what_predict_prints(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    """Issue 59 on the demo's own models: `pt2pt export` run by hand under smpirun is within
    2 % of `pt2pt predict` at every size the closed loop checks."""
    from tests.simgrid_loop import hand_run_over_predict

    out, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    checked = 0
    for exported in sorted((out / "simgrid").iterdir()):
        transport, tool = exported.name.split("-", 1)
        model = out / "models" / f"{transport}-pingpong-{tool}.json"
        work = tmp_path / exported.name
        work.mkdir()
        ratios = hand_run_over_predict(model, work)
        assert all(abs(r - 1) <= 0.02 for r in ratios.values()), (exported.name, ratios)
        checked += 1
    assert checked >= 1


def test_demo_prints_summary_and_how_to_open_the_tui(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = demo_run
    assert "tcp pingpong (probe)" in proc.stdout
    assert "shm pingpong (probe)" in proc.stdout
    assert f"pt2pt tui {out / 'dataset'} --models {out / 'models'}" in proc.stdout  # printed
    assert "Traceback" not in proc.stderr
    # Tools the plan left out are named at the end, with the command that adds them.
    manifest = json.loads((out / "campaign" / "manifest.json").read_text(encoding="utf-8"))
    if manifest["not_planned"]:
        text = " ".join(proc.stdout.split())
        assert "note: Not run:" in text and "PT2PT_TOOLS_PATH=" in text


def _printed_tui_command(stdout: str) -> list[str]:
    lines = [line for line in stdout.splitlines() if line.startswith("explore:")]
    assert len(lines) == 1, stdout[-2000:]
    return shlex.split(lines[0].removeprefix("explore:"))


def test_printed_tui_command_opens_the_demo_models_without_refitting(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """The command the demo prints parses, and the TUI it opens shows the demo's models."""
    from kit.cli import build_parser
    from tests.test_tui_pilot import SIZE, settle
    from tui.app import ExplorerApp
    from tui.screens.browser import BrowserScreen
    from tui.screens.series import SeriesScreen

    out, proc = demo_run
    words = _printed_tui_command(proc.stdout)
    assert words[:3] == ["pt2pt", "tui", str(out / "dataset")]
    assert "--models" in words and str(out / "models") in words
    args = build_parser().parse_args(words[1:])
    model_files = {p.name: read_model(p) for p in (out / "models").glob("*.json")}

    async def explore() -> None:
        app = ExplorerApp(args.dataset, model=args.model, models=args.models)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            browser = app.screen
            assert isinstance(browser, BrowserScreen)
            noise = [n.message for n in app._notifications if n.severity != "information"]
            assert noise == []  # every model found its series, every file loaded
            session = browser.session
            matched = {mf.name for mf in session.file_models.values()}
            assert matched == set(model_files)
            for row in browser.shown:
                has_model = row.key in session.file_models
                assert session.fitted(row.key) == has_model
                if has_model:
                    series = model_files[session.file_models[row.key].name].provenance["series"]
                    assert {k: row.key.get(k) for k in series} == series
            key = next(k for k in session.file_models if k.get("transport") == "tcp"
                       and k.get("op") == "pingpong")
            browser.query_one("#filter").value = "tcp pingpong probe"
            await pilot.pause()
            assert [r.key for r in browser.shown] == [key]
            await pilot.press("enter")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, SeriesScreen) and screen.key == key
            wanted = model_files["tcp-pingpong-probe.json"]
            assert screen.state.model.breakpoints_ == wanted.model.breakpoints_
            assert screen.state.source == "tcp-pingpong-probe.json"

    asyncio.run(explore())


def test_demo_twice_reuses_measurements_and_models(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = demo_run
    model = out / "models" / "tcp-pingpong-probe.json"
    before = model.stat().st_mtime_ns
    runs_before = (out / "dataset" / "runs.parquet").read_bytes()
    again = _demo(out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already done" in again.stderr
    assert model.stat().st_mtime_ns == before
    assert (out / "dataset" / "runs.parquet").read_bytes() == runs_before


def test_demo_bad_campaign_is_one_paragraph(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kit", "demo", "--no-tui", "-o",
                           str(tmp_path), "--campaign", str(tmp_path / "nope.yaml")],
                          env={**os.environ}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "nope.yaml" in proc.stderr and "--campaign" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_crosscheck_is_withheld_without_the_same_conditions(tmp_path: Path,
                                                           fixtures_dir: Path) -> None:
    """OSU's per-size aggregates are set beside the probe's model only when both ran in the
    same recorded conditions: an OSU output from elsewhere (nothing recorded) is withheld,
    saying why and the campaign that compares like with like (the shown case is
    tests/test_conditions.py)."""
    from kit.data.ingest import ingest
    from kit.fit import synth
    from kit.model import RegimeModel
    from kit.model.io import save_model
    from kit.outputs.demo import SeriesResult, crosscheck

    dataset = tmp_path / "ds"
    osu = fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt"
    assert ingest([osu], dataset, campaign="c", transport="tcp").ok
    size, time = synth.sample(synth.ethernet_like(), 3000, 1, 4 << 20, seed=1)
    model = RegimeModel(random_state=0).fit(size, time)
    path = save_model(model, tmp_path / "tcp.json")
    probe = SeriesResult(series={"campaign": "c", "tool": "probe", "transport": "tcp",
                                 "op": "pingpong"}, model_path=path)
    other = SeriesResult(series={"campaign": "c", "tool": "probe", "transport": "shm",
                                 "op": "pingpong"})  # not fitted: ignored
    found = crosscheck(dataset, [probe, other])
    assert found.table is None and len(found.withheld) == 1
    (why,) = found.withheld
    assert why.startswith("tcp osu mean vs the probe's model: not compared")
    assert "no load recorded" in why and "local-crosscheck.yaml" in why
    assert "x1.3-1.5" in why
    # nothing to set beside: no probe model for the tool's transport
    assert crosscheck(dataset, [other]).table is None


def test_no_unflagged_violation_in_the_demos_output(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """The demo's data through the physical sanity layer (kit/figures/sanity.py): its summary,
    report and SimGrid exports, and LogGP / diff on its dataset, show no figure physics
    forbids unflagged (tests/sanity_scan.py); the exports have no factor <= 0."""
    from tests.sanity_scan import violations

    out, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    texts = [("demo", proc.stdout + proc.stderr),
             ("report", (out / "report" / "index.html").read_text(encoding="utf-8"))]
    texts += [(str(p), p.read_text()) for p in (out / "simgrid").glob("*/smpi-config.txt")]
    dataset = out / "dataset"
    for args in (["loggp", dataset, "--series", "transport=tcp"],
                 ["loggp", dataset, "--series", "transport=shm"],
                 ["diff", f"{dataset}#transport=tcp,op=pingpong", "--halves",
                  "--bootstrap", "40"]):
        done = subprocess.run([sys.executable, "-m", "kit", *map(str, args)], env=mpi_env(),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode in (0, 3, 4) and "Traceback" not in done.stderr, done.stderr
        texts.append((" ".join(map(str, args[:1])), done.stdout + done.stderr))
    found = [v for where, text in texts for v in violations(text, where)]
    assert not found, "\n".join(found[:20])
