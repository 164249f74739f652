"""``pt2pt submit DIR`` of an adaptive campaign through the real local Slurm: every round
planned, submitted as a job array, waited for, collected and fitted, until the budget (exit
3); the same command again measures nothing (issue 60 item 2). Tiny rounds: two rounds of
one job each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.data import dataset as ds
from kit.measure.localcluster import Cluster
from tests.builders import adaptive_campaign
from tests.conftest_slurm import pt2pt

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow,
              pytest.mark.usefixtures("campaign_env")]


def test_submit_runs_the_rounds_through_slurm_until_the_budget(slurm_cluster: Cluster,
                                                               tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(adaptive_campaign(
        "adaptive-slurm", seed=9, budget=200, round_samples=100, launcher="srun --mpi=pmix",
        slurm=f'{{partition: {slurm_cluster.partition}, time: "00:05:00"}}'))
    out = tmp_path / "adaptive"
    planned = pt2pt(slurm_cluster, "plan", campaign, "-o", out)
    assert planned.returncode == 0, planned.stderr
    proc = pt2pt(slurm_cluster, "submit", out)
    # ±0.1 % in every decade from 200 samples: the budget stops it after two rounds
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "the sample budget (200) was spent" in proc.stdout
    record = json.loads((out / "design.json").read_text())
    assert [r["round"] for r in record["rounds"]] == [0, 1]
    data = ds.select_series(out / "dataset", {"campaign": "adaptive-slurm"})
    assert len(data.size) == record["total_samples"] == 200
    submitted = {}
    for r in record["rounds"]:
        round_dir = out / f"round-{r['round']:02d}"
        submitted[round_dir] = (round_dir / "submitted.json").read_text()
        jobs = json.loads(submitted[round_dir])["jobs"]
        assert len(jobs) == 1  # one job, run by Slurm (an array task id), completed
        job_dir = next(round_dir.glob("jobs/*/"))
        assert json.loads((job_dir / "job.json").read_text())["state"] == "completed"
        assert set(r["sizes"]) <= set(data.size.astype(int).tolist())
    # the same command again: finished, nothing submitted again, nothing lost
    again = pt2pt(slurm_cluster, "submit", out)
    assert again.returncode == 3 and "already finished after 2 rounds" in again.stdout
    assert {d: (d / "submitted.json").read_text() for d in submitted} == submitted
    assert len(ds.select_series(out / "dataset", {"campaign": "adaptive-slurm"}).size) == 200
