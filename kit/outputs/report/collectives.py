"""The collective-algorithm study as a page: ``pt2pt collectives analyze OUT --report DIR``.

Why a page of its own: a sweep is not a point-to-point dataset (no ingest, no models), so it
does not fit ``pt2pt report DATASET``'s sections. The figures are the 2015 study's, drawn from
:mod:`kit.analyses.collectives` (the same numbers the CLI prints):

* time / size against numproc per algorithm, one panel per size, log axes (a straight line
  of slope 1 is a cost linear in numproc per byte);
* each algorithm's share of configurations within X % of the best, with its 95 % interval,
  per numproc range.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

from kit.analyses.collectives import (
    CENSORING,
    Share,
    not_completed,
    ranking,
    selector_lines,
    share_cell,
)
from kit.core.atomicwrite import make_dirs, save_png, write_text
from kit.core.paths import PACKAGE_DIR

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl
from jinja2 import Environment, FileSystemLoader

TEMPLATE_DIR = PACKAGE_DIR / "templates" / "report"


def _size(v: int) -> str:
    for unit, step in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= step and v % step == 0:
            return f"{v // step} {unit}"
    return f"{v} B"


def times_plot(path: Path, ranked: pl.DataFrame, collective: str) -> Path:
    part = ranked.filter((pl.col("collective") == collective) & pl.col("median").is_not_null())
    sizes = sorted(part["size"].unique().to_list())
    cols = min(3, max(1, len(sizes)))
    rows = math.ceil(len(sizes) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, size in zip(axes.flat, sizes, strict=False):
        at = part.filter(pl.col("size") == size)
        for alg in sorted(at["algorithm"].unique().to_list()):
            s = at.filter(pl.col("algorithm") == alg).sort("numproc")
            ax.plot(s["numproc"], s["median"] / max(size, 1), marker="o", ms=3, label=alg)
        ax.set(yscale="log", title=f"{collective}, {_size(size)}", xlabel="numproc",
               ylabel="median simulated time / size (s/B)")
        ax.set_xscale("log", base=2)
        ticks = sorted(at["numproc"].unique().to_list())
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(sizes):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return save_png(fig, path, dpi=100)


def shares_plot(path: Path, found: list[Share], collective: str) -> Path:
    mine = [s for s in found if s.collective == collective]
    ranges = list(dict.fromkeys(s.numprocs for s in mine))
    algs = sorted({s.algorithm for s in mine})
    xs = list(dict.fromkeys(s.within_percent for s in mine))
    fig, axes = plt.subplots(1, len(ranges), figsize=(4.5 * len(ranges), 0.35 * len(algs) + 1.6),
                             squeeze=False, sharey=True)
    for ax, label in zip(axes[0], ranges, strict=True):
        for k, x in enumerate(xs):
            pts = [s for s in mine if s.numprocs == label and s.within_percent == x]
            pts.sort(key=lambda s: algs.index(s.algorithm))
            y = [algs.index(s.algorithm) + (k - (len(xs) - 1) / 2) * 0.22 for s in pts]
            out = [(yy, s) for yy, s in zip(y, pts, strict=True) if s.left_out]
            if out:  # what the left-out configurations could make the share over all
                ax.hlines([yy for yy, _ in out], [s.bound_lo for _, s in out],
                          [s.bound_hi for _, s in out], colors="grey", lw=5, alpha=0.3,
                          label="bounds (left out)" if k == 0 else None)
            y = [yy for yy, s in zip(y, pts, strict=True) if s.configurations]
            pts = [s for s in pts if s.configurations]
            ax.errorbar([s.share for s in pts], y,
                        xerr=[[s.share - s.lo for s in pts], [s.hi - s.share for s in pts]],
                        fmt="o", ms=4, capsize=2, label=f"within {x:g} %")
        n, gone = next(((s.configurations, s.left_out) for s in mine if s.numprocs == label),
                       (0, 0))
        ax.set(xlim=(-0.02, 1.02), title=f"numproc {label} ({n} configurations"
               + (f", {gone} left out)" if gone else ")"),
               xlabel="share of configurations (95 % interval)")
        ax.set_yticks(range(len(algs)), algs)
        ax.grid(True, axis="x", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=len(labels))
    fig.tight_layout(rect=(0, 0.35 / (0.35 * len(algs) + 1.6), 1, 1))  # room for the legend
    return save_png(fig, path, dpi=100)


def write_report(out_dir: Path, rows: pl.DataFrame, found: list[Share], *, source: str,
                 within: list[float], split: str) -> Path:
    """``index.html`` and one pair of PNGs per collective, into ``out_dir``; ``split`` says
    where the numproc ranges split and why (``topology_split``'s text)."""
    make_dirs(out_dir)
    ranked = ranking(rows)
    missing = not_completed(rows)
    parts = []
    for collective in sorted(ranked["collective"].unique().to_list()):
        times_plot(out_dir / f"{collective}-times.png", ranked, collective)
        shares_plot(out_dir / f"{collective}-shares.png", found, collective)
        table: dict[tuple[str, str], dict[float, Share]] = {}
        for s in found:
            if s.collective == collective:
                table.setdefault((s.numprocs, s.algorithm), {})[s.within_percent] = s
        best = (ranked.filter((pl.col("collective") == collective) & (pl.col("ratio") == 1.0))
                .group_by("numproc", "size").agg(pl.col("algorithm").sort().str.join(", "))
                .sort("numproc", "size"))
        status = (rows.filter(pl.col("collective") == collective)
                  .unique(["algorithm", "numproc", "size"]).group_by("status").len()
                  .sort("status"))
        parts.append({
            "name": collective,
            "shares": [{"numprocs": k[0], "algorithm": k[1],
                        "n": next(iter(v.values())).configurations,
                        "left_out": next(iter(v.values())).left_out,
                        "cells": [share_cell(v[x]) for x in within]}
                       for k, v in table.items()],
            "missing": [(n, _size(size), ", ".join(f"{r['algorithm']} {r['status']}"
                                                    for r in part.iter_rows(named=True)))
                        for (n, size), part in missing.filter(
                            pl.col("collective") == collective).partition_by(
                            "numproc", "size", as_dict=True, maintain_order=True).items()],
            "best": [(r["numproc"], _size(r["size"]), r["algorithm"])
                     for r in best.iter_rows(named=True)],
            "selectors": [ln for ln in selector_lines(found) if ln.startswith(collective + " ")],
            "status": ", ".join(f"{r['len']} {r['status']}" for r in status.iter_rows(named=True)),
        })
    env = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    html = env.get_template("collectives.html.j2").render(
        source=source, parts=parts, within=within, split=split, censoring=CENSORING)
    return write_text(out_dir / "index.html", html)
