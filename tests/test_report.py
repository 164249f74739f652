"""report: the HTML page and its PNG figures exist and hold what they claim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit import synth
from kit.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One synthetic ping-pong series, ingested like any plain 'size,duration' CSV."""
    from kit.ingest import ingest

    root = tmp_path_factory.mktemp("report")
    size, time = synth.sample(synth.ethernet_like(), 2500, grid=30, seed=8)
    csv = root / "eth.csv"
    pl.DataFrame({"size": size.astype(np.uint64), "duration": time}).write_csv(csv)
    report = ingest([csv], root / "ds", campaign="synthetic", transport="tcp")
    assert not report.files_failed
    return root / "ds"


def _check_report(out: Path, expect_validation: bool) -> str:
    html = (out / "index.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    images = [line.split('src="')[1].split('"')[0] for line in html.splitlines()
              if "<img src=" in line]
    assert any(i.endswith("-scatter.png") for i in images)
    assert any(i.endswith("-residuals.png") for i in images)
    for name in images:
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5000
    assert "Regimes" in html
    assert ("Validation on held-out samples" in html) == expect_validation
    if expect_validation:
        for row in ("hockney", "peak", "floor"):
            assert f"<td class=\"l\">{row}</td>" in html
    return html


def test_report_of_a_dataset_fits_and_validates(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    assert main(["report", str(dataset), "-o", str(out)]) == 0
    html = _check_report(out, expect_validation=True)
    assert "synthetic / csv / tcp / pingpong / raw" in html
    assert "(Hockney " in html  # per-regime held-out score next to the baseline's


def test_report_of_a_model_file_uses_its_provenance(dataset: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.json"
    assert main(["fit", str(dataset), "-o", str(model)]) == 0
    out = tmp_path / "rep-model"
    assert main(["report", str(model), "-o", str(out)]) == 0
    _check_report(out, expect_validation=False)  # the model holds no validation yet
    assert main(["validate", str(model)]) == 0
    out2 = tmp_path / "rep-validated"
    assert main(["report", str(model), "-o", str(out2)]) == 0
    _check_report(out2, expect_validation=True)


def test_report_errors_are_one_paragraph(dataset: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(dataset), "-o", str(tmp_path / "x"), "--series",
                 "transport=ib"]) == 2
    err = capsys.readouterr().err
    assert "--series" in err and "Traceback" not in err
    assert main(["report", str(tmp_path / "nope.json"), "-o", str(tmp_path / "y")]) == 2
