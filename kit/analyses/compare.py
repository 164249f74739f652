"""Which transport (or tool, or MPI library) is fastest at which message size.

The question users ask of a campaign is rarely "what is the latency" but "when is
transport A as good as B". A single average hides that the answer changes with size, so
sizes are cut into narrow log-spaced bins (10 per decade by default: powers of two land in
separate bins), and in each bin every series' median is compared with the best median.
A series is *within X %* when its median is at most (1 + X/100) times the best. The share
of bins in which a series is within X % is the one-number summary, counted only over bins
where it was measured next to at least one other series.

Raw samples are used where a series has them; tools that only print aggregates (OSU,
SKaMPI) contribute their per-size ``mean`` rows instead, which the table marks.

How sure: each share comes with a 95 % bootstrap interval. A replicate redraws every bin's
median from its samples (the bootstrap median of n sorted samples is the order statistic of
rank about n/2 + z·sqrt(n)/2, z standard normal, which is what is drawn), recomputes the best
and the within-X % flags, and the share; the interval is the 2.5-97.5 % range of the
replicates. A share of 60 % [35, 80] says the ranking in the contested bins is not settled.

A second dimension (``per``: placement, MPI library, number of pairs, ...) repeats the
comparison for each of its values, as the seed analysis of collectives did per node count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kit.core.atomicwrite import make_dirs, replacing, save_png
from kit.core.errors import UserError
from kit.data.schema import pairs_label

COMPARE_BY = {"transport": "transport", "tool": "tool", "mpi": "mpi_version",
              "campaign": "campaign", "op": "op", "placement": "placement",
              "host_pair": "host_pair", "pairs": "pairs"}
#: Bootstrap replicates of the share intervals.
SHARE_BOOT = 200


@dataclass
class Comparison:
    """Result of :func:`compare`: per-bin table, per-series shares, and the settings."""

    by: str
    within_pct: float
    bins: pl.DataFrame  # size_lo, size_hi, size_mid, <series median columns>, best, within
    shares: pl.DataFrame  # series, n_bins, n_within, share, share_lo, share_hi, stat
    series: list[str]
    group: str | None = None  # "placement=inter-node" when one of several per-groups

    def write(self, out_dir: Path) -> list[Path]:
        """``compare-bins.csv``, ``compare-shares.csv`` and ``compare.png`` in ``out_dir``."""
        make_dirs(out_dir)
        tag = ""
        if self.group:
            tag = "-" + "".join(c if c.isalnum() or c in "=._" else "_" for c in self.group)
        paths = [out_dir / f"compare{tag}-bins.csv", out_dir / f"compare{tag}-shares.csv",
                 out_dir / f"compare{tag}.png"]
        for frame, path in zip((self.bins, self.shares), paths[:2], strict=False):
            with replacing(path) as tmp:
                frame.write_csv(tmp)
        plot_comparison(self, paths[2])
        return paths


def _pick_rows(frame: pl.DataFrame, key: str) -> tuple[pl.DataFrame, dict[str, str]]:
    """Raw rows per series where there are any, else its ``mean`` rows; kit.data.dataset's
    row rule (no warm-up, finite times) on frames that did not come through it."""
    from kit.data.dataset import series_predicate

    if "warmup" in frame.columns:
        frame = frame.filter(series_predicate(aggregates=True))
    name = pl.col(key).cast(pl.String).fill_null("unknown")
    if (key not in ("placement", "host_pair") and "placement" in frame.columns
            and frame["placement"].n_unique() > 1):
        # Intra- and inter-node rows of one transport are two series, never pooled.
        name = name + " @ " + pl.col("placement").cast(pl.String).fill_null("unknown")
    if key != "pairs" and "pairs" in frame.columns and frame["pairs"].n_unique() > 1:
        # k concurrent pairs share the network: each k is its own series (k = 1 unnamed).
        labels = {k: pairs_label(k) for k in frame["pairs"].unique().to_list()}
        suffix = pl.col("pairs").replace_strict(labels, return_dtype=pl.String)
        name = pl.when(suffix == "").then(name).otherwise(name + ", " + suffix)
    frame = frame.with_columns(name.alias("series"), pl.col("stat").cast(pl.String))
    kinds: dict[str, str] = {}
    parts = []
    for name in sorted(frame["series"].unique().to_list()):
        rows = frame.filter(pl.col("series") == name)
        for stat in ("raw", "median", "mean"):
            chosen = rows.filter(pl.col("stat") == stat)
            if chosen.height:
                kinds[name] = stat
                parts.append(chosen.select("series", "size", "time"))
                break
    if not parts:
        raise UserError("no raw, median or mean rows to compare",
                        hint="ingest raw probe output or OSU/SKaMPI results first")
    return pl.concat(parts), kinds


def _boot_medians(sorted_times: list[np.ndarray], n_boot: int,
                  rng: np.random.Generator) -> np.ndarray:
    """(n_boot, len(sorted_times)) bootstrap medians, one column per cell (see the docstring)."""
    out = np.empty((n_boot, len(sorted_times)))
    for j, arr in enumerate(sorted_times):
        n = len(arr)
        z = rng.standard_normal(n_boot)
        k = np.clip(np.rint((n - 1) / 2 + z * np.sqrt(n) / 2), 0, n - 1).astype(np.int64)
        out[:, j] = arr[k]
    return out


def compare(frame: pl.DataFrame, *, by: str = "transport", within: float = 5.0,
            bins_per_decade: int = 10, n_boot: int = SHARE_BOOT, seed: int = 0) -> Comparison:
    """Compare the series of ``frame`` (samples table, plus ``mpi_version`` for by=mpi)."""
    if by not in COMPARE_BY:
        raise UserError(f"cannot compare by '{by}'", where="option --by",
                        hint=f"use one of {', '.join(COMPARE_BY)}")
    if not within >= 0:
        raise UserError(f"--within {within} is negative", where="option --within",
                        hint="give a percentage such as 5")
    key = COMPARE_BY[by]
    if key not in frame.columns:
        raise UserError(f"the data has no '{key}' column", where="option --by",
                        hint="for --by mpi the dataset's runs table must be present")
    rows, kinds = _pick_rows(frame, key)
    rows = rows.filter(pl.col("time").is_finite() & (pl.col("time") > 0))
    series = sorted(rows["series"].unique().to_list())
    if len(series) < 2:
        raise UserError(f"only one {by} in the data ({', '.join(series) or 'none'}); "
                        "nothing to compare", where="option --by",
                        hint="select a dataset or campaign with several of them, or another --by")
    size = rows["size"].cast(pl.Float64)
    cell = (pl.when(size > 0).then((size.log10() * bins_per_decade).floor())
            .otherwise(-1.0)).alias("cell")
    med = (rows.with_columns(cell)
           .group_by("cell", "series")
           .agg(pl.col("time").median().alias("median"), pl.len().alias("n"),
                pl.col("time").sort().alias("sorted"))
           .sort("cell"))
    wide = med.pivot(on="series", index="cell", values="median").sort("cell")
    for s in series:
        if s not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(s))
    values = wide.select(series).to_numpy().astype(np.float64)
    cells = wide["cell"].to_numpy()
    best = np.nanmin(np.where(np.isnan(values), np.inf, values), axis=1)
    ok = values <= best[:, None] * (1.0 + within / 100.0)
    present = ~np.isnan(values)
    lo = np.where(cells < 0, 0.0, 10.0 ** (cells / bins_per_decade))
    hi = np.where(cells < 0, 1.0, 10.0 ** ((cells + 1) / bins_per_decade))
    within_names = [", ".join(s for s, w in zip(series, row, strict=True) if w) for row in ok]
    bins = pl.DataFrame({"size_lo": lo, "size_hi": hi,
                         "size_mid": np.where(cells < 0, 0.0, np.sqrt(lo * hi))})
    bins = bins.with_columns(*[pl.Series(s, values[:, i]) for i, s in enumerate(series)],
                             pl.Series("best", best), pl.Series("within", within_names))
    contested = present.sum(axis=1) >= 2
    boot = _share_replicates(med, cells, series, within, n_boot, seed) & contested[None, :, None]
    share_rows = []
    for i, s in enumerate(series):
        n_bins = int((present[:, i] & contested).sum())
        n_within = int((ok[:, i] & contested).sum())
        reps = boot[:, :, i].sum(axis=1) / n_bins if n_bins else np.full(1, math.nan)
        q_lo, q_hi = (np.quantile(reps, [0.025, 0.975]) if n_bins else (math.nan, math.nan))
        share_rows.append({"series": s, "n_bins": n_bins, "n_within": n_within,
                           "share": n_within / n_bins if n_bins else math.nan,
                           "share_lo": float(q_lo), "share_hi": float(q_hi),
                           "stat": kinds[s]})
    shares = pl.DataFrame(share_rows).sort("share", descending=True, nulls_last=True)
    return Comparison(by=by, within_pct=within, bins=bins, shares=shares, series=series)


def _share_replicates(med: pl.DataFrame, cells: np.ndarray, series: list[str], within: float,
                      n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, cells, series) within-X % flags of bootstrap replicates of every bin median."""
    rng = np.random.default_rng(seed)
    col = {c: i for i, c in enumerate(cells.tolist())}
    ser = {s: i for i, s in enumerate(series)}
    reps = np.full((max(n_boot, 1), len(cells), len(series)), np.nan)
    arrays = [np.asarray(a, dtype=np.float64) for a in med["sorted"].to_list()]
    draws = _boot_medians(arrays, max(n_boot, 1), rng)
    for j, (c, s) in enumerate(zip(med["cell"].to_list(), med["series"].to_list(),
                                   strict=True)):
        reps[:, col[c], ser[s]] = draws[:, j]
    best = np.nanmin(np.where(np.isnan(reps), np.inf, reps), axis=2)
    return reps <= best[:, :, None] * (1.0 + within / 100.0)


