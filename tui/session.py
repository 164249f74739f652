"""What the explorer knows across screens: the open dataset, loaded series, models.

Screens come and go (the user opens a series, leaves, comes back); the work already done
(samples loaded, models fitted, breakpoints edited) stays here so nothing is recomputed
or lost by navigating.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.binning import Binned, draw_summaries
from tui.loading import Samples, SeriesRow
from tui.modelfiles import match_models
from tui.serieskey import SeriesKey

if TYPE_CHECKING:
    from kit.model.contract import ModelFile
    from kit.model.estimator import RegimeModel


#: One step of a breakpoint move: an eighth of an octave.
FINE_STEP = 2 ** 0.125


@dataclass
class SeriesState:
    """One series as the user left it: data, current model and the working breakpoints."""

    samples: Samples
    binned: Binned  # narrow bins: per-bin medians, compare view
    raw_binned: Binned | None = None  # bins merged to a minimum count: the raw view's bands
    model: RegimeModel | None = None
    breakpoints: list[float] = field(default_factory=list)
    families: list[str | None] = field(default_factory=list)
    edited: bool = False  # breakpoints/families changed since the model was fitted
    source: str | None = None  # the model file the current model came from, if not fitted here
    #: kit.fit.validate's result for ``model`` (from its file, or computed here), kept beside it.
    validation: dict[str, Any] = field(default_factory=dict)
    #: bootstrap intervals of ``model`` from its file (a refit here has none)
    intervals: dict[str, Any] = field(default_factory=dict)
    #: aggregate series: the messages' noise as the tool reported it (None: unknown)
    reported_noise: str | None = None

    @classmethod
    def of(cls, samples: Samples, reported_noise: str | None = None) -> SeriesState:
        """A freshly loaded series with both drawing summaries."""
        raw, median = draw_summaries(samples)
        return cls(samples, median, raw, reported_noise=reported_noise)

    def aggregate_note(self) -> str | None:
        """What the side panel says first about an aggregate series (None for raw ones)."""
        key = self.samples.key
        if not key.aggregate:
            return None
        noise = (f"messages' noise {self.reported_noise}" if self.reported_noise
                 else "noise of single messages unknown")
        return f"aggregates: the tool's {key.get('stat')} per size; {noise}"

    def binned_for(self, mode: str) -> Binned:
        return self.raw_binned if mode == "raw" and self.raw_binned is not None else self.binned

    # -------------------------------------------------------------- editing rules
    # The rules of breakpoint/family edits live here, testable without a screen; the series
    # screen only maps keys to them and shows their messages. Each returns None when done
    # (and marks the model as edited), else the reason it was refused.

    def move_breakpoint(self, index: int, steps: int) -> str | None:
        """Move breakpoint ``index`` by ``steps`` eighths of an octave, staying strictly
        between its neighbours (or the series' size range) by at least one step."""
        bps = self.breakpoints
        if not 0 <= index < len(bps):
            return "Select a breakpoint first (left/right)."
        lo = bps[index - 1] if index > 0 else float(self.samples.size.min())
        hi = bps[index + 1] if index + 1 < len(bps) else float(self.samples.size.max())
        new = bps[index] * (FINE_STEP ** steps)
        new = min(max(new, lo * FINE_STEP), hi / FINE_STEP)
        if not lo < new < hi:
            return "No room to move this breakpoint further."
        bps[index] = float(round(new))
        self.edited = True
        return None

    def add_breakpoint(self, regime: int) -> str | None:
        """Split ``regime`` at its geometric middle; the new regime keeps its family."""
        edges = [float(self.samples.size.min()), *self.breakpoints,
                 float(self.samples.size.max())]
        if not 0 <= regime < len(edges) - 1:
            return "No such regime."
        lo, hi = max(edges[regime], 1.0), edges[regime + 1]
        new = float(round(math.sqrt(lo * hi)))
        if not lo < new < hi:
            return "This regime is too narrow to split."
        self.breakpoints.insert(regime, new)
        self.families.insert(regime, self.families[regime]
                             if regime < len(self.families) else None)
        self.edited = True
        return None

    def delete_breakpoint(self, index: int) -> str | None:
        """Merge the two regimes around breakpoint ``index`` (the left one's family stays)."""
        if not 0 <= index < len(self.breakpoints):
            return "Select a breakpoint first (left/right)."
        del self.breakpoints[index]
        del self.families[index + 1]
        self.edited = True
        return None

    def cycle_family(self, regime: int, families: tuple[str | None, ...]) -> str | None:
        """The next of ``families`` (the engine's list, ``None`` = automatic) for ``regime``."""
        if not 0 <= regime < len(self.families):
            return "No such regime."
        current = self.families[regime]
        at = families.index(current) if current in families else -1
        self.families[regime] = families[(at + 1) % len(families)]
        self.edited = True
        return None

    def adopt(self, model: RegimeModel, breakpoints: list[float], families: list[str],
              source: str | None = None, validation: dict[str, Any] | None = None,
              intervals: dict[str, Any] | None = None) -> None:
        """Take a fitted (or loaded) model as the current one and start editing from it."""
        self.model = model
        self.source = source
        self.validation = dict(validation or {})
        self.intervals = dict(intervals or {})
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
    apps: Path | None = None  # a pt2pt predict-app result (--apps): the applications view
    collectives: Path | None = None  # a pt2pt collectives sweep (--collectives): its view

    def fitted(self, key: SeriesKey) -> bool:
        state = self.series.get(key)
        return bool(state and state.model is not None) or self.file_model_for(key) is not None

    def row_for(self, key: SeriesKey) -> SeriesRow | None:
        """The browser's row of the series (its measured latency and bandwidth)."""
        return next((r for r in self.rows if r.key == key), None)

    def validation_for(self, key: SeriesKey) -> dict[str, Any]:
        """The validation of the series' current model: fitted here (once validated), or
        its model file's; empty when there is none."""
        state = self.series.get(key)
        if state is not None and state.model is not None:
            return state.validation
        file_model = self.file_model_for(key)
        return file_model.validation if file_model is not None else {}

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
