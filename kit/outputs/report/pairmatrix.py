"""The report's cluster part: the pair matrix of a multi-pair campaign as heat maps.

One picture per figure (latency at a small size, asymptotic bandwidth, noise level): node
against node, each cell the pair's measured value, coloured by its deviation from the
typical pair (red = worse, blue = better, the scale symmetric and clipped at +-50 %), a
flagged link framed in black with a cross, a flagged node's row and column framed and its
name in red. The numbers and flags are :func:`kit.analyses.clusterview.pair_matrix`'s, the
verdict lines :func:`kit.analyses.clusterview.describe_model`'s, so the page says what
``pt2pt cluster`` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from kit.analyses.clusterview import PairMatrix, describe_model, fit_or_read, pair_matrix
from kit.analyses.slowlinks import Findings, find
from kit.core.atomicwrite import save_png
from kit.core.errors import UserError
from kit.data.pairrows import MIN_PAIRS, clusters
from kit.figures.deviation import FIGURES
from kit.fit.clustermodel import ClusterModel

#: Cells annotated with their value up to this many nodes (beyond, colour only).
ANNOTATE_MAX_NODES = 16
CLIP = 0.5


@dataclass
class ClusterPart:
    """One cluster of the report: title, the text lines, the pictures, the findings."""

    title: str
    slug: str
    lines: list[str]
    images: list[tuple[str, str]] = field(default_factory=list)  # (file, caption)
    flagged: list[dict[str, Any]] = field(default_factory=list)
    rule: str = ""
    notes: list[str] = field(default_factory=list)


def heatmap(path: Path, matrix: PairMatrix) -> Path:
    """The matrix as a PNG (see the module doc)."""
    n = len(matrix.nodes)
    side = min(max(4.0, 0.32 * n + 2.0), 16.0)
    fig, ax = plt.subplots(figsize=(side + 1.4, side))
    dev = np.clip(matrix.deviation(), -CLIP, CLIP)
    shown = np.ma.masked_invalid(dev)
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#dddddd")
    im = ax.imshow(shown, cmap=cmap, vmin=-CLIP, vmax=CLIP, interpolation="nearest")
    bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label("worse than the typical pair (clipped at ±50 %)")
    bar.ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    fontsize = max(4, min(9, int(200 / max(n, 1))))
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(matrix.nodes, rotation=90, fontsize=fontsize)
    ax.set_yticklabels(matrix.nodes, fontsize=fontsize)
    for i, flagged in enumerate(matrix.flagged_nodes):
        if flagged:
            ax.get_xticklabels()[i].set_color("#b00000")
            ax.get_yticklabels()[i].set_color("#b00000")
            for rect in ((i - 0.5, -0.5, 1, n), (-0.5, i - 0.5, n, 1)):
                ax.add_patch(plt.Rectangle(rect[:2], rect[2], rect[3], fill=False,
                                           edgecolor="#b00000", linewidth=1.6))
    for i, j in zip(*np.nonzero(np.triu(matrix.flagged_links)), strict=True):
        for a, b in ((i, j), (j, i)):
            ax.add_patch(plt.Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False,
                                       edgecolor="black", linewidth=2.0))
            ax.plot([b - 0.35, b + 0.35], [a - 0.35, a + 0.35], color="black", lw=1.2)
            ax.plot([b - 0.35, b + 0.35], [a + 0.35, a - 0.35], color="black", lw=1.2)
    if n <= ANNOTATE_MAX_NODES:
        for i in range(n):
            for j in range(n):
                if i != j and math.isfinite(matrix.values[i, j]):
                    dark = abs(float(dev[i, j])) > 0.3  # white on the deep colours
                    ax.text(j, i, matrix.cell_text(i, j).replace(" ", "\n"), ha="center",
                            va="center", fontsize=max(4, fontsize - 2),
                            color="white" if dark else "#222222")
    ax.set_title(f"{matrix.title}\ntypical pair {matrix.cell_text_typical()}; "
                 "framed: flagged slow", fontsize=10)
    fig.tight_layout()
    return save_png(fig, path, dpi=100)


def cluster_part(model: ClusterModel, findings: Findings, out_dir: Path, slug: str,
                 title: str) -> ClusterPart:
    """The part of one cluster: its text, its three heat maps, its findings."""
    part = ClusterPart(title=title, slug=slug, lines=describe_model(model, findings),
                       rule=findings.rule())
    for figure in FIGURES:
        if figure not in model.figures_:
            continue
        matrix = pair_matrix(model, findings, figure)
        if not np.isfinite(matrix.values).any():
            part.notes.append(f"{figure}: not measured ({matrix.meaning})")
            continue
        name = f"{slug}-{figure}.png"
        heatmap(out_dir / name, matrix)
        part.images.append((name, f"{matrix.title}: {matrix.meaning}"))
    part.flagged = [f.to_dict() for f in findings.flagged]
    return part


def cluster_parts(dataset: Path, out_dir: Path, series: dict[str, str] | None = None
                  ) -> tuple[list[ClusterPart], set[tuple[str, ...]]]:
    """A part per multi-pair campaign series of ``dataset`` (at least MIN_PAIRS pairs), and
    the cluster keys covered (their per-pair series need no section of their own)."""
    from kit.data.pairrows import CLUSTER_KEYS

    selector = {k: v for k, v in (series or {}).items() if k in CLUSTER_KEYS}
    parts: list[ClusterPart] = []
    covered: set[tuple[str, ...]] = set()
    for row in clusters(dataset, selector).iter_rows(named=True):
        if row["n_pairs"] < MIN_PAIRS:
            continue
        keys = {k: str(row[k]) for k in CLUSTER_KEYS}
        title = "Cluster: " + ", ".join(f"{k}={v}" for k, v in keys.items() if k != "stat")
        slug = "cluster-" + "-".join(str(row[k]) for k in CLUSTER_KEYS)
        slug = "".join(c if c.isalnum() or c == "-" else "-" for c in slug)
        try:
            model, _ = fit_or_read(dataset, keys)
        except UserError as err:
            parts.append(ClusterPart(title=title, slug=slug, lines=[],
                                     notes=[f"Not fitted: {err.paragraph()}"]))
            continue
        parts.append(cluster_part(model, find(model), out_dir, slug, title))
        covered.add(tuple(keys[k] for k in CLUSTER_KEYS))
    return parts, covered
