"""The probe never overwrites a run and never outlives its launcher (issue 53, lines 1 and 7).

Real MPI runs (serial half): a second run with the same ``--output`` is refused with exit 2
and the first run's files are unchanged (1,010 samples used to become 20); while it runs the
samples file is locked and ingest skips it as "still being written"; SIGKILL of ``mpirun``
ends both ranks (PR_SET_PDEATHSIG), whose meta then says complete: false, and the run is
ingested as incomplete. A rerun in a campaign moves the earlier outputs to ``previous/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.measure.campaign import jobrecord
from tests.test_probe import descendants, kill_tree, mpirun_cmd, run_probe


@pytest.fixture
def scratch() -> Iterator[Path]:
    """Shared-memory segments and session dirs of this test's MPI runs; removed after."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    path = Path(tempfile.mkdtemp(prefix="pt2pt-lifecycle-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_an_existing_run_is_never_overwritten(probe_bin: Path, scratch: Path,
                                              tmp_path: Path) -> None:
    prefix = tmp_path / "run"
    first = run_probe(probe_bin, scratch, prefix, ["--sizes", "list:8", "--samples", "1000",
                                                  "--warmup", "10"])
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = run_probe(probe_bin, scratch, prefix, ["--sizes", "list:8", "--samples", "20"],
                      exits_2=True)
    assert again.returncode == 2 and "never overwrites a run" in again.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert len(before["run.samples.csv"].splitlines()) == 1011


def _start(probe_bin: Path, scratch: Path, prefix: Path) -> subprocess.Popen[str]:
    cmd, env = mpirun_cmd(probe_bin, scratch, ["--sizes", "loguniform:0:64K", "--samples",
                                               "5000000", "--flush-every", "512",
                                               "--output", str(prefix)])
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for_rows(samples: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if samples.exists() and samples.stat().st_size > 4096:
            return
        time.sleep(0.1)
    kill_tree(proc)
    pytest.fail("the probe wrote no block within 60 s")


def test_a_running_probe_is_not_ingested_and_its_ranks_die_with_mpirun(
        probe_bin: Path, scratch: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "job" / "probe"
    prefix.parent.mkdir()
    proc = _start(probe_bin, scratch, prefix)
    samples = prefix.with_name("probe.samples.csv")
    try:
        _wait_for_rows(samples, proc)
        report = ingest([prefix.parent], tmp_path / "ds")
        assert report.running == [samples] and report.runs_added == 0
        ranks = descendants(proc.pid)
        assert ranks
        os.kill(proc.pid, signal.SIGKILL)  # mpirun alone, as a user or a crash would
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in ranks):
            time.sleep(0.2)
        alive = [p for p in ranks if Path(f"/proc/{p}/stat").exists()
                 and Path(f"/proc/{p}/stat").read_text().split()[2] != "Z"]
        assert not alive, f"ranks {alive} outlived mpirun"
    finally:
        for pid in [proc.pid, *descendants(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    meta = json.loads(prefix.with_name("probe.meta.json").read_text())
    assert meta["complete"] is False and meta["stop_reason"] == "signal SIGTERM"
    report = ingest([prefix.parent], tmp_path / "ds")
    assert report.runs_added == 1 and not report.running
    assert ds.runs(tmp_path / "ds")["complete"].to_list() == [False]


def test_a_rerun_keeps_the_previous_outputs(tmp_path: Path) -> None:
    """What `pt2pt run-local --rerun` or a Slurm requeue does before the tool starts."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "plan.json").write_text(json.dumps({"outputs": ["probe.samples.csv"],
                                               "meta_file": "probe.meta.json"}))
    (job / "probe.samples.csv").write_text("old samples\n")
    (job / "probe.meta.json").write_text("{}")
    jobrecord._keep_previous(job, json.loads((job / "plan.json").read_text()))
    kept = list((job / "previous").iterdir())
    assert len(kept) == 1 and (kept[0] / "probe.samples.csv").read_text() == "old samples\n"
    assert not (job / "probe.samples.csv").exists() and (kept[0] / "probe.meta.json").exists()
