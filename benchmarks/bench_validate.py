"""CPU seconds of held-out validation (``validate_into``), the largest part of ``pt2pt fit``.

Why: ``pt2pt fit`` validates by default: it refits on a training split and scores the model
and three baselines per size cell against the held-out samples. On the reference runs (490
sizes) that took about three times the fit itself. This times ``validate_into`` on a model
fitted beforehand (the refit inside is timed: it is part of validation), for the shared
reference runs and a 33 k probe-like series (60 sizes), and, with ``--compare DIR``, the
kit package in DIR in the same run, alternating fresh processes (round 1: before, after;
round 2: ...). Reports each side's median and minimum and the ratio of medians.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_validate.py [--rounds 2] \\
        [--runs graphene,taurus] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from with_kit import call, print_ratio_table

HERE = os.path.dirname(os.path.abspath(__file__))
SYNTHETIC = "33k probe-like"


def validate_times(runs: list[str]) -> dict[str, float]:
    """CPU seconds of one ``validate_into`` per run, with the ``kit`` on sys.path."""
    from bench_engine_v2 import CAL, RUNS, read_pingpong

    from kit.fit import synth
    from kit.fit.validate import validate_into
    from kit.model import RegimeModel

    out: dict[str, float] = {}
    for name in runs:
        if name == SYNTHETIC:
            s, t = synth.sample(synth.ethernet_like(), 33_000, lo=1, hi=2**22, seed=1, grid=60)
        else:
            s, t = read_pingpong(CAL / RUNS[name])
        model = RegimeModel(random_state=0).fit(s, t)
        c = time.process_time()
        validate_into(model, s, t, random_state=0)
        out[name] = time.process_time() - c
    return out


def main() -> None:
    sys.path.insert(0, HERE)
    from bench_engine_v2 import RUNS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", default=",".join([*RUNS, SYNTHETIC]))
    ap.add_argument("--compare", metavar="DIR", help="also time the kit package in DIR")
    args = ap.parse_args()
    runs = args.runs.split(",")
    sides = {"after": os.path.dirname(HERE)} | ({"before": args.compare} if args.compare else {})
    times: dict[str, dict[str, list[float]]] = {side: {r: [] for r in runs} for side in sides}
    print("load average at start", os.getloadavg())
    for _ in range(args.rounds):
        for side, kit_dir in reversed(list(sides.items())):
            for name, v in call(kit_dir, "bench_validate", "validate_times", runs).items():
                times[side][name].append(v)
    print("load average at end", os.getloadavg())
    print_ratio_table(times, runs)


if __name__ == "__main__":
    main()
