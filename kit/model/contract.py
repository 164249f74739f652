"""The model contract outside ``kit/model``: what any fitted model offers, and a model file.

Validation, the report, export and the TUI used to treat models as ``Any`` and probe them
with ``getattr(model, "validation_", None) or {}``; validation and provenance were written
onto the estimator from outside it. Here:

* :class:`PointToPointModel` is the Protocol every model of time vs size implements (the
  regime model and the baselines in ``kit.fit.baselines``): ``fit``, ``predict``,
  ``predict_quantiles``, ``sample``. Code that only scores or draws takes this type.
* :class:`ModelFile` keeps what is *about* a fitted model beside it: ``provenance`` (which
  dataset and series, raw rows or aggregates) and ``validation`` (kit.fit.validate's result).
  ``kit.model.io.read_model`` / ``write_model`` read and write it; the JSON layout is
  unchanged (``provenance`` and ``validation`` are top-level keys of the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel


@runtime_checkable
class PointToPointModel(Protocol):
    """A model of one series' time (seconds) as a distribution over message size (bytes)."""

    def fit(self, size: ArrayLike, time: ArrayLike) -> Self: ...

    def predict(self, size: ArrayLike) -> NDArray[np.float64]:
        """Median time per size."""
        ...

    def predict_quantiles(self, size: ArrayLike, q: Any) -> NDArray[np.float64]:
        """Quantiles ``q`` per size, ``(n_sizes, n_q)`` for a list of ``q``."""
        ...

    def sample(self, size: ArrayLike, n: int = 1,
               random_state: Any = None) -> NDArray[np.float64]:
        """``n`` draws per size, ``(n_sizes, n)``."""
        ...


@dataclass
class ModelFile:
    """A fitted regime model and what is known about it, kept beside it (not on it)."""

    model: RegimeModel
    provenance: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    #: bootstrap intervals (kit.model.uncertainty) and run quality (kit.fit.runquality)
    intervals: dict[str, Any] = field(default_factory=dict)
    run_quality: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The file's name (for messages), ``model`` when it has no file yet."""
        return self.path.name if self.path is not None else "model"

    @property
    def series(self) -> dict[str, str] | None:
        """The series the provenance names (``None`` when it names none)."""
        series = self.provenance.get("series")
        return {str(k): str(v) for k, v in series.items()} if isinstance(series, dict) else None

    @property
    def dataset(self) -> Path | None:
        value = self.provenance.get("dataset")
        return Path(value) if isinstance(value, str) and value else None

    @property
    def aggregate(self) -> bool:
        """Fitted to a tool's statistics (OSU mean...), not to single messages."""
        stat = (self.series or {}).get("stat", "raw")
        return self.provenance.get("samples") == "aggregates" or stat != "raw"

    def regime_validation(self, index: int) -> dict[str, Any]:
        """kit.fit.validate's numbers for one regime (empty when not validated)."""
        per_regime = self.validation.get("regimes")
        if isinstance(per_regime, list) and 0 <= index < len(per_regime) \
                and isinstance(per_regime[index], dict):
            return dict(per_regime[index])
        return {}

    def summary(self, name: str = "model") -> dict[str, Any]:
        """kit.fit.validate's held-out summary of ``name`` (model, hockney, peak, floor)."""
        summary = self.validation.get("summary")
        part = summary.get(name) if isinstance(summary, dict) else None
        return dict(part) if isinstance(part, dict) else {}
