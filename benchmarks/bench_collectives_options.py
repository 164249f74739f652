"""Which SimGrid/SMPI options lower the cost of a collective sweep point, and do they change
the answer? (issue 61)

Why: ``bench_collectives_limits.py`` states the law of cost in numproc per algorithm; this asks
whether a configuration knob moves it. Each variant runs the same points through the kit's
sweep (same seed, so the same noise draws), the variants alternated ``--rounds`` times so a
change of the machine's load hits all of them alike; printed per (point, variant): the median
CPU seconds, its ratio to the baseline, the peak memory, and whether the simulated time equals
the baseline's (``same``: equal to 1e-9 relative; else the relative change). A variant that
changes the simulated time changes the study's answer: it does not count as lowering the cost.

Variants (``--variants``, names below): SimGrid's other context factories (``ucontext``,
``thread``: the user code of the ranks switches differently; ``raw`` is 3.32's default on
amd64), no stack guard pages (``noguard``), SimGrid's ``global`` shared-malloc mode
(``global``), a coarser event precision (``precision``: surf/precision 1e-6 s instead of
smpirun's 1e-9, completions that close in time solved together), SimGrid's other sharing solver
(``bottleneck``: network/solver fairbottleneck instead of maxmin), the noise plugin off
(``deterministic``: not the same study, printed for the share of the cost the noise makes).

    nice -n 19 .venv/bin/python benchmarks/bench_collectives_options.py OUT --platform DIR
        [--points pair:256:1M,mvapich2:128:1M,basic_linear:32:1M] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: name -> (Sweep fields to change, extra --cfg)
VARIANTS: dict[str, tuple[dict[str, object], tuple[str, ...]]] = {
    "base": ({}, ()),
    "ucontext": ({}, ("contexts/factory:ucontext",)),
    "thread": ({}, ("contexts/factory:thread",)),
    "noguard": ({}, ("contexts/guard-size:0",)),
    "global": ({"shared_malloc": "global"}, ()),
    "precision": ({}, ("surf/precision:1e-6",)),
    "bottleneck": ({}, ("network/solver:fairbottleneck",)),
    "deterministic": ({"noise": False}, ()),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--platform", type=Path, required=True)
    ap.add_argument("--points", default="pair:256:1M,mvapich2:128:1M,basic_linear:32:1M")
    ap.add_argument("--variants", default="base,ucontext,noguard,global,precision,bottleneck,"
                    "deterministic")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--cpu", type=int, default=120, help="CPU-s limit per run")
    a = ap.parse_args()

    from kit.core.checks import parse_size
    from kit.outputs import collsweep

    variants = a.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    points = [(alg, int(n), parse_size(s)) for alg, n, s in
              (p.split(":") for p in a.points.split(","))]
    print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    runs: dict[tuple[str, int, int, str], list[collsweep.Point]] = {}
    for r in range(a.rounds):
        for alg, n, size in points:
            for v in variants:
                fields, cfg = VARIANTS[v]
                sweep = collsweep.Sweep(platform=a.platform, algorithms={"alltoall": [alg]},
                                        numprocs=[n], sizes=[size], reps=1,
                                        memory_limit=int(a.gib * 2**30), cpu_limit=a.cpu,
                                        time_limit=1800, cfg=cfg)
                sweep = dataclasses.replace(sweep, **fields)  # type: ignore[arg-type]
                out = a.out / f"{alg}-{n}-{size}-{v}-{r}"
                p = next(q for q in collsweep.run_sweep(sweep, out)
                         if q.key == ("alltoall", alg, n, size))
                runs.setdefault((alg, n, size, v), []).append(p)
                print(f"  round {r} {alg} {n} {size} {v}: {p.status} {p.cpu_s:.2f} CPU-s "
                      f"{p.wall_s:.1f} s wall {p.peak_memory_bytes / 2**30:.2f} GiB "
                      f"time {p.times} (load {os.getloadavg()[0]:.1f}) {p.reason[:60]}",
                      flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    for alg, n, size in points:
        base = runs[(alg, n, size, "base")]
        cpu0 = statistics.median(p.cpu_s for p in base)
        t0 = base[0].times[0] if base[0].times else float("nan")
        for v in variants:
            ps = runs[(alg, n, size, v)]
            cpu = statistics.median(p.cpu_s for p in ps)
            t = ps[0].times[0] if ps[0].times else float("nan")
            same = "same" if abs(t / t0 - 1) <= 1e-9 else f"{t / t0 - 1:+.2e}"
            print(f"RESULT {alg} np {n} {size} {v}: median {cpu:.2f} CPU-s "
                  f"({cpu / cpu0:.2f}x base), {max(p.peak_memory_bytes for p in ps) / 2**30:.2f}"
                  f" GiB, simulated {t:.6g} s ({same}); runs "
                  f"{', '.join(f'{p.cpu_s:.2f}' for p in ps)}")


if __name__ == "__main__":
    main()
