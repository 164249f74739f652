"""All the figures of one series, from the dataset's stored summary and a validation.

A surface gets a :class:`SeriesFigures` (:meth:`SeriesFigures.of`: the series' row of
kit.data.dataset.series_table, and the model file's validation when there is one) and shows
its :meth:`~SeriesFigures.cells`; the legend is :data:`LEGEND`. So the demo summary, the
report, ``pt2pt datasets``, the TUI and ``pt2pt diff`` print the same text for one series.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kit.figures import bandwidth, latency
from kit.figures.baseline import best_baseline, name
from kit.figures.estimate import Estimate
from kit.figures.score import LEGEND as SCORE_LEGEND
from kit.figures.score import Score, explanation, format_score, score_of, summary_of
from kit.figures.text import format_size, format_with_interval
from kit.figures.verdict import verdict

#: What every figure of :meth:`SeriesFigures.cells` is, one clause each.
LEGEND = "; ".join((latency.DEFINITION, bandwidth.DEFINITION, SCORE_LEGEND,
                    "best baseline = the honest baseline (robust Hockney, peak) with the "
                    "lowest held-out CRPS; the textbook least-squares line is never one"))


def _estimate(row: Mapping[str, Any], column: str) -> Estimate:
    def num(key: str) -> float | None:
        v = row.get(key)
        return float(v) if v is not None and math.isfinite(float(v)) else None

    return Estimate(num(column), num(f"{column}_lo"), num(f"{column}_hi"))


def _interval(e: Estimate, kind: str) -> str:
    if e.value is None or not e.known:
        return "–"
    return format_with_interval(e.value, e.lo, e.hi, kind)


@dataclass(frozen=True)
class SeriesFigures:
    """Latency, bandwidth, score, best honest baseline and verdict of one series."""

    latency: Estimate
    bandwidth: Estimate
    size_min: float
    size_max: float
    #: the series' rows (the dataset's summary: disturbed windows included)
    n_rows: int = 0
    score: Score | None = None
    best: tuple[str, Score] | None = None
    coverage: float | None = None
    verdict: str = ""

    @classmethod
    def of(cls, summary_row: Mapping[str, Any],
           validation: Mapping[str, Any] | None = None) -> SeriesFigures:
        """From a row of kit.data.dataset.series_table (``latency_s``, ``bandwidth_Bps`` with
        their ``_lo``/``_hi``, ``size_max``) and a validation (kit.fit.validate), if any."""
        cov = summary_of(validation, "model").get("coverage")
        coverage = float(cov) if isinstance(cov, int | float) else None
        return cls(_estimate(summary_row, "latency_s"), _estimate(summary_row, "bandwidth_Bps"),
                   float(summary_row.get("size_min") or 0.0),
                   float(summary_row.get("size_max") or 0.0),
                   int(summary_row.get("n_samples") or 0), score_of(validation),
                   best_baseline(validation), coverage,
                   verdict(validation) if validation else "")

    def with_validation(self, validation: Mapping[str, Any] | None) -> SeriesFigures:
        """The same latency and bandwidth with the score and verdict of ``validation``."""
        other = SeriesFigures.of({}, validation)
        return SeriesFigures(self.latency, self.bandwidth, self.size_min, self.size_max,
                             self.n_rows, other.score, other.best, other.coverage,
                             other.verdict)

    @classmethod
    def of_samples(cls, size: Sequence[float], time: Sequence[float]) -> SeriesFigures:
        """Latency and bandwidth of samples that are no dataset series (a half of one)."""
        if len(size) == 0:
            return cls(Estimate(None), Estimate(None), 0.0, 0.0)
        return cls(latency.latency_of(size, time), bandwidth.bandwidth_of(size, time),
                   float(min(size)), float(max(size)), len(size))

    def samples_text(self, fitted: int | None = None) -> str:
        """``488 of 500``: the samples a model was fitted on, of the series' rows (run
        quality left the others out); the rows alone without a model."""
        if fitted is None or not self.n_rows or fitted == self.n_rows:
            return f"{fitted if fitted is not None else self.n_rows:,}"
        return f"{fitted:,} of {self.n_rows:,}"

    def latency_label(self) -> str:
        """``latency <= 64 B``: the figure's label with the sizes it was taken over."""
        return f"latency <= {format_size(latency.small_bound(self.size_min))}"

    def latency_text(self) -> str:
        return _interval(self.latency, "time")

    def bandwidth_text(self) -> str:
        return _interval(self.bandwidth, "rate")

    def bandwidth_label(self) -> str:
        return bandwidth.label(self.size_max) if self.size_max > 0 else bandwidth.LABEL

    def score_text(self) -> str:
        return format_score(self.score)

    def best_text(self) -> str:
        if self.best is None:
            return "–"
        key, score = self.best
        return f"{name(key)} {format_score(score)}"

    def score_note(self) -> str | None:
        """Why the score is below 0.9, when it is (kit.figures.score.explanation)."""
        return explanation(self.score)

    def cells(self) -> dict[str, str]:
        """The figures as every surface writes them."""
        return {"latency": self.latency_text(), "bandwidth": self.bandwidth_text(),
                "score": self.score_text(), "best baseline": self.best_text(),
                "verdict": self.verdict}
