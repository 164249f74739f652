"""The noise a tool reported for an aggregate series (OSU ``-z``), instead of "unknown".

An aggregate series (OSU's mean, or its p50, per size) holds no single messages, so the kit
cannot fit the messages' noise from it. OSU 7.x run with ``-z`` prints, beside the mean,
percentiles of the per-iteration time (P50/P90/P99 for osu_latency; for osu_bw/osu_bibw
ingest turns a bandwidth percentile PNN into the time percentile p(100-NN)). Those columns
are the tool's own report of the spread. They are ingested as sibling series (the same
keys, another ``stat``); this module reads them back and expresses each percentile as its
ratio to the tool's median (p50) at the same size in the same run: the "ratio to the
median" scale of the model's own noise quantiles. The figures are what the tool reported,
summarised over sizes (median, min, max), overall and per regime of a model; nothing is
fitted. Without percentile columns there is nothing to report and the noise stays
"unknown".
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kit.data import dataset as ds

_PERCENTILE = re.compile(r"^p(\d+(?:_\d+)?)$")
MEDIAN = "p50"


def percentile_of(stat: str) -> float | None:
    """``p99`` -> 99.0, ``p99_9`` -> 99.9; None for other statistics (mean, raw...)."""
    match = _PERCENTILE.match(stat)
    return float(match.group(1).replace("_", ".")) if match else None


def _summary(values: pl.Series) -> dict[str, float]:
    return {"median": float(values.median()),  # type: ignore[arg-type]
            "min": float(values.min()),  # type: ignore[arg-type]
            "max": float(values.max())}  # type: ignore[arg-type]


@dataclass(frozen=True)
class ReportedNoise:
    """Percentile / median ratios a tool printed for one aggregate series."""

    tool: str
    #: the statistic the series' model is fitted to (mean, p50...)
    statistic: str
    #: percentiles reported beside the median, lowest first (``p90``, ``p99``)
    quantiles: tuple[str, ...]
    #: quantile -> {"median", "min", "max"} of the per-size, per-run ratio q / p50
    ratios: dict[str, dict[str, float]]
    n_sizes: int
    n_runs: int
    #: per regime of the model: size_min, size_max, n_sizes, ratios {q: median}
    regimes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """What the model's provenance keeps (``provenance.reported_noise``)."""
        return {"source": f"{self.tool} percentile columns (OSU: -z)",
                "definition": "ratio of each reported percentile of time to the tool's own "
                              "median (p50) at the same size and run; median, min and max "
                              "over sizes and runs; reported by the tool, not fitted",
                "statistic": self.statistic, "quantiles": list(self.quantiles),
                "ratios": self.ratios, "n_sizes": self.n_sizes, "n_runs": self.n_runs,
                "regimes": self.regimes, "summary": self.describe()}

    def describe(self) -> str:
        """One line: ``p90/p50 1.05 (1.01-1.20), p99/p50 1.38 (...)`` and where it came from."""
        parts = [f"{q}/{MEDIAN} {r['median']:.3g} ({r['min']:.3g}-{r['max']:.3g})"
                 for q, r in self.ratios.items()]
        return (f"as reported by {self.tool} (its percentile columns; median over "
                f"{self.n_sizes} size(s) and {self.n_runs} run(s), range in brackets): "
                + ", ".join(parts))


def reported_noise(dataset: str | Path, keys: Mapping[str, str],
                   breakpoints: Sequence[float] | None = None) -> ReportedNoise | None:
    """The noise the tool reported for the aggregate series ``keys``, or None.

    None for a raw series, and when the tool printed no median together with another
    percentile for this series (no ``-z``): then the noise is unknown. ``breakpoints`` (a
    model's) split the summary per regime.
    """
    statistic = keys.get("stat", ds.RAW)
    if statistic == ds.RAW:
        return None
    siblings = {k: v for k, v in keys.items() if k != "stat"}
    rows = (ds.series_rows(dataset, siblings, aggregates=True)
            .select("run_id", "size", pl.col("stat").cast(pl.String), "time")
            .filter(pl.col("stat").str.contains(r"^p\d"))
            .collect())
    if rows.height == 0 or MEDIAN not in set(rows["stat"].to_list()):
        return None
    median = (rows.filter(pl.col("stat") == MEDIAN)
              .group_by("run_id", "size").agg(p50=pl.col("time").median()))
    ratios = (rows.filter(pl.col("stat") != MEDIAN)
              .join(median, on=["run_id", "size"], how="inner")
              .filter(pl.col("p50") > 0)
              .with_columns(ratio=pl.col("time") / pl.col("p50")))
    if ratios.height == 0:
        return None
    quantiles = tuple(sorted(set(ratios["stat"].to_list()),
                             key=lambda s: percentile_of(s) or 0.0))
    overall = {q: _summary(ratios.filter(pl.col("stat") == q)["ratio"]) for q in quantiles}
    per_regime: list[dict[str, Any]] = []
    edges = [0.0, *(float(b) for b in breakpoints or ()), math.inf]
    for lo, hi in itertools.pairwise(edges):
        part = ratios.filter((pl.col("size") >= lo) & (pl.col("size") < hi))
        if part.height == 0:
            continue
        per_regime.append({
            "size_min": lo, "size_max": None if math.isinf(hi) else hi,
            "n_sizes": int(part["size"].n_unique()),
            "ratios": {q: float(part.filter(pl.col("stat") == q)["ratio"].median())  # type: ignore[arg-type]
                       for q in quantiles if (part["stat"] == q).any()}})
    return ReportedNoise(tool=keys.get("tool", "the tool"), statistic=statistic,
                         quantiles=quantiles, ratios=overall,
                         n_sizes=int(ratios["size"].n_unique()),
                         n_runs=int(ratios["run_id"].n_unique()), regimes=per_regime)
