"""Binding: the campaign chooses how the two ranks are pinned, the job scripts do it and show
it, job.json and the dataset record it; on the local Slurm cluster and with run-local."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.data.dataset import runs
from kit.measure.campaign import nodestate
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.slurm import wait_gone
from kit.measure.localcluster import Cluster
from tests.conftest_slurm import pt2pt as _pt2pt

CAMPAIGN = """\
name: binding
mpi: openmpi
transports: [shm]
placement: intra-node
repetitions: 1
seed: 3
launcher: {launcher}
{binding}
slurm:
  partition: {partition}
  time: "00:05:00"
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:64K
    samples: 200
    warmup: 5
"""


def _campaign(tmp_path: Path, binding: str = "", launcher: str = "srun --mpi=pmix",
              partition: str = "debug") -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(binding=binding, launcher=launcher, partition=partition))
    return path


@pytest.fixture(autouse=True)
def _env(campaign_env: None) -> None:
    """Plan with the checkout's probe and no site defaults."""


def _script(out: Path) -> str:
    (script,) = out.glob("jobs/*/job.sbatch")
    return script.read_text()


@pytest.mark.parametrize("binding,policy", [("", "cores"), ("binding: cores", "cores"),
                                            ("binding: none", "none"),
                                            ("binding: {cpus: [0, 1]}", "cpus:0,1")])
def test_the_campaign_chooses_the_binding_and_the_script_shows_it(
        tmp_path: Path, binding: str, policy: str) -> None:
    out = tmp_path / "out"
    plan_campaign(_campaign(tmp_path, binding), out)
    text = _script(out)
    assert f"# Every rank runs the tool under this wrapper, which pins it to one CPU (binding\n" \
           f"# {policy}:" in text
    assert f"PT2PT_BINDING={policy}" in text and 'pin=(taskset -c "$cpu")' in text
    # the launchers leave the pinning to the wrapper
    assert "PT2PT_LAUNCH=(mpirun -n 2 --bind-to none)" in text
    assert re.search(r"PT2PT_LAUNCH=\(srun --mpi=pmix .*--cpu-bind=none\)", text)
    (plan,) = out.glob("jobs/*/plan.json")
    assert json.loads(plan.read_text())["binding"] == policy
    assert json.loads((out / "manifest.json").read_text())["campaign"]["binding"] == policy


def test_a_bad_binding_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(CampaignError) as err:
        plan_campaign(_campaign(tmp_path, "binding: sockets"), tmp_path / "out")
    assert "c.yaml:8" in err.value.paragraph() and "binding: cores" in err.value.paragraph()


def test_cores_are_one_cpu_per_physical_core_and_ranks_get_distinct_ones() -> None:
    found = nodestate.cores()
    assert found and len(set(found)) == len(found)
    assert set(found) <= set(os.sched_getaffinity(0))
    assert nodestate.bind_cpu(0, "cores") == found[0]
    if len(found) > 1:
        assert nodestate.bind_cpu(1, "cores") == found[1]
    assert nodestate.bind_cpu(1, "cpus:4,6") == 6 and nodestate.bind_cpu(0, "none") is None


@pytest.mark.mpi
@pytest.mark.slow
def test_run_local_pins_the_ranks_and_the_dataset_records_it(tmp_path: Path,
                                                             probe_bin: Path) -> None:
    from kit.data.collect import collect
    from kit.measure.campaign.runlocal import run_local
    from tests.conftest import mpi_env

    for binding, expected in (("", "cores"), ("binding: none", "none")):
        out, data = tmp_path / f"out-{expected}", tmp_path / f"ds-{expected}"
        plan_campaign(_campaign(tmp_path, binding, launcher="mpirun"), out)
        (result,) = run_local(out, env=mpi_env())
        assert result.state == "completed", result.reason
        collect(out, data)
        (run,) = runs(data).to_dicts()
        if expected == "none":
            assert run["binding"] == "none"
            continue
        pinned = nodestate.cores()[:2]
        assert run["binding"] == f"cores {pinned[0]},{pinned[1] if len(pinned) > 1 else pinned[0]}"
        # what the probe saw (sched_getcpu when measuring started and ended) is what was pinned
        assert run["cpus"] == run["binding"].split()[1] == run["cpus_end"]


@pytest.mark.slurm
@pytest.mark.mpi
@pytest.mark.slow
def test_slurm_jobs_pin_the_ranks_and_the_dataset_records_it(
        slurm_cluster: Cluster, tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, "binding: cores", partition=slurm_cluster.partition)
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    text = _script(out)
    assert "PT2PT_BINDING=cores" in text and "--cpu-bind=none" in text
    sub = _pt2pt(slurm_cluster, "submit", out)
    assert sub.returncode == 0, sub.stderr
    ids = list(json.loads((out / "submitted.json").read_text())["jobs"].values())
    wait_gone(ids, slurm_cluster.environ(), 300, poll=0.5)
    collected = _pt2pt(slurm_cluster, "collect", out, "--dataset", dataset)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    (record_path,) = out.glob("jobs/*/job.json")
    record = json.loads(record_path.read_text())
    assert record["state"] == "completed", record.get("reason")
    assert record["binding"]["policy"] == "cores" and set(record["binding"]["cpus"]) == {"0", "1"}
    (run,) = runs(dataset).to_dicts()
    cpus = ",".join(str(record["binding"]["cpus"][r]) for r in ("0", "1"))
    assert run["binding"] == f"cores {cpus}" and run["cpus"] == cpus
    # under Slurm the job also asks squeue for other jobs on its node: none here
    assert run["tenants"] == "" and run["conditions"] in ("quiet", "disturbed")
