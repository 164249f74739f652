"""Placement and host pair are series keys: intra- and inter-node runs are never fitted together."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.cli import main
from kit.core.errors import ModelError
from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.data.placement import resolve
from kit.fit.fitting import fit_series
from tests.test_ingest_probe import META, write_run


def _probe_run(folder: Path, hosts: list[str], latency: float, bandwidth: float, seed: int,
               *, n: int = 600, **meta: object) -> Path:
    """A probe pingpong run: round trip = 2 * (latency + size / bandwidth) with noise."""
    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(0, np.log(1 << 22), n)).astype(int)
    one_way = (latency + sizes / bandwidth) * rng.lognormal(0.0, 0.05, n)
    lines = [f"{i},pingpong,{s},1,{2 * t:.9e},,0" for i, (s, t) in enumerate(zip(sizes, one_way,
                                                                                 strict=True))]
    return write_run(folder, "run", lines, {**META, "hosts": hosts, "seed": seed, **meta})


@pytest.fixture(scope="module")
def two_placements(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tcp ping-pong inside node n1 (loopback: fast) and from n1 to n2 (slow), one campaign."""
    root = tmp_path_factory.mktemp("placement")
    dataset = root / "ds"
    intra = _probe_run(root / "intra", ["n1", "n1"], 20e-6, 5e9, 1)
    inter = _probe_run(root / "inter", ["n1", "n2"], 60e-6, 0.12e9, 2)
    report = ingest([intra, inter], dataset, campaign="sweep", transport="tcp")
    assert report.ok and report.runs_added == 2
    return dataset


