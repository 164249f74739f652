"""What the explorer knows across screens: the open dataset, loaded series, models.

Screens come and go (the user opens a series, leaves, comes back); the work already done
(samples loaded, models fitted, breakpoints edited) stays here so nothing is recomputed
or lost by navigating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.data import Binned, ModelFile, Samples, SeriesKey, SeriesRow, draw_summaries, match_models


@dataclass
class SeriesState:
    """One series as the user left it: data, current model and the working breakpoints."""

    samples: Samples
    binned: Binned  # narrow bins: per-bin medians, compare view
    raw_binned: Binned | None = None  # bins merged to a minimum count: the raw view's bands
    model: Any | None = None
    breakpoints: list[float] = field(default_factory=list)
    families: list[str | None] = field(default_factory=list)
    edited: bool = False  # breakpoints/families changed since the model was fitted
    source: str | None = None  # the model file the current model came from, if not fitted here

    @classmethod
    def of(cls, samples: Samples) -> SeriesState:
        """A freshly loaded series with both drawing summaries."""
        raw, median = draw_summaries(samples)
        return cls(samples, median, raw)

    def binned_for(self, mode: str) -> Binned:
        return self.raw_binned if mode == "raw" and self.raw_binned is not None else self.binned

    def adopt(self, model: Any, breakpoints: list[float], families: list[str],
              source: str | None = None) -> None:
        """Take a fitted (or loaded) model as the current one and start editing from it."""
        self.model = model
        self.source = source
        self.breakpoints = list(breakpoints)
        self.families = [f if f in ("constant", "linear", "power") else None for f in families]
        if len(self.families) != len(self.breakpoints) + 1:
            self.families = [None] * (len(self.breakpoints) + 1)
        self.edited = False


@dataclass
class Session:
    dataset: Path | None = None
    rows: list[SeriesRow] = field(default_factory=list)
    series: dict[SeriesKey, SeriesState] = field(default_factory=dict)
    model_files: list[ModelFile] = field(default_factory=list)  # --model / --models
    file_models: dict[SeriesKey, ModelFile] = field(default_factory=dict)  # matched to rows
    fallback_model: ModelFile | None = None  # a model whose provenance names no series

    def fitted(self, key: SeriesKey) -> bool:
        state = self.series.get(key)
        return bool(state and state.model is not None) or self.file_model_for(key) is not None

    def file_model_for(self, key: SeriesKey) -> ModelFile | None:
        """The model file matched to this series, else a model that names no series."""
        return self.file_models.get(key) or self.fallback_model

    def match_models(self) -> list[str]:
        """Pair the loaded model files with the open dataset's series; messages for the user.

        Called whenever the rows change (a dataset opened), so each dataset gets the
        models that are about its series and the user hears about the others.
        """
        matched, unnamed, messages = match_models(self.model_files, self.rows)
        self.file_models = matched
        self.fallback_model = None
        if unnamed and len(self.rows) == 1:
            self.fallback_model = unnamed[0]
        elif unnamed:
            first, *rest = unnamed
            self.fallback_model = first
            messages.append(f"{first.name} names no series in its provenance: it is shown for "
                            "every series without a model of its own")
            messages += [f"{m.name} names no series in its provenance, so it is not shown"
                         for m in rest]
        return messages
