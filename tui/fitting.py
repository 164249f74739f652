"""The TUI's fitting adapter: kit.fit.fitting's one entry point, validation, and the
fitted regimes as plain values for drawing. Nothing here re-implements the engine;
the rules a user edits against (families, preview size) are read from kit.fit.fitting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kit.core.errors import ModelError
from tui.loading import Samples, SeriesRow

if TYPE_CHECKING:
    from kit.figures.series import SeriesFigures
    from kit.model.estimator import RegimeModel


def __getattr__(name: str) -> Any:
    """The engine's own values, imported on first use (kit.model takes seconds to import,
    and the browser must appear without waiting for it).

    ``FAMILIES``: families a user can cycle through for one regime (``None`` lets the engine
    choose); ``PREVIEW_SAMPLES``: samples a preview fit uses. Both are kit.fit.fitting's.
    """
    if name in ("FAMILIES", "PREVIEW_SAMPLES"):
        from kit.fit import fitting

        return fitting.FAMILY_CHOICES if name == "FAMILIES" else fitting.PREVIEW_SAMPLES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Above this many samples an edit is first answered by a quick preview fit.
PREVIEW_MIN_SAMPLES = 150_000


@dataclass(frozen=True)
class RegimeView:
    """What the side panel and the plot need to know about one regime."""

    index: int
    size_min: float
    size_max: float
    family: str
    params: dict[str, float]
    noise_family: str
    noise_params: dict[str, float | list[float]]
    n_samples: int | None
    overlap: tuple[float, float] | None  # size window shared with the next regime
    errors: dict[str, float] = field(default_factory=dict)
    bands: list[tuple[str, float]] = field(default_factory=list)  # mixture: (family, share)


def options(breakpoints: list[float] | None = None,
            families: list[str | None] | None = None, *, preview: bool = False) -> Any:
    """kit.fit.fitting.FitOptions of a TUI fit: ``pt2pt fit``'s defaults, the user's
    breakpoints and families, validation left to :func:`validate` (in the background, once
    the user stops editing) and no bootstrap (a saved model carries its intervals)."""
    from kit.fit.fitting import PREVIEW_SAMPLES, FitOptions, with_edits

    opts = FitOptions(aggregates=True, validate=False, intervals=False, preview=preview,
                      preview_samples=globals().get("PREVIEW_SAMPLES", PREVIEW_SAMPLES))
    return with_edits(opts, breakpoints, families)


def fit(samples: Samples, breakpoints: list[float] | None = None,
        families: list[str | None] | None = None, *, preview: bool = False) -> Any:
    """Fit the series as ``pt2pt fit`` does (kit.fit.fitting), with the user's breaks/families.

    Fixed seed (fit's default): the same edit gives the same model, which is what the user
    expects when toggling back and forth (and what snapshot tests need); with no edit it is
    the model ``pt2pt fit`` writes. ``preview`` fits a deterministic subsample without
    mixtures, overlaps or the noise-family search: an answer within a second on large
    series, replaced by the full fit when it is done.
    """
    from kit.fit.fitting import fit_read

    try:
        return fit_read(samples.fit_rows(), options(breakpoints, families,
                                                    preview=preview)).model
    except ModelError as err:
        if "fitting failed" not in err.message:
            raise
        detail = err.message.removeprefix("fitting failed: ")
        raise ModelError(f"fitting {samples.key.label} failed: {detail}", where="fit",
                         hint="move or delete breakpoints so each regime holds enough "
                         "distinct sizes, or press R for an automatic fit") from err


def breakpoints_of(model: RegimeModel) -> list[float]:
    return [float(b) for b in model.breakpoints_]


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "to_dict"):
        return dict(obj.to_dict())
    if hasattr(obj, "__dataclass_fields__"):
        return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    return dict(vars(obj))


def _numbers(d: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in _as_dict(d).items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[str(k)] = float(v)
    return out


def _numbers_or_lists(d: Any) -> dict[str, float | list[float]]:
    """Like :func:`_numbers`, keeping numeric lists (a Gaussian mixture's weights, means)."""
    out: dict[str, float | list[float]] = dict(_numbers(d))
    for k, v in _as_dict(d).items():
        if isinstance(v, list | tuple) and all(isinstance(x, int | float) for x in v):
            out[str(k)] = [float(x) for x in v]
    return out


def _components(regime: dict[str, Any]) -> list[Any]:
    """A mixture regime's bands: under ``mixture.components`` in kit's JSON layout."""
    mixture = _as_dict(regime.get("mixture"))
    return list(mixture.get("components") or regime.get("components") or [])


def regimes(model: RegimeModel, validation: dict[str, Any] | None = None) -> list[RegimeView]:
    """The model's regimes as plain values for drawing (``validation``: kit.fit.validate's result
    for this model, kept beside it in the session, gives each regime its held-out numbers)."""
    views = []
    for i, reg in enumerate(model.regimes_):
        d = _as_dict(reg)
        noise = _as_dict(d.get("noise"))
        overlap = _as_dict(d.get("overlap"))
        window: tuple[float, float] | None = None
        if overlap.get("size_lo") is not None and overlap.get("size_hi") is not None:
            window = (float(overlap["size_lo"]), float(overlap["size_hi"]))
        views.append(RegimeView(
            index=i,
            size_min=float(d.get("size_min", 0.0)),
            size_max=float(d.get("size_max", math.inf)),
            family=str(d.get("family", "?")),
            params=_numbers(d.get("params")),
            noise_family=str(noise.get("family", "?")),
            noise_params=_numbers_or_lists(noise.get("params")),
            n_samples=int(d["n_samples"]) if d.get("n_samples") is not None else None,
            overlap=window,
            errors=_regime_errors(validation, i),
            bands=[(str(c.get("family", "?")), float(c.get("share", 0.0)))
                   for c in map(_as_dict, _components(d))],
        ))
    return views


def _regime_errors(validation: dict[str, Any] | None, index: int) -> dict[str, float]:
    """Validation numbers of one regime, if the validation has them."""
    per_regime = validation.get("regimes") if isinstance(validation, dict) else None
    if isinstance(per_regime, list) and index < len(per_regime):
        numbers = _numbers(per_regime[index])
        return {k: v for k, v in numbers.items() if k not in ("size_min", "size_max")}
    return {}


def series_figures(row: SeriesRow | None, validation: dict[str, Any] | None) -> SeriesFigures:
    """The series' figures as every surface shows them (kit.figures): its measured latency
    and bandwidth (the browser's row) with the score and verdict of the model's validation."""
    from kit.figures.series import SeriesFigures

    base = row.figures if row is not None else SeriesFigures.of({})
    return base.with_validation(validation)


def validate(model: RegimeModel, samples: Samples) -> dict[str, Any]:
    """Held-out validation by kit.fit.validate (per regime too), to keep beside the model:
    ``pt2pt fit``'s (kit.fit.fitting.validate_fit, same rows, same seed).

    It refits a copy on a training split, so it costs about one more fit: the series view
    runs it in the background once the user stops editing.
    """
    from kit.fit.fitting import validate_fit
    from kit.model.contract import ModelFile

    return validate_fit(ModelFile(model), samples.fit_rows(), options())


def curve(model: RegimeModel, size_lo: float, size_hi: float,
          n: int = 240) -> tuple[np.ndarray, ...]:
    """The fitted median and 5/95 % quantiles on a log grid, for drawing."""
    grid = np.geomspace(max(size_lo, 1.0), max(size_hi, 2.0), n)
    median = np.asarray(model.predict(grid), dtype=float)
    try:
        q = np.asarray(model.predict_quantiles(grid, [0.05, 0.95]), dtype=float)
        lo, hi = (q[:, 0], q[:, 1]) if q.shape == (n, 2) else (q[0], q[1])
    except (AttributeError, NotImplementedError, ValueError):
        lo = hi = np.full(n, np.nan)
    return grid, median, lo, hi
