"""Does the simulated ranking of collective algorithms agree with the real one? (issue 61)

Why only where the real difference exceeds the noise: two algorithms whose real times are
within their run-to-run noise have no real order to agree with, and counting them would
reward a simulator for a coin toss. The figures, each computed here once:

* Per configuration (collective, numproc, size) and algorithm, the real and the simulated
  time are the **medians of the repetitions** (the slowest rank's time per repetition).
* For each pair of algorithms (a, b) in a configuration, the real **ratio** median(a) /
  median(b) with a 95 % percentile bootstrap interval (each algorithm's repetitions
  resampled on their own, seeded). The pair is **decided** when the interval excludes 1:
  the measured difference exceeds the noise; otherwise it is ``undecided`` and not compared.
* The simulated ratio and its interval the same way. A decided pair **agrees** when the
  simulated ratio lies on the same side of 1 as the real one and its interval excludes 1;
  it **disagrees** when the simulated interval lies wholly on the other side; otherwise the
  simulation calls it a tie (``simulated tie``: it cannot rank what is measurably ranked,
  counted as not agreeing).
* The **agreement** is agrees / decided pairs, with the exact binomial (Clopper-Pearson)
  95 % interval: pairs are few (3 algorithms x 3 numprocs x a few sizes).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy.stats import binomtest

RESAMPLES = 2000
LEVEL = 0.95
VERDICTS = ("agrees", "disagrees", "simulated tie", "undecided")


@dataclass
class PairVerdict:
    """One pair of algorithms in one configuration: real and simulated ratios, the verdict."""

    collective: str
    numproc: int
    size: int
    a: str
    b: str
    real_ratio: float
    real_lo: float
    real_hi: float
    sim_ratio: float
    sim_lo: float
    sim_hi: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Agreement:
    """The share of decided pairs where the simulation orders the algorithms as measured."""

    decided: int
    agrees: int
    disagrees: int
    simulated_ties: int
    undecided: int
    share: float
    lo: float
    hi: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(x: np.ndarray, y: np.ndarray, rng: np.random.Generator,
           resamples: int) -> tuple[float, float, float]:
    bx = np.median(x[rng.integers(0, x.size, (resamples, x.size))], axis=1)
    by = np.median(y[rng.integers(0, y.size, (resamples, y.size))], axis=1)
    lo, hi = np.quantile(bx / by, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(np.median(x) / np.median(y)), float(lo), float(hi)


def verdicts(real: pl.DataFrame, simulated: pl.DataFrame, *, resamples: int = RESAMPLES,
             seed: int = 1) -> list[PairVerdict]:
    """Every pair of algorithms in every configuration both frames have (columns
    collective, algorithm, numproc, size, time: one row per repetition)."""
    keys = ["collective", "numproc", "size"]
    rng = np.random.default_rng(seed)

    def groups(frame: pl.DataFrame) -> dict[tuple[Any, ...], dict[str, np.ndarray]]:
        out: dict[tuple[Any, ...], dict[str, np.ndarray]] = {}
        for key, part in frame.drop_nulls("time").group_by([*keys, "algorithm"],
                                                           maintain_order=True):
            out.setdefault(tuple(key[:3]), {})[str(key[3])] = part["time"].to_numpy()
        return out

    r, s = groups(real), groups(simulated)
    out = []
    for config in sorted(set(r) & set(s)):
        algs = sorted(set(r[config]) & set(s[config]))
        for a, b in itertools.combinations(algs, 2):
            rr = _ratio(r[config][a], r[config][b], rng, resamples)
            sr = _ratio(s[config][a], s[config][b], rng, resamples)
            if rr[1] <= 1.0 <= rr[2]:
                verdict = "undecided"
            elif sr[1] <= 1.0 <= sr[2]:
                verdict = "simulated tie"
            else:
                verdict = "agrees" if (rr[0] > 1) == (sr[0] > 1) else "disagrees"
            out.append(PairVerdict(str(config[0]), int(config[1]), int(config[2]), a, b,
                                   *rr, *sr, verdict))
    return out


def agreement(found: list[PairVerdict]) -> Agreement:
    """Agreement over the decided pairs, with its exact binomial interval."""
    count = {v: sum(p.verdict == v for p in found) for v in VERDICTS}
    decided = len(found) - count["undecided"]
    if decided == 0:
        share, lo, hi = float("nan"), 0.0, 1.0
    else:
        ci = binomtest(count["agrees"], decided).proportion_ci(LEVEL, method="exact")
        share, lo, hi = count["agrees"] / decided, float(ci.low), float(ci.high)
    return Agreement(decided, count["agrees"], count["disagrees"], count["simulated tie"],
                     count["undecided"], share, lo, hi)