def compare_per(frame: pl.DataFrame, *, by: str, per: str, **kwargs: Any) -> list[Comparison]:
    """One :func:`compare` per value of the second dimension ``per`` (skipping lone values)."""
    if per not in COMPARE_BY:
        raise UserError(f"cannot split by '{per}'", where="option --per",
                        hint=f"use one of {', '.join(COMPARE_BY)}")
    if per == by:
        raise UserError("--per must differ from --by", where="option --per",
                        hint="e.g. --by transport --per placement")
    key = COMPARE_BY[per]
    if key not in frame.columns:
        raise UserError(f"the data has no '{key}' column", where="option --per",
                        hint="ingest with a kit version that records it, or choose another")
    out = []
    skipped = []
    for value in sorted(frame[key].cast(pl.String).fill_null("unknown").unique().to_list()):
        part = frame.filter(pl.col(key).cast(pl.String).fill_null("unknown") == value)
        try:
            result = compare(part, by=by, **kwargs)
        except UserError:
            skipped.append(value)
            continue
        result.group = f"{per}={value}"
        out.append(result)
    if not out:
        raise UserError(f"no value of {per} has two or more {by}s to compare "
                        f"({', '.join(skipped)})", where="option --per",
                        hint="drop --per or choose another dimension")
    return out


