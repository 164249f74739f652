"""`pt2pt demo` end to end on this machine (real MPI, real probe): the README's first command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.model.io import load_model
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
    models = {p.stem: load_model(p) for p in (out / "models").glob("*.json")}
    assert {"shm-pingpong-probe", "tcp-pingpong-probe"} <= set(models)
    tcp = [m for name, m in models.items() if name.startswith("tcp-")]
    assert max(len(m.regimes_) for m in tcp) >= 2, "no tcp series has two regimes"
    for model in models.values():
        assert model.validation_["summary"]["model"]["crps_over_floor"] > 0
    index = out / "report" / "index.html"
    html = index.read_text(encoding="utf-8")
    pngs = list((out / "report").glob("*.png"))
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    assert all(p.name in html for p in pngs)
    cfg = (out / "simgrid" / "tcp-probe" / "smpi-config.txt").read_text(encoding="utf-8")
    assert "--cfg=network/latency-factor:" in cfg and "--cfg=smpi/os:" in cfg


def test_demo_prints_summary_and_how_to_open_the_tui(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = demo_run
    assert "tcp pingpong (probe)" in proc.stdout
    assert "shm pingpong (probe)" in proc.stdout
    assert f"pt2pt tui {out / 'dataset'}" in proc.stdout  # not a terminal: command printed
    assert "Traceback" not in proc.stderr


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
