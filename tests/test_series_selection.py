"""One series, one set of rows: the TUI, fit, validate and the report select the same samples.

Before kit.data.dataset owned the selection, fit took raw rows only, the report and validate any
statistic with time > 0, and the TUI any statistic with a finite time, so the TUI fitted OSU
means that ``pt2pt fit`` refused. Here every series of the shared fixtures is read by each
consumer's own entry point and the rows compared.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
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


def _sorted(size: np.ndarray, time: np.ndarray) -> np.ndarray:
    pairs = np.column_stack([np.asarray(size, dtype=float), np.asarray(time, dtype=float)])
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def test_every_consumer_selects_the_same_rows(fixtures_dataset: Path) -> None:
    from kit.commands import validate as validate_cmd
    from kit.fit.fitting import select_series
    from kit.outputs.report.build import series_samples
    from tui import data

    rows = data.series_rows(fixtures_dataset)
    keys = [r.key for r in rows]
    table = ds.series_table(fixtures_dataset)
    assert len(rows) == table.height > 5
    n_aggregate = 0
    for row in rows:
        series = row.key.as_dict()
        aggregate = series["stat"] != "raw"
        n_aggregate += aggregate
        tui = data.load_samples(fixtures_dataset, row.key, keys)
        _chosen, fit_size, fit_time = select_series(fixtures_dataset, series,
                                                    aggregates=aggregate)
        rep_size, rep_time = series_samples(fixtures_dataset, series)
        args = argparse.Namespace(target=fixtures_dataset, series=ds.describe(series), seed=0,
                                  dataset=None)
        _fitted, frame = validate_cmd._load(args)
        reference = _sorted(tui.size, tui.time)
        label = ds.describe(series)
        assert len(reference) == row.n_samples, label  # the browser's count is these rows
        for name, (size, time) in {"fit": (fit_size, fit_time),
                                   "report": (rep_size, rep_time),
                                   "validate": (frame["size"].to_numpy(),
                                                frame["time"].to_numpy())}.items():
            np.testing.assert_array_equal(_sorted(size, time), reference,
                                          err_msg=f"{name} vs TUI for {label}")
    assert n_aggregate > 0  # the fixtures hold OSU/SkaMPI aggregates: the rule covers them


def test_fit_refuses_aggregates_unless_asked(fixtures_dataset: Path) -> None:
    from kit.fit.fitting import fit_dataset

    table = ds.series_table(fixtures_dataset).filter(pl.col("stat") == "mean")
    series = {k: table.row(0, named=True)[k] for k in ds.SERIES_KEYS}
    with pytest.raises(ModelError, match=r"only aggregates.*--aggregates"):
        fit_dataset(fixtures_dataset, series)
    fitted = fit_dataset(fixtures_dataset, series, aggregates=True, random_state=0)
    assert fitted.aggregate and fitted.provenance["samples"] == "aggregates"
    assert fitted.provenance["statistic"] == "mean"
    assert "unknown" in fitted.provenance["noise"]
