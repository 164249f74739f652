"""Which collective algorithm is best, and which stay close to it (issue 61, 2015 study).

Why one module: the CLI print, the JSON and any report section read these figures, so each
is computed here once.

* A configuration is (collective, numproc, size). An algorithm's time there is the median
  of its repetitions' simulated times (the slowest rank's per repetition). The **best** is
  the smallest median among the algorithms swept there, selectors included (a selector runs
  one of SMPI's algorithms, so it can only tie the best if that algorithm was swept too).
* An algorithm's **ratio** is its median over the best (1 for the best). A point that did
  not complete (timeout, memory, failed) has ratio infinity: it is never within X %.
* A point that did not complete has **no simulated time**: a timeout is the host's CPU or
  wall clock, ``memory`` the host's memory, and neither bounds the simulated time (basic_linear
  is slow to simulate because it posts every message at once, which is also what makes it fast
  in simulated time). Counting such a point as "not within" would bias the shares exactly
  where the sweep outgrows the host (large numproc), so a configuration where any algorithm
  did not complete is **left out** of the share (:func:`not_completed` lists them), and the
  output says how many per range. What they could change is bounded instead of guessed: the
  **bounds** are the share over *every* configuration of the range, lower when each missing
  time is faster than all the others (only complete configurations can count), upper when
  the missing times of the others are slower and the algorithm's own is the fastest.
* An algorithm's **share within X %** over a range of numproc is the fraction of that
  range's complete configurations (above) where its ratio is at most 1 + X/100 (so every
  share of a collective has the same denominator; ``--algorithms`` of ``analyze`` restricts
  the set, and the best, to algorithms that ran further). Its 95 % interval is a percentile
  bootstrap over configurations (the resampling unit; the same resamples for every
  algorithm), seeded. At a share of 0 or 1 every resample agrees, so there the bound away
  from it is the exact binomial (Clopper-Pearson) one, ``1 - 0.025^(1/n)``: two
  configurations all within say little. A range without a complete configuration has no
  share (NaN, ``null`` in JSON), only its bounds.
* Ranges split numproc at ``split``: ``numproc <= split`` and ``numproc > split``, plus
  ``all`` (``split`` None: ``all`` only). Where the topology changes: the sweep's cabinet
  capacity in ranks, or the 2015 study's cabinet boundary 256 on a flat platform
  (``kit.outputs.collsweep.topology_split`` says which and why).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

#: The libraries' selectors among SMPI's algorithm names: each picks an algorithm per call.
SELECTORS = ("default", "ompi", "mpich", "mvapich2", "impi", "automatic")
WITHIN = (2.0, 5.0, 10.0)
#: The 2015 study's cabinet boundary (numproc), the split on a flat platform.
SPLIT = 256
RESAMPLES = 2000
LEVEL = 0.95


@dataclass
class Share:
    """One algorithm's share of configurations within X % of the best, with its interval."""

    collective: str
    algorithm: str
    numprocs: str
    within_percent: float
    share: float  # NaN when no configuration of the range is complete
    lo: float
    hi: float
    configurations: int  # complete configurations: the denominator
    left_out: int = 0  # configurations of the range where some algorithm did not complete
    bound_lo: float = math.nan  # the share over all of the range's configurations, at worst
    bound_hi: float = math.nan  # ... and at best, whatever the missing times are

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v)
                for k, v in asdict(self).items()}


#: The censoring rule in one sentence, printed by every surface that shows the shares.
CENSORING = ("a point that did not complete (timeout, memory, failed) has no simulated time: "
             "configurations where one did not are left out of the shares; bounds = the share "
             "over all of the range's configurations, whatever the missing times are")


