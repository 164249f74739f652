"""The cluster view against shaped truth on the local Slurm cluster (issue 58).

One all-pairs campaign on five namespace nodes with one slow link and one slow node
(tests/clustertruth.py), then ``pt2pt cluster``: the slow link and the slow node must be
flagged, as that link and that node, with bandwidth intervals containing the shaped truth.
That nothing else is flagged is a statistical claim on a machine other jobs may load (a
rank waiting for a core makes a pair look slow at small sizes), so it is asserted only when
the machine was quiet before measuring; otherwise it is withheld with a warning that names
the load and what was flagged. The 10-seed figure: benchmarks/bench_cluster_slurm.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.measure.localcluster import Cluster
from kit.measure.machine import current_load
from tests import clustertruth as truth

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow]


class ExactnessWithheld(UserWarning):
    """"Nothing else flagged" was not tested: the machine was not quiet (the text says)."""


@pytest.fixture(autouse=True)
def _env(campaign_env: None) -> None:
    """Plans with the checkout's probe and no site defaults."""


@pytest.mark.timeout(1200)
def test_cluster_flags_the_shaped_link_and_node_with_intervals_containing_the_truth(
        slurm_cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    cluster = slurm_cluster_factory(truth.NODES, shape=truth.SHAPE, links=truth.LINKS,
                                    node_shapes=truth.NODE_SHAPES)
    load = current_load()
    dataset = truth.run_campaign(cluster, tmp_path / "c", seed=1)
    verdict, text = truth.judge(cluster, dataset)
    print(text, verdict.describe(), sep="\n")
    assert verdict.found, (verdict.describe(), text)
    # its bandwidth loss is reported as the node's, not as its four links'
    assert not any(f["kind"] == "link" and f["figure"] == "bandwidth"
                   and verdict.slow_node in f["name"].split("-") for f in verdict.flagged), text
    assert verdict.covered, (verdict.describe(), text)
    if load.busy:
        warnings.warn(ExactnessWithheld(
            f"'no other node or link flagged' not asserted, the machine was not quiet before "
            f"measuring ({load.describe()}); {verdict.describe()}"), stacklevel=1)
        return
    assert verdict.exact, (verdict.describe(), text)
