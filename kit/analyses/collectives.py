"""Which collective algorithm is best, and which stay close to it (issue 61, 2015 study).

Why one module: the CLI print, the JSON and any report section read these figures, so each
is computed here once.

* A configuration is (collective, numproc, size). An algorithm's time there is the median
  of its repetitions' simulated times (the slowest rank's per repetition). The **best** is
  the smallest median among the algorithms swept there, selectors included (a selector runs
  one of SMPI's algorithms, so it can only tie the best if that algorithm was swept too).
* An algorithm's **ratio** is its median over the best (1 for the best). A point that did
  not complete (timeout, memory, failed) has ratio infinity: it is never within X %.
* An algorithm's **share within X %** over a range of numproc is the fraction of that
  range's configurations where its ratio is at most 1 + X/100; only configurations where
  every algorithm of the collective has a point count (so every share has the same
  denominator). Its 95 % interval is a percentile bootstrap over configurations (the
  resampling unit; the same resamples for every algorithm), seeded. At a share of 0 or 1
  every resample agrees, so there the bound away from it is the exact binomial
  (Clopper-Pearson) one, ``1 - 0.025^(1/n)``: two configurations all within say little.
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
    share: float
    lo: float
    hi: float
    configurations: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def shares(rows: pl.DataFrame, *, within: tuple[float, ...] = WITHIN,
           split: int | None = SPLIT,
           resamples: int = RESAMPLES, seed: int = 1) -> list[Share]:
    """Every algorithm's share within each X %, per numproc range (see the module doc)."""
    ranked = ranking(rows).filter(pl.col("best").is_not_null())
    out: list[Share] = []
    rng = np.random.default_rng(seed)
    for (collective,), part in ranked.partition_by("collective", as_dict=True,
                                                   maintain_order=True).items():
        algorithms = sorted(part["algorithm"].unique().to_list())
        wide = part.pivot(on="algorithm", index=["numproc", "size"], values="ratio").drop_nulls()
        if wide.height == 0:
            continue
        ratios = wide.select(algorithms).to_numpy()  # configurations x algorithms
        numprocs = wide["numproc"].to_numpy()
        for label, mask in _ranges(numprocs, split):
            r = ratios[mask]
            n = r.shape[0]
            draws = rng.integers(0, n, size=(resamples, n))
            for x in within:
                ok = (r <= 1.0 + x / 100.0).astype(float)
                boot = ok[draws].mean(axis=1)  # resamples x algorithms
                lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
                # no spread to resample at 0/n or n/n: the exact (Clopper-Pearson) bound
                edge = ((1 - LEVEL) / 2) ** (1.0 / n)
                hi = np.where(ok.sum(axis=0) == 0, 1.0 - edge, hi)
                lo = np.where(ok.sum(axis=0) == n, edge, lo)
                for j, alg in enumerate(algorithms):
                    out.append(Share(str(collective), alg, label, x, float(ok[:, j].mean()),
                                     float(lo[j]), float(hi[j]), n))
    return out


def selector_lines(found: list[Share]) -> list[str]:
    """The selectors' irregularity, one sentence each: in how many configurations (of the
    range ``all``) the algorithm a selector picks is more than X % slower than the best."""
    out = []
    for s in found:
        if s.algorithm in SELECTORS and s.numprocs == "all":
            slower = round((1 - s.share) * s.configurations)
            out.append(f"{s.collective} selector {s.algorithm}: more than {s.within_percent:g} % "
                       f"slower than the best in {slower} of {s.configurations} configurations "
                       f"(share within {s.share:.2f} [{s.lo:.2f}, {s.hi:.2f}])")
    return out
