"""report: the HTML page and its PNG figures exist and hold what they claim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.cli import main
from kit.fit import synth

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One synthetic ping-pong series, ingested like any plain 'size,duration' CSV."""
    from kit.data.ingest import ingest

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
    # Per-regime held-out score next to the best honest baseline's, named.
    assert any(f"({b} " in html for b in ("hockney", "hockney_robust", "peak"))


def test_report_of_a_model_file_uses_its_provenance(dataset: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.json"
    assert main(["fit", str(dataset), "-o", str(model), "--no-validate"]) == 0
    out = tmp_path / "rep-model"
    assert main(["report", str(model), "-o", str(out)]) == 0
    html = _check_report(out, expect_validation=False)  # the model holds no validation yet
    # fit's intervals and run quality travel with the file into the report.
    assert "How sure: intervals" in html and "Run quality" in html
    assert any(line.endswith("-sequence.png") for line in html.split('"'))
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


def test_report_of_a_pingpong_only_dataset_says_why_there_is_no_loggp(dataset: Path,
                                                                      tmp_path: Path) -> None:
    out = tmp_path / "rep-pp"
    assert main(["report", str(dataset), "-o", str(out), "--no-validate"]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "LogGP not estimated: only pingpong was measured" in html
    assert '<table class="loggp">' not in html


def test_report_shows_loggp_with_definitions_and_intervals(shared_dir: Path,
                                                           tmp_path: Path) -> None:
    """Netgauge's LogGP run (pingpong, send, recv, gap): the report's LogGP table holds each
    parameter with its definition and the values ``kit.analyses.loggp`` derives, with intervals."""
    from kit.analyses.loggp import DEFINITIONS, loggp
    from kit.data.ingest import ingest

    ds = tmp_path / "ds"
    assert ingest([shared_dir / "fixtures/netgauge/netgauge_loggp_tcp_ng.out"], ds,
                  campaign="ng", transport="tcp").ok
    out = tmp_path / "rep"
    assert main(["report", str(ds), "-o", str(out), "--series", "op=pingpong",
                 "--no-validate"]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    assert html.index("LogGP parameters") < html.index('class="series"')
    assert "ng / tcp / netgauge" in html and '<table class="loggp">' in html
    for p in ("T1", "o_s", "o_r", "g", "G"):
        assert f"<b>{p}</b>" in html, p
        assert DEFINITIONS[p].replace("'", "&#39;") in html, p
    # Netgauge's send + recv overheads exceed its half round trip: L = T1 - o_s - o_r < 0 in
    # every range is no latency, so it is listed as not estimated, with why (kit.figures.sanity)
    assert "<b>L</b>" not in html
    assert ">L</abbr>: not physical: L -" in html and "T1 - o_s - o_r = " in html
    # The first range's values are those of kit.analyses.loggp on the same dataset (default ranges).
    res = loggp(ds, {"campaign": "ng"})
    first = res["regimes"][0]
    for p in ("o_s", "o_r", "g", "T1"):
        v = first[p]
        assert f"{v['value'] * 1e6:.4g}<br><span class=\"small\">[{v['lo'] * 1e6:.4g}, " \
               f"{v['hi'] * 1e6:.4g}]" in html, p
    assert "nan" not in html.split("LogGP parameters")[1].split('class="series"')[0].lower()


def test_report_of_a_stream_only_campaign_lists_what_loggp_lacks(tmp_path: Path) -> None:
    """A probe campaign with stream windows alone: g and G in the table, and every other
    parameter listed as not estimated with the series it needs; never a NaN."""
    import json

    from kit.data.ingest import ingest
    from tests.test_ingest_probe import META, write_run

    rng = np.random.default_rng(2)
    sizes = np.floor(np.exp(rng.uniform(0, np.log(2**20), 300))).astype(int)
    window = 16
    lines = [f"{k},stream,{s},{window},{window * (2e-7 + s / 5e9) * rng.lognormal(0, .05):.9e},"
             ",0" for k, s in enumerate(sizes)]
    meta = dict(META, ops=["stream"], samples_written=len(lines), warmup=0)
    write_run(tmp_path / "in", "st", lines, meta)
    json.loads((tmp_path / "in" / "st.meta.json").read_text())
    ds = tmp_path / "ds"
    assert ingest([tmp_path / "in"], ds, campaign="st", transport="tcp").ok
    out = tmp_path / "rep"
    assert main(["report", str(ds), "-o", str(out), "--no-validate"]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    part = html.split("LogGP parameters")[1].split('class="series"')[0]
    assert "<b>g</b>" in part and "<b>G</b>" in part
    assert "Not estimated:" in part
    for p in ("L", "T1", "o_s", "o_r"):
        assert f">{p}</abbr>: needs" in part, p
    assert "no series of send" in part and "nan" not in part.lower()
    # the stream series itself is a raw series of per-message gaps, fitted like any other
    assert "st / probe / tcp" in html and "stream / raw" in html