def point_medians(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per point: the median simulated time (null unless every repetition ran)."""
    return (rows.group_by("collective", "algorithm", "numproc", "size")
            .agg(pl.col("time").median().alias("median"), pl.len().alias("reps"),
                 (pl.col("status") == "ok").all().alias("ok"))
            .with_columns(pl.when(pl.col("ok")).then(pl.col("median")).alias("median")))


def ranking(rows: pl.DataFrame) -> pl.DataFrame:
    """Per point: the best algorithm of its configuration, the best time and its ratio."""
    pts = point_medians(rows)
    keys = ["collective", "numproc", "size"]
    best = (pts.filter(pl.col("median").is_not_null()).sort("median", "algorithm")
            .group_by(keys, maintain_order=True)
            .agg(pl.col("algorithm").first().alias("best"),
                 pl.col("median").first().alias("best_time")))
    return (pts.join(best, on=keys, how="left")
            .with_columns(pl.when(pl.col("median").is_not_null())
                          .then(pl.col("median") / pl.col("best_time"))
                          .otherwise(math.inf).alias("ratio"))
            .sort([*keys, "ratio", "algorithm"]))


def _ranges(numprocs: np.ndarray, split: int | None) -> list[tuple[str, np.ndarray]]:
    out = [("all", np.ones(numprocs.size, dtype=bool))]
    if split is None:
        return out
    low = numprocs <= split
    if low.any() and (~low).any():
        out += [(f"<={split}", low), (f">{split}", ~low)]
    return out


def not_completed(rows: pl.DataFrame) -> pl.DataFrame:
    """Per configuration, the algorithms whose point did not complete and why (its first
    status other than ``ok``), sorted by collective, numproc, size, algorithm."""
    return (rows.group_by("collective", "numproc", "size", "algorithm")
            .agg(pl.col("status").filter(pl.col("status") != "ok").first())
            .drop_nulls("status").sort("collective", "numproc", "size", "algorithm"))


def shares(rows: pl.DataFrame, *, within: tuple[float, ...] = WITHIN,
           split: int | None = SPLIT, resamples: int = RESAMPLES, seed: int = 1,
           algorithms: tuple[str, ...] | None = None) -> list[Share]:
    """Every algorithm's share within each X %, per numproc range (see the module doc);
    ``algorithms``: only these (the best is then the best of them)."""
    if algorithms is not None:
        rows = rows.filter(pl.col("algorithm").is_in(list(algorithms)))
    ranked = ranking(rows)
    out: list[Share] = []
    rng = np.random.default_rng(seed)
    for (collective,), part in ranked.partition_by("collective", as_dict=True,
                                                   maintain_order=True).items():
        algs = sorted(part["algorithm"].unique().to_list())
        # every algorithm has a point here (a configuration not yet swept is not censored)
        wide = part.pivot(on="algorithm", index=["numproc", "size"], values="ratio").drop_nulls()
        if wide.height == 0:
            continue
        every = wide.select(algs).to_numpy().astype(float)  # configurations x algorithms
        complete = np.isfinite(every).all(axis=1)
        for label, mask in _ranges(wide["numproc"].to_numpy(), split):
            r_all, done = every[mask], complete[mask]
            r, big_n = r_all[done], r_all.shape[0]
            n = r.shape[0]
            draws = rng.integers(0, n, size=(resamples, n)) if n else None
            for x in within:
                seen = r_all <= 1.0 + x / 100.0  # within among what completed (inf: never)
                low = (seen & done[:, None]).sum(axis=0) / big_n
                high = (seen | ~np.isfinite(r_all)).sum(axis=0) / big_n
                share = lo = hi = np.full(len(algs), math.nan)
                if draws is not None:
                    ok = (r <= 1.0 + x / 100.0).astype(float)
                    share = ok.mean(axis=0)
                    boot = ok[draws].mean(axis=1)  # resamples x algorithms
                    lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
                    # no spread to resample at 0/n or n/n: the exact (Clopper-Pearson) bound
                    edge = ((1 - LEVEL) / 2) ** (1.0 / n)
                    hi = np.where(ok.sum(axis=0) == 0, 1.0 - edge, hi)
                    lo = np.where(ok.sum(axis=0) == n, edge, lo)
                for j, alg in enumerate(algs):
                    out.append(Share(str(collective), alg, label, x, float(share[j]),
                                     float(lo[j]), float(hi[j]), n, big_n - n,
                                     float(low[j]), float(high[j])))
    return out


def share_cell(s: Share) -> str:
    """A share as every table prints it: ``0.87 [0.67, 1.00]``, and the bounds when some
    configuration was left out (``{0.40-0.95}``); ``-`` without a complete configuration."""
    text = f"{s.share:.2f} [{s.lo:.2f}, {s.hi:.2f}]" if s.configurations else "-"
    return text + (f" {{{s.bound_lo:.2f}-{s.bound_hi:.2f}}}" if s.left_out else "")


def selector_lines(found: list[Share]) -> list[str]:
    """The selectors' irregularity, one sentence each: in how many configurations (of the
    range ``all``) the algorithm a selector picks is more than X % slower than the best."""
    out = []
    for s in found:
        if s.algorithm in SELECTORS and s.numprocs == "all" and s.configurations:
            slower = round((1 - s.share) * s.configurations)
            out.append(f"{s.collective} selector {s.algorithm}: more than {s.within_percent:g} % "
                       f"slower than the best in {slower} of {s.configurations} configurations "
                       f"(share within {s.share:.2f} [{s.lo:.2f}, {s.hi:.2f}])"
                       + (f"; {s.left_out} configurations left out: an algorithm did not "
                          "complete there" if s.left_out else ""))
    return out
