"""The cluster view's state and rules: which cluster a series belongs to, its pair matrix as
coloured cells, what a cell says, and which series a cell opens.

The numbers, flags and sentences are :mod:`kit.analyses.clusterview`'s (the same as
``pt2pt cluster`` and the report's heat maps); this adapter only turns them into cells and
keeps the cursor and the figure shown. The screen (:mod:`tui.screens.cluster`) draws.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.text import Text

from kit.analyses.clusterview import PairMatrix, describe_model, fit_or_read, pair_matrix
from kit.analyses.slowlinks import Findings, find
from kit.data.pairrows import CLUSTER_KEYS, MIN_PAIRS, pair_key, pair_label
from kit.figures.deviation import FIGURES, MEANING
from kit.fit.clustermodel import ClusterModel
from tui.serieskey import SeriesKey

__all__ = ["MEANING", "ClusterState", "cell_info", "cells", "cluster_of", "colour",
           "is_cluster_member", "load_cluster", "series_of"]

#: Colours from much better (blue) through typical (white) to much worse (red), as in the
#: report's heat maps (RdBu reversed), by the deviation clipped at +-50 %.
_STOPS = ((-0.5, (33, 102, 172)), (-0.25, (146, 197, 222)), (0.0, (247, 247, 247)),
          (0.25, (244, 165, 130)), (0.5, (178, 24, 43)))


def cluster_of(key: SeriesKey) -> dict[str, str]:
    """The cluster selector of a series (its campaign, tool, transport, op, statistic)."""
    return {k: key.get(k) for k in CLUSTER_KEYS}


def is_cluster_member(key: SeriesKey, keys: Sequence[SeriesKey]) -> bool:
    """An inter-node one-pair series whose campaign measured at least MIN_PAIRS pairs."""
    if key.get("placement") != "inter-node" or key.get("pairs") not in ("1", ""):
        return False
    mine = cluster_of(key)
    pairs = {pair_key(k.get("host_pair")) for k in keys
             if cluster_of(k) == mine and k.get("placement") == "inter-node"}
    pairs.discard(None)
    return len(pairs) >= MIN_PAIRS


def colour(dev: float) -> str:
    """Background colour of a cell whose figure is ``dev`` (signed: worse > 0) off."""
    if not math.isfinite(dev):
        return "#555555"
    d = min(max(dev, -0.5), 0.5)
    for (x0, c0), (x1, c1) in itertools.pairwise(_STOPS):
        if d <= x1:
            f = (d - x0) / (x1 - x0)
            rgb = [round(a + (b - a) * f) for a, b in zip(c0, c1, strict=True)]
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return "#b2182b"


@dataclass
class ClusterState:
    """A fitted cluster, its findings, the figure shown and the cursor's cell."""

    selector: dict[str, str]
    model: ClusterModel
    findings: Findings
    figure: int = 0
    lines: list[str] = field(default_factory=list)

    @property
    def figure_name(self) -> str:
        return FIGURES[self.figure]

    def matrix(self) -> PairMatrix:
        return pair_matrix(self.model, self.findings, self.figure_name)

    def next_figure(self) -> None:
        names = [f for f in FIGURES if f in self.model.figures_]
        self.figure = FIGURES.index(names[(names.index(self.figure_name) + 1) % len(names)])


def load_cluster(dataset: Path, key: SeriesKey) -> ClusterState:
    """Fit the cluster ``key`` belongs to (what ``pt2pt cluster`` fits) and test it."""
    selector = cluster_of(key)
    model, _ = fit_or_read(dataset, selector)
    findings = find(model)
    return ClusterState(selector, model, findings, lines=describe_model(model, findings))


def cells(matrix: PairMatrix) -> list[list[Text]]:
    """Rows of coloured cells, node by node; a flagged link's cell marked ``×``, a flagged
    node's name in bold red with a ``!``."""
    dev = matrix.deviation()
    n = len(matrix.nodes)
    width = max([len(matrix.cell_text(i, j)) + 2 for i in range(n) for j in range(n) if i != j]
                or [4])
    out = []
    for i, node in enumerate(matrix.nodes):
        name = Text(node + (" !" if matrix.flagged_nodes[i] else ""),
                    style="bold red" if matrix.flagged_nodes[i] else "bold")
        row = [name]
        for j in range(len(matrix.nodes)):
            if i == j:
                row.append(Text(" " * width, style="on #333333"))
                continue
            text = matrix.cell_text(i, j)
            flagged = bool(matrix.flagged_links[i, j])
            style = f"{'bold ' if flagged else ''}black on {colour(float(dev[i, j]))}"
            label = ("× " if flagged else "  ") + text
            row.append(Text(label.ljust(width), style=style))  # the colour fills the cell
        out.append(row)
    return out


def cell_info(state: ClusterState, i: int, j: int) -> str:
    """What a cell says: the pair, its measured value against the typical pair, its test."""
    matrix = state.matrix()
    if i == j or not (0 <= i < len(matrix.nodes) and 0 <= j < len(matrix.nodes)):
        return f"{matrix.nodes[i] if 0 <= i < len(matrix.nodes) else ''}: a node with itself"
    k = int(matrix.pair_of[i, j])
    label = pair_label((matrix.nodes[min(i, j)], matrix.nodes[max(i, j)]))
    if k < 0:
        return f"{label}: not measured"
    text = (f"{label}: {matrix.cell_text(i, j)} (typical pair "
            f"{matrix.cell_text_typical()}; {matrix.title})")
    test = state.findings.cell(state.figure_name, k)
    if test is not None:
        verdict = "FLAGGED: " + test.sentence if test.flagged else \
            f"not flagged (p = {test.p:.2g}, q = {test.q:.2g}): {test.sentence}"
        text += "\n" + verdict
    nodes = [f.sentence for f in state.findings.flagged
             if f.kind == "node" and f.figure == state.figure_name
             and f.name in (matrix.nodes[i], matrix.nodes[j])]
    return "\n".join([text, *nodes])


def series_of(state: ClusterState, i: int, j: int, keys: Sequence[SeriesKey]
              ) -> SeriesKey | None:
    """The dataset series of the cell's pair (either rank order), or None."""
    matrix = state.matrix()
    if i == j:
        return None
    want = pair_key(f"{matrix.nodes[i]}:{matrix.nodes[j]}")
    for key in keys:
        if (cluster_of(key) == state.selector and key.get("placement") == "inter-node"
                and pair_key(key.get("host_pair")) == want):
            return key
    return None
