"""What the demo tells a new user: tools it did not run and how to add them, a busy machine.

These run the real planner on the real demo campaign (no measurement): fast, and they fail
when the demo goes quiet about a missing cross-check again.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from kit.core.paths import SPACK_VIEW_ENV
from kit.measure.campaign.plan import plan_campaign
from kit.measure.machine import Load, busy_limit, check_machine, current_load, wait_for_idle
from kit.outputs.demo import DEFAULT_CAMPAIGN, not_run_note
from kit.tools.binaries import TOOLS_PATH_ENV
from kit.tools.osu import find_osu
from kit.tools.skampi import find_skampi


@pytest.fixture
def no_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """PATH and the default Spack view without OSU/SkaMPI (whatever this machine and checkout
    hold), no PT2PT_TOOLS_PATH."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    import shutil

    keep = [d for d in ("/usr/bin", "/bin") if shutil.which("osu_latency", path=d) is None
            and shutil.which("skampi", path=d) is None]
    monkeypatch.setenv("PATH", ":".join([str(empty), *keep]))
    monkeypatch.delenv(TOOLS_PATH_ENV, raising=False)
    monkeypatch.setenv(SPACK_VIEW_ENV, str(empty))
    return empty


def _fake_tool(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_demo_names_the_tools_it_did_not_plan_and_the_command(
        no_tools: Path, tmp_path: Path, probe_bin: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    campaign_dir = tmp_path / "out" / "campaign"
    plan_campaign(DEFAULT_CAMPAIGN, campaign_dir)
    note = not_run_note(campaign_dir, tmp_path / "out")
    assert note is not None
    assert "OSU micro-benchmarks (osu_latency, osu_bw)" in note and "SkaMPI" in note
    assert f"{TOOLS_PATH_ENV}=" in note and "pt2pt demo -o out-tools" in note
    assert "spack -e . install" in note

    # The command the note gives works: PT2PT_TOOLS_PATH makes the planner find the tools.
    prefix = tmp_path / "osu-prefix"
    osu = _fake_tool(prefix / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt",
                     "osu_latency")
    _fake_tool(prefix / "bin", "osu_bw")
    skampi = _fake_tool(tmp_path / "skampi-bin", "skampi")
    monkeypatch.setenv(TOOLS_PATH_ENV, f"{prefix}:{skampi.parent}")
    view = tmp_path / "no-view"
    assert find_osu("osu_latency", view) == osu
    assert find_skampi(view) == skampi
    # The old plan is fixed: the note now says to plan afresh rather than how to install.
    assert "fresh plan" in (not_run_note(campaign_dir, tmp_path / "out") or "")
    fresh = tmp_path / "fresh" / "campaign"
    plan_campaign(DEFAULT_CAMPAIGN, fresh)
    assert not_run_note(fresh, tmp_path / "fresh") is None


def test_busy_limit_leaves_the_two_ranks_their_cpus() -> None:
    assert busy_limit(1) == busy_limit(2) == 1.0
    assert busy_limit(4) == 2.5
    assert not Load(0.2, 2, busy_limit(2)).busy
    assert Load(15.0, 2, busy_limit(2)).busy
    load = current_load()  # the real one: a number, never an exception
    assert load.load1 >= 0 and load.cpus >= 1


def test_wait_for_idle_waits_until_quiet_or_gives_up() -> None:
    loads = iter([8.0, 6.0, 0.5, 0.4])
    slept: list[float] = []
    seen: list[float] = []
    last = wait_for_idle(600, poll_s=10, sample=lambda: Load(next(loads), 2, 1.0),
                         sleep=slept.append, on_wait=lambda load, _w: seen.append(load.load1))
    assert last.load1 == 0.5 and not last.busy
    assert slept == [10, 10] and seen == [8.0, 6.0]

    slept.clear()
    last = wait_for_idle(25, poll_s=10, sample=lambda: Load(9.0, 2, 1.0), sleep=slept.append)
    assert last.busy and slept == [10, 10, 5]  # gives up after max_wait_s, never longer


def test_busy_warning_names_the_load_and_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    import kit.measure.machine

    monkeypatch.setattr(kit.measure.machine, "current_load", lambda: Load(15.3, 2, 1.0))
    buf = io.StringIO()
    note = check_machine(Console(file=buf, width=300), wait_idle_s=0)
    assert note is not None and "15.3" in note and "--wait-idle" in note
    assert "warning" in buf.getvalue()
    monkeypatch.setattr(kit.measure.machine, "current_load", lambda: Load(0.1, 2, 1.0))
    assert check_machine(Console(file=io.StringIO()), wait_idle_s=0) is None


@pytest.mark.parametrize("command", [["fit", "-o", "m.json"], ["report", "-o", "r"],
                                     ["validate"], ["compare"], ["datasets"]])
def test_commands_on_a_folder_that_is_not_a_dataset_say_so(command: list[str],
                                                           tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "demo-out"
    (folder / "dataset").mkdir(parents=True)
    (folder / "dataset" / "runs.parquet").write_bytes(b"")  # a dataset one level down
    argv = [sys.executable, "-m", "kit", command[0], str(folder), *command[1:]]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "nothing has been ingested into this folder" in text
    assert f"'pt2pt ingest FILES... --dataset {folder}'" in text  # the next command
    assert str(folder / "dataset") in text  # and the dataset it probably meant
    assert "Traceback" not in proc.stderr


def test_a_dataset_given_where_a_model_is_expected_says_fit_first(tmp_path: Path) -> None:
    from kit.core.errors import ModelError
    from kit.model.io import load_model

    dataset = tmp_path / "data"
    dataset.mkdir()
    (dataset / "runs.parquet").write_bytes(b"")
    with pytest.raises(ModelError) as err:
        load_model(dataset)
    assert f"'pt2pt fit {dataset} -o MODEL.json'" in err.value.paragraph()
    with pytest.raises(ModelError) as err:
        load_model(tmp_path)
    assert "give one of its *.json model files" in err.value.paragraph()


def test_run_local_warns_on_a_busy_machine_only_when_it_measures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """run-local checks the load like the demo, and says nothing when no job is left to run."""
    import kit.commands.run_local as run_local
    import kit.measure.campaign.manifest
    import kit.measure.machine
    from kit.cli import main

    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: busy\nmpi: openmpi\ntransports: [shm]\nplacement: intra-node\n"
                        "tools:\n  - tool: probe\n    ops: [pingpong]\n    sizes: list:1\n"
                        "    samples: 2\n")
    out = tmp_path / "out"
    assert main(["plan", str(campaign), "-o", str(out)]) == 0
    monkeypatch.setattr(kit.measure.machine, "current_load", lambda: Load(15.3, 2, 1.0))
    monkeypatch.setattr(run_local, "run_local_with_progress", lambda *a, **k: [])
    capsys.readouterr()
    assert main(["run-local", str(out)]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())  # rich wraps at the terminal width
    assert "15.3" in err and f"pt2pt run-local {out} --rerun --wait-idle" in err
    assert "busy machine" in captured.out
    monkeypatch.setattr(kit.measure.campaign.manifest, "pending_jobs", lambda *a: 0)
    assert main(["run-local", str(out)]) == 0
    assert "15.3" not in capsys.readouterr().err
