"""The same samples are never stored twice (issue 53, line 1).

A probe run ingested while it is still being written, then again once it has ended, used to
become two overlapping runs (300,000 samples became 339,990 in the series; a second collect
gave 386,006). Now a run has an identity beyond its bytes (kit.tools.identity: plan
hash, start, hosts, seed, pairing) and a longer copy replaces a shorter one; a run whose
writer is alive (the probe's lock on its samples file, its pid in the meta, or a meta without
an end time that changed moments ago) is not committed unless ``--allow-running``;
``collect`` calls a job still running on this host "running", not "ended without job.json".
The probe side (lock, pid, never overwriting, dying with mpirun) is in test_probe_lifecycle.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.core.liveness import start_time
from kit.data import dataset as ds
from kit.data.collect import collect
from kit.data.ingest import ingest
from kit.measure.campaign.jobrecord import COUNTERS
from kit.measure.campaign.plan import plan_campaign
from kit.tools.identity import GRACE_S
from kit.tools.probe import HEADER

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}
HOST = os.uname().nodename


def _meta(*, rows: int, ended: bool, host: str = HOST, pid: int | None = None) -> dict:
    return {
        "probe_version": "0.1.0", "argv": ["pt2pt-probe"], "mpi_version": "Open MPI v4.1.4",
        "hosts": [host, host], "timer": {"name": "mpi", "resolution_s": 1e-9,
                                         "overhead_s": 3e-8},
        "seed": 7, "sizes": {"spec": "loguniform:0:64K", "samples": 5000},
        "ops": ["pingpong"], "warmup": 0, "env": {}, "slurm_job_id": None,
        "plan_hash": "00c0ffee00c0ffee", "pairing": [[0, 1]],
        "start": "2026-03-01T10:00:00.000001Z",
        "end": "2026-03-01T10:05:00Z" if ended else None,
        "samples_written": rows, "complete": ended,
        "stop_reason": "done" if ended else None, "writer_pid": pid,
    }


def _lines(n: int) -> str:
    return "".join(f"{i},pingpong,{(i * 37) % 65536},1,{2e-6 + i * 1e-12:.9e},,0\n"
                   for i in range(n))


def _write(folder: Path, rows: int, *, ended: bool, **meta: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    samples = folder / "probe.samples.csv"
    samples.write_text(HEADER + "\n" + _lines(rows))
    (folder / "probe.meta.json").write_text(json.dumps(_meta(rows=rows, ended=ended, **meta)))
    return samples


class Writer:
    """A probe run being written: its samples file locked, as the running probe holds it."""

    def __init__(self, folder: Path) -> None:
        self.samples = _write(folder, 300, ended=False)
        self.fd: int | None = os.open(self.samples, os.O_RDWR)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def end(self, rows: int) -> None:
        """The probe writes its last blocks and its final meta, and exits."""
        _write(self.samples.parent, rows, ended=True)
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@pytest.fixture
def held_lock(tmp_path: Path) -> Iterator[Writer]:
    writer = Writer(tmp_path / "job")
    try:
        yield writer
    finally:
        writer.close()


def _rows(dataset: Path) -> int:
    return ds.scan(dataset).filter(~pl.col("warmup")).select(pl.len()).collect().item()


def test_a_run_being_written_is_not_committed(held_lock: Writer, tmp_path: Path) -> None:
    report = ingest([held_lock.samples.parent], tmp_path / "ds")
    assert report.running == [held_lock.samples] and report.runs_added == 0
    assert any("still being written" in why for _p, why in report.files_skipped)
    assert not (tmp_path / "ds" / ds.RUNS_FILE).exists() or ds.runs(tmp_path / "ds").height == 0


def test_the_ended_run_replaces_its_partial_copy(held_lock: Writer, tmp_path: Path) -> None:
    """--allow-running takes 300 rows; when the run has ended with 5,000, the second ingest
    replaces them: 5,000 rows in the series, never 5,300."""
    dataset = tmp_path / "ds"
    partial = tmp_path / "copy-while-running"
    shutil.copytree(held_lock.samples.parent, partial)
    report = ingest([held_lock.samples.parent], dataset, allow_running=True)
    assert report.runs_added == 1 and _rows(dataset) == 300
    assert ds.runs(dataset)["complete"].to_list() == [False]
    held_lock.end(5000)
    report = ingest([held_lock.samples.parent], dataset)
    assert report.replaced and _rows(dataset) == 5000
    runs = ds.runs(dataset)
    assert runs.height == 1 and runs["complete"].to_list() == [True]
    assert len(list((dataset / "samples").rglob("part-*.parquet"))) == 1
    # The old, shorter copy found again later (another folder): not a second run.
    report = ingest([partial], dataset, allow_running=True)
    assert report.runs_added == 0 and _rows(dataset) == 5000
    assert any("a copy of run" in why for _p, why in report.files_skipped)


def test_two_copies_in_one_ingest_keep_the_longer(tmp_path: Path) -> None:
    _write(tmp_path / "a", 400, ended=False)  # a copy taken while it ran (its writer gone)
    _write(tmp_path / "b", 1200, ended=True)
    report = ingest([tmp_path / "a", tmp_path / "b"], tmp_path / "ds")
    assert report.runs_added == 1 and _rows(tmp_path / "ds") == 1200
    assert ds.runs(tmp_path / "ds").height == 1


def test_a_writer_on_this_host_is_asked_by_pid(tmp_path: Path) -> None:
    """No lock (a file system without them): the meta's writer_pid, alive and the probe."""
    fake = tmp_path / "pt2pt-probe"
    shutil.copy("/bin/sleep", fake)
    proc = subprocess.Popen([str(fake), "60"])
    try:
        _write(tmp_path / "run", 50, ended=False, pid=proc.pid)
        report = ingest([tmp_path / "run"], tmp_path / "ds")
        assert report.running and f"process {proc.pid}" in report.files_skipped[-1][1]
    finally:
        proc.kill()
        proc.wait()
    report = ingest([tmp_path / "run"], tmp_path / "ds")  # killed: an incomplete run
    assert report.runs_added == 1 and ds.runs(tmp_path / "ds")["complete"].to_list() == [False]


