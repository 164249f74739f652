"""What the explorer knows across screens: the open dataset, loaded series, models.

Screens come and go (the user opens a series, leaves, comes back); the work already done
(samples loaded, models fitted, breakpoints edited) stays here so nothing is recomputed
or lost by navigating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.data import Binned, Samples, SeriesKey, SeriesRow


@dataclass
class SeriesState:
    """One series as the user left it: data, current model and the working breakpoints."""

    samples: Samples
    binned: Binned
    model: Any | None = None
    breakpoints: list[float] = field(default_factory=list)
    families: list[str | None] = field(default_factory=list)
    edited: bool = False  # breakpoints/families changed since the model was fitted

    def adopt(self, model: Any, breakpoints: list[float], families: list[str]) -> None:
        """Take a freshly fitted model as the current one and start editing from it."""
        self.model = model
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
    file_model: Any | None = None  # the --model given on the command line
    file_model_series: dict[str, str] | None = None

    def fitted(self, key: SeriesKey) -> bool:
        state = self.series.get(key)
        return bool(state and state.model is not None) or self.file_model_for(key) is not None

    def file_model_for(self, key: SeriesKey) -> Any | None:
        """The --model applies to the series its provenance names, or to any if it names none."""
        if self.file_model is None:
            return None
        if self.file_model_series is None:
            return self.file_model
        wanted = self.file_model_series
        d = key.as_dict()
        return self.file_model if all(d.get(k) == v for k, v in wanted.items() if k in d) else None
