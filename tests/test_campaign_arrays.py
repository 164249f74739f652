"""Cluster scale without a cluster: job arrays per group, node pairs, the job-side helper.

The Slurm side (arrays really running, pinning, scancel, skips under each launcher) is in
tests/test_slurm_campaign.py; here everything that is a pure function of its inputs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.measure.campaign import jobrecord
from kit.measure.campaign.pairs import expand_hostlist, parse_topology, select_pairs
from kit.measure.campaign.plan import plan_campaign, time_limit_s
from kit.measure.campaign.schema import PairSpec
from kit.measure.campaign.submit import format_submissions, submit


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    probe = tmp_path / "pt2pt-probe"
    probe.write_text("#!/bin/sh\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))


def _pairs_yaml(n: int) -> str:
    return "[" + ", ".join(f"[c{2 * i + 1:03d}, c{2 * i + 2:03d}]" for i in range(n)) + "]"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ten_thousand_configurations_are_four_arrays(tmp_path: Path) -> None:
    # 2 transports x (25 pairs inter-node + their 50 nodes intra-node) x 67 repetitions
    campaign = tmp_path / "big.yaml"
    campaign.write_text(
        "name: big\nmpi: openmpi\ntransports: [tcp, ib]\nplacement: [inter-node, intra-node]\n"
        "repetitions: 67\nseed: 5\nlauncher: srun --mpi=pmix\n"
        "slurm: {time: '00:20:00', throttle: 16, signal_lead: 90}\n"
        f"pairs: {_pairs_yaml(25)}\ntools:\n  - tool: probe\n")
    out = tmp_path / "out"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    assert len(manifest["jobs"]) == 2 * (25 + 50) * 67 == 10050
    assert sorted(manifest["arrays"]) == ["probe-ib-inter", "probe-ib-intra",
                                          "probe-tcp-inter", "probe-tcp-intra"]
    subs = submit(out, dry_run=True)
    text = format_submissions(subs)
    sbatch = [line for line in text.splitlines() if line.startswith("sbatch ")]
    assert len(sbatch) == 4 and all("--hold" in line for line in sbatch)
    assert len(re.findall(r"^  scontrol update JobId=ARRAY_\d+ ReqNodeList=", text, re.M)) == 10050
    assert len(re.findall(r"^  scontrol release ARRAY$", text, re.M)) == 4
    assert not (out / "submitted.json").exists()
    for group, array in manifest["arrays"].items():
        size = len(array["tasks"])
        assert size == (25 if "inter" in group else 50) * 67
        script = (out / array["script"]).read_text()
        assert f"#SBATCH --array=0-{size - 1}%16\n" in script
        assert "#SBATCH --signal=B:TERM@90\n" in script
        # every task of the group, once, in the manifest's (shuffled) order
        ids = [j["id"] for j in manifest["jobs"] if j["group"] == group]
        assert array["tasks"] == ids
    job = manifest["jobs"][0]
    assert job["array_index"] == manifest["arrays"][job["group"]]["tasks"].index(job["id"])
    plan = json.loads((out / job["dir"] / "plan.json").read_text())
    assert plan["host_pair"] == job["host_pair"] and plan["placement"] == job["placement"]
    if job["placement"] == "intra-node":
        assert plan["host_pair"][0] == plan["host_pair"][1] == plan["nodelist"]
    else:
        assert plan["nodelist"] == ",".join(plan["host_pair"])
    # each array task finds its job directory through the manifest
    last = manifest["arrays"]["probe-tcp-intra"]
    assert jobrecord.task_dir(out / "manifest.json", "probe-tcp-intra",
                              len(last["tasks"]) - 1) == out / "jobs" / last["tasks"][-1]


def test_campaign_without_pairs_is_one_unpinned_array_per_group(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: s\nmpi: openmpi\ntransports: [shm, tcp]\nrepetitions: 3\n"
                        "tools:\n  - tool: probe\n")
    out = tmp_path / "out"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    subs = submit(out, dry_run=True)
    assert [s.command[:2] for s in subs] == [["sbatch", "--parsable"]] * 2
    assert all(s.pin_commands == [] for s in subs)
    for array in manifest["arrays"].values():
        script = (out / array["script"]).read_text()
        assert "#SBATCH --array=0-2\n" in script and "--nodelist" not in script
    # the helper is part of the campaign: compute nodes need python3, not the checkout
    helper = out / "bin" / "jobrecord.py"
    assert helper.read_text() == Path(jobrecord.__file__).read_text()
    job_script = (out / manifest["jobs"][0]["script"]).read_text()
    assert f"python3 {helper} \"$@\"" in job_script
    assert len(job_script.splitlines()) < 130


def test_hostlists_and_topology() -> None:
    assert expand_hostlist("n[1-3,07],m2") == ["n1", "n2", "n3", "n07", "m2"]
    assert expand_hostlist("a[08-10]") == ["a08", "a09", "a10"]
    topo = parse_topology(
        "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-2]\n"
        "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n"
        "SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=s[0-1]\n")
    assert topo == {"n1": "s0", "n2": "s0", "n3": "s1", "n4": "s1"}
    nodes = ["n1", "n2", "n3", "n4"]
    assert select_pairs(nodes, PairSpec(all_pairs=100, switch="same"), 1, topo) == [
        ("n1", "n2"), ("n3", "n4")]
    across = select_pairs(nodes, PairSpec(all_pairs=100, switch="across"), 1, topo)
    assert len(across) == 4 and all(topo[a] != topo[b] for a, b in across)
    with pytest.raises(CampaignError, match="topology"):
        select_pairs(nodes, PairSpec(random=1, switch="same"), 1, {})


def test_random_and_capped_pairs_are_seeded() -> None:
    nodes = [f"n{i}" for i in range(1, 21)]
    first = select_pairs(nodes, PairSpec(random=6), seed=9)
    assert first == select_pairs(list(reversed(nodes)), PairSpec(random=6), seed=9)
    assert first != select_pairs(nodes, PairSpec(random=6), seed=10)
    assert len(set(first)) == 6 and all(a < b for a, b in first)
    assert len(select_pairs(nodes, PairSpec(all_pairs=1000), 1)) == 190
    assert len(select_pairs(nodes, PairSpec(all_pairs=25), 1)) == 25
    with pytest.raises(CampaignError, match="only 1 distinct"):
        select_pairs(["a", "b"], PairSpec(random=2), 1)


def test_pairs_are_validated_at_their_line(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: s\nmpi: openmpi\ntransports: [tcp]\ntools:\n  - tool: probe\n"
                        "pairs: {random: 2, all-pairs: 3}\n")
    with pytest.raises(CampaignError) as err:
        plan_campaign(campaign, tmp_path / "out")
    assert "c.yaml:6" in err.value.paragraph() and "exactly one" in str(err.value)


def test_time_limits() -> None:
    assert time_limit_s("30") == 1800 and time_limit_s("00:10:00") == 600
    assert time_limit_s("5:30") == 330 and time_limit_s("1-02") == 93600


# --- the job-side helper ----------------------------------------------------------------

PLAN = {"tool": "probe", "transport": "ib", "nodes": 2, "ntasks_per_node": 1,
        "unavailable": ["transport 'rc' is not available", "Destination is unreachable"],
        "exits": {"skipped": 77, "check_failed": 78}, "stdout_name": "stdout.txt",
        "meta_file": "probe.meta.json", "forced_vars": [], "transport_check": "none",
        "time_limit_s": 600, "signal_lead_s": 60, "outputs": ["probe.samples.csv"],
        "placement": "inter-node", "host_pair": ["n1", "n2"]}


def _job(tmp_path: Path, ranks: dict[int, int], stdout: str = "", stderr: str = "") -> Path:
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    for rank, rc in ranks.items():
        (tmp_path / f"rank-{rank}.rc").write_text(f"{rc}\n")
    (tmp_path / "stdout.txt").write_text(stdout)
    (tmp_path / "stderr.txt").write_text(stderr)
    return tmp_path


UCX = "[1.2] [n2:1:0] ucp_context.c:1014 UCX  WARN  transport 'rc' is not available, please\n"


@pytest.mark.parametrize(("launcher_rc", "ranks"), [
    (16, {0: 16}),            # srun --mpi=pmix: the rank's MPI error code, one rank reported
    (16, {0: 16, 1: 16}),     # mpirun between two nodes
    (1, {0: 1, 1: 143}),      # mpirun on one node: a rank fails, mpirun kills the other
])
def test_missing_transport_is_skipped_whatever_the_launcher_says(
        tmp_path: Path, launcher_rc: int, ranks: dict[int, int]) -> None:
    job = _job(tmp_path, ranks, stdout=UCX, stderr="Error: ... Destination is unreachable\n")
    out = jobrecord.classify(PLAN, job, launcher_rc, None, time.time())
    assert out["state"] == "skipped" and out["exit_status"] == 77
    assert out["reason"] == "ib unavailable: transport 'rc' is not available, please"
    assert out["tool_exit_status"] == min(c for c in ranks.values())


def test_a_failure_without_the_message_is_a_failure(tmp_path: Path) -> None:
    job = _job(tmp_path, {0: 3, 1: 0}, stderr="segfault somewhere\n")
    out = jobrecord.classify(PLAN, job, 3, None, time.time())
    assert out["state"] == "failed" and out["exit_status"] == 3
    assert "segfault" in out["reason"]
    # no rank reported at all (the launcher failed before the tool ran): not a skip either
    (tmp_path / "x").mkdir()
    job2 = _job(tmp_path / "x", {})
    out2 = jobrecord.classify(PLAN, job2, 1, None, time.time())
    assert out2["state"] == "failed" and out2["tool_exit_status"] is None


def test_signal_is_a_cancellation_early_and_the_time_limit_late(tmp_path: Path) -> None:
    job = _job(tmp_path, {})
    early = jobrecord.classify(PLAN, job, 143, "TERM", time.time() - 10)
    assert early["state"] == "cancelled" and early["exit_status"] == 143
    late = jobrecord.classify(PLAN, job, 143, "TERM", time.time() - 560)
    assert late["state"] == "timeout" and "time limit" in late["reason"]


def test_helper_runs_with_a_bare_python(tmp_path: Path) -> None:
    """What the nodes run: the copied file with -I (no site packages, no PYTHONPATH)."""
    job = _job(tmp_path, {0: 0, 1: 0})
    helper = Path(jobrecord.__file__)
    begin = subprocess.run([sys.executable, "-I", str(helper), "begin", "true", "true", "--",
                            "true"], cwd=job, capture_output=True, text=True)
    assert begin.returncode == 0, begin.stderr
    (job / "probe.meta.json").write_text("{}")  # the tool's output, written after begin
    assert not list(job.glob("rank-*.rc"))  # begin clears a previous run's codes
    for rank in (0, 1):
        (job / f"rank-{rank}.rc").write_text("0\n")
    fin = subprocess.run([sys.executable, "-I", str(helper), "finish", "--rc", "0"], cwd=job,
                         capture_output=True, text=True, env={"SLURM_ARRAY_JOB_ID": "12",
                                                              "SLURM_ARRAY_TASK_ID": "3",
                                                              "SLURM_JOB_ID": "15"})
    assert fin.returncode == 0, fin.stderr
    record = json.loads((job / "job.json").read_text())
    assert record["state"] == "completed" and record["slurm_job_id"] == "12_3"
    assert record["slurm_raw_job_id"] == "15" and record["host_pair"] == ["n1", "n2"]
    assert record["placement"] == "inter-node" and record["plan"]["outputs"]
    missing = subprocess.run([sys.executable, "-I", str(helper), "begin", "no-such-launcher",
                              "true"], cwd=job, capture_output=True, text=True)
    assert missing.returncode == 127
    assert "no-such-launcher" in json.loads((job / "job.json").read_text())["reason"]


def test_contention_mode_is_one_array_per_k(tmp_path: Path) -> None:
    """concurrent_pairs: [1, 2, 4] -> the probe's --pairs K with 2K ranks, K per node across
    two nodes (rank i of node A against rank i+K on node B) or all 2K on one node."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "name: k\nmpi: openmpi\ntransports: [tcp]\nplacement: [inter-node, intra-node]\n"
        "tools:\n  - tool: probe\n    concurrent_pairs: [1, 2, 4]\n")
    out = tmp_path / "out"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    assert sorted(manifest["arrays"]) == sorted(
        f"probe-k{k}-tcp-{p}" for k in (1, 2, 4) for p in ("inter", "intra"))
    for job in manifest["jobs"]:
        k = int(job["group"].split("-k")[1].split("-")[0])
        assert job["concurrent_pairs"] == k
        assert job["command"][-2:] == ["--pairs", str(k)]
        assert (job["nodes"], job["ntasks_per_node"]) == (
            (2, k) if job["placement"] == "inter-node" else (1, 2 * k))
        script = (out / job["script"]).read_text()
        assert f"#SBATCH --ntasks-per-node={job['ntasks_per_node']}\n" in script
        if job["placement"] == "intra-node":
            assert f"PT2PT_LAUNCH=(mpirun -n {2 * k}" in script
    with pytest.raises(CampaignError, match="once"):
        campaign.write_text(campaign.read_text().replace("[1, 2, 4]", "[2, 2]"))
        plan_campaign(campaign, tmp_path / "out2")


