"""Campaigns through a real local Slurm: plan -> submit -> status -> collect, and scancel.

Uses the project's own single-node cluster (``slurm_cluster`` from tests/conftest_slurm.py,
brought up by playbooks/local-cluster.yml). Sample counts are small; assertions are about
states, labels and orderings, never speed.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from kit.data.dataset import describe, runs, series_table
from kit.measure.campaign.slurm import squeue_states, wait_gone
from kit.measure.campaign.status import job_statuses
from kit.measure.localcluster import Cluster
from tests.conftest_slurm import pt2pt as _pt2pt

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
def _env(campaign_env: None) -> None:
    """Every test here plans with the checkout's probe and no site defaults."""


def _wait_gone(cluster: Cluster, ids: list[str], timeout: float = 300) -> None:
    wait_gone(ids, cluster.environ(), timeout, poll=0.5)


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
    # one array per (tool, transport, placement): each job is task 0 of its own array
    assert all(re.fullmatch(r"\d+_0", sid) for sid in ids.values()), ids
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
    assert "1 skipped" in collected.stdout and "ib unavailable: " in collected.stdout
    series = series_table(dataset)
    assert {(r["transport"], r["op"]) for r in series.iter_rows(named=True)} == {
        (t, op) for t in ("shm", "tcp") for op in ("pingpong", "recv")}
    table = runs(dataset)
    records = {job: json.loads((out / "jobs" / job / "job.json").read_text()) for job in ids}
    assert sorted(table["job_id"].to_list()) == sorted(
        r["slurm_raw_job_id"] for job, r in records.items() if "-ib-" not in job)
    for job, sid in ids.items():
        record = records[job]
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
    assert "scancel" in record["reason"] and record["slurm_job_id"] == sid
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
    assert "sbatch refused array" in text and "partition" in text.lower()
    assert not (out / "submitted.json").exists()


MISSING_IB = """\
name: skip-{tag}
mpi: openmpi
transports: [ib]
placement: intra-node
seed: 3
launcher: {launcher}
{env}slurm: {{partition: {partition}, time: "00:05:00"}}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: list:8
    samples: 10
    warmup: 0
"""


@pytest.mark.parametrize(("launcher", "env"), [
    ("srun --mpi=pmix", ""),
    ("mpirun", ""),
    # plain srun: the site's MpiDefault decides; the local cluster's is none, so name pmix
    ("srun", "env: {SLURM_MPI_TYPE: pmix}\n"),
])
def test_missing_ib_is_skipped_under_every_launcher(slurm_cluster: Cluster, tmp_path: Path,
                                                    launcher: str, env: str) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(MISSING_IB.format(tag=launcher.split()[0], launcher=launcher, env=env,
                                          partition=slurm_cluster.partition))
    out = tmp_path / "campaign"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    assert _pt2pt(slurm_cluster, "submit", out).returncode == 0
    (job, sid), = json.loads((out / "submitted.json").read_text())["jobs"].items()
    _wait_gone(slurm_cluster, [sid])
    record = json.loads((out / "jobs" / job / "job.json").read_text())
    assert record["state"] == "skipped", record
    assert record["exit_status"] == 77 and record["reason"].startswith("ib unavailable: ")
    # the probe's own code (from its ranks), whatever the launcher passed on. Under srun a
    # rank that aborts in MPI_Init makes slurmstepd SIGKILL the whole step, rank wrappers
    # included, often before any writes its rank-N.rc (measured on the 1-node cluster: 5 of
    # 10 runs, with the tree or the ring PMIx fence); the skip then rests on the ranks' stderr.
    assert record["tool_exit_status"] != 0
    if record["tool_exit_status"] is None:
        assert launcher.startswith("srun") and record["rank_exit_status"] == {}, record
        stderr = (out / "jobs" / job / "stderr.txt").read_text()
        assert "Killed" in stderr or "CANCELLED" in stderr, stderr[-2000:]
    assert record["command"][:len(launcher.split())] == launcher.split()
    status = _pt2pt(slurm_cluster, "status", out)
    assert "skipped" in status.stdout and sid in status.stdout


TIMEOUT = """\
name: slurm-timeout
mpi: openmpi
transports: [tcp]
placement: intra-node
seed: 5
launcher: srun --mpi=pmix
slurm: {{partition: {partition}, time: "2", signal_lead: 80}}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:64K
    samples: 1000000
    warmup: 0
    extra_args: [--flush-every, "64", --inject-delay-us, "300"]
"""


