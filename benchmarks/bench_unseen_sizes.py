"""Sizes the model never saw, over many hold-outs (issue 15: "no worse than today").

``bench_engine_v2.py`` holds out one random 30 % of the sizes (seed 0). Which sizes fall out
moves the median error by more than the engines differ, so one draw cannot say "worse"
or "better". Here every run is scored on ``--seeds`` hold-outs; the same held-out sizes go to
the kit in this checkout and, with ``--compare DIR``, to the kit package in DIR (e.g.
``git archive 3cedc7e kit | tar -x -C /tmp/old``, wave 1's engine) in a child process.

Per run and engine: median over seeds of the unseen-size median error (median over held-out
sizes of |model median / held-out median - 1|), mean W1 / median, and [p05, p95] coverage;
then how many seeds each engine wins on the median error, and a paired sign test.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_unseen_sizes.py [--seeds 10]
        [--runs graphene,taurus] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent


def scores(runs: list[str], seeds: int) -> dict[str, list[dict[str, float]]]:
    """Unseen-size figures of the ``kit`` first on sys.path, per run and seed."""
    sys.path.insert(0, str(HERE))
    from bench_engine_v2 import CAL, RUNS, read_pingpong, unseen_sizes

    out: dict[str, list[dict[str, float]]] = {}
    for name in runs:
        s, t = read_pingpong(CAL / RUNS[name])
        out[name] = [unseen_sizes(s, t, seed) for seed in range(seeds)]
    return out


def child(path: str, runs: list[str], seeds: int) -> dict[str, list[dict[str, float]]]:
    from with_kit import call

    return call(path, "bench_unseen_sizes", "scores", runs, seeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="graphene,taurus,stampede,sirocco,taurus-loopback,"
                    "stampede-shm")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--compare", metavar="DIR", help="also score the kit package in DIR")
    args = ap.parse_args()
    runs = args.runs.split(",")
    print(f"load average at start {os.getloadavg()}")
    now = child(str(HERE.parent), runs, args.seeds)
    old = child(args.compare, runs, args.seeds) if args.compare else None
    print("| run | engine | unseen med err (median over seeds; range) | unseen W1/med "
          "| unseen coverage | seeds won on med err | sign test p |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name in runs:
        for label, res in (("this", now), ("before", old)):
            if res is None:
                continue
            rows = res[name]
            err = [r["unseen_med_err"] for r in rows]
            won, p = "", ""
            if old is not None:
                mine = np.array(err)
                other = np.array([r["unseen_med_err"] for r in (old if label == "this"
                                                                 else now)[name]])
                wins = int(np.sum(mine < other))
                ties = int(np.sum(mine == other))
                won = f"{wins} of {len(err) - ties}"
                if len(err) - ties:
                    p = f"{stats.binomtest(wins, len(err) - ties).pvalue:.2f}"
            print(f"| {name} | {label} | {100 * statistics.median(err):.2f} % "
                  f"({100 * min(err):.2f}-{100 * max(err):.2f}) "
                  f"| {statistics.median(r['unseen_w1'] for r in rows):.3f} "
                  f"| {statistics.median(r['unseen_coverage'] for r in rows):.3f} | {won} | {p} |")


if __name__ == "__main__":
    main()
