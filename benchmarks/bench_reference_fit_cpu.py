"""CPU seconds of one whole-run fit of each shared reference run (issue 15: <= 1 s at 33 k).

This VM's CPU time for the same fit moves by 30-50 % from one minute to the next, so the
kits are timed alternately (round 1: before, after; round 2: before, after; ...) and the
report gives each side's median and minimum over all its fits, and the ratio of medians.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_reference_fit_cpu.py \\
        [--rounds 2] [--fits 3] [--runs graphene,taurus] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from with_kit import call, print_ratio_table

HERE = os.path.dirname(os.path.abspath(__file__))


def fit_times(runs: list[str], fits: int) -> dict[str, list[float]]:
    """CPU seconds of ``fits`` fits of each run with the ``kit`` on sys.path (after a warm-up)."""
    from bench_engine_v2 import CAL, RUNS, read_pingpong

    from kit.model import RegimeModel

    data = {name: read_pingpong(CAL / RUNS[name]) for name in runs}
    s0, t0 = data[runs[0]]
    RegimeModel().fit(s0[:3000], t0[:3000])
    out: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(fits):
        for name in runs:
            s, t = data[name]
            c = time.process_time()
            RegimeModel(random_state=0).fit(s, t)
            out[name].append(time.process_time() - c)
    return out


def main() -> None:
    sys.path.insert(0, HERE)
    from bench_engine_v2 import RUNS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--fits", type=int, default=3, help="fits of each run per round and side")
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--compare", metavar="DIR", help="also time the kit package in DIR")
    args = ap.parse_args()
    runs = args.runs.split(",")
    here_kit = os.path.dirname(HERE)
    sides = {"after": here_kit} | ({"before": args.compare} if args.compare else {})
    times: dict[str, dict[str, list[float]]] = {side: {r: [] for r in runs} for side in sides}
    print("load average at start", os.getloadavg())
    for _ in range(args.rounds):
        for side, kit_dir in reversed(list(sides.items())):
            for name, v in call(kit_dir, "bench_reference_fit_cpu", "fit_times", runs,
                                args.fits).items():
                times[side][name].extend(v)
    print("load average at end", os.getloadavg())
    print_ratio_table(times, runs)


if __name__ == "__main__":
    main()
