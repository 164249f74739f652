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
from rich.text import Text

from kit.analyses.collectives import CENSORING, LEVEL, WITHIN, Share, share_cell

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
    found: list[Share]

    @property
    def thresholds(self) -> list[float]:
        """The X's of the shares, in the order the analysis gave them."""
        return list(dict.fromkeys(s.within_percent for s in self.found))

    def share_chart(self, collective: str, within: float, width: int | None = None) -> Text:
        """The 2015 study's figure of the shares as text: per numproc range (side by side) one
        line per algorithm on a 0-1 axis, the share ``●`` and its 95 % interval ``━``; where
        configurations were left out, their bounds ``╎┄╎`` (what the missing times could make
        the share over all of them)."""
        mine = [s for s in self.found if s.collective == collective and s.within_percent == within]
        ranges = list(dict.fromkeys(s.numprocs for s in mine))
        algs = sorted({s.algorithm for s in mine})
        width = width or {1: 30, 2: 22}.get(len(ranges), 16)  # the time plot keeps room
        name_w = max((len(a) for a in algs), default=4) + 1
        cell = {(s.numprocs, s.algorithm): s for s in mine}

        def col(v: float) -> int:
            return min(width - 1, max(0, round(v * (width - 1))))

        lines = [Text(f"share of configurations within {within:g} % of the best "
                      f"[{LEVEL:.0%} interval]", style="bold")]
        head, sub = Text(" " * name_w), Text(" " * name_w)
        for r in ranges:
            first = cell[r, algs[0]]
            head.append(f" numproc {r}"[:width + 6].ljust(width + 7), "bold")
            sub.append((f" {first.configurations} configs" + (
                f", {first.left_out} left out" if first.left_out else ""))[:width + 6]
                .ljust(width + 7))
        lines += [head, sub]
        for alg in algs:
            line = Text(alg.ljust(name_w))
            for r in ranges:
                s = cell[r, alg]
                bar: list[tuple[str, str]] = [("·", "grey35")] * width
                if s.left_out:
                    for c in range(col(s.bound_lo), col(s.bound_hi) + 1):
                        bar[c] = ("┄", "grey58")
                if s.configurations:
                    for c in range(col(s.lo), col(s.hi) + 1):
                        bar[c] = ("━", "cyan")
                if s.left_out:  # the bounds' ends stay visible over the interval
                    bar[col(s.bound_lo)] = bar[col(s.bound_hi)] = ("╎", "bold grey70")
                if s.configurations:
                    bar[col(s.share)] = ("●", "bold yellow")
                line.append("│", "grey50")
                for ch, style in bar:
                    line.append(ch, style)
                line.append("│", "grey50")
                line.append((f"{s.share:.2f}" if s.configurations else "  - ").ljust(5))
            lines.append(line)
        axis = Text(" " * name_w)
        for _ in ranges:
            axis.append(("0" + "0.5".center(width - 1) + "1").ljust(width + 7), "grey50")
        lines.append(axis)
        return Text("\n").join(lines)

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
    from kit.analyses.collectives import (
        not_completed,
        point_medians,
        ranking,
        selector_lines,
        shares,
    )
    from kit.outputs.collsweep import read_dataset, topology_split

    rows = read_dataset(Path(out_dir))
    split, why = (split, str(split)) if split is not None else topology_split(Path(out_dir))
    ranked = ranking(rows)
    why_not = {tuple(k[:4]): k[4] for k in not_completed(rows).iter_rows()}
    table = []
    for (coll, n, size), part in ranked.partition_by(
            "collective", "numproc", "size", as_dict=True, maintain_order=True).items():
        best = part["best_time"][0]
        ratios = ", ".join(f"{r['algorithm']} {r['ratio']:.3f}" if math.isfinite(r["ratio"])
                           else f"{r['algorithm']} not completed "
                           f"({why_not.get((coll, n, size, r['algorithm']), 'no time')})"
                           for r in part.iter_rows(named=True))
        table.append([str(coll), str(n), str(size), str(part["best"][0] or "none"),
                      f"{best:.4g}" if best is not None else "-", ratios])
    found = shares(rows, within=within, split=split, seed=seed)
    xs = list(dict.fromkeys(s.within_percent for s in found))
    by_key: dict[tuple[str, str, str], dict[float, str]] = {}
    counts: dict[tuple[str, str, str], tuple[int, int]] = {}
    for s in found:
        key = (s.collective, s.algorithm, s.numprocs)
        by_key.setdefault(key, {})[s.within_percent] = share_cell(s)
        counts[key] = (s.configurations, s.left_out)
    share_rows = [[c, a, r, *map(str, counts[(c, a, r)]), *(cells.get(x, "-") for x in xs)]
                  for (c, a, r), cells in by_key.items()]
    curves: Curves = {}
    for r in point_medians(rows).drop_nulls("median").sort("numproc").iter_rows(named=True):
        ns, ts = curves.setdefault((r["collective"], r["size"]), {}).setdefault(
            r["algorithm"], ([], []))
        ns.append(int(r["numproc"]))
        ts.append(float(r["median"]) / max(1, int(r["size"])))
    return CollectivesView(
        path=Path(out_dir), ranking=table, curves=curves, found=found,
        share_headers=["collective", "algorithm", "numproc", "configs", "left out",
                       *(f"within {x:g} %" for x in xs)],
        shares=share_rows, lines=selector_lines(found),
        statistic=("time = median simulated time over repetitions (slowest rank); ratio = time "
                   "/ the best algorithm's at the same (numproc, size); share = configurations "
                   f"within X % of the best [{LEVEL:.0%} bootstrap interval over "
                   f"configurations]; numproc ranges split at {why}; {CENSORING} "
                   "{in braces}"))
