"""What every surface shows of a cluster model: the fit (or a saved one), the summary, the
pair matrix.

``pt2pt cluster``, the report's pair-matrix section and the TUI's cluster view all come
through here, so they fit the same rows the same way and show the same numbers: the pair
matrix's cells are :func:`kit.figures.deviation.value_of` of each pair's measured deviation,
its marks are the flags of :func:`kit.analyses.slowlinks.find`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from kit.analyses.slowlinks import Findings
from kit.data.pairrows import read_pairs
from kit.figures.deviation import (
    FIGURES,
    MEANING,
    WORSE,
    format_seconds,
    quoted_size,
    value_of,
)
from kit.fit.clustermodel import ClusterModel, is_cluster_model, read_cluster_model

#: What each matrix shows, with its unit (the TUI and the report's titles).
MATRIX_TITLES = {"latency": "latency at {at} (one-way, median)",
                 "bandwidth": "asymptotic bandwidth (1 / slope of time over size, {at})",
                 "noise": "noise level (p95/p50 of time at a size)"}


def fit_or_read(path: str | Path, selector: Mapping[str, str] | None = None, *,
                seed: int = 0) -> tuple[ClusterModel, str]:
    """(model, where it came from): a saved cluster model, or fitted on a dataset's pairs."""
    if is_cluster_model(path):
        return read_cluster_model(path), str(path)
    rows = read_pairs(path, selector)
    return ClusterModel(random_state=seed).fit(rows), str(path)


def _fmt_rate(v: float) -> str:
    if not math.isfinite(v) or v <= 0:
        return "–"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} B/s"


def format_value(figure: str, value: float) -> str:
    """A pair's or the typical pair's figure as the matrix and the summary write it."""
    if figure == "latency":
        return format_seconds(value)
    if figure == "bandwidth":
        return _fmt_rate(value)
    return f"{value:.2f}" if math.isfinite(value) else "–"


def describe_model(model: ClusterModel, findings: Findings) -> list[str]:
    """The text ``pt2pt cluster`` prints: what was fitted, the typical pair, the spread, the
    rule and the verdict lines."""
    series = ",".join(f"{k}={v}" for k, v in model.series_.items())
    n_visits = int(sum(f.visits.n_visits.sum() for f in model.figures_.values())
                   / max(len(model.figures_), 1))
    lat = model.figures_["latency"]
    lines = [f"cluster model of {series}",
             f"  {len(model.nodes_)} nodes, {len(model.pairs_)} pairs, {n_visits} visits, "
             f"{model.n_samples_:,} samples; between-visit variance from {lat.visits.source}"]
    label = {"latency": "latency", "bandwidth": "bandwidth (asymptotic)",
             "noise": "noise p95/p50"}
    at = {"latency": findings.where["latency"], "bandwidth": f"({findings.where['bandwidth']})",
          "noise": f"at {quoted_size(model.windows_.latency_at)}"}
    typical = ", ".join(
        f"{label[name]} {format_value(name, model.figures_[name].population)} {at[name]}"
        for name in FIGURES if name in model.figures_)
    lines.append(f"  typical pair: {typical}")
    spread = []
    for name in FIGURES:
        fig = model.figures_.get(name)
        if fig is None or not math.isfinite(fig.parts.tau2):
            continue
        sd = math.sqrt(fig.parts.tau2)
        spread.append(f"{name} {format_seconds(sd)}" if name == "latency"
                      else f"{name} {100 * math.expm1(sd):.2g} %")
    lines.append("  between links (sd beyond sampling noise): " + ", ".join(spread))
    lines.append(f"  rule: {findings.rule()}")
    flagged = findings.flagged
    if flagged:
        lines.append(f"slow ({len(flagged)}):")
        lines += [f"  {f.sentence}" for f in flagged]
    else:
        lines.append("no slow node or link")
    lines += [f"note: {n}" for n in [*model.notes_, *findings.notes]]
    return lines


@dataclass(frozen=True)
class PairMatrix:
    """One figure over every pair: ``values[i, j]`` (symmetric, NaN on the diagonal and for
    pairs not measured), flagged links, flagged nodes, the typical value, labels."""

    figure: str
    title: str
    nodes: list[str]
    values: NDArray[np.float64]
    flagged_links: NDArray[np.bool_]
    flagged_nodes: NDArray[np.bool_]
    pair_of: NDArray[np.int64]  # pair index of each cell, -1 where none
    typical: float
    meaning: str

    def cell_text(self, i: int, j: int) -> str:
        return format_value(self.figure, float(self.values[i, j]))

    def cell_text_typical(self) -> str:
        return format_value(self.figure, self.typical)

    def deviation(self) -> NDArray[np.float64]:
        """Each cell's deviation from the typical pair, signed so that worse is positive
        (a fraction; the noise level's as the ratio of its ln width): what the report's
        heat maps and the TUI's cells colour."""
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.figure == "noise":
                dev = np.log(self.values) / math.log(self.typical) - 1.0
            else:
                dev = self.values / self.typical - 1.0
        return np.asarray(dev * WORSE[self.figure], dtype=float)


def pair_matrix(model: ClusterModel, findings: Findings, figure: str) -> PairMatrix:
    """The matrix of one figure: each measured pair's own value (measured, not shrunk)."""
    fig = model.figures_[figure]
    N = len(model.nodes_)
    values = np.full((N, N), np.nan)
    flagged = np.zeros((N, N), dtype=bool)
    pair_of = np.full((N, N), -1, dtype=np.int64)
    flagged_links = {f.index for f in findings.flagged
                     if f.kind == "link" and f.figure == figure}
    for k, (i, j) in enumerate(model.ends_):
        v = value_of(figure, fig.population, float(fig.visits.y[k] - fig.parts.centre))
        values[i, j] = values[j, i] = v
        pair_of[i, j] = pair_of[j, i] = k
        flagged[i, j] = flagged[j, i] = k in flagged_links
    nodes = np.zeros(N, dtype=bool)
    for f in findings.flagged:
        if f.kind == "node" and f.figure == figure:
            nodes[f.index] = True
    win = model.windows_
    at = {"latency": quoted_size(win.latency_at),
          "bandwidth": f"{quoted_size(win.bandwidth_min)}-{quoted_size(win.bandwidth_at)}"
          }.get(figure, "")
    return PairMatrix(figure, MATRIX_TITLES[figure].format(at=at), list(model.nodes_), values,
                      flagged, nodes, pair_of, fig.population, MEANING[figure])
