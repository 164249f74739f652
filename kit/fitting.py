"""Fit one series of a dataset: select it, read its raw samples, run :class:`RegimeModel`.

A dataset holds many series (campaign × tool × transport × op × stat). A model describes
one, so the selector must pin a single series; when the dataset holds only one, no
selector is needed. Only raw single-message rows outside warm-up enter the fit: aggregate
rows (means printed by OSU etc.) are not samples of the distribution being modelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kit import dataset as ds
from kit.errors import ModelError
from kit.model import RegimeModel
from kit.schema import SERIES_KEYS

#: Keys a series selector may use (``stat`` is always ``raw`` for fitting).
SELECTOR_KEYS = tuple(k for k in SERIES_KEYS if k != "stat")


def parse_selector(text: str | None, where: str = "--series",
                   keys: tuple[str, ...] = SELECTOR_KEYS) -> dict[str, str]:
    """``campaign=a,tool=probe`` → dict; UserError naming the bad item.

    ``keys`` are the accepted keys: fitting selects raw samples, so ``stat`` is not one of
    them by default; reports and validation of aggregated series pass ``SERIES_KEYS``.
    """
    if not text:
        return {}
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in keys or not value:
            raise ModelError(f"bad series selector item {item!r}", where=where,
                             hint=f"use KEY=VALUE pairs with KEY in {', '.join(keys)}, "
                             "e.g. --series campaign=c1,transport=tcp,op=pingpong")
        out[key] = value
    return out


def _describe(row: dict[str, Any]) -> str:
    return ",".join(f"{k}={row[k]}" for k in SELECTOR_KEYS)


def select_series(dataset: str | Path, series: dict[str, str] | None = None
                  ) -> tuple[dict[str, str], np.ndarray, np.ndarray]:
    """The one series matching ``series``, as (keys, size, time) of its raw non-warm-up rows."""
    series = dict(series or {})
    unknown = [k for k in series if k not in SELECTOR_KEYS]
    if unknown:
        raise ModelError(f"unknown series key {unknown[0]!r}", where="series",
                         hint=f"use {', '.join(SELECTOR_KEYS)}")
    selected = ds.scan(dataset)
    for k, v in series.items():
        selected = selected.filter(pl.col(k).cast(pl.String) == v)
    lf = selected.filter((pl.col("stat").cast(pl.String) == "raw") & ~pl.col("warmup"))
    keys = list(SELECTOR_KEYS)
    found = (lf.group_by([pl.col(k).cast(pl.String) for k in keys]).agg(n=pl.len())
             .sort(keys).collect())
    if found.height == 0:
        stats = (selected.select(pl.col("stat").cast(pl.String).unique()).collect()
                 .to_series().to_list())
        if stats and "raw" not in stats:
            kinds = ", ".join(sorted(stats))
            raise ModelError(f"the selected rows hold only aggregates ({kinds}), not raw samples",
                             where=str(dataset),
                             hint="fit a series measured by the probe or another raw-timing tool")
        raise ModelError(f"no raw samples match {series or 'the dataset'}", where=str(dataset),
                         hint="list the series with 'pt2pt datasets' and pick one with --series")
    if found.height > 1:
        listing = "; ".join(f"{_describe(r)} ({r['n']} samples)"
                            for r in found.iter_rows(named=True))
        raise ModelError(f"{found.height} series match, a model needs one: {listing}",
                         where="--series", hint="add keys to --series to pick exactly one")
    row = found.row(0, named=True)
    chosen = {k: row[k] for k in keys}
    match = pl.all_horizontal([pl.col(k).cast(pl.String) == v for k, v in chosen.items()])
    data = lf.filter(match).select(pl.col("size").cast(pl.Float64), pl.col("time")).collect()
    return chosen, data["size"].to_numpy(), data["time"].to_numpy()


def fit_dataset(dataset: str | Path, series: dict[str, str] | None = None,
                **params: Any) -> RegimeModel:
    """Fit :class:`RegimeModel` (``params`` are its constructor arguments) to one series.

    The model's ``provenance_`` names the dataset and series so that ``save_model`` records them.
    """
    chosen, size, time = select_series(dataset, series)
    return fit_samples(dataset, chosen, size, time, **params)


def fit_samples(dataset: str | Path, chosen: dict[str, str], size: np.ndarray, time: np.ndarray,
                **params: Any) -> RegimeModel:
    """:func:`fit_dataset` for samples already read with :func:`select_series`.

    Callers that also validate on the same samples read the series once.
    """
    try:
        model = RegimeModel(**params).fit(size, time)
    except ModelError as err:
        # Name the data rather than the Python call when the data is at fault.
        where = err.where
        if where is None or where.startswith("fit("):
            where = f"{dataset} (series {_describe(chosen)})"
        raise ModelError(err.message, where=where, hint=err.hint) from None
    model.provenance_ = {"dataset": str(Path(dataset).resolve()), "series": chosen,
                         "n_samples": len(size)}
    return model