def test_submit_refuses_more_ranks_per_node_than_cpus(tmp_path: Path) -> None:
    """K pairs on one node need 2K CPUs there: Slurm would accept the array and leave it
    pending for ever, so submit asks sinfo first and names concurrent_pairs (nothing is
    submitted); with enough CPUs, or without sinfo, submit goes on to sbatch."""
    import os

    from kit.core.errors import UserError
    from kit.measure.campaign.submit import check_fits_nodes

    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "name: k\nmpi: openmpi\ntransports: [tcp]\nplacement: [inter-node, intra-node]\n"
        "tools:\n  - tool: probe\n    concurrent_pairs: [1, 4]\n")
    out = tmp_path / "out"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    assert manifest["arrays"]["probe-k4-tcp-intra"]["ntasks_per_node"] == 8
    check_fits_nodes(manifest, {"n1": 8, "n2": 8})  # fits
    check_fits_nodes(manifest, {})  # sinfo said nothing: no opinion
    with pytest.raises(UserError, match="probe-k4-tcp-intra needs 8 ranks per node"):
        check_fits_nodes(manifest, {"n1": 4, "n2": 4})

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch.calls"
    (bin_dir / "sinfo").write_text("#!/bin/sh\nprintf 'n1 4\\nn2 4\\n'\n")
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho 42\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    with pytest.raises(UserError) as err:
        submit(out, env=env)
    assert "concurrent_pairs" in str(err.value) and "c.yaml" in str(err.value)
    assert not calls.exists()  # refused before any sbatch
    (bin_dir / "sinfo").write_text("#!/bin/sh\nprintf 'n1 16\\nn2 16\\n'\n")
    subs = submit(out, env=env)
    assert len(subs) == 4 and calls.read_text().count("\n") == 4
