"""Per alltoall algorithm: the largest numproc within 60 CPU-s and 4 GiB, and the law of cost.

Issue 61's target: "a 1,024-rank point at 1 MiB takes under 60 s and 4 GiB; state the law of
cost in numproc". ``bench_collectives.py`` measures one algorithm at fixed counts; this one
walks numproc 2, 4, 8, ... per (algorithm, size) through the kit's own sweep (its time and
memory limits: a point over 4 GiB is killed and recorded ``memory``), stops an (algorithm,
size) at its first point over budget (or failed; the sweep's CPU limit stops a run at the
CPU budget, ``timeout``), and prints per (algorithm, size): the
largest numproc within budget, what stopped it, and the law: the exponent b of
``CPU-s ~ numproc^b`` and ``memory ~ numproc^b``, a least-squares fit of log-log over the
last three counts well above SimGrid's start-up cost (:func:`exponent`), and the
extrapolation to 1,024 ranks from the largest measured count. The budget is judged on CPU
seconds (the run is one process; on a shared machine its wall time measures the neighbours
too).

A next count whose cost, extrapolated from the last count at the fitted exponent, is above
the budget (``--skip-over`` x the budget) is not run (``predicted``): it would cost a minute
of CPU to learn what the law says.
The output folder is a sweep folder (resumable; ``pt2pt collectives analyze`` reads it).

``--platform DIR`` runs on a platform folder ``pt2pt export --hosts N`` wrote (N >= --max-np;
e.g. the graphene-calibrated one of the 2015 sweep) instead of the synthetic one; ``--start N``
begins the walk at N ranks (the law is read where the cost has left SimGrid's start-up).
The law's interval: the 95 % t-interval of that least-squares slope (:func:`exponent_interval`,
over the last three counts of at least 0.4 CPU-s; one degree of freedom: narrow only where the
law is straight over those two doublings); the slope of the last doubling is printed beside it.

    nice -n 19 .venv/bin/python benchmarks/bench_collectives_limits.py OUT
        [--algorithms all] [--sizes 1K,1M] [--max-np 1024] [--cpu 60] [--gib 4] [--report-only]
        [--platform DIR] [--start 64] [--cpu-kill 150] [--deterministic]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kit.outputs.collsweep import Point

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: ``automatic`` runs every algorithm on each call to pick one (a tuning aid, not an algorithm).
SKIP = ("automatic",)


def exponent(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(value) on log(numproc) over the last three counts whose value
    is at least 4x the smallest count's (SimGrid's start-up, ~0.1 CPU-s and a few MiB, hides
    the law below), or the last two."""
    points = sorted(points)
    floor = 4 * max(points[0][1], 1e-9) if points else 0.0
    use = [(n, v) for n, v in points if v >= floor][-3:]
    if len(use) < 2:
        use = [(n, v) for n, v in points if v > 0][-2:]
    if len(use) < 2:
        return math.nan
    xs = [math.log(n) for n, _ in use]
    ys = [math.log(v) for _, v in use]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else math.nan


#: CPU-s below which SimGrid's start-up (~0.1 CPU-s at 8 ranks) hides the law: 4x it.
STARTUP_FLOOR_CPU_S = 0.4