def test_two_host_pairs_are_two_series(two_placements: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    table = ds.series_table(two_placements)
    assert table.height == 2
    got = {(r["placement"], r["host_pair"]) for r in table.iter_rows(named=True)}
    assert got == {("intra-node", "n1:n1"), ("inter-node", "n1:n2")}
    runs = ds.runs(two_placements).sort("host_pair")
    assert runs["placement_source"].to_list() == ["hosts", "hosts"]
    assert main(["datasets", str(two_placements), "--csv"]) == 0
    out = capsys.readouterr().out
    assert "placement,host_pair" in out.splitlines()[0]
    assert ",inter-node,n1:n2," in out and ",intra-node,n1:n1," in out


def test_fit_needs_a_placement_and_gives_two_models(two_placements: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ModelError, match="2 series match"):
        fit_series(two_placements, {"transport": "tcp", "op": "pingpong"})
    models = {}
    for selector in ("placement=inter-node", "host_pair=n1:n1"):
        out = tmp_path / f"{selector.split('=')[1]}.json"
        assert main(["fit", str(two_placements), "--series", selector, "-o", str(out)]) == 0
        models[selector] = json.loads(out.read_text())
    inter = models["placement=inter-node"]["provenance"]["series"]
    intra = models["host_pair=n1:n1"]["provenance"]["series"]
    assert (inter["placement"], inter["host_pair"]) == ("inter-node", "n1:n2")
    assert (intra["placement"], intra["host_pair"]) == ("intra-node", "n1:n1")
    # Each model describes its own data: at 1 MiB inter-node is ~8 ms, intra-node ~0.2 ms.
    from kit.model.io import load_model

    slow = load_model(tmp_path / "inter-node.json").predict(np.array([1 << 20]))[0]
    fast = load_model(tmp_path / "n1:n1.json").predict(np.array([1 << 20]))[0]
    assert slow > 10 * fast
    capsys.readouterr()


def test_selector_rejects_unknown_keys_and_names_placement() -> None:
    assert ds.parse_selector("placement=inter-node,host_pair=n1:n2") == {
        "placement": "inter-node", "host_pair": "n1:n2"}
    with pytest.raises(ModelError, match="placement"):
        ds.parse_selector("node=n1")


def test_campaign_placement_is_checked_against_the_hosts(tmp_path: Path) -> None:
    run = _probe_run(tmp_path / "in", ["n1", "n2"], 60e-6, 0.12e9, 3, n=50)
    report = ingest([run], tmp_path / "ds", campaign="c", placement="intra-node")
    assert report.ok
    assert any("planned intra-node" in w and "inter-node" in w for w in report.warnings)
    row = ds.runs(tmp_path / "ds").row(0, named=True)
    assert (row["placement"], row["placement_source"]) == ("inter-node", "hosts-override")
    # Agreeing campaign and hosts: both sources named.
    run = _probe_run(tmp_path / "in2", ["n1", "n1"], 20e-6, 5e9, 4, n=50)
    ingest([run], tmp_path / "ds2", campaign="c", placement="intra-node")
    row = ds.runs(tmp_path / "ds2").row(0, named=True)
    assert (row["placement"], row["placement_source"]) == ("intra-node", "campaign+hosts")


def test_sockets_in_the_probe_meta_give_intra_socket(tmp_path: Path) -> None:
    run = _probe_run(tmp_path / "in", ["n1", "n1"], 20e-6, 5e9, 5, n=50,
                     cpus=[0, 1], sockets=[0, 0])
    ingest([run], tmp_path / "ds", campaign="c")
    row = ds.runs(tmp_path / "ds").row(0, named=True)
    assert (row["placement"], row["cpus"]) == ("intra-socket", "0,1")
    assert ds.scan(tmp_path / "ds").select("placement").unique().collect().item() == "intra-socket"


def test_resolve_rules() -> None:
    assert resolve([]).placement == "unknown" and resolve([]).host_pair == "unknown"
    assert resolve([], "inter-node").source == "campaign"
    assert resolve(["a", "a"], "intra-socket").placement == "intra-socket"  # no sockets known
    assert resolve(["a", "a"], "intra-socket", [0, 1]).placement == "intra-node"
    assert resolve(["a"]).host_pair == "a:a"


def test_old_datasets_without_the_columns_still_open(tmp_path: Path) -> None:
    """A dataset written before placement existed: derived from hosts, unknown without them."""
    with_hosts = _probe_run(tmp_path / "a", ["n1", "n2"], 60e-6, 0.12e9, 6, n=50)
    no_hosts = _probe_run(tmp_path / "b", [], 20e-6, 5e9, 7, n=50)
    dataset = tmp_path / "ds"
    ingest([with_hosts, no_hosts], dataset, campaign="old", transport="tcp")
    runs_file = dataset / ds.RUNS_FILE
    old = pl.read_parquet(runs_file).drop("placement", "placement_source", "host_pair", "cpus")
    old.write_parquet(runs_file)
    got = {(r["placement"], r["host_pair"], r["placement_source"])
           for r in ds.runs(dataset).iter_rows(named=True)}
    assert got == {("inter-node", "n1:n2", "hosts"), ("unknown", "unknown", "unknown")}
    table = ds.series_table(dataset)
    assert set(table["placement"].to_list()) == {"inter-node", "unknown"}
    rows = ds.series_rows(dataset, {"placement": "inter-node"}, aggregates=False).collect()
    assert rows.height == 50
    # The next ingest stores what was derived (and nothing else changes).
    ingest([_probe_run(tmp_path / "c", ["n3", "n4"], 60e-6, 0.12e9, 8, n=50)], dataset,
           campaign="old", transport="tcp")
    stored = pl.read_parquet(runs_file)
    assert stored["placement"].null_count() == 0


def _k2_run(folder: Path, **meta: object) -> Path:
    """An inter-node ``--pairs 2`` run: initiators 0, 1 on n1, peers 2, 3 on n2."""
    from tests.builders import write_contention_run

    rounds = [(64, [30e-6, 31e-6]) for _ in range(20)]
    return write_contention_run(folder, 2, rounds,
                                {**META, "hosts": ["n1", "n1", "n2", "n2"], **meta})


def test_contention_placement_comes_from_the_first_pair(tmp_path: Path) -> None:
    """Ranks 0 and 1 are two initiators on n1: the pair (0, 2) crosses to n2."""
    ingest([_k2_run(tmp_path / "in")], tmp_path / "ds", campaign="c", transport="tcp")
    row = ds.runs(tmp_path / "ds").row(0, named=True)
    assert (row["placement"], row["host_pair"]) == ("inter-node", "n1:n2")
    table = ds.series_table(tmp_path / "ds")
    assert table.select("placement", "host_pair", "pairs").rows() == [
        ("inter-node", "n1:n2", "2")]
    # An explicit pairing (--pairs 0:3,1:2) is followed too.
    ingest([_k2_run(tmp_path / "in2", pairing=[[1, 3], [0, 2]],
                    hosts=["n1", "n2", "n3", "n3"])], tmp_path / "ds2", campaign="c")
    assert ds.runs(tmp_path / "ds2")["host_pair"].to_list() == ["n2:n3"]


def test_resolve_with_pair_ranks() -> None:
    hosts = ["n1", "n1", "n2", "n2"]
    assert resolve(hosts).placement == "intra-node"  # ranks 0 and 1: the old mistake
    got = resolve(hosts, "inter-node", ranks=(0, 2))
    assert (got.placement, got.host_pair, got.source) == ("inter-node", "n1:n2",
                                                          "campaign+hosts")
    assert resolve(hosts, ranks=(0, 1), sockets=[0, 0, 1, 1]).placement == "intra-socket"
    assert resolve(["n1"], ranks=(0, 3)).host_pair == "n1:n1"  # one host for all ranks
    assert resolve(["n1", "n2"], ranks=(0, 3)).placement == "unknown"  # hosts do not cover
