"""Slow links and nodes of a cluster model, found with a controlled false-discovery rate.

Every node and every link gets one test per figure (latency, bandwidth, noise; see
:mod:`kit.figures.deviation`): is its deviation from the population beyond the threshold
on the slow side? The null hypothesis is "no worse than the threshold" (``H0: effect <=
thr`` in the bad direction), so a machine whose links differ by 2 % in a harmless way has
no discovery however many samples it has, and a threshold is what a user states ("10 %
slower"). The p-value is one-sided, from the effect's standard error (for a link: its
visits' sampling and between-visit variance plus its two nodes' estimation error; for a
node: the sandwich error of its effect, which includes the between-link spread).

The decision is Benjamini-Hochberg at level ``fdr`` over *all* tests together (nodes and
links, three figures): the expected share of false findings among the flagged is at most
``fdr``. A node whose pairs are all slow is one node effect with link effects near zero
(:mod:`kit.fit.hierarchy`), so it is flagged as the node, not as n-1 links.

Every flagged item comes with its estimate and a 95 % confidence interval (unshrunk: a
flagged item is by the test's verdict not from the bulk the shrinkage pulls toward).
:func:`find` is the one place these are computed; ``pt2pt cluster``, the report's pair
matrix and the TUI's cluster view read its :class:`Findings`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from kit.data.pairrows import pair_label
from kit.figures.deviation import (
    FIGURES,
    WORSE,
    format_seconds,
    quoted_size,
    sentence,
    threshold_value,
)
from kit.fit.clustermodel import ClusterModel

#: Defaults: 10 % slower (latency, bandwidth), 25 % wider tail, 5 % false discoveries.
DEFAULT_THRESHOLDS = {"latency": 0.10, "bandwidth": 0.10, "noise": 0.25}
DEFAULT_FDR = 0.05
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Thresholds:
    """Per figure: a fraction of the population's value; latency may be absolute seconds."""

    latency: float = DEFAULT_THRESHOLDS["latency"]
    bandwidth: float = DEFAULT_THRESHOLDS["bandwidth"]
    noise: float = DEFAULT_THRESHOLDS["noise"]
    latency_absolute: bool = False

    def of(self, figure: str) -> float:
        return float(getattr(self, figure))

    def describe(self, populations: Mapping[str, float]) -> str:
        if self.latency_absolute:
            lat = f"+{format_seconds(self.latency)}"
        else:
            secs = threshold_value("latency", self.latency, populations["latency"])
            lat = f"+{self.latency:.0%} ({format_seconds(secs)})"
        return (f"latency {lat}, bandwidth -{self.bandwidth:.0%}, noise level "
                f"+{self.noise:.0%}")


@dataclass(frozen=True)
class Finding:
    """One test: a node or link, one figure; estimate and 95 % interval on the figure's
    scale (seconds / ln ratio), its one-sided p-value, BH-adjusted q, and the verdict."""

    kind: str  # node | link
    name: str
    figure: str
    estimate: float
    lo: float
    hi: float
    se: float
    p: float
    q: float
    flagged: bool
    sentence: str
    index: int  # node index or pair index in the model

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {"kind": self.kind, "name": self.name, "figure": self.figure,
                "estimate": num(self.estimate), "lo": num(self.lo), "hi": num(self.hi),
                "se": num(self.se), "p": num(self.p), "q": num(self.q),
                "flagged": self.flagged, "sentence": self.sentence}


@dataclass
class Findings:
    """Every test of a cluster model, the flagged ones, and what the decision rule was."""

    tests: list[Finding]
    thresholds: Thresholds
    fdr: float
    where: dict[str, str]
    populations: dict[str, float]
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[Finding]:
        order = {"node": 0, "link": 1}
        return sorted((f for f in self.tests if f.flagged),
                      key=lambda f: (order[f.kind], FIGURES.index(f.figure), f.p))

    def flagged_nodes(self) -> set[str]:
        return {f.name for f in self.flagged if f.kind == "node"}

    def flagged_links(self) -> set[str]:
        return {f.name for f in self.flagged if f.kind == "link"}

    def cell(self, figure: str, pair_index: int) -> Finding | None:
        """The link test of a pair for a figure (for the pair matrix)."""
        for f in self.tests:
            if f.kind == "link" and f.figure == figure and f.index == pair_index:
                return f
        return None

    def rule(self) -> str:
        limits = self.thresholds.describe(self.populations)
        return (f"flagged when worse than the threshold ({limits}) "
                f"at a false-discovery rate of {self.fdr:.0%} over all {len(self.tests)} tests "
                "(Benjamini-Hochberg; one-sided tests of each node and link effect)")

    def to_dict(self) -> dict[str, Any]:
        return {"format": "pt2pt-cluster-findings", "fdr": self.fdr,
                "thresholds": vars(self.thresholds), "rule": self.rule(),
                "where": self.where, "populations": self.populations,
                "flagged": [f.to_dict() for f in self.flagged],
                "tests": [f.to_dict() for f in self.tests], "notes": self.notes}


