"""Reading a dataset for the TUI: the browser's series table and one series' samples.

Both go through kit.data.dataset (its series table and its one selector), so the rows the TUI
shows and fits are those that ``pt2pt fit``, validate and the report use."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kit.core.errors import UserError
from kit.data.schema import SERIES_KEYS
from kit.measure.conditions import RUN_KEYS, conditions_by_series
from tui.serieskey import SeriesKey


@dataclass(frozen=True)
class SeriesRow:
    """One line of the series browser."""

    key: SeriesKey
    n_samples: int
    size_min: int
    size_max: int
    small_median_s: float | None
    large_bw_Bps: float | None
    mpi: str
    #: the node's state during the series' runs (kit.measure.conditions): quiet | disturbed |
    #: unknown, and why
    conditions: str = "unknown"
    conditions_why: str = ""


@dataclass(frozen=True)
class Samples:
    """All non-warm-up samples of one series, as float arrays (what the model is fitted on)."""

    key: SeriesKey
    size: np.ndarray
    time: np.ndarray

    def __len__(self) -> int:
        return int(self.size.shape[0])


def _check_dataset_dir(path: Path) -> None:
    if not path.exists():
        raise UserError(f"'{path}' does not exist", where="dataset",
                        hint="give the directory that 'pt2pt ingest' wrote")
    if not path.is_dir() or not any((path / n).exists() for n in ("samples", "runs.parquet")):
        raise UserError(f"'{path}' is not a pt2pt dataset (no 'samples/' directory in it)",
                        where="dataset",
                        hint="give the directory that 'pt2pt ingest' wrote, or create one with "
                        "'pt2pt ingest FILES --dataset DIR'")


def series_rows(dataset: str | Path) -> list[SeriesRow]:
    """The browser's table: kit's series table plus the MPI library of each series' runs."""
    from kit.data import dataset as kds

    path = Path(dataset)
    _check_dataset_dir(path)
    table = kds.series_table(path)
    if table.height == 0:
        raise UserError(f"'{path}' holds no samples", where="dataset",
                        hint="ingest measurements into it with 'pt2pt ingest'")
    runs = _runs(path)
    mpi = _mpi_by_series(runs)
    conditions = conditions_by_series(runs) if runs is not None else {}
    rows = []
    for rec in table.iter_rows(named=True):
        values = tuple("" if rec.get(k) is None else str(rec.get(k)) for k in SERIES_KEYS)
        key = SeriesKey(values)
        rows.append(SeriesRow(
            key=key,
            n_samples=int(rec.get("n_samples") or 0),
            size_min=int(rec.get("size_min") or 0),
            size_max=int(rec.get("size_max") or 0),
            small_median_s=_float_or_none(rec.get("small_median_s")),
            large_bw_Bps=_float_or_none(rec.get("large_bw_Bps")),
            mpi=mpi.get((key.get("campaign"), key.get("tool"), key.get("transport")), ""),
            **_conditions(conditions.get(tuple(str(rec.get(k)) for k in RUN_KEYS))),
        ))
    rows.sort(key=lambda r: r.key.sort_key)
    return rows


def _runs(path: Path) -> pl.DataFrame | None:
    from kit.data import dataset as kds

    try:
        return kds.runs(path)
    except (UserError, OSError, pl.exceptions.PolarsError):
        return None


def _mpi_by_series(runs: pl.DataFrame | None) -> dict[tuple[str, str, str], str]:
    """MPI library per (campaign, tool, transport), from the runs table; empty if unknown."""
    if runs is None or runs.height == 0 or "mpi_version" not in runs.columns:
        return {}
    out: dict[tuple[str, str, str], str] = {}
    for rec in runs.iter_rows(named=True):
        k = (str(rec.get("campaign") or ""), str(rec.get("tool") or ""),
             str(rec.get("transport") or ""))
        version = str(rec.get("mpi_version") or "").splitlines()[0:1]
        if version and k not in out:
            out[k] = version[0][:40]
    return out


def run_conditions(dataset: str | Path, key: SeriesKey) -> list[Any]:
    """The recorded conditions (kit.measure.conditions) of the runs of one series."""
    from kit.measure.conditions import Conditions

    runs = _runs(Path(dataset))
    if runs is None:
        return []
    for name in RUN_KEYS:
        value = key.get(name)
        if value:
            runs = runs.filter(pl.col(name).cast(pl.String) == value)
    return [Conditions.from_row(row) for row in runs.iter_rows(named=True)]


def _conditions(found: tuple[str, str] | None) -> dict[str, str]:
    verdict, why = found or ("unknown", "no run of this series in the runs table")
    return {"conditions": verdict, "conditions_why": why}


def _float_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def load_samples(dataset: str | Path, key: SeriesKey,
                 others: list[SeriesKey] | None = None) -> Samples:
    """The rows of one series that fit, validate and the report use (kit.data.dataset's selector).

    Aggregate series are shown (and fitted, marked as such) like raw ones: the key's
    ``stat`` tells them apart. ``others`` (all series of the dataset) lets us filter only
    on the key columns that differ between series: comparing strings over millions of rows
    is most of the load time, and a column with one value in the whole dataset selects
    nothing.
    """
    from kit.data import dataset as kds

    varying = {k: v for i, (k, v) in enumerate(key.as_dict().items())
               if others is None or len({o.values[i] for o in others}) > 1}
    df = (kds.series_rows(Path(dataset), varying, aggregates=True)
          .select(pl.col("size").cast(pl.Float64), pl.col("time").cast(pl.Float64))
          .collect())
    if df.height == 0:
        raise UserError(f"series {key.label} has no usable samples (all warm-up or not finite)",
                        where=str(dataset), hint="pick another series or re-ingest the run")
    return Samples(key, df["size"].to_numpy(), df["time"].to_numpy())


def reported_noise(dataset: str | Path, key: SeriesKey) -> str | None:
    """For an aggregate series: the messages' noise as the tool reported it (OSU ``-z``
    percentiles as ratios to its median, kit.fit.reportednoise), in one line; None when the
    tool reported none (then it is unknown) or the series is raw."""
    if not key.aggregate:
        return None
    from kit.fit.reportednoise import reported_noise as _reported

    found = _reported(Path(dataset), key.as_dict())
    return found.describe() if found is not None else None
