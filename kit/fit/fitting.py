"""Fit one series of a dataset: select it (kit.data.dataset's selector), run :class:`RegimeModel`.

A dataset holds many series (campaign × tool × transport × placement × host pair × op ×
stat). A model describes one, so the selector must pin a single series; when the dataset
holds only one, no selector is needed. By default only raw single-message rows outside
warm-up enter the fit: aggregate rows (means printed by OSU etc.) are not samples of the
distribution being modelled. ``aggregates=True`` is the explicit choice to fit a tool's
statistic anyway: the curve and regimes are then those of the statistic, the noise is not
the messages' noise (fitted as lognormal only), and the model's provenance says the rows
were aggregates. The messages' noise is then what the tool reported, when it did (OSU
``-z`` percentiles, as ratios to its median: kit.fit.reportednoise), else marked unknown.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from kit.core.errors import ModelError
from kit.data import dataset as ds
from kit.data.dataset import SeriesData
from kit.data.schema import OP_QUANTITY, SERIES_KEYS
from kit.fit.reportednoise import ReportedNoise, reported_noise
from kit.model import RegimeModel
from kit.model.contract import ModelFile
from kit.model.estimator import default_min_support
from kit.model.families import FAMILIES

#: Keys a series selector may use.
SELECTOR_KEYS = SERIES_KEYS


def parse_selector(text: str | None, where: str = "--series",
                   keys: tuple[str, ...] = SELECTOR_KEYS) -> dict[str, str]:
    """``campaign=a,tool=probe`` → dict; UserError naming the bad item (kit.data.dataset's rule)."""
    del keys  # every series key is accepted everywhere now
    return ds.parse_selector(text, where)


def _describe(row: dict[str, Any]) -> str:
    return ds.describe(row)


def select_series(dataset: str | Path, series: dict[str, str] | None = None, *,
                  aggregates: bool = False) -> tuple[dict[str, str], np.ndarray, np.ndarray]:
    """The one series matching ``series``, as (keys, size, time) (see kit.data.dataset)."""
    data = ds.select_series(dataset, series, aggregates=aggregates)
    return data.keys, data.size, data.time


def fit_dataset(dataset: str | Path, series: dict[str, str] | None = None, *,
                aggregates: bool = False, **params: Any) -> ModelFile:
    """Fit :class:`RegimeModel` (``params`` are its constructor arguments) to one series.

    Returns the model with its provenance (dataset, series, raw rows or aggregates) beside
    it; ``kit.model.io.write_model`` saves both.
    """
    data = ds.select_series(dataset, series, aggregates=aggregates)
    return fit_samples(dataset, data.keys, data.size, data.time, **params)


def provenance(dataset: str | Path, chosen: dict[str, str], n_samples: int,
               reported: ReportedNoise | None = None) -> dict[str, Any]:
    """What a model records about its data: dataset, series, rows, and whether they were
    aggregates (then the model's noise is the spread of the tool's statistic, not of
    messages; the messages' noise is what the tool ``reported``, or unknown)."""
    prov: dict[str, Any] = {"dataset": str(Path(dataset).resolve()), "series": dict(chosen),
                            "n_samples": int(n_samples)}
    stat = chosen.get("stat", ds.RAW)
    prov["samples"] = "raw" if stat == ds.RAW else "aggregates"
    if chosen.get("op") in OP_QUANTITY:  # time is not one message's duration: say what it is
        prov["quantity"] = OP_QUANTITY[chosen["op"]]
    if stat != ds.RAW:
        prov["statistic"] = stat
        prov["noise"] = aggregate_noise_note(stat, reported)
        if reported is not None:
            prov["reported_noise"] = reported.to_dict()
    return prov


def aggregate_noise_note(stat: str, reported: ReportedNoise | None) -> str:
    """The one line every output of an aggregate fit gives about the messages' noise."""
    if reported is None:
        return ("unknown: fitted to the tool's per-size statistic "
                f"({stat}), not to single messages")
    return (f"fitted to the tool's per-size statistic ({stat}), not to single messages; "
            f"the messages' noise {reported.describe()}")


#: Samples a preview fit uses (every k-th in run order; sizes are shuffled in time).
PREVIEW_SAMPLES = 100_000
#: Families a user may fix per regime (``None`` lets the engine choose): the engine's list.
FAMILY_CHOICES: tuple[str | None, ...] = (None, *FAMILIES)


def fit_arrays(chosen: dict[str, str], size: np.ndarray, time: np.ndarray, *,
               dataset: str | Path | None = None, preview: bool = False,
               preview_samples: int = PREVIEW_SAMPLES, **params: Any) -> RegimeModel:
    """The one fitting entry point: :class:`RegimeModel` (``params``) on one series' rows.

    ``chosen`` names the series (its ``stat`` decides whether the rows are aggregates: then
    the noise is not searched and no bands are fitted). ``preview`` fits a deterministic
    subsample of about ``preview_samples`` without mixtures, overlaps or the
    noise-family search, with the full series' default minimum support scaled to the
    subsample, so a preview refuses exactly the edits the full fit refuses. Any failure is a
    ModelError naming the dataset and series.
    """
    if chosen.get("stat", ds.RAW) != ds.RAW:
        # A statistic per size has no message noise to find: lognormal only, no bands.
        params = {"noise": False, "mixture": False, **params}
    n_full = len(size)
    if preview:
        step = max(n_full // max(preview_samples, 1), 1)
        size, time = size[::step], time[::step]
        support = params.get("min_support") or default_min_support(n_full)
        params.update(mixture=False, overlap=False, noise=False,
                      min_support=max(1, math.ceil(support / step)))
    where_data = f"{dataset} (series {_describe(chosen)})" if dataset else \
        f"series {_describe(chosen)}"
    try:
        model = RegimeModel(**params).fit(size, time)
    except ModelError as err:
        # Name the data rather than the Python call when the data is at fault.
        where = err.where
        if where is None or where.startswith("fit("):
            where = where_data
        raise ModelError(err.message, where=where, hint=err.hint) from None
    except (ValueError, RuntimeError, np.linalg.LinAlgError, FloatingPointError) as exc:
        raise ModelError(f"fitting failed: {exc}", where=where_data,
                         hint="move or delete breakpoints so each regime holds enough "
                         "distinct sizes, or fit without fixed breakpoints") from exc
    return model


def fit_samples(dataset: str | Path, chosen: dict[str, str], size: np.ndarray, time: np.ndarray,
                **params: Any) -> ModelFile:
    """:func:`fit_dataset` for samples already read with :func:`select_series`.

    Callers that also validate on the same samples read the series once.
    """
    model = fit_arrays(chosen, size, time, dataset=dataset, **params)
    reported = None
    if chosen.get("stat", ds.RAW) != ds.RAW:
        reported = reported_noise(dataset, chosen, model.breakpoints_)
    return ModelFile(model, provenance=provenance(dataset, chosen, len(size), reported))


__all__ = ["FAMILY_CHOICES", "PREVIEW_SAMPLES", "SELECTOR_KEYS", "ModelFile", "SeriesData",
           "aggregate_noise_note", "fit_arrays", "fit_dataset", "fit_samples", "parse_selector",
           "provenance", "select_series"]