def load_frame(dataset: Path, *, by: str, op: str | None = None,
               campaign: str | None = None, per: str | None = None,
               series: dict[str, str] | None = None) -> pl.DataFrame:
    """Samples of ``dataset`` for one op (pingpong by default when several), MPI joined.

    Rows are kit.data.dataset's selection (aggregates allowed: :func:`compare` prefers raw rows
    per series and marks the others), narrowed by ``series`` (any series keys).
    """
    from kit.data import dataset as ds

    lf = ds.series_rows(dataset, series, aggregates=True)
    if campaign is not None:
        lf = lf.filter(pl.col("campaign") == campaign)
    ops = lf.select(pl.col("op").cast(pl.String).unique()).collect()["op"].to_list()
    if op is None:
        if len(ops) == 1:
            op = ops[0]
        elif "pingpong" in ops:
            op = "pingpong"
        else:
            raise UserError(f"{dataset} holds several operations ({', '.join(sorted(ops))})",
                            where="option --op", hint="choose one with --op")
    elif op not in ops:
        raise UserError(f"operation '{op}' is not in {dataset} (has {', '.join(sorted(ops))})",
                        where="option --op", hint="pick one of those")
    frame = lf.filter(pl.col("op").cast(pl.String) == op).collect()
    if by == "mpi" or per == "mpi":
        runs = ds.runs(dataset).select("run_id", "mpi_version")
        frame = frame.join(runs, on="run_id", how="left")
    return frame


def plot_comparison(result: Comparison, path: Path) -> None:
    """Medians per bin (top) and their ratio to the best median (bottom), log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 7), sharex=True,
                                   gridspec_kw={"height_ratios": [2, 1]})
    x = np.maximum(result.bins["size_mid"].to_numpy(), 0.5)
    best = result.bins["best"].to_numpy()
    for s in result.series:
        y = result.bins[s].to_numpy().astype(np.float64)
        ax1.plot(x, y, marker="o", ms=3, lw=1, label=s)
        ax2.plot(x, y / best, marker="o", ms=3, lw=1, label=s)
    ax2.axhline(1 + result.within_pct / 100, color="k", ls="--", lw=0.8,
                label=f"within {result.within_pct:g} %")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_ylabel("median time [s]")
    ax1.legend(title=result.by, fontsize=8)
    ax2.set_xscale("log")
    ax2.set_xlabel("message size [B]")
    ax2.set_ylabel("median / best")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def summary_lines(result: Comparison) -> list[str]:
    """Plain-text lines for the terminal: the shares, then the per-bin winners."""
    group = f" [{result.group}]" if result.group else ""
    out = [f"share of size bins within {result.within_pct:g} % of the best median "
           f"(by {result.by}){group}, with its 95 % bootstrap interval:"]
    for r in result.shares.iter_rows(named=True):
        if r["share"] is None or math.isnan(r["share"]):
            share = "  n/a"
        else:
            share = f"{r['share']:>4.0%} [{r['share_lo']:.0%}, {r['share_hi']:.0%}]"
        note = "" if r["stat"] == "raw" else f"  ({r['stat']} rows)"
        out.append(f"  {r['series']:<24} {share:>17}  ({r['n_within']}/{r['n_bins']} bins){note}")
    out.append("size_lo,size_hi,best_s,within")
    for r in result.bins.iter_rows(named=True):
        out.append(f"{r['size_lo']:.6g},{r['size_hi']:.6g},{r['best']:.6g},\"{r['within']}\"")
    return out


def as_dict(result: Comparison) -> dict[str, Any]:
    """JSON-friendly form (for the report)."""
    return {"by": result.by, "within_pct": result.within_pct, "group": result.group,
            "shares": result.shares.to_dicts(), "bins": result.bins.to_dicts()}
