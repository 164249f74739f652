"""Contention through a campaign on the local cluster: plan -> submit -> collect -> dataset.

Issue 18: k concurrent pairs between the same two nodes share the link, so per-pair
large-message bandwidth is the shaped rate / k (±15 %); pairs on disjoint nodes do not slow
each other. The nodes' egress is shaped with tbf (kit.measure.localcluster ``shape``) far below what
the veths carry on this machine, so the token bucket, not the CPU, sets the rate.

Per-pair bandwidth of a round = bytes one pair moved / the round's slowest pair's time; the
best round is compared, as in tests/test_probe_contention_shaped.py (on 2 loaded cores a rank
that is not scheduled can only lower a round's rate, the token bucket bounds it from above).
Rates are read back from the collected dataset (``pairs``, ``pair``, and ``seq`` = round).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from kit.data.dataset import runs, scan
from kit.measure.localcluster import Cluster
from tests.conftest_slurm import run_campaign

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow]

RATE = "200mbit"
RATE_BPS = 200e6 / 8
TOLERANCE = 0.15
SIZE = 1 << 20
WINDOW = 16

CAMPAIGN = """\
name: {name}
mpi: openmpi
transports: [tcp]
placement: inter-node
seed: 21
launcher: srun --mpi=pmix
pairs: {pairs}
# k ranks per node on 2 real cores: Open MPI must yield when idle (srun does not tell it
# the node is oversubscribed, as mpirun would). --exclusive: the arrays of different k run
# one after the other, never sharing the link.
env: {{OMPI_MCA_mpi_yield_when_idle: "1"}}
slurm: {{partition: {partition}, time: "00:05:00", throttle: {throttle}, extra: [--exclusive]}}
tools:
  - tool: probe
    ops: [stream]
    sizes: list:{size}
    samples: 5
    warmup: 1
    extra_args: [--window, "{window}"]
{concurrent}
"""


@pytest.fixture(autouse=True)
def _env(campaign_env: None) -> None:
    """Every test here plans with the checkout's probe and no site defaults."""



def _best_round_bps(dataset: Path) -> dict[tuple[str, int], float]:
    """(host pair, k) -> best round's per-pair bandwidth (B/s), from the dataset's rows."""
    rows = (scan(dataset).filter((pl.col("op") == "stream") & ~pl.col("warmup"))
            .select("run_id", "host_pair", "pairs", "pair", "seq", "size", "time")
            .collect())
    best: dict[tuple[str, int], float] = {}
    for (run, pair, k), frame in rows.group_by(["run_id", "host_pair", "pairs"]):
        per_round = frame.group_by("seq").agg(pl.col("time").max(), pl.col("pair").n_unique(),
                                              pl.col("size").first())
        assert (per_round["pair"] == k).all(), (run, "every pair in every round")
        # time is per message (stream rows: round time / window), so size / time is B/s
        bps = max((per_round["size"] / per_round["time"]).to_list())
        best[(str(pair), int(k))] = max(best.get((str(pair), int(k)), 0.0), bps)
    return best


@pytest.mark.timeout(1200)
def test_k_pairs_on_one_shaped_link_get_rate_over_k_through_a_campaign(
        slurm_cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    # k=4 puts 4 ranks on each node: Slurm refuses --ntasks-per-node above a node's CPUs
    # (even with --overcommit), so the nodes declare 4
    # (later tests ask the factory for the cluster they need: it unshapes it for them)
    cluster = slurm_cluster_factory(2, shape=(RATE, "256kb"), cpus=4)
    n1, n2 = sorted(cluster.nodes)
    manifest, dataset = run_campaign(cluster, tmp_path / "k", CAMPAIGN.format(
        name="contention", pairs=f"[[{n1}, {n2}]]", partition=cluster.partition,
        throttle=1, size=SIZE, window=WINDOW, concurrent="    concurrent_pairs: [1, 2, 4]"))
    # one array per k (probe-k1/-k2/-k4), each task 2 nodes x k ranks
    assert sorted(manifest["arrays"]) == [f"probe-k{k}-tcp-inter" for k in (1, 2, 4)]
    table = runs(dataset)
    assert table.height == 3
    best = _best_round_bps(dataset)
    assert {k for _, k in best} == {1, 2, 4}
    report = {k: round(bps / 1e6, 2) for (_, k), bps in sorted(best.items(),
                                                               key=lambda i: i[0][1])}
    print(f"best-round per-pair MB/s by k (shaped {RATE_BPS / 1e6:.0f} MB/s): {report}")
    for (_, k), bps in best.items():
        assert abs(bps / (RATE_BPS / k) - 1) <= TOLERANCE, (k, report)


@pytest.mark.timeout(1200)
def test_pairs_on_disjoint_nodes_do_not_slow_each_other(
        slurm_cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    """Two disjoint pairs at once (throttle 2) each get the shaped rate, as one pair alone."""
    cluster = slurm_cluster_factory(4, accounting=True, shape=(RATE, "256kb"))
    n1, n2, n3, n4 = sorted(cluster.nodes)
    _, alone = run_campaign(cluster, tmp_path / "alone", CAMPAIGN.format(
        name="alone", pairs=f"[[{n1}, {n2}]]", partition=cluster.partition, throttle=1,
        size=SIZE, window=WINDOW, concurrent=""))
    manifest, both = run_campaign(cluster, tmp_path / "both", CAMPAIGN.format(
        name="both", pairs=f"[[{n1}, {n2}], [{n3}, {n4}]]", partition=cluster.partition,
        throttle=2, size=SIZE, window=WINDOW, concurrent=""))
    # the two tasks really ran at the same time
    spans = []
    for job in manifest["jobs"]:
        meta = json.loads((tmp_path / "both" / "campaign" / job["dir"] / "probe.meta.json")
                          .read_text())
        spans.append((meta["start"], meta["end"]))
    (_, first_end), (second_start, _) = sorted(spans)
    assert second_start < first_end, f"the two pairs did not overlap: {spans}"
    solo = _best_round_bps(alone)
    together = _best_round_bps(both)
    print("per-pair MB/s alone", {p: round(b / 1e6, 2) for (p, _), b in solo.items()},
          "together", {p: round(b / 1e6, 2) for (p, _), b in together.items()})
    assert len(together) == 2
    for bps in [*solo.values(), *together.values()]:
        assert abs(bps / RATE_BPS - 1) <= TOLERANCE, (solo, together)
