"""The regime model on real ping-pong data from six clusters (../shared/reference-data).

Targets from issue 4: graphene 1 GbE median error below 3 %; taurus 10 GbE within 1.5x of
the floor in every size decade (the two Ethernet bands must be reproduced for that); the
model beats the Hockney line by a wide margin everywhere; shared-memory and fast
interconnect runs fit too; a SimGrid export of a fitted model parses back to its regimes.
All numbers are on held-out samples (30 % of each size's repetitions, seed 0).
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from kit.fit.validate import validate
from kit.model import RegimeModel

pytestmark = pytest.mark.slow

CLUSTERS = {
    "graphene": "graphene_eth_example",
    "taurus": "taurus_26_07_2016_calibration",
    "taurus-loopback": "taurus_26_07_2016_taurus-loopback",
    "stampede": "stampede_17_06_01-17_14_calibration",
    "stampede-shm": "stampede_17_06_01-17_26_calibration",
    "sirocco": "sirocco_26_08_2016_calibration",
}


@cache
def _pingpong(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """One-way ping-pong samples of a calibration folder, read by the kit's own ingest."""
    import tempfile

    from kit.data import dataset as ds
    from kit.data.ingest import ingest

    csv = next(folder.glob("*_PingPong.csv"))
    with tempfile.TemporaryDirectory() as tmp:
        report = ingest([csv], Path(tmp) / "ds", campaign=folder.name, transport="ref")
        assert not report.files_failed, report.files_failed
        frame = (ds.scan(Path(tmp) / "ds").filter(pl.col("op") == "pingpong")
                 .select("size", "time").collect())
    return frame["size"].to_numpy().astype(float), frame["time"].to_numpy()


@cache
def _validation(folder: Path) -> dict[str, Any]:
    size, time = _pingpong(folder)
    return validate(RegimeModel(), size, time, random_state=0)


@pytest.fixture(scope="module")
def calib(refdata_dir: Path) -> Path:
    return refdata_dir / "platform-calibration"


@pytest.mark.parametrize("cluster", list(CLUSTERS))
def test_model_beats_hockney_by_a_wide_margin(calib: Path, cluster: str) -> None:
    """Wide margin on the primary (distributional) score: at most 3/4 of Hockney's CRPS over
    all sizes and better in every decade; and a smaller median error. (On taurus the
    per-size median flips between the two Ethernet bands, so the median error is a weak
    yardstick there; the CRPS is not.)"""
    result = _validation(calib / CLUSTERS[cluster])
    s = result["summary"]
    assert s["model"]["crps"] < 0.75 * s["hockney"]["crps"]
    for r in result["ranges"]:
        assert r["model"]["crps"] < r["hockney"]["crps"], r
    assert s["model"]["median_err"] < s["hockney"]["median_err"]
    assert s["model"]["crps"] < s["peak"]["crps"]


def test_graphene_median_error_below_3_percent(calib: Path) -> None:
    result = _validation(calib / CLUSTERS["graphene"])
    # Median over sizes of |model median - held-out median| / held-out median; the lookup
    # table (training median vs held-out median) is about 1 %, so 3 % is reachable.
    assert result["summary"]["lookup"]["median_err"] < 0.015
    assert result["summary"]["model"]["median_err"] < 0.03


def test_taurus_bands_within_1_5x_of_the_floor_in_every_decade(calib: Path) -> None:
    result = _validation(calib / CLUSTERS["taurus"])
    ratios = {r["size_min"]: r["model"]["crps_over_floor"] for r in result["ranges"]}
    assert len(ratios) >= 6
    assert max(ratios.values()) <= 1.5, ratios


@pytest.mark.parametrize("cluster", [
    "taurus-loopback", "stampede", "stampede-shm", "sirocco"])
def test_shared_memory_and_fast_interconnects_fit(calib: Path, cluster: str) -> None:
    result = _validation(calib / CLUSTERS[cluster])
    assert result["summary"]["model"]["median_err"] < 0.05
    ratios = [r["model"]["crps_over_floor"] for r in result["ranges"]]
    assert max(ratios) <= 1.5, ratios
    assert 0.85 < result["summary"]["model"]["coverage"] < 0.95


