"""Reading a dataset for the TUI: the browser's series table and one series' samples.

Both go through kit.data.dataset (its series table and its one selector), so the rows the TUI
shows and fits are those that ``pt2pt fit``, validate and the report use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from kit.core.errors import UserError
from kit.data.schema import SERIES_KEYS
from kit.figures.series import SeriesFigures
from kit.measure.conditions import RUN_KEYS, Conditions, conditions_by_series
from tui.serieskey import SeriesKey

if TYPE_CHECKING:
    from kit.fit.fitting import SeriesSamples


@dataclass(frozen=True)
class SeriesRow:
    """One line of the series browser."""

    key: SeriesKey
    n_samples: int
    size_min: int
    size_max: int
    #: latency and bandwidth as every surface shows them (kit.figures, from the dataset's
    #: stored summary)
    figures: SeriesFigures
    mpi: str
    #: the node's state during the series' runs (kit.measure.conditions): quiet | disturbed |
    #: unknown, and why
    conditions: str = "unknown"
    conditions_why: str = ""


@dataclass(frozen=True)
class Samples:
    """The samples of one series the model is fitted on, as float arrays.

    ``rows`` is kit.fit.fitting's reading of the series (run quality's exclusions, the
    subsample of a very large series), which the TUI fits and validates exactly as
    ``pt2pt fit`` does; None for samples made from arrays (tests), fitted as they are.
    """

    key: SeriesKey
    size: np.ndarray
    time: np.ndarray
    rows: SeriesSamples | None = None

    def __len__(self) -> int:
        return int(self.size.shape[0])

    @property
    def left_out(self) -> int:
        """Samples run quality flagged as disturbed and left out of the fit (and of view)."""
        return self.rows.n_disturbed_left_out if self.rows is not None else 0

    def fit_rows(self) -> SeriesSamples:
        """What kit.fit.fitting fits: the rows read, or these arrays as they are."""
        if self.rows is not None:
            return self.rows
        from kit.fit.fitting import SeriesSamples

        return SeriesSamples.of_arrays(self.size, self.time, keys=self.key.as_dict())


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
            figures=SeriesFigures.of(rec),
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


def run_conditions(dataset: str | Path, key: SeriesKey) -> list[Conditions]:
    """The recorded conditions (kit.measure.conditions) of the runs of one series."""
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


def load_samples(dataset: str | Path, key: SeriesKey,
                 others: list[SeriesKey] | None = None) -> Samples:
    """The rows of one series that ``pt2pt fit`` fits (kit.fit.fitting.read_series: the
    series' rows, disturbed windows left out, the subsample of a very large series).

    Aggregate series are shown (and fitted, marked as such) like raw ones: the key's
    ``stat`` tells them apart. ``others`` is no longer needed (kit.data.dataset filters only
    on the keys that differ between series) and kept for callers that pass it.
    """
    from kit.fit.fitting import FitOptions, read_series

    del others
    rows = read_series(Path(dataset), key.as_dict(), FitOptions(aggregates=True))
    if len(rows) == 0:
        raise UserError(f"series {key.label} has no usable samples (all warm-up or not finite)",
                        where=str(dataset), hint="pick another series or re-ingest the run")
    return Samples(key, rows.size, rows.time, rows)


def preview_rows(dataset: str | Path, key: SeriesKey, n_rows: int, at_most: int
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Every k-th row of a series (about ``at_most`` of its ``n_rows``), in file order: the
    ``size`` and ``time`` columns only, read by one lazy scan of kit.data.dataset's query
    for the series (its row rule: warm-up and non-finite times left out).

    Not the rows :func:`load_samples` gives: run quality has not judged them (that needs
    every row of every run, seconds at 10 M), so disturbed windows are still in. Returns
    (size, time, k).
    """
    from kit.data.dataset import series_lazy

    step = max(int(n_rows) // max(int(at_most), 1), 1)
    lf = series_lazy(Path(dataset), key.as_dict()).select("size", "time")
    frame = (lf.gather_every(step) if step > 1 else lf).collect()
    return frame["size"].to_numpy(), frame["time"].to_numpy(), step


def reported_noise(dataset: str | Path, key: SeriesKey) -> str | None:
    """For an aggregate series: the messages' noise as the tool reported it (OSU ``-z``
    percentiles as ratios to its median, kit.fit.reportednoise), in one line; None when the
    tool reported none (then it is unknown) or the series is raw."""
    if not key.aggregate:
        return None
    from kit.fit.reportednoise import reported_noise as _reported

    found = _reported(Path(dataset), key.as_dict())
    return found.describe() if found is not None else None
