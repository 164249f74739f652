"""``pt2pt run-local`` and ``collect`` with the real probe and Open MPI (no Slurm)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kit.data.dataset import runs, series_table
from tests.conftest_slurm import pt2pt_here

CAMPAIGN = """\
name: local-test
mpi: openmpi
transports: [shm, tcp, ib]
placement: intra-node
repetitions: 1
seed: 9
launcher: srun --mpi=pmix
tools:
  - tool: probe
    ops: [pingpong, send]
    sizes: loguniform:0:256K
    samples: 60
    warmup: 5
"""

pytestmark = [pytest.mark.mpi, pytest.mark.usefixtures("tcp_campaign_env")]


def test_run_local_runs_every_job_and_collects(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    proc = pt2pt_here("run-local", campaign, "-o", out, "--dataset", dataset)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    records = {j["transport"]: json.loads((out / j["dir"] / "job.json").read_text())
               for j in manifest["jobs"]}
    for name in ("shm", "tcp"):
        assert records[name]["state"] == "completed"
        assert records[name]["transport_check"]["status"] == "passed"
        assert records[name]["run_local"] is True
        assert records[name]["command"][:3] == ["mpirun", "-n", "2"]
    assert "grew by" in records["tcp"]["transport_check"]["detail"]
    ib = records["ib"]
    assert ib["state"] == "skipped" and ib["exit_status"] == 77 and ib["tool_exit_status"] == 1
    assert "'rc' is not available" in ib["skipped"]
    # Jobs ran in the manifest's (shuffled) order.
    starts = [records[j["transport"]]["start"] for j in manifest["jobs"]]
    assert starts == sorted(starts)
    # The dataset holds both series of both transports, labelled from the manifest.
    series = series_table(dataset)
    assert {(r["transport"], r["op"]) for r in series.iter_rows(named=True)} == {
        (t, op) for t in ("shm", "tcp") for op in ("pingpong", "send")}
    assert set(series["campaign"]) == {"local-test"}
    assert runs(dataset)["complete"].to_list() == [True, True]
    assert "skipped" in proc.stdout and "ib unavailable" in proc.stdout
    collected = json.loads((out / "collect.json").read_text())
    assert sorted(j["outcome"] for j in collected["jobs"]) == ["ingested", "ingested", "skipped"]


def test_second_run_resumes_and_collect_is_idempotent(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN.replace("[shm, tcp, ib]", "[shm]"))
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    assert pt2pt_here("run-local", campaign, "-o", out, "--dataset", dataset).returncode == 0
    job_json = next(out.glob("jobs/*/job.json"))
    before = job_json.read_bytes()
    rows = len(runs(dataset))
    again = pt2pt_here("run-local", out, "--dataset", dataset)
    assert again.returncode == 0
    assert "already done" in again.stderr
    assert job_json.read_bytes() == before
    assert len(runs(dataset)) == rows
    assert "already in the dataset" in again.stdout


def test_record_survives_term_sent_to_every_process_of_the_job(tmp_path: Path) -> None:
    """scancel signals every process of a job, then kills what is left KillWait later: a
    record helper killed as it starts left a job with no job.json at all (seen once in the
    4-node campaign: the probe had just finished, the helper writing "completed" died of the
    TERM, and no other record was written before the kill). Here the whole process group
    gets TERM every 5 ms for 3 s from the moment the probe's meta says it is done, then KILL:
    without the helper ignoring TERM no record is ever written."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN.replace("[shm, tcp, ib]", "[shm]"))
    out = tmp_path / "campaign"
    assert pt2pt_here("plan", campaign, "-o", out).returncode == 0
    script = next(out.glob("jobs/*/job.sbatch"))
    meta = script.parent / "probe.meta.json"
    proc = subprocess.Popen(["bash", str(script)], env={**os.environ, "PT2PT_RUN_LOCAL": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (meta.exists() and '"complete": true' in meta.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "the probe did not finish"
            time.sleep(0.002)
        stop, sent = time.monotonic() + 3, 0
        while time.monotonic() < stop and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
                sent += 1
            time.sleep(0.005)
        assert sent > 0, "the job ended before the first TERM: nothing was tested"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    record = json.loads((script.parent / "job.json").read_text())
    assert record["state"] in ("completed", "cancelled"), record


@pytest.mark.root
def test_job_script_runs_as_an_unprivileged_user(tmp_path: Path) -> None:
    """run-local is plain bash + mpirun: the same script works without root flags."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root (to switch to 'nobody') and runuser")
    # pytest's own tmp root is private to root; 'nobody' needs a path it can traverse.
    shared = Path(tempfile.mkdtemp(prefix="pt2pt-nonroot-"))
    try:
        shared.chmod(0o755)
        _run_as_nobody(tmp_path, shared)
    finally:
        shutil.rmtree(shared)


def _run_as_nobody(tmp_path: Path, shared: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN.replace("[shm, tcp, ib]", "[shm]"))
    out = shared / "campaign"
    assert pt2pt_here("plan", campaign, "-o", out).returncode == 0
    subprocess.run(["chown", "-R", "nobody", str(out)], check=True)
    script = next(out.glob("jobs/*/job.sbatch"))
    proc = subprocess.run(["runuser", "-u", "nobody", "--", "env", "-i", "PATH=/usr/bin:/bin",
                           f"HOME={out}", "PT2PT_RUN_LOCAL=1", "bash", str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((script.parent / "job.json").read_text())
    assert record["state"] == "completed"
    assert (script.parent / "probe.samples.csv").stat().st_uid != 0