@pytest.mark.timeout(600)
def test_time_limit_signal_writes_a_timeout_record_with_the_samples(
        slurm_cluster: Cluster, tmp_path: Path) -> None:
    """--signal=B:TERM@80 on a 2-minute job: the script records 'timeout' before the kill.

    slurmctld checks time limits every 30 s and sends the signal at the first check from
    30 s before (limit - lead) on, so the TERM arrives between 10 and 40 s after the start
    (measured on this cluster: leads 80 and 85 both at 25 s, 90 and 100 at 29 s), never at
    once. A lead of 45 (TERM at 45-75 s) made this the suite's longest wait.
    The probe must still be running then on any machine: rank 1 waits 300 us before each
    reply (--inject-delay-us), so 1,000,000 samples take at least 300 s whatever the CPU,
    and the plan stays small (about 16 MB)."""
    campaign = tmp_path / "t.yaml"
    campaign.write_text(TIMEOUT.format(partition=slurm_cluster.partition))
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    assert _pt2pt(slurm_cluster, "submit", out).returncode == 0
    (job, sid), = json.loads((out / "submitted.json").read_text())["jobs"].items()
    _wait_gone(slurm_cluster, [sid], timeout=240)
    record = json.loads((out / "jobs" / job / "job.json").read_text())
    assert record["state"] == "timeout" and record["exit_status"] == 143, record
    csv = out / "jobs" / job / "probe.samples.csv"
    written = csv.read_text().count("\n") - 1
    assert written > 0
    # A rank can outlive the job's end by a moment (its lock still held): collect says
    # 'running' and takes nothing then; once it has exited, the samples are one partial run.
    for _ in range(40):  # ingest's grace for a writer on another host is 60 s
        collected = _pt2pt(slurm_cluster, "collect", out, "--dataset", dataset)
        if "1 running" not in collected.stdout:
            break
        assert runs(dataset).height == 0
        time.sleep(3)
    assert "1 partial" in collected.stdout, collected.stdout + collected.stderr
    assert runs(dataset)["complete"].to_list() == [False], collected.stdout


PAIRS = """\
name: slurm-pairs
mpi: openmpi
transports: [tcp]
placement: [inter-node, intra-node]
seed: 8
launcher: srun --mpi=pmix
pairs: {{random: 1}}
slurm: {{partition: {partition}, time: "00:05:00", throttle: 1}}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:64K
    samples: 300
    warmup: 2
"""


@pytest.mark.timeout(900)
def test_array_tasks_are_pinned_to_their_pair_and_record_it(
        slurm_cluster_2n: Cluster, tmp_path: Path) -> None:
    """random: 1 pair from the partition (sinfo); intra-node tasks pinned to each of its nodes;
    collected, each series (inter-node pair, intra-node per node) gets its own model."""
    cluster = slurm_cluster_2n
    campaign = tmp_path / "p.yaml"
    campaign.write_text(PAIRS.format(partition=cluster.partition))
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    planned = _pt2pt(cluster, "plan", campaign, "-o", out)
    assert planned.returncode == 0, planned.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["campaign"]["pairs"] == [sorted(cluster.nodes)]
    assert sorted(manifest["arrays"]) == ["probe-tcp-inter", "probe-tcp-intra"]
    sub = _pt2pt(cluster, "submit", out)
    assert sub.returncode == 0, sub.stderr
    assert "2 task(s) pinned" in sub.stdout and "1 task(s) pinned" in sub.stdout
    ids = json.loads((out / "submitted.json").read_text())["jobs"]
    _wait_gone(cluster, list(ids.values()))
    seen = set()
    for job in manifest["jobs"]:
        record = json.loads((out / job["dir"] / "job.json").read_text())
        assert record["state"] == "completed", record
        assert record["host_pair"] == job["host_pair"] and record["placement"] == job["placement"]
        if job["placement"] == "intra-node":
            assert record["host"] == job["host_pair"][0]
            seen.add(record["host"])
        else:
            assert record["slurm_nodelist"] != record["host"]  # two nodes: n[1-2]
    assert seen == set(cluster.nodes)
    status = _pt2pt(cluster, "status", out)
    assert status.returncode == 0 and ",".join(sorted(cluster.nodes)) in status.stdout
    collected = _pt2pt(cluster, "collect", out, "--dataset", dataset)
    assert "3 ingested" in collected.stdout, collected.stdout + collected.stderr

    # Issue 14: tcp intra- and inter-node on two real (fake) nodes are separate series, each
    # with its own model: one inter-node (the pair) and one intra-node per node of the pair.
    series = series_table(dataset).filter(pl.col("stat") == "raw")
    placed = sorted((r["placement"], r["host_pair"]) for r in series.iter_rows(named=True))
    n1, n2 = sorted(cluster.nodes)
    assert sorted(pair for _, pair in placed) == sorted([f"{n1}:{n2}", f"{n1}:{n1}", f"{n2}:{n2}"])
    models = {}
    for row in series.iter_rows(named=True):
        selector = describe(row)  # the kit's own selector (an empty program left out)
        model = tmp_path / f"model-{row['host_pair'].replace(':', '-')}.json"
        fitted = _pt2pt(cluster, "fit", dataset, "--series", selector, "--no-intervals",
                        "--no-validate", "-o", model)
        assert fitted.returncode == 0, fitted.stdout + fitted.stderr
        prov = json.loads(model.read_text())["provenance"]["series"]
        assert (prov["placement"], prov["host_pair"]) == (row["placement"], row["host_pair"])
        models[row["host_pair"]] = prov["placement"]
    assert models[f"{n1}:{n2}"] == "inter-node"
    assert {models[f"{n}:{n}"] for n in (n1, n2)} <= {"intra-node", "intra-socket"}


