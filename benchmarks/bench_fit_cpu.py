"""CPU seconds of one fit at 33 k and 1 M samples, per-size layer and intervals off and on
(issue 19 targets: 33 k <= 0.5 s, 1 M <= 3 s CPU).

CPU time of this process (``time.process_time``), not wall time: the machine is shared.
The 33 k series is probe-like (60 sizes log-spaced 1 B-4 MiB, ~550 repetitions each); the
1 M one has log-uniform sizes (``kit.fit.synth.ethernet_like``, as in bench_fit.py); "1M grid-58"
is the same series on a fixed grid of 58 sizes (as grid/list plans, OSU and the reference
runs measure: the per-size layer's cost follows the number of distinct sizes). Each
configuration runs ``--repeat`` times after a warm-up fit (imports), median reported.
``--compare DIR`` also times the kit package found in DIR (e.g. an older commit unpacked
with ``git archive COMMIT kit | tar -x -C DIR``) in a child process, alternating, for
before/after ratios taken in one run.

    .venv/bin/python benchmarks/bench_fit_cpu.py [--repeat 3] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

CASES = {"33k probe-like": (33_000, 60), "1M log-uniform": (1_000_000, 0),
         "1M grid-58": (1_000_000, 58)}


def measure(case: str, per_size: bool, intervals: bool, repeat: int) -> list[float]:
    from kit.fit import synth
    from kit.model import RegimeModel

    n, grid = CASES[case]
    kw = {"grid": grid} if grid else {}
    s, t = synth.sample(synth.ethernet_like(), n, lo=1, hi=2**22, seed=1, **kw)
    RegimeModel(per_size=per_size).fit(s[:3000], t[:3000])  # imports and caches
    out = []
    for _ in range(repeat):
        c0 = time.process_time()
        model = RegimeModel(per_size=per_size).fit(s, t)
        if intervals:
            from kit.model.uncertainty import bootstrap_intervals

            bootstrap_intervals(model, s, t, random_state=0)
        out.append(time.process_time() - c0)
    return out


def child(path: str, case: str, per_size: bool, intervals: bool, repeat: int) -> list[float]:
    from with_kit import call

    return call(path, "bench_fit_cpu", "measure", case, per_size, intervals, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare", metavar="DIR", help="also time the kit package in DIR")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--intervals", default="off,on")
    ap.add_argument("--per-size", default="off,on")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    print(f"load average at start {os.getloadavg()}")
    for case in args.cases.split(","):
        for per_size in [v == "on" for v in args.per_size.split(",")]:
            for iv in args.intervals.split(","):
                now = child(here, case, per_size, iv == "on", args.repeat)
                line = (f"{case:<16} per-size {'on ' if per_size else 'off'} intervals {iv:<3}: "
                        f"CPU median {statistics.median(now):6.2f} s "
                        f"({', '.join(f'{v:.2f}' for v in now)})")
                if args.compare:
                    old = child(args.compare, case, per_size, iv == "on", args.repeat)
                    line += (f"; before {statistics.median(old):6.2f} s -> "
                             f"{statistics.median(old) / statistics.median(now):.2f}x")
                print(line, flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
