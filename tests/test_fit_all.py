"""``pt2pt fit --all``: every series of a dataset in worker processes, same models as alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.cli import main
from kit.fit.fitall import model_filename

GRAPHENE = "platform-calibration/graphene_eth_example"


@pytest.fixture(scope="module")
def dataset(refdata_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three series: two real ones (graphene ping-pong and recv) and one whose data cannot be
    fitted (a zero time: a timer too coarse), which must not cost the others their models."""
    from kit.data.ingest import ingest

    tmp = tmp_path_factory.mktemp("all")
    ds = tmp / "dataset"
    for name in ("graphene_eth_PingPong.csv", "graphene_eth_Recv.csv"):
        report = ingest([refdata_dir / GRAPHENE / name], ds, campaign="graphene",
                        transport="tcp")
        assert report.files_ok and not report.files_failed
    bad = tmp / "zero.csv"
    bad.write_text("size,duration\n" + "".join(f"{s},{1e-6 if s != 3 else 0}\n"
                                                for s in range(1, 9)))
    ingest([bad], ds, campaign="z")
    return ds


def _model(path: Path) -> dict:
    return json.loads(path.read_text())


def test_all_in_parallel_matches_one_by_one(dataset: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "models"
    argv = ["fit", str(dataset), "--all", "--jobs", "2", "--no-intervals", "--no-validate",
            "-o", str(out)]
    assert main(argv) == 1  # one series failed
    err = " ".join(capsys.readouterr().err.split())
    assert "2 of 3 series fitted, 1 failed" in err
    assert "campaign=z" in err and "FAILED" in err and "1 of 8 times" in err
    assert "Traceback" not in err
    written = sorted(p.name for p in out.glob("*.json"))
    assert len(written) == 2 and all(n.startswith("graphene__") for n in written)
    for op in ("pingpong", "recv"):
        single = tmp_path / f"{op}.json"
        assert main(["fit", str(dataset), "--series", f"campaign=graphene,op={op}",
                     "--no-intervals", "--no-validate", "-o", str(single)]) == 0
        doc = _model(single)
        batch = out / model_filename(doc["provenance"]["series"])
        assert _model(batch) == doc


def test_all_sequential_equals_parallel_with_selector(dataset: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]):
    one, two = tmp_path / "one", tmp_path / "two"
    base = ["fit", str(dataset), "--all", "--series", "campaign=graphene", "--no-intervals",
            "--no-validate"]
    assert main([*base, "--jobs", "1", "-o", str(one)]) == 0
    assert main([*base, "--jobs", "2", "-o", str(two)]) == 0
    names = sorted(p.name for p in one.glob("*.json"))
    assert len(names) == 2 and names == sorted(p.name for p in two.glob("*.json"))
    for name in names:
        assert _model(one / name) == _model(two / name)
    assert "2 of 2 series fitted" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "message"), [
    (["--jobs", "0"], "--jobs"),
    (["--series", "op=bw"], "no series to fit"),
])
def test_all_user_errors(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         extra: list[str], message: str):
    assert main(["fit", str(dataset), "--all", *extra, "-o", str(tmp_path / "m")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "Traceback" not in err


def test_jobs_without_all_is_refused(dataset: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]):
    argv = ["fit", str(dataset), "--series", "op=recv", "--jobs", "2", "-o",
            str(tmp_path / "m.json")]
    assert main(argv) == 2
    assert "--all" in capsys.readouterr().err


def test_large_series_fitted_on_a_deterministic_subsample(dataset: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    """--max-samples: the bounded-memory path reads ~N rows while streaming, says so in the
    model's provenance, and draws the same rows every time."""
    docs = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        assert main(["fit", str(dataset), "--series", "campaign=graphene,op=pingpong",
                     "--max-samples", "2000", "--no-intervals", "--no-validate",
                     "-o", str(out)]) == 0
        docs.append(_model(out))
    assert docs[0] == docs[1]
    sub = docs[0]["provenance"]["subsample"]
    assert sub["rows"] == 6620 and sub["max_samples"] == 2000
    assert 1700 < sub["fitted"] < 2300 and docs[0]["n_samples"] == sub["fitted"]
    assert "uniform subsample" in capsys.readouterr().err
    # Below the cap nothing changes: every row, no subsample recorded.
    full = tmp_path / "full.json"
    assert main(["fit", str(dataset), "--series", "campaign=graphene,op=pingpong",
                 "--max-samples", "0", "--no-intervals", "--no-validate", "-o", str(full)]) == 0
    assert "subsample" not in _model(full)["provenance"] and _model(full)["n_samples"] == 6620
