"""Adaptive vs fixed design on synthetic truth with known breaks (issue 60 item 2 targets).

For each seed: the adaptive design (kit.fit.adaptive.run_design) and the fixed log-uniform
design (rounds of the same size, all log-uniform, stopped by the same precision rule) measure
a synthetic truth with breaks at 128 B and 64 KiB (``--truth plain``: no slow band;
``ethernet``: kit.fit.synth.ethernet_like) until the same target; reported:
samples each needed (median over seeds and the ratio adaptive / fixed, target ≤ 0.5), and
the share of the adaptive design's final median intervals (at every decade's check sizes)
that hold the true median (nominal: the level, 0.95).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_adaptive.py [--seeds 20]
        [--median 0.03] [--breaks 0.10] [--round 5000]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats

from kit.fit import synth
from kit.fit.adaptive import (
    DECADE_POINTS,
    Budget,
    Design,
    Target,
    accumulate,
    decades,
    first_sizes,
    fit_round,
    precision,
    run_design,
)
from kit.model.uncertainty import bootstrap_intervals


def _measure(truth: synth.Truth, seed: int) -> Any:
    def measure(k: int, sizes: np.ndarray, reps: int) -> tuple[np.ndarray, np.ndarray]:
        s = np.repeat(sizes.astype(float), reps)
        return s, synth.generate(truth, s, np.random.default_rng([seed, k, 7]))
    return measure


def fixed(truth: synth.Truth, design: Design) -> int:
    """Log-uniform rounds of ``round_samples`` until the same precision rule is met."""
    measure = _measure(truth, design.seed)
    size, t = np.zeros(0), np.zeros(0)
    for k in range(design.budget.rounds):
        sizes, reps = first_sizes(replace(design, seed=design.seed * 7919 + k))
        s, tt = measure(k, sizes, reps)
        size, t = np.r_[size, s], np.r_[t, tt]
        if precision(fit_round(size, t, design.seed), size, t, design, k).met(design.target):
            return len(size)
    return -len(size)  # not reached within the budget


def coverage(truth: synth.Truth, design: Design, size: np.ndarray, t: np.ndarray
             ) -> tuple[int, int]:
    at = np.concatenate([np.geomspace(a, b, DECADE_POINTS)
                         for a, b in decades(design.lo, design.hi)])
    model = fit_round(size, t, design.seed)
    iv = bootstrap_intervals(model, size, t, at=at, level=design.target.level,
                             random_state=design.seed)
    true = truth.median(at)
    hit = [m["lo"] is not None and m["lo"] <= v <= m["hi"]
           for m, v in zip(iv["medians"], true, strict=True)]
    return int(sum(hit)), len(hit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first", type=int, default=1, help="first seed (to split a run)")
    ap.add_argument("--no-fixed", action="store_true",
                    help="the adaptive design and its coverage only (the fixed design is "
                    "most of the time)")
    ap.add_argument("--fixed-only", action="store_true",
                    help="the fixed design alone (seeds whose adaptive run is already known)")
    ap.add_argument("--median", type=float, default=0.03)
    ap.add_argument("--breaks", type=float, default=0.10)
    ap.add_argument("--round", type=int, default=5000)
    ap.add_argument("--truth", choices=("plain", "ethernet"), default="plain",
                    help="plain: no slow band (coverage is counted); ethernet: "
                    "synth.ethernet_like, whose band moves the median off the curve")
    args = ap.parse_args()
    truth = synth.jumps() if args.truth == "plain" else synth.ethernet_like()
    rows = []
    c0 = time.process_time()
    for seed in range(args.first, args.first + args.seeds):
        design = Design(lo=1, hi=2**22, target=Target(args.median, args.breaks),
                        budget=Budget(400_000, 40), round_samples=args.round, seed=seed)
        if args.fixed_only:
            print(f"seed {seed}: fixed {fixed(truth, design)}", flush=True)
            continue
        record, size, t = run_design(accumulate(_measure(truth, seed)), design)
        n_fixed = 0 if args.no_fixed else fixed(truth, design)
        hit, n = coverage(truth, design, size, t) if args.truth == "plain" else (0, 0)
        rows.append((record["total_samples"], n_fixed, hit, n, record["stopped"]))
        print(f"seed {seed}: adaptive {record['total_samples']} ({record['stopped']}), "
              f"fixed {n_fixed}, coverage {hit}/{n}", flush=True)
    if rows:
        print(summary(rows))
    print(f"{time.process_time() - c0:.0f} CPU-s, load {os.getloadavg()[0]:.1f}")


def summary(rows: list[tuple[int, int, int, int, str]]) -> str:
    """The per-seed ratio's median and worst, and the pooled coverage with its exact
    (Clopper-Pearson) 95 % interval; its check sizes are not independent (one regime's share
    an interval), so the interval is a lower bound on the uncertainty."""
    ratio = [a / f for a, f, *_ in rows if f > 0]
    shown = ratio or [math.nan]
    hit, n = sum(r[2] for r in rows), sum(r[3] for r in rows)
    ci = stats.binomtest(hit, n).proportion_ci(0.95) if n else None
    cov = (f"{hit}/{n} = {hit / n:.3f} (Clopper-Pearson 95 % {ci.low:.3f}-{ci.high:.3f}; "
           f"nominal 0.95), {sum(r[2] < 0.85 * r[3] for r in rows)} seeds below 0.85"
           if ci else "not counted")
    return (f"adaptive/fixed samples: median {statistics.median(shown):.2f}, worst "
            f"{max(shown):.2f}, best {min(shown):.2f}, {sum(r > 0.5 for r in ratio)} of "
            f"{len(ratio)} above 0.5 ({len(rows) - len(ratio)} seeds where fixed did not reach "
            f"it); median-interval coverage of the truth {cov}; "
            f"{sum(r[4] == 'target' for r in rows)}/{len(rows)} reached the target;")


if __name__ == "__main__":
    main()
