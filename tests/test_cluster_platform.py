"""A heterogeneous SimGrid platform from a cluster model (kit.outputs.export.clusterlinks):
the slow nodes' deviations on their hosts' links, checked in SimGrid itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kit.analyses.slowlinks import find
from kit.cli import main
from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.clustermodel import ClusterModel, save_cluster_model
from kit.fit.fitting import fit_arrays
from kit.fit.synthcluster import Effect, SynthCluster, draw, write_probe_runs
from kit.outputs.export.clusterlinks import cluster_model_platform, shrunk_nodes
from tests.test_platform import _pingpong, needs_simgrid


@pytest.fixture(scope="module")
def model() -> ClusterModel:
    """Eight nodes: n3 adds the typical 64 B latency again, n6 has 40 % less bandwidth,
    link n1-n8 is slow on its own."""
    s, t = synth.sample(synth.ethernet_like(), 15000, 1, 4 * 2**20, seed=1)
    population = fit_arrays({"stat": "raw"}, s, t)
    cluster = SynthCluster(n_nodes=8, nodes_slow={2: Effect(latency=1.0),
                                                  5: Effect(bandwidth=0.4)},
                           links_slow={(0, 7): Effect(bandwidth=0.5)}, samples=400)
    rows, _ = draw(cluster, population, seed=6)
    return ClusterModel().fit(rows)


def test_node_effects_go_on_their_hosts_links(model: ClusterModel) -> None:
    findings = find(model)
    platform = cluster_model_platform(model, findings=findings)
    assert platform.hosts == 8 and platform.labels == model.nodes_
    lat = shrunk_nodes(model, "latency")
    up = platform.link_values[platform.link_names(2)["up"]]
    assert up.latency - platform.link.latency == pytest.approx(lat[2])
    assert lat[2] == pytest.approx(model.figures_["latency"].parts.node[2], rel=0.02)
    slow = platform.link_values[platform.link_names(5)["down"]]
    assert slow.bandwidth / platform.link.bandwidth == pytest.approx(0.6, abs=0.05)
    assert any("link n1-n8" in n and "not on the platform" in n for n in platform.notes)
    doc = platform.to_dict()
    assert doc["host_labels"]["node-2"] == "n3"


@needs_simgrid
def test_simgrid_sees_the_slow_nodes(model: ClusterModel, tmp_path: Path) -> None:
    """A ping-pong in SimGrid: a pair with n3 takes n3's added latency more at 1 B; a pair
    with n6 moves 4 MiB at 60 % of the bandwidth; a typical pair is the population."""
    platform = cluster_model_platform(model)
    platform.write(tmp_path)
    small, large = 1, 4 * 2**20
    typical = _pingpong(platform, tmp_path, "node-0\nnode-1\n", [small, large])
    with_n3 = _pingpong(platform, tmp_path, "node-2\nnode-1\n", [small])
    with_n6 = _pingpong(platform, tmp_path, "node-5\nnode-1\n", [large])
    added = shrunk_nodes(model, "latency")
    assert with_n3[small] - typical[small] == pytest.approx(added[2] - added[1], rel=0.1)
    pop = float(model.population_.predict(np.array([float(large)]))[0])
    assert typical[large] == pytest.approx(pop, rel=0.05)
    bw_term = typical[large] - platform.inter.latency
    assert with_n6[large] - typical[large] == pytest.approx(bw_term * (1 / 0.6 - 1), rel=0.15)


def test_cli_writes_the_platform(model: ClusterModel, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = save_cluster_model(model, tmp_path / "c.json")
    out = tmp_path / "sg"
    assert main(["cluster", str(path), "--simgrid", str(out), "--cores", "2"]) == 0
    text = capsys.readouterr().out
    assert "node-2 = n3: link latency" in text and "node-5 = n6:" in text
    doc = json.loads((out / "platform.json").read_text())
    assert doc["cores"] == 2 and doc["hosts"] == 8
    assert "link pt2pt_link_2_UP " in (out / "network.tsv").read_text()
    assert main(["cluster", str(path), "--intra", str(path)]) == 2
    assert "needs --simgrid" in capsys.readouterr().err


def test_cluster_model_dataset_round_trip_through_ingest(tmp_path: Path) -> None:
    """The same synthetic cluster, written as probe runs and ingested: the CLI fits it."""
    s, t = synth.sample(synth.ethernet_like(), 8000, 1, 2**20, seed=2)
    population = fit_arrays({"stat": "raw"}, s, t)
    rows, _ = draw(SynthCluster(n_nodes=4, samples=150), population, seed=1)
    report = ingest(write_probe_runs(rows, tmp_path / "raw"), tmp_path / "ds",
                    campaign="c", transport="tcp")
    assert report.ok and report.runs_added == 12
    assert main(["cluster", str(tmp_path / "ds"), "--simgrid", str(tmp_path / "sg")]) == 0
