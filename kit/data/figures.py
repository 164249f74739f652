"""The figures of one dataset series (kit.figures), read from the dataset's stored summary.

Latency and bandwidth are computed once per dataset, with the series table
(kit.data.dataset.series_table, kept in ``series.json``); every surface that shows them for
a series reads them here, so ``pt2pt datasets``, the report, the demo, the TUI and ``pt2pt
diff`` print one number.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from kit.data import dataset as ds
from kit.figures.series import SeriesFigures


def summary_row(dataset: str | Path, series: Mapping[str, Any]) -> dict[str, Any]:
    """The series' row of the dataset's summary (empty when ``series`` names none). Keys a
    model's provenance leaves out get kit.data.dataset.model_selector's defaults."""
    keys = ds.resolve_series(dataset, ds.model_selector(series), aggregates=True,
                             where="series")
    table = ds.series_table(dataset)
    for k, v in keys.items():
        table = table.filter(pl.col(k) == v)
    return table.row(0, named=True) if table.height == 1 else {}


def series_figures(dataset: str | Path | None, series: Mapping[str, Any],
                   validation: Mapping[str, Any] | None = None) -> SeriesFigures:
    """Latency and bandwidth of the series, score and verdict of ``validation`` (a model's,
    kit.fit.validate); without a dataset, the latter only."""
    row = summary_row(dataset, series) if dataset is not None else {}
    return SeriesFigures.of(row, validation)
