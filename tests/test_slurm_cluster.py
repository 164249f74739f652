"""The cluster view against shaped truth on the local Slurm cluster (issue 58).

One all-pairs campaign on five namespace nodes with one slow link and one slow node
(tests/clustertruth.py), then ``pt2pt cluster``: the slow link and the slow node must be
flagged, as that link and that node, with bandwidth intervals containing the shaped truth.
That nothing else is flagged is a statistical claim on a machine other jobs may load (a
rank waiting for a core makes a pair look slow at small sizes), so it is asserted only when
the machine was quiet before measuring; otherwise it is withheld with a warning that names
the load and what was flagged. On an overloaded machine (load above OVERLOADED per CPU) the
finding itself and the intervals are withheld too, and only what no load can change is
asserted (both read slower; the node's loss is not spread over its links). The 10-seed
figure: benchmarks/bench_cluster_slurm.py.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kit.measure import localcluster
from kit.measure.localcluster import Cluster
from kit.measure.machine import RANKS, current_load
from tests import clustertruth as truth

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow]


#: Load average per CPU above which even finding the shaped link and node is not asserted
#: (a rank waiting for a core blurs the slopes). 10 seeds on 2 CPUs (BENCHMARKS.md): all 7 at
#: load <= 10 found both, the misses were at 11.5 and 14.9; nothing else was flagged in any.
OVERLOADED = 4.0


class ExactnessWithheld(UserWarning):
    """"Nothing else flagged" was not tested: the machine was not quiet (the text says)."""


@pytest.fixture(autouse=True)
def _env(campaign_env: None) -> None:
    """Plans with the checkout's probe and no site defaults."""


@pytest.fixture
def truth_cluster(slurm_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    """The five shaped nodes, downed after the test (no other test uses them). The Slurm
    tests after it failed in CI rehearsals for another reason: the machine stalled for 34-54 s
    during their k=4 job (kernel watchdog: workqueue lockups on both CPUs), and the wait loop
    read the failed squeue as an empty queue (fixed: kit.measure.campaign.slurm.wait_gone)."""
    cluster = slurm_cluster_factory(truth.NODES, shape=truth.SHAPE, links=truth.LINKS,
                                    node_shapes=truth.NODE_SHAPES)
    try:
        yield cluster
    finally:
        localcluster.down(cluster.state_dir)


@pytest.mark.timeout(1200)
def test_cluster_flags_the_shaped_link_and_node_with_intervals_containing_the_truth(
        truth_cluster: Cluster, tmp_path: Path) -> None:
    cluster = truth_cluster
    load = current_load()
    dataset = truth.run_campaign(cluster, tmp_path / "c", seed=1)
    # The load before and after measuring (the 1-minute average spans the campaign's end,
    # less the campaign's own ranks): a machine that became busy while measuring flags extra
    # links (seen: a container build started during the campaign, link p58n4-p58n5 latency
    # flagged at load 1.8 before, 5 after).
    after = current_load()
    others = dataclasses.replace(after, load1=max(0.0, after.load1 - RANKS))
    if others.load1 > load.load1:
        load = others
    verdict, text = truth.judge(cluster, dataset)
    print(text, verdict.describe(), sep="\n")
    # whatever the load: both were tested and read slower (tbf only slows a link down)
    assert verdict.node and verdict.link, (verdict.describe(), text)
    assert verdict.node["estimate"] < 0 and verdict.link["estimate"] < 0, verdict.describe()
    # its bandwidth loss is reported as the node's, not as its four links'
    assert not any(f["kind"] == "link" and f["figure"] == "bandwidth"
                   and verdict.slow_node in f["name"].split("-") for f in verdict.flagged), text
    if load.load1 > OVERLOADED * load.cpus:
        # seen at load 11.5 on 2 CPUs: the node's interval [-49 %, -15 %] held the truth but
        # did not clear the threshold at 5 % FDR
        warnings.warn(ExactnessWithheld(
            f"found/covered/nothing else not asserted, the machine was overloaded before "
            f"measuring or during it ({load.describe()}); {verdict.describe()}"), stacklevel=1)
        return
    assert verdict.found, (verdict.describe(), text)
    assert verdict.covered, (verdict.describe(), text)
    if load.busy:
        warnings.warn(ExactnessWithheld(
            f"'no other node or link flagged' not asserted, the machine was not quiet before "
            f"measuring or during it ({load.describe()}); {verdict.describe()}"), stacklevel=1)
        return
    assert verdict.exact, (verdict.describe(), text)
