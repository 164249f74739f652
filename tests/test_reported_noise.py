"""Aggregates' noise (issue 14): an OSU series run with ``-z`` reports its percentiles, and a
fit of the aggregate series gives that as the messages' noise (ratios to the tool's median)
instead of "unknown"; every output still says the fit came from aggregates.

The expected ratios are computed here from the fixture's text, independently of ingest.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from kit.cli import main
from kit.data.ingest import ingest
from kit.fit.fitting import FitOptions, fit_series
from kit.fit.reportednoise import percentile_of, reported_noise

LATENCY_Z = "osu/osu_latency_tcp_7.4_z.txt"
BW_Z = "osu/osu_bw_tcp_7.4_z.txt"
LATENCY_PLAIN = "osu/osu_latency_tcp_7.4.txt"
QUICK = FitOptions(aggregates=True, validate=False, intervals=False)


def _columns(path: Path) -> dict[str, list[float]]:
    """The fixture's table: column name -> values (sizes under 'size')."""
    header: list[str] = []
    cols: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("# Size"):
            header = ["size", "avg", *(f"P{w.removeprefix('P')}" for w in line.split()
                                        if w.startswith("P"))]
            cols = {h: [] for h in header}
        elif header and line.strip() and not line.startswith("#"):
            for name, value in zip(header, line.split(), strict=True):
                cols[name].append(float(value))
    return cols


@pytest.fixture(scope="module")
def dataset(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rn") / "ds"
    report = ingest([fixtures_dir / LATENCY_Z, fixtures_dir / BW_Z], out, campaign="z",
                    transport="tcp")
    assert report.ok and report.runs_added == 2
    return out


def test_latency_percentiles_are_the_reported_noise(dataset: Path, fixtures_dir: Path) -> None:
    cols = _columns(fixtures_dir / LATENCY_Z)
    expected = {q: statistics.median(t / m for t, m in zip(cols[q], cols["P50"], strict=True))
                for q in ("P90", "P99")}
    fitted = fit_series(dataset, {"op": "pingpong", "stat": "mean"}, QUICK).fitted
    prov = fitted.provenance
    assert fitted.aggregate and prov["samples"] == "aggregates" and prov["statistic"] == "mean"
    reported = prov["reported_noise"]
    assert reported["quantiles"] == ["p90", "p99"]
    assert reported["ratios"]["p90"]["median"] == pytest.approx(expected["P90"], rel=1e-9)
    assert reported["ratios"]["p99"]["median"] == pytest.approx(expected["P99"], rel=1e-9)
    assert reported["n_sizes"] == len(cols["size"]) and reported["n_runs"] == 1
    assert reported["ratios"]["p99"]["max"] == pytest.approx(
        max(t / m for t, m in zip(cols["P99"], cols["P50"], strict=True)), rel=1e-9)
    # one entry per regime of the fitted model, covering every size
    assert sum(r["n_sizes"] for r in reported["regimes"]) == len(cols["size"])
    assert not prov["noise"].startswith("unknown")
    assert "as reported by osu" in prov["noise"] and "p99/p50" in prov["noise"]
    assert "not to single messages" in prov["noise"]  # still says: aggregates


def test_bandwidth_percentiles_become_time_percentiles(dataset: Path, fixtures_dir: Path) -> None:
    """osu_bw -z prints bandwidth percentiles: P99 of bandwidth is p1 of time (ratio < 1)."""
    cols = _columns(fixtures_dir / BW_Z)
    found = reported_noise(dataset, {"campaign": "z", "tool": "osu", "transport": "tcp",
                                     "placement": "unknown", "host_pair": "unknown",
                                     "op": "bw", "stat": "p50"})
    assert found is not None and found.quantiles == ("p1", "p10")
    # time = size / bandwidth, so time ratio p1/p50 = bandwidth P50 / P99
    expected = statistics.median(m / t for t, m in zip(cols["P99"], cols["P50"], strict=True))
    assert found.ratios["p1"]["median"] == pytest.approx(expected, rel=1e-9)
    assert found.ratios["p1"]["max"] < 1


def test_without_percentiles_the_noise_stays_unknown(fixtures_dir: Path, tmp_path: Path) -> None:
    ingest([fixtures_dir / LATENCY_PLAIN], tmp_path / "ds", campaign="plain")
    fitted = fit_series(tmp_path / "ds", {"stat": "mean"}, QUICK).fitted
    assert fitted.provenance["noise"].startswith("unknown")
    assert "reported_noise" not in fitted.provenance
    assert reported_noise(tmp_path / "ds", {"stat": "raw"}) is None
    assert percentile_of("p99_9") == 99.9 and percentile_of("mean") is None


def test_cli_fit_and_report_say_aggregates_and_reported_noise(
        dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    assert main(["fit", str(dataset), "--series", "op=pingpong,stat=p50", "--aggregates",
                 "--no-intervals", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "fitted to aggregates (p50 per size)" in err
    assert "as reported by osu" in err and "p90/p50" in err
    saved = json.loads(out.read_text())["provenance"]
    assert saved["samples"] == "aggregates" and saved["reported_noise"]["quantiles"] == [
        "p90", "p99"]
    assert main(["report", str(out), "-o", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Fitted to aggregates" in html and "as reported by osu" in html


def test_tui_side_panel_and_saved_model_give_the_reported_noise(dataset: Path,
                                                                tmp_path: Path) -> None:
    from tui import fitting, loading, modelfiles
    from tui.session import SeriesState

    rows = loading.series_rows(dataset)
    key = next(r.key for r in rows if r.key.get("op") == "pingpong"
               and r.key.get("stat") == "mean")
    samples = loading.load_samples(dataset, key)
    state = SeriesState.of(samples, loading.reported_noise(dataset, key))
    note = state.aggregate_note()
    assert note is not None and note.startswith("aggregates: the tool's mean per size")
    assert "as reported by osu" in note and "p99/p50" in note
    # without the tool's report the same series says unknown
    assert "unknown" in (SeriesState.of(samples).aggregate_note() or "")
    model = fitting.fit(samples)
    path = modelfiles.save_model(model, tmp_path / "tui.json", dataset, key)
    prov = json.loads(path.read_text())["provenance"]
    assert prov["samples"] == "aggregates" and "as reported by osu" in prov["noise"]
    assert prov["reported_noise"]["quantiles"] == ["p90", "p99"]