SCALE = """\
name: scale
mpi: openmpi
transports: [tcp, ib]
placement: [inter-node, intra-node]
repetitions: 3
seed: 11
launcher: srun --mpi=pmix
pairs: {{all-pairs: 6}}
slurm: {{partition: {partition}, time: "00:10:00", throttle: 2}}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:64K
    samples: {samples}
    warmup: 2
    extra_args: [--flush-every, "64"]
"""


@pytest.mark.timeout(1800)
def test_four_node_campaign_with_accounting_pairs_scancel_and_skips(
        slurm_cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    """Issue 18's done-when on the local cluster: 4 nodes, accounting on; 2 transports x
    2 placements x 6 pairs x 3 repetitions is one sbatch per group, runs, is collected per
    pair, survives one scancel with a record, and shows the missing ib as skipped."""
    cluster = slurm_cluster_factory(4, accounting=True)
    env = cluster.environ()
    campaign = tmp_path / "scale.yaml"
    campaign.write_text(SCALE.format(partition=cluster.partition, samples=150))
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    assert _pt2pt(cluster, "plan", campaign, "-o", out).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    pairs = manifest["campaign"]["pairs"]
    assert len(pairs) == 6 and len({tuple(p) for p in pairs}) == 6  # all 6 pairs of 4 nodes
    # inter-node: 6 pairs; intra-node: each of the 4 nodes; x 3 repetitions x 2 transports
    assert len(manifest["jobs"]) == (6 + 4) * 3 * 2
    dry = _pt2pt(cluster, "submit", out, "--dry-run")
    assert dry.stdout.count("sbatch --parsable --hold") == 4, dry.stdout
    sub = _pt2pt(cluster, "submit", out)
    assert sub.returncode == 0, sub.stderr
    ids = json.loads((out / "submitted.json").read_text())["jobs"]
    assert len({sid.split("_")[0] for sid in ids.values()}) == 4

    # scancel one running tcp task once it has written samples
    tcp_jobs = [j for j in manifest["jobs"] if j["transport"] == "tcp"]
    victim = None
    deadline = time.monotonic() + 600
    while victim is None:
        assert time.monotonic() < deadline, "no tcp task started within 600 s"
        for job in tcp_jobs:
            csv = out / job["dir"] / "probe.samples.csv"
            if (csv.exists() and csv.read_text().count("\n") > 40
                    and not (out / job["dir"] / "job.json").exists()):
                victim = job
                break
        time.sleep(0.3)
    subprocess.run(["scancel", ids[victim["id"]]], env=env, check=True)
    _wait_gone(cluster, list(ids.values()), timeout=1200)

    records = {j["id"]: json.loads((out / j["dir"] / "job.json").read_text())
               for j in manifest["jobs"]}
    cancelled = [k for k, r in records.items() if r["state"] == "cancelled"]
    assert cancelled == [victim["id"]] or (
        # the probe may have finished in the instant between the check and scancel
        not cancelled and records[victim["id"]]["state"] == "completed")
    for job in manifest["jobs"]:
        record = records[job["id"]]
        assert record["host_pair"] == job["host_pair"]
        if job["transport"] == "ib":
            assert record["state"] == "skipped", record
        elif job["id"] != victim["id"]:
            assert record["state"] == "completed", record

    rows = {r.job: r for r in job_statuses(out, env=env)}
    assert {r.slurm_source for r in rows.values()} == {"sacct"}
    assert all(rows[j].host_pair == ",".join(records[j]["host_pair"]) for j in rows)

    collected = _pt2pt(cluster, "collect", out, "--dataset", dataset)
    assert collected.returncode in (0, 1), collected.stderr
    assert "30 skipped" in collected.stdout, collected.stdout
    table = runs(dataset)
    ingested = 30 - (1 if cancelled else 0)
    assert table.height == ingested + (1 if cancelled else 0)
    # the cancelled run is incomplete: ingest honours the record's state even when the probe
    # had just written all its samples as scancel came (seen: meta complete, stop_reason done,
    # record cancelled 1 s later)
    assert table["complete"].to_list().count(False) == (1 if cancelled else 0)
    # per-pair series: placement and host pair are series keys (rank order "a:b")
    # An intra-node job whose ranks the probe saw on one socket is the finer intra-socket
    # (kit.data.placement: what the run recorded wins over the plan, refining intra-node).
    def planned(placement: str) -> set[str]:
        return {"intra-node", "intra-socket"} if placement == "intra-node" else {placement}

    series = series_table(dataset)
    found = set(zip(series["placement"].to_list(), series["host_pair"].to_list(),
                    strict=True))
    wanted = {(j["placement"], ":".join(j["host_pair"]))
              for j in manifest["jobs"] if j["transport"] == "tcp"}
    assert {pair for _, pair in found} == {pair for _, pair in wanted}
    for place, pair in wanted:
        assert {p for p, q in found if q == pair} <= planned(place), (place, pair, found)


SWITCHED = """\
name: switched
mpi: openmpi
transports: [tcp]
placement: inter-node
seed: 1
pairs: {{all-pairs: 10, switch: {mode}}}
slurm: {{partition: {partition}}}
tools:
  - tool: probe
"""


@pytest.mark.timeout(900)
def test_pairs_on_the_same_switch_or_across_from_slurms_topology(
        slurm_cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    """3 nodes over 2 leaf switches (s0: n1 n2, s1: n3): scontrol show topology decides."""
    cluster = slurm_cluster_factory(3, switches=2)
    n1, n2, n3 = sorted(cluster.nodes)
    found = {}
    for mode in ("same", "across"):
        campaign = tmp_path / f"{mode}.yaml"
        campaign.write_text(SWITCHED.format(mode=mode, partition=cluster.partition))
        planned = _pt2pt(cluster, "plan", campaign, "-o", tmp_path / mode)
        assert planned.returncode == 0, planned.stderr
        manifest = json.loads((tmp_path / mode / "manifest.json").read_text())
        found[mode] = [tuple(p) for p in manifest["campaign"]["pairs"]]
    assert found == {"same": [(n1, n2)], "across": [(n1, n3), (n2, n3)]}


COLL_CAMPAIGN = """\
name: slurm-coll
mpi: openmpi
transports: [shm]
placement: intra-node
repetitions: 1
seed: 19
launcher: srun --mpi=pmix
slurm:
  partition: {partition}
  time: "00:05:00"
tools:
  - tool: collectives
    platform: {platform}
    algorithms: [pair]
    np: [2, 4]
    sizes: [1K]
    reps: 2
    deterministic: true
"""


def test_collectives_points_run_as_slurm_array_tasks_and_collect(slurm_cluster: Cluster,
                                                                 tmp_path: Path) -> None:
    """The collectives section on a real Slurm (issue 61): each (algorithm, numproc) is an
    array task of the usual templates, srun runs the sweep in the job's folder, and
    'collectives collect' gathers the points as a local sweep's folder."""
    from kit.outputs.collsweep import read_dataset
    from kit.outputs.export.platform import cluster_platform
    from tests.builders import three_linear_regimes

    platform = tmp_path / "platform"
    cluster_platform(three_linear_regimes(1e-8), hosts=4, cabinet=2).write(platform)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(COLL_CAMPAIGN.format(partition=slurm_cluster.partition,
                                             platform=platform))
    out, merged = tmp_path / "campaign", tmp_path / "merged"
    assert _pt2pt(slurm_cluster, "plan", campaign, "-o", out).returncode == 0
    sub = _pt2pt(slurm_cluster, "submit", out)
    assert sub.returncode == 0, sub.stderr
    ids = json.loads((out / "submitted.json").read_text())["jobs"]
    assert len(ids) == 2 and all(re.fullmatch(r"\d+_0", sid) for sid in ids.values()), ids
    _wait_gone(slurm_cluster, list(ids.values()))
    for job in ids:
        record = json.loads((out / "jobs" / job / "job.json").read_text())
        assert record["state"] == "completed", record
        assert record["command"][:2] == ["srun", "--mpi=pmix"]
    got = _pt2pt(slurm_cluster, "collectives", "collect", out, merged)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "2 new point(s)" in got.stdout
    rows = read_dataset(merged)
    assert sorted(set(rows["numproc"])) == [2, 4] and set(rows["status"]) == {"ok"}
    analyzed = _pt2pt(slurm_cluster, "collectives", "analyze", merged)
    assert analyzed.returncode == 0 and "split at 2: a cabinet's ranks" in analyzed.stdout
