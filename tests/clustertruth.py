"""Ground truth of the cluster view on the local Slurm cluster (issue 58), shared by the test
(one seed, tests/test_slurm_cluster.py) and the 10-seed benchmark
(benchmarks/bench_cluster_slurm.py).

Five network-namespace nodes, every egress shaped to ``RATE``; one link (nodes 1-2) shaped
to half that rate in both directions, and one node (5) whose egress is half the rate. The
kernel has no netem (docs: /work/shared/notes/local-cluster-lab.md), so the slow node is a
node whose *sending* is slower, not one with added delay: each of its pairs' round trips
takes 1/2 + 1 = 1.5 times as long per byte, so its asymptotic bandwidth is 2/3 of the
typical pair's (-33 %); the slow link's is 1/2 (-50 %). Those are the truths the intervals
must contain (ln ratios, the figure's scale). Tbf's measured/configured rate (0.96, the
TCP/IP headers) is the same on every link, so it cancels in the ratios.

The campaign: all 10 pairs once, in the randomized all-pairs order, ping-pong sizes drawn
log-uniformly up to 1 MiB (the bandwidth window is the top two octaves). A pair's single
visit is split in halves for the between-visit variance (kit.fit.clustermodel).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.measure.localcluster import Cluster, LinkShape, NodeShape
from tests import conftest_slurm as slurm

NODES = 5
RATE = "80mbit"
SLOW = "40mbit"
SHAPE = (RATE, "64kb")
LINKS = (LinkShape(1, 2, SLOW),)
NODE_SHAPES = (NodeShape(5, SLOW),)
#: ln of the asymptotic bandwidth ratio to the typical pair (see the module docstring)
TRUE_LINK = math.log(0.5)
TRUE_NODE = math.log(2 / 3)

CAMPAIGN = """\
name: truth{seed}
mpi: openmpi
transports: [tcp]
placement: inter-node
seed: {seed}
launcher: srun --mpi=pmix
pairs: {{all-pairs: 10}}
slurm: {{partition: {partition}, time: "00:05:00", throttle: 1}}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:16:1M
    samples: 300
    warmup: 10
"""


def run_campaign(cluster: Cluster, out: Path, seed: int, timeout: float = 900) -> Path:
    """Plan, submit, wait for, and collect the campaign of ``seed``; returns the dataset."""
    manifest, dataset = slurm.run_campaign(
        cluster, out, CAMPAIGN.format(seed=seed, partition=cluster.partition), timeout)
    assert len(manifest["jobs"]) == NODES * (NODES - 1) // 2, manifest["jobs"]
    return dataset


@dataclass
class Verdict:
    """What ``pt2pt cluster`` found against the truth."""

    slow_node: str
    slow_link: str
    flagged: list[dict[str, Any]]
    node: dict[str, Any] | None = None  # the slow node's bandwidth test
    link: dict[str, Any] | None = None  # the slow link's bandwidth test
    others: list[str] = field(default_factory=list)  # flagged items that are not the truth

    @property
    def found(self) -> bool:
        return bool(self.node and self.node["flagged"] and self.link and self.link["flagged"])

    @property
    def covered(self) -> bool:
        """Both intervals contain the shaped truth."""
        return bool(self.node and self.link
                    and self.node["lo"] <= TRUE_NODE <= self.node["hi"]
                    and self.link["lo"] <= TRUE_LINK <= self.link["hi"])

    @property
    def exact(self) -> bool:
        return self.found and not self.others

    def describe(self) -> str:
        def one(t: dict[str, Any] | None, truth: float) -> str:
            if t is None:
                return "not tested"
            return (f"{math.expm1(t['estimate']):+.1%} [{math.expm1(t['lo']):+.1%}, "
                    f"{math.expm1(t['hi']):+.1%}] (truth {math.expm1(truth):+.1%}, "
                    f"q {t['q']:.2g}, {'flagged' if t['flagged'] else 'not flagged'})")

        return (f"node {self.slow_node} bandwidth {one(self.node, TRUE_NODE)}; link "
                f"{self.slow_link} bandwidth {one(self.link, TRUE_LINK)}; other flags: "
                f"{self.others or 'none'}")


def judge(cluster: Cluster, dataset: Path) -> tuple[Verdict, str]:
    """Run ``pt2pt cluster DATASET`` (text and JSON) and compare its findings with the truth."""
    text = slurm.pt2pt(cluster, "cluster", dataset)
    assert text.returncode == 0, text.stdout + text.stderr
    as_json = slurm.pt2pt(cluster, "cluster", dataset, "--json", "-")
    assert as_json.returncode == 0, as_json.stderr
    findings = json.loads(as_json.stdout)
    nodes = sorted(cluster.nodes)
    slow_node = nodes[NODE_SHAPES[0].node - 1]
    slow_link = f"{nodes[LINKS[0].a - 1]}-{nodes[LINKS[0].b - 1]}"
    verdict = Verdict(slow_node, slow_link, findings["flagged"])
    for test in findings["tests"]:
        if test["figure"] != "bandwidth":
            continue
        if (test["kind"], test["name"]) == ("node", slow_node):
            verdict.node = test
        elif (test["kind"], test["name"]) == ("link", slow_link):
            verdict.link = test
    verdict.others = sorted({f"{f['kind']} {f['name']} {f['figure']}" for f in findings["flagged"]
                             if f["name"] not in (slow_node, slow_link)})
    return verdict, text.stdout