def test_simgrid_export_of_graphene_parses_back(calib: Path) -> None:
    from kit.outputs.export.simgrid import (
        export_simgrid,
        factor_at,
        parse_factor,
        regimes_from_simgrid,
    )

    size, time = _pingpong(calib / CLUSTERS["graphene"])
    model = RegimeModel().fit(size, time)
    result = export_simgrid(model, latency=20e-6, bandwidth=117e6, envelope=0, center="curve")
    lat_s, bw_s = result.latency_factor, result.bandwidth_factor
    pieces = regimes_from_simgrid(lat_s, bw_s, 20e-6, 117e6)
    starts = {p.size_min for p in pieces}
    for regime in model.regimes_[1:]:
        assert math.ceil(regime.size_min) in starts
    _, lat = parse_factor(lat_s)
    _, bw = parse_factor(bw_s)
    grid = np.unique(np.geomspace(1, size.max(), 300).round())
    sim = np.array([20e-6 * factor_at(lat, s, (1.0,))[0]
                    + s / (117e6 * factor_at(bw, s, (1.0,))[0]) for s in grid])
    curve = model.curve(grid)
    assert np.max(np.abs(sim - curve) / curve) < 0.025


@pytest.mark.parametrize("cluster", ["graphene", "taurus"])
def test_population_quantiles_invert_the_cdf(calib: Path, cluster: str) -> None:
    """Quantiles are found by safeguarded Newton on the mixture CDF. Without the rtsafe
    rule (a step must halve the one before last) Newton cycled between two points inside
    the bracket on graphene's population at 1-2 B (level 0.355: 4.0e-5 <-> 3.0e-5 s, the
    CDF at the answer 0.66), and the SimGrid noise tables carried that 17 % shift."""
    size, time = _pingpong(calib / CLUSTERS[cluster])
    pop = RegimeModel(random_state=0).fit(size, time).population()
    sizes = np.unique(np.round(np.geomspace(1, 2**20, 80)))
    levels = np.linspace(0.005, 0.995, 100)
    q = pop.predict_quantiles(sizes, levels)
    assert np.abs(pop.cdf(sizes, q) - levels[None, :]).max() < 1e-6


@pytest.mark.parametrize("cluster", list(CLUSTERS))
def test_no_score_below_the_floor_beyond_sampling_error(calib: Path, cluster: str,
                                                         tmp_path: Path) -> None:
    """Issue 59: "CRPS / floor" printed 0.58 (graphene) and 0.02 (send series) when the
    floor was the training samples' lookup table. The floor is now the held-out samples' own
    expected CRPS: every series of every run (pingpong, isend, recv), fitted as ``pt2pt fit``
    fits it, scores at least 1 give or take its standard error, and never below 0.9
    without the reason the surfaces print beside it."""
    from kit.data import dataset as ds
    from kit.data.ingest import ingest
    from kit.figures.score import explanation, score_of
    from kit.fit.fitting import FitOptions, fit_series

    folder = calib / CLUSTERS[cluster]
    files = [f for f in folder.glob("*.csv") if any(op in f.name
                                                     for op in ("PingPong", "Isend", "Recv"))]
    report = ingest(files, tmp_path / "ds", campaign=cluster, transport="ref")
    assert not report.files_failed
    table = ds.series_table(tmp_path / "ds")
    assert table.height == 3
    for row in table.iter_rows(named=True):
        series = {k: row[k] for k in ds.SERIES_KEYS}
        fit = fit_series(tmp_path / "ds", series, FitOptions(intervals=False))
        validation = fit.fitted.validation
        for name in ("model", "hockney_robust", "peak", "lookup"):
            score = score_of(validation, name)
            assert score is not None and score.se is not None
            assert score.value + 3 * score.se >= 1.0, (row["op"], name, score)
        model = score_of(validation)
        assert model is not None
        assert model.value >= 0.9 or explanation(model) is not None, (row["op"], model)
