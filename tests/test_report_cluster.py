"""The report's cluster part (kit.outputs.report.pairmatrix): a multi-pair campaign is one
cluster model with its pair matrices as heat maps, not one fitted section per pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from kit.cli import main
from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.fitting import fit_arrays
from kit.fit.synthcluster import Effect, SynthCluster, draw, write_probe_runs


@pytest.fixture(scope="module")
def cluster_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six nodes; n3 adds half the typical latency to every pair, link n1-n5 loses 40 %."""
    root = tmp_path_factory.mktemp("report-cluster")
    s, t = synth.sample(synth.ethernet_like(), 15000, 1, 4 * 2**20, seed=1)
    population = fit_arrays({"stat": "raw"}, s, t)
    cluster = SynthCluster(n_nodes=6, nodes_slow={2: Effect(latency=0.5)},
                           links_slow={(0, 4): Effect(bandwidth=0.4)}, samples=300)
    rows, _ = draw(cluster, population, seed=2)
    report = ingest(write_probe_runs(rows, root / "raw"), root / "ds", campaign="allpairs",
                    transport="tcp")
    assert report.ok
    return root / "ds"


def test_a_multi_pair_campaign_is_one_cluster_part(cluster_dataset: Path,
                                                   tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report", str(cluster_dataset), "--output", str(out)]) == 0
    html = (out / "index.html").read_text()
    assert html.count('<section class="cluster"') == 1
    assert "6 nodes, 15 pairs" in html
    # the flagged table says what pt2pt cluster says, and nothing else is flagged
    assert "n3 adds" in html and "to every pair it is in" in html
    assert "link n1-n5 bandwidth (asymptotic) -" in html
    assert html.count("<tr><td class=\"l\">") == 2
    # three heat maps, each a real picture of the 6 x 6 matrix
    images = sorted(out.glob("cluster-*.png"))
    assert [p.name.rsplit("-", 1)[1] for p in images] == ["bandwidth.png", "latency.png",
                                                         "noise.png"]
    for path in images:
        assert f'src="{path.name}"' in html
        with Image.open(path) as im:
            assert im.width > 300 and im.height > 300
            colours = im.convert("RGB").getcolors(1 << 20)
            assert colours is not None and len(colours) > 20
    # the 15 per-pair series are said to be covered, not fitted one section each
    assert "the 15 per-pair series of the clusters above are not fitted one by one" in html
    assert html.count('<section class="series"') == 0