def benjamini_hochberg(p: NDArray, fdr: float) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """(rejected, adjusted q-values) of the Benjamini-Hochberg step-up procedure.

    NaN p-values are not tests (never rejected, q NaN) and do not count in m.
    """
    p = np.asarray(p, dtype=float)
    ok = np.isfinite(p)
    q = np.full(p.shape, np.nan)
    reject = np.zeros(p.shape, dtype=bool)
    m = int(ok.sum())
    if m == 0:
        return reject, q
    pv = p[ok]
    order = np.argsort(pv, kind="stable")
    ranked = pv[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    qv = np.empty(m)
    qv[order] = np.minimum(adj, 1.0)
    q[ok] = qv
    below = pv[order] <= fdr * np.arange(1, m + 1) / m
    k = int(np.max(np.flatnonzero(below))) + 1 if below.any() else 0
    rej = np.zeros(m, dtype=bool)
    rej[order[:k]] = True
    reject[ok] = rej
    return reject, q


def _where(model: ClusterModel) -> dict[str, str]:
    win = model.windows_
    return {"latency": f"at {quoted_size(win.latency_at)}",
            "bandwidth": f"1/slope over {quoted_size(win.bandwidth_min)}-"
                         f"{quoted_size(win.bandwidth_at)}",
            "noise": "tail width over all sizes"}


def find(model: ClusterModel, thresholds: Thresholds | None = None,
         fdr: float = DEFAULT_FDR) -> Findings:
    """Test every node and link effect of ``model`` and flag the slow ones."""
    th = thresholds or Thresholds()
    where = _where(model)
    pops = {m: f.population for m, f in model.figures_.items()}
    rows: list[tuple[str, str, str, float, float, int]] = []
    notes: list[str] = []
    for figure in FIGURES:
        fig = model.figures_.get(figure)
        if fig is None:
            continue
        parts = fig.parts
        for i, node in enumerate(model.nodes_):
            if parts.node_estimated[i] and math.isfinite(parts.node_se[i]):
                rows.append(("node", node, figure, float(parts.node[i]),
                             float(parts.node_se[i]), i))
        for k, pair in enumerate(model.pairs_):
            if math.isfinite(parts.link[k]) and math.isfinite(parts.link_se[k]):
                rows.append(("link", pair_label(pair), figure, float(parts.link[k]),
                             float(parts.link_se[k]), k))
        for note in parts.notes:
            if note not in notes:
                notes.append(note)
    p = np.array([_p_value(r[2], r[3], r[4], th, pops) for r in rows])
    reject, q = benjamini_hochberg(p, fdr)
    tests = []
    for (kind, name, figure, est, se, idx), pv, qv, flag in zip(rows, p, q, reject,
                                                                 strict=True):
        lo, hi = est - Z95 * se, est + Z95 * se
        text = sentence(kind, name, figure, est, lo, hi, where[figure])
        tests.append(Finding(kind, name, figure, est, lo, hi, se, float(pv), float(qv),
                             bool(flag), text, idx))
    return Findings(tests, th, fdr, where, pops, notes)


def _p_value(figure: str, est: float, se: float, th: Thresholds,
             pops: Mapping[str, float]) -> float:
    thr = threshold_value(figure, th.of(figure), pops[figure],
                          figure == "latency" and th.latency_absolute)
    if not (math.isfinite(est) and math.isfinite(se)) or se <= 0:
        return math.nan
    z = WORSE[figure] * (est - thr) / se
    return float(ndtr(-z))
