"""The adaptive campaign's round driver (kit.fit.adaptive_campaign), whoever runs the jobs:
plan -> the round's jobs -> collect -> fit -> decide, resumed after an interruption without
measuring a recorded round again, and refused in words when a round's job failed.

The jobs are replaced only at the "run this round's jobs" seam (``run_adaptive(run=...)``):
the fake writes what the probe would (samples of a known two-regime truth at exactly the
sizes the round's plan asks for, ``job.json``), so planning, collecting, fitting and the
record are the real ones. The real probe runs these rounds in tests/test_adaptive_campaign.py
(run-local) and tests/test_adaptive_slurm.py (Slurm).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from kit.core.errors import CampaignError
from kit.data import dataset as ds
from kit.fit.adaptive_campaign import is_adaptive_dir, prepare, run_adaptive, use_dataset
from kit.measure.campaign.runlocal import LocalResult
from tests.builders import adaptive_campaign
from tests.conftest_slurm import pt2pt_here

CAMPAIGN = adaptive_campaign("adaptive-unit")


@pytest.fixture(autouse=True)
def _fake_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning needs a probe binary to name; the fake jobs never run it."""
    probe = tmp_path / "probe"
    probe.write_text("#!/bin/sh\nexit 0\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))


class FakeJobs:
    """Runs a round's jobs the way the probe would, counting the rounds it measured."""

    def __init__(self, fail_round: int | None = None,
                 loads: dict[int, float] | None = None) -> None:
        self.ran: list[str] = []
        self.fail_round = fail_round
        self.loads = loads  # per round: the runnable tasks the job's watcher saw

    def __call__(self, round_dir: Path) -> list[LocalResult]:
        k = int(round_dir.name.split("-")[1])
        self.ran.append(round_dir.name)
        plan = yaml.safe_load((round_dir.parent / f"{round_dir.name}.yaml").read_text())
        probe = plan["tools"][0]
        sizes = np.repeat([int(s) for s in probe["sizes"][len("list:"):].split(",")],
                          probe["samples"])
        rng = np.random.default_rng(k)
        rng.shuffle(sizes)
        # truth: 2 us + 1 ns/B below 4 KiB, 6 us + 0.2 ns/B above, 3 % lognormal noise
        one_way = np.where(sizes < 4096, 2e-6 + 1e-9 * sizes, 6e-6 + 2e-10 * sizes)
        one_way = one_way * rng.lognormal(0.0, 0.03, len(sizes))
        manifest = json.loads((round_dir / "manifest.json").read_text())
        results = []
        for job in manifest["jobs"]:
            folder = round_dir / job["dir"]
            if k == self.fail_round:
                (folder / "job.json").write_text(json.dumps(
                    {"state": "failed", "exit_status": 1, "reason": "probe exited 1"}))
                results.append(LocalResult(job["id"], "failed", 1, "probe exited 1"))
                continue
            lines = ["seq,op,size,count,time,call,warmup"]
            lines += [f"{i},pingpong,{s},1,{2 * t:.9e},,0"
                      for i, (s, t) in enumerate(zip(sizes, one_way, strict=True))]
            (folder / job["outputs"][0]).write_text("\n".join(lines) + "\n")
            meta = {"probe_version": "0.1.0", "argv": ["fake"], "mpi_version": "fake",
                    "hosts": ["n0", "n0"], "seed": job["seed"],
                    "timer": {"name": "mpi", "resolution_s": 1e-9, "overhead_s": 0.0},
                    "sizes": {"spec": probe["sizes"], "samples": len(sizes)},
                    "ops": ["pingpong"], "warmup": 0, "env": {}, "slurm_job_id": None,
                    "start": f"2026-01-01T00:00:{k:02d}Z", "end": None,
                    "samples_written": len(sizes), "complete": True}
            (folder / job["meta_file"]).write_text(json.dumps(meta))
            job_record: dict[str, object] = {"state": "completed", "exit_status": 0}
            if self.loads is not None:  # as the job templates record it (kit.tools.jobrecord)
                job_record["plan"] = json.loads((folder / "plan.json").read_text())
                job_record["conditions"] = {
                    "cpus_online": 2, "ranks_per_node": 2, "before": {"load1": 1.0},
                    "during": {"load": self.loads.get(k, 2.0), "samples": 5,
                               "cpu_pressure": 0.5 if k in self.loads else 0.01},
                    "after": {"load1": 1.0}}
            (folder / "job.json").write_text(json.dumps(job_record))
            results.append(LocalResult(job["id"], "completed", 0))
        return results


def _start(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    out = tmp_path / "out"
    prepare(campaign, out)
    assert is_adaptive_dir(out)
    return out


def test_rounds_until_the_budget_every_round_collected(tmp_path: Path) -> None:
    out = _start(tmp_path)
    jobs = FakeJobs()
    lines: list[str] = []
    record = run_adaptive(out, run=jobs, echo=lines.append)
    # ±0.1 % everywhere is out of reach of 600 samples: the budget stops it after 3 rounds
    assert record["stopped"] == "budget" and not record["reached"]
    assert jobs.ran == ["round-00", "round-01", "round-02"]
    data = ds.select_series(out / "dataset", {"campaign": "adaptive-unit"})
    assert len(data.size) == record["total_samples"] == 600
    for r in record["rounds"]:
        assert set(r["sizes"]) <= set(data.size.astype(int).tolist())
    assert json.loads((out / "dataset" / "design.json").read_text()) == record
    assert any("the sample budget (600) was spent" in line for line in lines)
    status = pt2pt_here("status", out)
    assert status.returncode == 0, status.stderr
    assert "round 2: 200 samples (600 in all)" in status.stdout
    assert "stopped: the sample budget (600) was spent" in status.stdout
    assert "000-probe-tcp-intra-r1" in status.stdout  # the latest round's job table
    # finished: the same call says so and measures nothing
    again = run_adaptive(out, run=jobs, echo=lines.append)
    assert again == record and jobs.ran == ["round-00", "round-01", "round-02"]
    assert "already finished" in lines[-1]


def test_a_round_measured_on_a_busy_node_is_said_and_recorded(tmp_path: Path) -> None:
    """Each round's fit takes all its samples, so a loaded round moves the design: the
    run-conditions judge's verdict is printed per round and kept in the design record."""
    out = _start(tmp_path)
    lines: list[str] = []
    record = run_adaptive(out, run=FakeJobs(loads={1: 6.0}), echo=lines.append)
    verdicts = [r["conditions"] for r in record["rounds"]]
    assert [v.get("disturbed", 0) for v in verdicts] == [0, 1, 0]
    assert [v.get("quiet", 0) for v in verdicts] == [1, 0, 1]
    said = [line for line in lines if "disturbed node" in line]
    assert len(said) == 1 and said[0].startswith("round 1: 1 of 1 run(s)")
    assert "load 6.0 during the run" in said[0]
    assert json.loads((out / "design.json").read_text())["rounds"][1]["conditions"] == \
        verdicts[1]


def test_an_interrupted_run_resumes_where_it_stopped_and_draws_the_same_rounds(
        tmp_path: Path) -> None:
    whole = run_adaptive(_start(tmp_path / "a"), run=FakeJobs())
    out = _start(tmp_path / "b")
    jobs = FakeJobs(fail_round=1)
    with pytest.raises(CampaignError, match=r"round 1: job \S+ ended failed \(probe exited 1\)"):
        run_adaptive(out, run=jobs)
    state = json.loads((out / "adaptive.json").read_text())
    assert [r["round"] for r in state["rounds"]] == [0]  # round 0 kept, recorded
    assert len(ds.select_series(out / "dataset", {"campaign": "adaptive-unit"}).size) == 200
    lines: list[str] = []
    jobs.fail_round = None
    resumed = run_adaptive(out, run=jobs, echo=lines.append)
    assert jobs.ran == ["round-00", "round-01", "round-01", "round-02"]  # 0 not run again
    assert "resuming after round 0 (200 samples)" in lines[0]
    assert [r["sizes"] for r in resumed["rounds"]] == [r["sizes"] for r in whole["rounds"]]
    assert resumed["total_samples"] == 600 and resumed["stopped"] == "budget"
    assert len(ds.select_series(out / "dataset", {"campaign": "adaptive-unit"}).size) == 600


def test_a_changed_design_or_dataset_is_refused_in_words(tmp_path: Path) -> None:
    out = _start(tmp_path)
    with pytest.raises(CampaignError, match="round 1"):
        run_adaptive(out, run=FakeJobs(fail_round=1))  # round 0 recorded
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN.replace("median: 0.001", "median: 0.01"))
    with pytest.raises(CampaignError, match="design changed since its rounds began"):
        run_adaptive(out, run=FakeJobs())
    with pytest.raises(CampaignError, match="with other design settings"):
        prepare(campaign, out)
    campaign.write_text(CAMPAIGN)
    with pytest.raises(CampaignError, match="collects into"):
        use_dataset(out, tmp_path / "elsewhere")
    assert len(ds.select_series(out / "dataset", {"campaign": "adaptive-unit"}).size) == 200


def test_plan_then_submit_dry_run_of_an_adaptive_campaign(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    planned = pt2pt_here("plan", campaign, "-o", tmp_path / "out")
    assert planned.returncode == 0, planned.stderr
    assert re.search(r"next: pt2pt submit \S+/out", planned.stdout)
    dry = pt2pt_here("submit", tmp_path / "out", "--dry-run")
    assert dry.returncode == 2 and "Traceback" not in dry.stderr
    assert "rounds are chosen as it runs" in " ".join(dry.stderr.split())


def _fake_slurm(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """sbatch/squeue/scontrol/sinfo that record their calls: an empty queue (after one
    squeue that gets no answer), no accounting."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch.calls"
    (bin_dir / "sbatch").write_text(
        f"#!/bin/sh\necho \"$@\" >> {calls}\nwc -l < {calls} | tr -d ' '\n")
    # the controller stalls once (as on a paused machine), then answers: an empty queue
    stalled = tmp_path / "squeue.stalled"
    (bin_dir / "squeue").write_text(
        f"#!/bin/sh\n[ -e {stalled} ] && exit 0\ntouch {stalled}\n"
        "echo 'slurm_load_jobs error: Socket timed out on send/recv operation' >&2\nexit 1\n")
    (bin_dir / "sinfo").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n[ \"$2\" = config ] && echo 'AccountingStorageType = "
        "accounting_storage/none' && exit 0\nexit 1\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, calls


def test_submit_and_wait_resubmits_only_a_failed_rounds_arrays(tmp_path: Path) -> None:
    from kit.measure.campaign.plan import plan_campaign
    from kit.measure.campaign.wait import submit_and_wait

    env, calls = _fake_slurm(tmp_path)
    fixed = tmp_path / "f.yaml"
    fixed.write_text(CAMPAIGN.split("design:")[0].replace("loguniform:1:64K", "list:5,70")
                     + "    samples: 2\n")
    round_dir = tmp_path / "round-00"
    plan_campaign(fixed, round_dir)
    job = json.loads((round_dir / "manifest.json").read_text())["jobs"][0]
    record = round_dir / job["dir"] / "job.json"
    record.write_text(json.dumps({"state": "failed", "exit_status": 1, "reason": "boom"}))
    first = submit_and_wait(round_dir, env=env, poll=0.0)
    assert [(r.job, r.state, r.reason) for r in first] == [(job["id"], "failed", "boom")]
    assert len(calls.read_text().splitlines()) == 1
    # the job failed: the same call submits its array again, with a new id
    again = submit_and_wait(round_dir, env=env, poll=0.0)
    assert [r.state for r in again] == ["failed"]  # (the fake sbatch runs nothing)
    assert len(calls.read_text().splitlines()) == 2
    assert json.loads((round_dir / "submitted.json").read_text())["jobs"] == {
        job["id"]: "2_0"}
    record.write_text(json.dumps({"state": "completed", "exit_status": 0}))
    # it completed: nothing is submitted again
    last = submit_and_wait(round_dir, env=env, poll=0.0)
    assert [(r.state, r.exit_status) for r in last] == [("completed", 0)]
    assert len(calls.read_text().splitlines()) == 2
