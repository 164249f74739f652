"""``pt2pt fit`` / ``predict`` / ``sample`` end to end on a real ingested dataset."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kit.cli import main
from kit.core.errors import ModelError
from kit.data.dataset import parse_selector
from kit.fit.fitting import FitOptions, fit_series

GRAPHENE = "platform-calibration/graphene_eth_example"


@pytest.fixture(scope="module")
def dataset(refdata_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kit.data.ingest import ingest

    ds = tmp_path_factory.mktemp("ds") / "dataset"
    report = ingest([refdata_dir / GRAPHENE / "graphene_eth_PingPong.csv"], ds,
                    campaign="graphene", transport="tcp")
    assert report.files_ok and not report.files_failed
    return ds


@pytest.fixture(scope="module")
def model_file(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("m") / "model.json"
    assert main(["fit", str(dataset), "-o", str(out)]) == 0
    return out


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_fit_single_series_writes_model_with_provenance(model_file: Path, dataset: Path):
    doc = json.loads(model_file.read_text())
    # No hosts in a calibration file and no campaign placement: both keys say unknown.
    assert doc["provenance"]["series"] == {"campaign": "graphene", "tool": "calibration",
                                           "transport": "tcp", "placement": "unknown",
                                           "host_pair": "unknown", "pairs": "1",
                                           "op": "pingpong", "stat": "raw"}
    assert doc["provenance"]["samples"] == "raw"
    assert doc["provenance"]["dataset"] == str(dataset.resolve())
    assert doc["n_samples"] == 6620 and len(doc["regimes"]) >= 2


def test_predict_csv(model_file: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["predict", str(model_file), "--sizes", "1,1024,65536"]) == 0
    rows = _csv(capsys.readouterr().out)
    assert [r["size"] for r in rows] == ["1", "1024", "65536"]
    for r in rows:
        assert float(r["p05"]) < float(r["median"]) < float(r["p95"])
    assert 20e-6 < float(rows[0]["median"]) < 60e-6  # ~34 us one-way on 1 GbE


def test_sample_csv_reproducible(model_file: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]):
    sizes = tmp_path / "sizes.txt"
    sizes.write_text("size\n8\n100000  # a comment\n")
    args = ["sample", str(model_file), "--sizes-file", str(sizes), "-n", "4", "--seed", "3"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first
    rows = _csv(first)
    assert [r["size"] for r in rows] == ["8"] * 4 + ["100000"] * 4
    assert all(float(r["time"]) > 0 for r in rows)


def test_fixed_breakpoints_option(dataset: Path, tmp_path: Path):
    out = tmp_path / "m.json"
    assert main(["fit", str(dataset), "--breakpoints", "1420,65536", "--no-overlap",
                 "-o", str(out)]) == 0
    assert json.loads(out.read_text())["breakpoints"] == [1420.0, 65536.0]


def test_several_series_need_a_selector(dataset: Path, refdata_dir: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]):
    import shutil

    from kit.data.ingest import ingest

    ds = tmp_path / "two"
    shutil.copytree(dataset, ds)
    ingest([refdata_dir / GRAPHENE / "graphene_eth_Recv.csv"], ds, campaign="graphene",
           transport="tcp")
    out = tmp_path / "m.json"
    assert main(["fit", str(ds), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "2 series match" in err and "op=recv" in err and "Traceback" not in err
    assert not out.exists()
    fitted = fit_series(ds, {"op": "recv"}, FitOptions(validate=False, intervals=False)).fitted
    assert fitted.provenance["series"]["op"] == "recv"


@pytest.mark.parametrize(("argv", "message"), [
    (["fit", "{ds}", "--series", "colour=red", "-o", "{tmp}/m.json"], "bad series selector"),
    (["fit", "{ds}", "--series", "op=bw", "-o", "{tmp}/m.json"], "no raw samples match"),
    (["fit", "{ds}", "--breakpoints", "1k", "-o", "{tmp}/m.json"], "--breakpoints"),
    # issue 53 line 10: both were tracebacks
    (["fit", "{ds}", "--breakpoints", "1e12", "-o", "{tmp}/m.json"], "holds 0 samples"),
    (["fit", "{ds}", "--breakpoints", "1e308", "-o", "{tmp}/m.json"], "holds 0 samples"),
    (["fit", "{tmp}/nowhere", "-o", "{tmp}/m.json"], "does not exist"),
    (["predict", "{model}", "--sizes", "12,abc"], "'abc' is not a size"),
    (["predict", "{model}"], "exactly one of --sizes"),
    (["predict", "{tmp}/missing.json", "--sizes", "1"], "cannot read model file"),
    (["sample", "{model}", "--sizes", "1", "-n", "0"], "-n"),
])
def test_user_errors(argv, message, dataset, model_file, tmp_path, capsys):
    args = [a.format(ds=dataset, tmp=tmp_path, model=model_file) for a in argv]
    assert main(args) == 2
    err = " ".join(capsys.readouterr().err.split())  # the paragraph is wrapped
    assert message in err and "Traceback" not in err


def test_parse_selector():
    assert parse_selector("campaign=a, op=pingpong") == {"campaign": "a", "op": "pingpong"}
    with pytest.raises(ModelError):
        parse_selector("op")
    assert parse_selector(None) == {}


def test_aggregate_only_series_is_refused(fixtures_dir: Path, tmp_path: Path):
    from kit.data.ingest import ingest

    ds = tmp_path / "osu"
    ingest([fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt"], ds, campaign="osu",
           transport="tcp")
    with pytest.raises(ModelError, match=r"only aggregates \(mean\)"):
        fit_series(ds, None)


def test_fit_errors_name_the_dataset_and_series(dataset: Path, capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path):
    # Far more regimes than 6,620 samples can support with 2,000 samples each.
    argv = ["fit", str(dataset), "--breakpoints", "10,100,1000", "--min-support", "2000",
            "-o", str(tmp_path / "m.json")]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "breakpoints" in err and "minimum support 2000" in err
    # Data faults name the dataset and the series (a zero time: a timer too coarse).
    from kit.data.ingest import ingest

    csv_file = tmp_path / "zero.csv"
    csv_file.write_text("size,duration\n" + "".join(f"{s},{1e-6 if s != 3 else 0}\n"
                                                    for s in range(1, 9)))
    ds = tmp_path / "zero"
    ingest([csv_file], ds, campaign="z")
    with pytest.raises(ModelError, match=r"zero \(series campaign=z,.*1 of 8 times"):
        fit_series(ds, None)
