"""One series, one set of rows: every surface fits the rows ``pt2pt fit`` fits.

Before kit.data.dataset owned the selection, fit took raw rows only, the report and validate any
statistic with time > 0, and the TUI any statistic with a finite time, so the TUI fitted OSU
means that ``pt2pt fit`` refused; later ``fit`` left disturbed windows out and the TUI and the
report did not, and this test still passed because it checked a selector ``fit`` no longer
called. Now it intercepts the one function that fits (kit.fit.fitting.fit_samples) and records
the rows each surface hands it, through the surface's own entry point: ``pt2pt fit``,
``fit --all``, ``pt2pt report DATASET``, ``pt2pt validate DATASET``, the TUI and ``pt2pt diff``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from kit.core.errors import ModelError
from kit.data import dataset as ds
from kit.data.ingest import ingest


@pytest.fixture(scope="module")
def fixtures_dataset(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> Path:
    dataset = tmp_path_factory.mktemp("selection") / "ds"
    report = ingest([fixtures_dir], dataset)
    assert report.files_ok > 10
    return dataset


def test_every_surface_fits_the_rows_fit_fits(fixtures_dataset: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.analyses import diff
    from kit.cli import main
    from kit.commands import validate as validate_cmd
    from kit.fit import fitting
    from kit.outputs.report.build import report_dataset
    from tui import data
    from tui import fitting as tui_fitting

    seen: dict[str, dict[str, pl.DataFrame]] = {}
    surface = ["?"]

    def capture(samples: fitting.SeriesSamples, opts: Any = None) -> Any:
        seen.setdefault(ds.describe(samples.keys), {})[surface[0]] = samples.frame
        raise ModelError("captured by the test", where="test")

    monkeypatch.setattr(fitting, "fit_samples", capture)
    rows = data.series_rows(fixtures_dataset)
    assert len(rows) == ds.series_table(fixtures_dataset).height > 5
    surface[0] = "fit --all"
    assert main(["fit", str(fixtures_dataset), "--all", "--aggregates", "--jobs", "1",
                 "-o", str(tmp_path / "all")]) == 1  # every series "failed": captured
    surface[0] = "report"
    report_dataset(fixtures_dataset, tmp_path / "report", validate=False)
    n_aggregate = 0
    for row in rows:
        series = row.key.as_dict()
        label = ds.describe(series)
        aggregate = series["stat"] != "raw"
        n_aggregate += aggregate
        surface[0] = "fit"
        argv = ["fit", str(fixtures_dataset), "--series", label, "-o", str(tmp_path / "m.json")]
        assert main(argv + (["--aggregates"] if aggregate else [])) == 2
        surface[0] = "TUI"
        with pytest.raises(ModelError, match="captured"):
            tui_fitting.fit(data.load_samples(fixtures_dataset, row.key))
        surface[0] = "validate"
        args = argparse.Namespace(target=fixtures_dataset, series=label, seed=0, dataset=None)
        with pytest.raises(ModelError, match="captured"):
            validate_cmd._load(args)
        surfaces = {"fit", "fit --all", "report", "TUI", "validate"}
        if not aggregate:  # diff compares single messages: it refuses a tool's statistics
            surface[0] = "diff"
            with pytest.raises(ModelError, match="captured"):
                diff._fit(diff.load_side(f"{fixtures_dataset}#{label}"), 0)
            surfaces.add("diff")
        read = fitting.read_series(fixtures_dataset, series, fitting.FitOptions(aggregates=True))
        reference = read.frame
        assert read.n_rows == row.n_samples, label  # the browser counts the series' rows,
        assert reference.height == read.n_rows - read.n_disturbed_left_out, label  # fit: quiet
        frames = seen.get(label, {})
        assert set(frames) == surfaces, label
        for name, frame in frames.items():
            assert frame.equals(reference), f"{name} fitted other rows than fit for {label}"
    assert n_aggregate > 0  # the fixtures hold OSU/SkaMPI aggregates: the rule covers them


def test_fit_refuses_aggregates_unless_asked(fixtures_dataset: Path) -> None:
    from kit.fit.fitting import FitOptions, fit_series

    table = ds.series_table(fixtures_dataset).filter(pl.col("stat") == "mean")
    series = {k: table.row(0, named=True)[k] for k in ds.SERIES_KEYS}
    with pytest.raises(ModelError, match=r"only aggregates.*--aggregates"):
        fit_series(fixtures_dataset, series)
    opts = FitOptions(aggregates=True, validate=False, intervals=False)
    fitted = fit_series(fixtures_dataset, series, opts).fitted
    assert fitted.aggregate and fitted.provenance["samples"] == "aggregates"
    assert fitted.provenance["statistic"] == "mean"
    assert "unknown" in fitted.provenance["noise"]