def test_a_writer_on_another_host_gets_a_grace_period(tmp_path: Path) -> None:
    _write(tmp_path / "run", 80, ended=False, host="node-far-away", pid=12345)
    report = ingest([tmp_path / "run"], tmp_path / "ds")
    assert report.running and "changed" in report.files_skipped[-1][1]
    old = time.time() - 2 * GRACE_S
    for name in ("probe.samples.csv", "probe.meta.json"):
        os.utime(tmp_path / "run" / name, (old, old))
    assert ingest([tmp_path / "run"], tmp_path / "ds").runs_added == 1


def test_cli_says_so_and_commits_nothing(held_lock: Writer, tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kit", "ingest", str(held_lock.samples.parent),
                          "--dataset", str(tmp_path / "ds")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert res.returncode == 0 and "Traceback" not in res.stderr
    assert "still being written" in res.stderr and "0 run(s)" in res.stdout


def _one_job_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A planned one-job probe campaign (never run): its folder and the job's folder."""
    monkeypatch.setenv("PT2PT_PROBE", "/bin/true")
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: live\nmpi: openmpi\ntransports: [shm]\nlauncher: mpirun\n"
                        "tools:\n  - tool: probe\n    samples: 10\n")
    out = tmp_path / "plan"
    job = json.loads(plan_campaign(campaign, out).read_text())["jobs"][0]
    return out, out / job["dir"]


def test_collect_calls_a_local_job_running(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose script is alive on this host (run-local) is "running": not ingested, not
    "ended without writing job.json"."""
    out, job_dir = _one_job_campaign(tmp_path, monkeypatch)
    _write(job_dir, 100, ended=False, host="node-far-away")
    # a process of our own as the job script: not this one, which is pid 1 in a container
    # (pid 1 is never taken for a writer)
    script = subprocess.Popen(["sleep", "300"])
    try:
        (job_dir / COUNTERS).write_text(json.dumps({"host": HOST, "pid": script.pid,
                                                    "pid_start": start_time(script.pid)}))
        report = collect(out, tmp_path / "ds")
    finally:
        script.kill()
        script.wait()
    assert [j.outcome for j in report.jobs] == ["running"]
    assert "still running on this host" in report.jobs[0].detail
    # the script has gone (another pid): the samples so far, as an incomplete run
    (job_dir / COUNTERS).write_text(json.dumps({"host": HOST, "pid": 2**22 + 7}))
    old = time.time() - 2 * GRACE_S
    for name in ("probe.samples.csv", "probe.meta.json"):
        os.utime(job_dir / name, (old, old))
    report = collect(out, tmp_path / "ds")
    assert [j.outcome for j in report.jobs] == ["partial"] and _rows(tmp_path / "ds") == 100


def test_collect_says_running_when_an_ended_jobs_writer_may_still_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """job.json says 'timeout' (Slurm signalled the script) but the probe on another node
    wrote a moment ago: nothing is taken and the job is 'running', not a 'partial' that
    ingested nothing (seen in CI: '1 partial' printed, an empty runs table)."""
    out, job_dir = _one_job_campaign(tmp_path, monkeypatch)
    _write(job_dir, 50, ended=False, host="node-far-away", pid=12345)
    (job_dir / "job.json").write_text(json.dumps({"state": "timeout", "exit_status": 143}))
    report = collect(out, tmp_path / "ds")
    assert [j.outcome for j in report.jobs] == ["running"], report.jobs
    assert "still being written" in report.jobs[0].detail and not ds.runs(tmp_path / "ds").height


@settings(max_examples=25, **SETTINGS)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=5))
def test_any_order_of_copies_stores_the_longest_once(tmp_path_factory: pytest.TempPathFactory,
                                                     lengths: list[int]) -> None:
    """Copies of one run taken at any moments, ingested in any order, one per call: the
    dataset always holds the longest seen so far, exactly once."""
    root = tmp_path_factory.mktemp("copies")
    dataset = root / "ds"
    longest = 0
    for k, n in enumerate(lengths):
        _write(root / f"copy{k}", n, ended=True)
        ingest([root / f"copy{k}"], dataset)
        longest = max(longest, n)
        assert _rows(dataset) == longest and ds.runs(dataset).height == 1
