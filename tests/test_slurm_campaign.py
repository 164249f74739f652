"""Campaigns through a real local Slurm: plan -> submit -> status -> collect, and scancel.

Uses the project's own single-node cluster (``slurm_cluster`` from tests/conftest_slurm.py,
brought up by playbooks/local-cluster.yml). Sample counts are small; assertions are about
states, labels and orderings, never speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.campaign.slurm import squeue_states
from kit.dataset import runs, series_table
from kit.localcluster import Cluster

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow]

CAMPAIGN = """\
name: slurm-test
mpi: openmpi
transports: [shm, tcp, ib]
placement: intra-node
repetitions: 1
seed: 17
launcher: srun --mpi=pmix
slurm:
  partition: {partition}
  time: "00:05:00"
tools:
  - tool: probe
    ops: [pingpong, recv]
    sizes: loguniform:0:512K
    samples: 80
    warmup: 5
"""

LONG = """\
name: slurm-cancel
mpi: openmpi
transports: [tcp]
placement: intra-node
seed: 4
launcher: mpirun
slurm: {{partition: {partition}, time: "00:10:00"}}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:64K
    samples: 5000000
    warmup: 0
    extra_args: [--flush-every, "64"]
"""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, probe_bin: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    monkeypatch.setenv("PT2PT_PROBE", str(probe_bin))


def _pt2pt(cluster: Cluster, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True,
                          text=True, timeout=600, env=cluster.environ())


def _wait_gone(cluster: Cluster, ids: list[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while squeue_states(ids, cluster.environ()):
        assert time.monotonic() < deadline, f"jobs {ids} still queued after {timeout} s"
        time.sleep(0.5)


def test_plan_submit_status_collect(slurm_cluster: Cluster, tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN.format(partition=slurm_cluster.partition))
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    dry = _pt2pt(slurm_cluster, "submit", out, "--dry-run")
    assert dry.returncode == 0 and dry.stdout.count("sbatch --parsable") == 3
    assert not (out / "submitted.json").exists()
    sub = _pt2pt(slurm_cluster, "submit", out)
    assert sub.returncode == 0, sub.stderr
    ids = json.loads((out / "submitted.json").read_text())["jobs"]
    assert len(ids) == 3
    _wait_gone(slurm_cluster, list(ids.values()))

    status = _pt2pt(slurm_cluster, "status", out)
    assert status.returncode == 0, status.stderr
    lines = {line.split()[1]: line for line in status.stdout.splitlines()
             if "-probe-" in line}
    for job, sid in ids.items():
        assert sid in lines[job]
        if "-ib-" in job:
            # slurm state from scontrol (no accounting here), result from job.json
            assert "FAILED" in lines[job] and "skipped" in lines[job]
        else:
            assert "COMPLETED" in lines[job] and "completed" in lines[job]

    collected = _pt2pt(slurm_cluster, "collect", out, "--dataset", dataset)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "2 ingested, 1 skipped" in collected.stdout
    assert "ib unavailable: transport 'rc' is not available" in collected.stdout
    series = series_table(dataset)
    assert {(r["transport"], r["op"]) for r in series.iter_rows(named=True)} == {
        (t, op) for t in ("shm", "tcp") for op in ("pingpong", "recv")}
    table = runs(dataset)
    assert sorted(table["job_id"].to_list()) == sorted(
        sid for job, sid in ids.items() if "-ib-" not in job)
    for job, sid in ids.items():
        record = json.loads((out / "jobs" / job / "job.json").read_text())
        assert record["slurm_job_id"] == sid and record["run_local"] is False
        assert record["command"][:2] == ["srun", "--mpi=pmix"]

    # run-local of the same campaign gives the same series (and the same skip).
    local_out, local_ds = tmp_path / "local", tmp_path / "local-dataset"
    local = _pt2pt(slurm_cluster, "run-local", campaign, "-o", local_out,
                   "--dataset", local_ds)
    assert local.returncode == 0, local.stdout + local.stderr
    keys = ["tool", "transport", "op", "stat"]
    assert series_table(local_ds).select(keys).sort(keys).equals(
        series.select(keys).sort(keys))


def test_scancel_keeps_written_samples_and_marks_the_run_incomplete(
        slurm_cluster: Cluster, tmp_path: Path) -> None:
    campaign = tmp_path / "long.yaml"
    campaign.write_text(LONG.format(partition=slurm_cluster.partition))
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    assert _pt2pt(slurm_cluster, "submit", out).returncode == 0
    (job, sid), = json.loads((out / "submitted.json").read_text())["jobs"].items()
    csv = out / "jobs" / job / "probe.samples.csv"
    deadline = time.monotonic() + 120
    while not (csv.exists() and csv.read_text().count("\n") > 200):
        assert time.monotonic() < deadline, "the probe wrote no block within 120 s"
        assert squeue_states([sid], slurm_cluster.environ()), "the job ended on its own"
        time.sleep(0.5)
    subprocess.run(["scancel", sid], env=slurm_cluster.environ(), check=True)
    _wait_gone(slurm_cluster, [sid])

    record = json.loads((out / "jobs" / job / "job.json").read_text())
    assert record["state"] == "cancelled" and record["exit_status"] == 143
    written = csv.read_text().count("\n") - 1
    collected = _pt2pt(slurm_cluster, "collect", out, "--dataset", dataset)
    assert "1 partial" in collected.stdout and "incomplete" in collected.stdout
    table = runs(dataset)
    assert table["complete"].to_list() == [False]
    assert 200 <= table["n_samples"][0] <= written
    report = json.loads((out / "collect.json").read_text())
    assert report["jobs"][0]["outcome"] == "partial" and report["jobs"][0]["complete"] is False


def test_submit_reports_sbatch_refusal_without_a_traceback(slurm_cluster: Cluster,
                                                          tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN.format(partition="no-such-partition"))
    out = tmp_path / "campaign"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    proc = _pt2pt(slurm_cluster, "submit", out)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    text = " ".join(proc.stderr.split())
    assert "sbatch refused job" in text and "partition" in text.lower()
    assert not (out / "submitted.json").exists()