def exponent_interval(points: list[tuple[int, float]],
                      floor: float = STARTUP_FLOOR_CPU_S) -> tuple[float, float, float]:
    """Slope b of log(CPU-s) on log(numproc) over the last three counts of at least ``floor``,
    and its 95 % t-interval: one degree of freedom, so it is narrow only where the law is
    straight over those two doublings (a law that bends there gets a wide one, as it should);
    NaN bounds with two counts. Why an absolute floor, not :func:`exponent`'s relative one: a
    walk that starts at 64 ranks is already above the start-up there."""
    from scipy import stats

    points = sorted(points)
    use = [(n, v) for n, v in points if v >= floor and v > 0][-3:]
    if len(use) < 2:
        use = [(n, v) for n, v in points if v > 0][-2:]
    if len(use) < 2:
        return math.nan, math.nan, math.nan
    fit = stats.linregress([math.log(n) for n, _ in use], [math.log(v) for _, v in use])
    if len(use) < 3:
        return float(fit.slope), math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(use) - 2)) * float(fit.stderr)
    return float(fit.slope), float(fit.slope) - half, float(fit.slope) + half


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--algorithms", default="all")
    ap.add_argument("--sizes", default="1K,1M")
    ap.add_argument("--max-np", type=int, default=1024)
    ap.add_argument("--cpu", type=float, default=60.0, help="CPU-s budget per point")
    ap.add_argument("--cpu-kill", type=float, help="CPU-s a run is stopped at (default: "
                    "--cpu; higher measures a point the load pushes over the budget)")
    ap.add_argument("--gib", type=float, default=4.0, help="memory budget per point")
    ap.add_argument("--time-limit", type=float, default=600.0, help="wall s (kill)")
    ap.add_argument("--per-byte", type=float, default=9e-10)
    ap.add_argument("--skip-over", type=float, default=1.0,
                    help="skip a count predicted above this many budgets (default 1)")
    ap.add_argument("--report-only", action="store_true", help="print OUT's results, run none")
    ap.add_argument("--platform", type=Path, help="platform folder (default: synthetic)")
    ap.add_argument("--start", type=int, default=2, help="first numproc (default 2)")
    ap.add_argument("--deterministic", action="store_true",
                    help="the noise plugin off (each message at its median factors)")
    a = ap.parse_args()

    from kit.core.checks import parse_size
    from kit.outputs import collsweep
    from kit.outputs.export.platform import cluster_platform
    from tests.builders import three_linear_regimes

    algorithms = [x for x in collsweep.valid_algorithms("alltoall") if x not in SKIP] \
        if a.algorithms == "all" else a.algorithms.split(",")
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    folder = a.platform or a.out / "platform"
    if a.platform is None and not (folder / "platform.json").is_file():
        cluster_platform(three_linear_regimes(a.per_byte), hosts=a.max_np, cores=1).write(folder)
    limit = int(a.gib * 2**30)
    print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    for alg in algorithms:
        for size in sizes:
            done = {p.numproc: p for p in collsweep.read_journal(a.out)
                    if p.algorithm == alg and p.size == size}
            n, stop, fit = a.start, "", 2.0
            while n <= a.max_np:
                p = done.get(n)
                if p is None and a.report_only:
                    stop = stop or f"np {n} not run"
                    break
                if p is None:
                    ok = sorted((m, q.cpu_s) for m, q in done.items() if q.status == "ok")
                    if len(ok) >= 2:
                        fit = exponent(ok)
                        guess = ok[-1][1] * (n / ok[-1][0]) ** fit
                        if guess > a.skip_over * a.cpu:
                            stop = f"np {n} predicted {guess:.0f} CPU-s"
                            break
                    sweep = collsweep.Sweep(platform=folder, algorithms={"alltoall": [alg]},
                                            numprocs=[n], sizes=[size], reps=1,
                                            time_limit=a.time_limit, memory_limit=limit,
                                            cpu_limit=math.ceil(a.cpu_kill or a.cpu),
                                            noise=not a.deterministic)
                    p = next(q for q in collsweep.run_sweep(sweep, a.out)
                             if q.key == ("alltoall", alg, n, size))
                    done[n] = p
                    print(f"  {alg} {size} np {n}: {p.status} {p.cpu_s:.1f} CPU-s "
                          f"{p.wall_s:.1f} s wall {p.peak_memory_bytes / 2**30:.2f} GiB "
                          f"(load {os.getloadavg()[0]:.1f}) {p.reason[:80]}", flush=True)
                if p.status == "failed" and "returned" in p.reason:
                    n *= 2  # the algorithm refuses this count (2dmesh, 3dmesh): the next
                    continue
                if p.status != "ok" or p.cpu_s > a.cpu or p.peak_memory_bytes > limit:
                    stop = f"np {n} {p.status}, {p.cpu_s:.1f} CPU-s, " \
                           f"{p.peak_memory_bytes / 2**30:.2f} GiB"
                    break
                n *= 2
            report(alg, size, done, stop, a.cpu, limit)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


def report(alg: str, size: int, done: dict[int, Point], stop: str, cpu: float,
           limit: int) -> None:
    ok = sorted(((n, p) for n, p in done.items()
                 if p.status == "ok" and p.cpu_s <= cpu and p.peak_memory_bytes <= limit),
                key=lambda t: t[0])
    if not ok:
        print(f"RESULT {alg} {size}: nothing within budget ({stop})")
        return
    top, tp = ok[-1]
    b_cpu = exponent([(n, p.cpu_s) for n, p in ok])
    b_mem = exponent([(n, p.peak_memory_bytes) for n, p in ok])
    b, lo, hi = exponent_interval([(n, p.cpu_s) for n, p in ok])
    last = (math.log(ok[-1][1].cpu_s / ok[-2][1].cpu_s) / math.log(ok[-1][0] / ok[-2][0])
            if len(ok) >= 2 and ok[-2][1].cpu_s > 0 else math.nan)
    at = 1024 / top
    print(f"RESULT {alg} {size}: largest np {top} ({tp.cpu_s:.1f} CPU-s, "
          f"{tp.peak_memory_bytes / 2**30:.2f} GiB); CPU-s ~ np^{b:.2f} [{lo:.2f}, {hi:.2f}] "
          f"over {', '.join(f'{n}:{p.cpu_s:.1f}' for n, p in ok)}, last doubling "
          f"np^{last:.2f}; memory ~ "
          f"np^{b_mem:.2f}; at 1024: {tp.cpu_s * at ** b_cpu:.0f} CPU-s, "
          f"{tp.peak_memory_bytes * at ** b_mem / 2**30:.1f} GiB; "
          f"stopped: {stop or 'max np'}", flush=True)


if __name__ == "__main__":
    main()
