"""The collectives view's content: a ``pt2pt collectives`` sweep as table rows and lines.

An adapter (screens reach ``kit`` through these): every figure is
``kit.analyses.collectives``'s (ranking, shares within X % with their bootstrap intervals,
the selectors' irregularity), the same the CLI and the report print.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kit.analyses.collectives import LEVEL, WITHIN

RANKING_HEADERS = ["collective", "numproc", "size", "best", "best time (s)", "ratios to the best"]
#: One colour per algorithm of a plot, in the order the legend lists them.
COLOURS = ("cyan", "magenta", "yellow", "green", "red", "blue", "bright_white",
           "bright_cyan", "bright_magenta", "bright_yellow", "bright_green", "bright_red")
#: (collective, size) -> algorithm -> (numprocs, median simulated seconds per byte)
Curves = dict[tuple[str, int], dict[str, tuple[list[int], list[float]]]]


@dataclass(frozen=True)
class CollectivesView:
    """What the collectives screen shows."""

    path: Path
    ranking: list[list[str]]
    share_headers: list[str]
    shares: list[list[str]]
    lines: list[str]
    statistic: str
    curves: Curves

    def plot(self, collective: str, size: int) -> tuple[Any, list[tuple[str, str]]]:
        """The 2015 study's panel for one size: median time / size against numproc per
        algorithm, log axes (a PlotSpec), and the legend as (algorithm, colour)."""
        from tui.widgets.plot import Layer, PlotSpec, format_seconds

        layers, legend = [], []
        for (alg, (ns, ts)), colour in zip(sorted(self.curves.get((collective, size), {})
                                                  .items()), itertools.cycle(COLOURS),
                                           strict=False):
            x, y = np.asarray(ns, dtype=float), np.asarray(ts, dtype=float)
            layers += [Layer("line", x, y, colour), Layer("scatter", x, y, colour)]
            legend.append((alg, colour))
        return PlotSpec(layers=layers, x_format=lambda v: f"{v:g}",
                        y_format=lambda v: f"{format_seconds(v)}/B",
                        empty_message="no completed point at this size"), legend


def load(out_dir: Path, *, within: tuple[float, ...] = WITHIN, split: int | None = None,
         seed: int = 1) -> CollectivesView:
    """Read a sweep folder (UserError naming it when it holds no sweep) and rank it."""
    from kit.analyses.collectives import point_medians, ranking, selector_lines, shares
    from kit.outputs.collsweep import read_dataset, topology_split

    rows = read_dataset(Path(out_dir))
    split, why = (split, str(split)) if split is not None else topology_split(Path(out_dir))
    ranked = ranking(rows)
    table = []
    for (coll, n, size), part in ranked.partition_by(
            "collective", "numproc", "size", as_dict=True, maintain_order=True).items():
        best = part["best_time"][0]
        ratios = ", ".join(f"{r['algorithm']} {r['ratio']:.3f}" if math.isfinite(r["ratio"])
                           else f"{r['algorithm']} not completed"
                           for r in part.iter_rows(named=True))
        table.append([str(coll), str(n), str(size), str(part["best"][0] or "none"),
                      f"{best:.4g}" if best is not None else "-", ratios])
    found = shares(rows, within=within, split=split, seed=seed)
    xs = list(dict.fromkeys(s.within_percent for s in found))
    by_key: dict[tuple[str, str, str], dict[float, str]] = {}
    counts: dict[tuple[str, str, str], int] = {}
    for s in found:
        key = (s.collective, s.algorithm, s.numprocs)
        by_key.setdefault(key, {})[s.within_percent] = f"{s.share:.2f} [{s.lo:.2f}, {s.hi:.2f}]"
        counts[key] = s.configurations
    share_rows = [[c, a, r, str(counts[(c, a, r)]), *(cells.get(x, "-") for x in xs)]
                  for (c, a, r), cells in by_key.items()]
    curves: Curves = {}
    for r in point_medians(rows).drop_nulls("median").sort("numproc").iter_rows(named=True):
        ns, ts = curves.setdefault((r["collective"], r["size"]), {}).setdefault(
            r["algorithm"], ([], []))
        ns.append(int(r["numproc"]))
        ts.append(float(r["median"]) / max(1, int(r["size"])))
    return CollectivesView(
        path=Path(out_dir), ranking=table, curves=curves,
        share_headers=["collective", "algorithm", "numproc", "configs",
                       *(f"within {x:g} %" for x in xs)],
        shares=share_rows, lines=selector_lines(found),
        statistic=("time = median simulated time over repetitions (slowest rank); ratio = time "
                   "/ the best algorithm's at the same (numproc, size); share = configurations "
                   f"within X % of the best [{LEVEL:.0%} bootstrap interval over "
                   f"configurations]; numproc ranges split at {why}"))
