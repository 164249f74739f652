"""``pairs`` (k concurrent pairs of a contention run) is a series key; k = 1 is never named.

A campaign with concurrent_pairs [1, 2, 4] must give three series and three models, not one
model through three network loads; data and models from before the key read as k = 1.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.cli import main
from kit.data import dataset as ds
from kit.data import series_summary
from kit.data.ingest import ingest
from kit.data.schema import SERIES_KEYS, pairs_count, pairs_label, pairs_short
from kit.fit.fitall import model_filename
from tests.builders import forget_checksums, write_contention_run
from tests.test_ingest_probe import META

KS = (1, 2, 4)


def contention_rounds(k: int, seed: int, n: int = 120) -> list[tuple[int, list[float]]]:
    """Pingpong rounds whose per-pair bandwidth is 1 GB/s / k (latency 20 µs * k)."""
    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(np.log(8), np.log(1 << 22), n)).astype(int)
    return [(int(s), [(20e-6 * k + s * k / 1e9) * float(rng.lognormal(0, 0.05))
                      for _ in range(k)]) for s in sizes]


@pytest.fixture(scope="module")
def three_ks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One campaign, k = 1, 2, 4 over the same two nodes (k = 1 a classic two-rank run)."""
    root = tmp_path_factory.mktemp("pairs")
    files = []
    for k in KS:
        hosts = ["n1"] * k + ["n2"] * k
        files.append(write_contention_run(root / f"k{k}", k, contention_rounds(k, k),
                                          {**META, "hosts": hosts}))
    report = ingest(files, root / "ds", campaign="cont", transport="tcp")
    assert report.ok and report.runs_added == 3
    return root / "ds"


def test_the_helper_owns_the_rule() -> None:
    assert [pairs_label(v) for v in (1, "1", None, "", 4, "16")] == ["", "", "", "", "4 pairs",
                                                                     "16 pairs"]
    assert [pairs_short(v) for v in (1, None, "4")] == ["", "", "k4"]
    assert pairs_count("x") == 1 and pairs_count(0) == 1
    assert "pairs" in SERIES_KEYS


def test_three_ks_are_three_series(three_ks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = ds.series_table(three_ks)
    assert table["pairs"].to_list() == ["1", "2", "4"]
    assert set(table["placement"].to_list()) == {"inter-node"}
    assert set(table["host_pair"].to_list()) == {"n1:n2"}
    rows = ds.select_series(three_ks, ds.parse_selector("pairs=4"))
    assert rows.keys["pairs"] == "4" and len(rows) == 120 * 4
    with pytest.raises(Exception, match="3 series match"):
        ds.select_series(three_ks, {"op": "pingpong"})
    # the table shows a pairs column (some k > 1); the CSV always has it
    assert main(["datasets", str(three_ks)]) == 0
    assert "pairs" in capsys.readouterr().out
    assert main(["datasets", str(three_ks), "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split(",")[5] == "pairs"


def test_no_pairs_column_for_classic_data(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = write_contention_run(tmp_path / "in", 1, contention_rounds(1, 9, 30),
                               {**META, "hosts": ["n1", "n2"]})
    ingest([run], tmp_path / "ds", campaign="c")
    assert main(["datasets", str(tmp_path / "ds")]) == 0
    head = next(line for line in capsys.readouterr().out.splitlines() if "campaign" in line)
    assert "host_pair" in head and "pairs" not in head


def test_fit_all_writes_one_model_per_k(three_ks: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "models"
    assert main(["fit", str(three_ks), "--all", "-o", str(out), "--no-validate",
                 "--no-intervals", "--jobs", "1"]) == 0
    names = sorted(p.name for p in out.glob("*.json"))
    assert names == [
        "cont__probe__tcp__inter-node__n1_n2__k2__pingpong__raw.json",
        "cont__probe__tcp__inter-node__n1_n2__k4__pingpong__raw.json",
        "cont__probe__tcp__inter-node__n1_n2__pingpong__raw.json",  # k = 1: the old name
    ]
    prov = json.loads((out / names[1]).read_text())["provenance"]["series"]
    assert prov["pairs"] == "4"
    capsys.readouterr()


def test_model_filename_is_unchanged_for_k1() -> None:
    series = {"campaign": "c", "tool": "probe", "transport": "tcp", "placement": "intra-node",
              "host_pair": "a:a", "op": "pingpong", "stat": "raw"}
    old = "c__probe__tcp__intra-node__a_a__pingpong__raw.json"
    assert model_filename(series) == old == model_filename({**series, "pairs": "1"})


def test_old_models_and_part_files_stand_for_k1(three_ks: Path, tmp_path: Path) -> None:
    """A model without ``pairs`` in its provenance selects (and in the TUI matches) k = 1."""
    assert ds.model_selector({"op": "pingpong"}) == {"op": "pingpong", "stat": "raw",
                                                     "pairs": "1"}
    data = ds.select_series(three_ks, ds.model_selector({"op": "pingpong"}))
    assert data.keys["pairs"] == "1"

    from kit.model.contract import ModelFile
    from tests.builders import three_linear_regimes
    from tui.loading import series_rows
    from tui.modelfiles import match_models

    rows = series_rows(three_ks)
    assert [r.key.where for r in rows] == ["inter-node n1:n2", "inter-node n1:n2, 2 pairs",
                                           "inter-node n1:n2, 4 pairs"]
    old = ModelFile(three_linear_regimes(1e-9), provenance={
        "series": {k: v for k, v in rows[0].key.as_dict().items() if k != "pairs"}})
    by_key, _, messages = match_models([old], rows)
    assert list(by_key) == [rows[0].key] and not messages

    from tui.screens.export import default_stem

    assert default_stem(rows[0].key) == "cont-probe-tcp-inter-node-n1_n2-pingpong"
    assert default_stem(rows[2].key) == "cont-probe-tcp-inter-node-n1_n2-k4-pingpong"


def test_part_files_without_the_column_read_as_k1(tmp_path: Path) -> None:
    """Part files written before ``pairs`` existed, and a summary cached before it was a key."""
    run = write_contention_run(tmp_path / "in", 1, contention_rounds(1, 3, 30),
                               {**META, "hosts": ["n1", "n2"]})
    dataset = tmp_path / "ds"
    ingest([run], dataset, campaign="old")
    for part in (dataset / ds.SAMPLES_DIR).rglob("*.parquet"):
        pl.read_parquet(part).drop("pairs", "pair", strict=False).write_parquet(part)
    forget_checksums(dataset)  # as that kit wrote them: no checksums
    # A summary in the old layout (no pairs column), even one carrying the current stamp and
    # a matching digest, is recomputed rather than trusted.
    old = ds.series_table(dataset).drop("pairs")
    state = ds._committed(dataset)
    rows = [list(r) for r in old.rows()]
    doc = json.loads((dataset / ds.SUMMARY_FILE).read_text())
    doc.update(columns=old.columns, rows=rows, stamp=state.stamp, digest=hashlib.sha256(
        json.dumps([old.columns, rows, doc["placement_sources"]]).encode()).hexdigest())
    (dataset / ds.SUMMARY_FILE).write_text(json.dumps(doc))
    assert series_summary.read(dataset, state.stamp) is None
    assert series_summary.read_current(dataset) is None
    table = ds.series_table(dataset)
    assert table["pairs"].to_list() == ["1"] and table["n_samples"].to_list() == [30]
    assert ds.scan(dataset).select(pl.col("pairs").unique()).collect().item() == 1
