"""``pt2pt collectives sweep|analyze``: collective algorithms under SMPI (issue 61; see
kit/outputs/collsweep.py for the runs and kit/analyses/collectives.py for the figures)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from kit.core import argtypes
from kit.core.argtypes import integer, real


def _list(parse: Any, what: str) -> Any:
    def inner(text: str) -> list[Any]:
        try:
            values = [parse(w.strip()) for w in text.split(",") if w.strip()]
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of "
                                             f"{what}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"{text!r}: give at least one of {what}")
        return values

    return inner


def _percent(text: str) -> float:
    value = float(text.rstrip("%"))
    if not (math.isfinite(value) and 0 <= value <= 1000):
        raise ValueError(text)
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "collectives", help="sweep collective algorithms under SMPI and rank them",
        description="The 2015 collective-algorithm study on a platform the kit exported: "
        "'sweep' runs the kit's driver (collbench) under smpirun for every collective x "
        "algorithm (--cfg=smpi/<collective>:<algorithm>) x numproc x size, recording the "
        "simulated time of each repetition, host wall and CPU time and peak anonymous memory per "
        "point into OUT/collectives.parquet (resumable: finished points are kept in "
        "OUT/points.jsonl); 'analyze' prints per configuration the best algorithm and every "
        "algorithm's ratio to it, and per algorithm the share of configurations within X %% "
        "of the best with 95 %% bootstrap intervals. Needs SimGrid.")
    sub = p.add_subparsers(dest="action", required=True,
                           metavar="sweep|collect|analyze|validate")
    s = sub.add_parser("sweep", help="run the points not yet in OUT",
                       description="Run every point not yet in OUT. A point that exceeds "
                       "--time-limit or --memory-limit, or that SimGrid stops, is recorded "
                       "with its status (timeout, memory, failed) and the sweep goes on.")
    s.add_argument("out", type=Path, metavar="OUT", help="output folder (resumed if it exists)")
    s.add_argument("--platform", type=Path, required=True, metavar="DIR",
                   help="cluster platform folder (pt2pt export MODEL --simgrid --hosts N)")
    s.add_argument("--collective", default="alltoall",
                   choices=("alltoall", "allreduce", "bcast", "allgather", "reduce"))
    s.add_argument("--algorithms", type=_list(str, "algorithm names"), required=True,
                   metavar="A,B,...", help="SimGrid algorithm names (an unknown one lists "
                   "the valid ones)")
    s.add_argument("--np", type=_list(integer(1, 65536, "ranks"), "rank counts"),
                   required=True, metavar="N,...", help="numbers of processes")
    s.add_argument("--sizes", type=_list(argtypes.size_bytes(), "sizes (bytes; K, M suffixes)"),
                   required=True, metavar="S,...",
                   help="message sizes (alltoall/allgather: per block; others: the buffer)")
    s.add_argument("--reps", type=integer(1, 10000, "repetitions"), default=3,
                   help="timed repetitions per point (default 3)")
    s.add_argument("--seed", type=argtypes.seed, default=1, help="noise seed (default 1)")
    s.add_argument("--deterministic", action="store_true",
                   help="no noise: every message at its model's median")
    s.add_argument("--time-limit", type=real(0.1, 86400.0, "seconds"), default=600.0,
                   metavar="S", help="per point (default 600 s)")
    s.add_argument("--memory-limit", type=real(0.01, 4096.0, "GiB"), default=8.0,
                   metavar="GIB", help="per point: peak resident memory (sampled) and each "
                   "process's private data (RLIMIT_DATA) (default 8 GiB)")
    s.add_argument("--cpu-limit", type=integer(1, 86400, "CPU seconds"), metavar="S",
                   help="per point, CPU seconds (RLIMIT_CPU; default none): unlike "
                   "--time-limit, not stretched by a busy machine")
    s.add_argument("--ranks-per-host", type=integer(1, 4096, "ranks per host"), metavar="K")
    s.add_argument("--shared-malloc", choices=("local", "global"), default="local",
                   help="SimGrid's shared buffers: local (default: one copy per buffer in "
                   "/dev/shm, at most 2 x numproc x size) or global (one 64 MiB block, but "
                   "page tables and kernel time grow as numproc^2 x size); the simulated "
                   "times are the same")
    s.set_defaults(func=run_sweep)
    c = sub.add_parser("collect", help="gather a campaign's collectives jobs into OUT",
                       description="Merge the point journals of the '- tool: collectives' jobs "
                       "of a planned campaign (pt2pt plan, then submit or run-local) into OUT, "
                       "the folder 'sweep' writes: 'analyze' and the TUI read it alike. Run it "
                       "again as jobs end: points already in OUT are kept.")
    c.add_argument("campaign", type=Path, metavar="CAMPAIGN", help="the planned campaign folder")
    c.add_argument("out", type=Path, metavar="OUT", help="output folder (created or extended)")
    c.set_defaults(func=run_collect)
    a = sub.add_parser("analyze", help="best algorithm per configuration, shares within X %%",
                       description="Read OUT (even a sweep stopped early) and print the "
                       "ranking and the shares within X %% (see kit/analyses/collectives.py "
                       "for the definitions).")
    a.add_argument("out", type=Path, metavar="OUT")
    a.add_argument("--within", type=_list(_percent, "percentages"), default=[2.0, 5.0, 10.0],
                   metavar="X,...", help="thresholds in %% (default 2,5,10)")
    a.add_argument("--split", type=integer(1, 1 << 20, "ranks"), metavar="N",
                   help="numproc at which the ranges split (default: where the topology "
                   "changes, a cabinet's ranks on a platform with cabinets; on a flat one the "
                   "2015 study's 256)")
    a.add_argument("--algorithms", type=_list(str, "algorithm names"), metavar="A,B,...",
                   help="shares among these algorithms only (default: all swept): the best is "
                   "the best of them, so configurations where only the others did not complete "
                   "count")
    a.add_argument("--resamples", type=argtypes.resamples, default=2000)
    a.add_argument("--seed", type=argtypes.seed, default=1, help="bootstrap seed (default 1)")
    a.add_argument("--json", action="store_true", help="print JSON instead of tables")
    a.add_argument("--report", type=Path, metavar="DIR",
                   help="also write DIR/index.html with the study's plots (time / size against "
                   "numproc per algorithm; shares within X %% with intervals)")
    a.set_defaults(func=run_analyze)
    v = sub.add_parser("validate", help="real (Open MPI, forced algorithms) against simulated "
                       "at np 2-4 on this host",
                       description="Run collbench for real with Open MPI's tuned algorithm "
                       "forced (linear, pairwise, modified_bruck: the ones with an SMPI twin) "
                       "and its SMPI twin (basic_linear, pair, bruck) on PLATFORM with every "
                       "rank on one host, and compare the rankings only where the real "
                       "difference exceeds the noise (95 %% bootstrap interval of the ratio of "
                       "medians excludes 1). Writes OUT/validation.json; see "
                       "kit/analyses/collagree.py for the definitions.")
    v.add_argument("out", type=Path, metavar="OUT")
    v.add_argument("--platform", type=Path, required=True, metavar="DIR",
                   help="platform folder with an intra-node model and enough cores "
                   "(pt2pt export MODEL --simgrid --hosts 1 --cores 4 --intra MODEL)")
    v.add_argument("--collective", default="alltoall", choices=("alltoall",))
    v.add_argument("--algorithms", type=_list(str, "Open MPI algorithm names"),
                   default=["linear", "pairwise", "modified_bruck"], metavar="A,B,...")
    v.add_argument("--np", type=_list(integer(2, 64, "ranks"), "rank counts"),
                   default=[2, 3, 4], metavar="N,...")
    v.add_argument("--sizes", type=_list(argtypes.size_bytes(), "sizes (bytes; K, M suffixes)"),
                   default=[1024, 65536, 1 << 20], metavar="S,...")
    v.add_argument("--runs", type=integer(1, 100, "runs"), default=3,
                   help="real mpiruns per point, interleaved (default 3)")
    v.add_argument("--reps", type=integer(2, 10000, "repetitions"), default=10,
                   help="timed repetitions per run (default 10)")
    v.add_argument("--transport", default="shm", choices=("shm", "tcp"))
    v.add_argument("--seed", type=argtypes.seed, default=1)
    v.add_argument("--deterministic", action="store_true",
                   help="simulate without noise (every message at its model's median): the "
                   "simulated order of the medians, without an interval")
    v.set_defaults(func=run_validate)


def run_sweep(args: argparse.Namespace) -> int:
    from kit.outputs.collsweep import Sweep, run_sweep

    sweep = Sweep(platform=args.platform, algorithms={args.collective: args.algorithms},
                  numprocs=args.np, sizes=args.sizes, reps=args.reps, seed=args.seed,
                  noise=not args.deterministic, time_limit=args.time_limit,
                  memory_limit=int(args.memory_limit * 2**30), cpu_limit=args.cpu_limit,
                  ranks_per_host=args.ranks_per_host, shared_malloc=args.shared_malloc)

    def show(p: Any, i: int, n: int) -> None:
        t = f"{sorted(p.times)[len(p.times) // 2]:.6g} s" if p.times else p.reason[:100]
        print(f"[{i}/{n}] {p.collective} {p.algorithm} np={p.numproc} size={p.size}: "
              f"{p.status} {t} (wall {p.wall_s:.1f} s, cpu {p.cpu_s:.1f} s, "
              f"memory {p.peak_memory_bytes / 2**20:.0f} MiB)", flush=True)

    points = run_sweep(sweep, args.out, show)
    bad = sum(p.status != "ok" for p in points)
    print(f"{len(points)} points in {args.out / 'collectives.parquet'} ({bad} not ok)")
    return 0


def run_collect(args: argparse.Namespace) -> int:
    from kit.outputs.collsweep import DATASET, collect_campaign

    found = collect_campaign(args.campaign, args.out)
    for job, what in found.jobs.items():
        print(f"{job}: {what}")
    print(f"{found.added} new point(s) in {args.out / DATASET}"
          + (f"; {found.duplicates} already there, kept as they were" if found.duplicates
             else ""))
    return 0


def run_analyze(args: argparse.Namespace) -> int:
    import polars as pl

    from kit.analyses.collectives import (
        CENSORING,
        not_completed,
        ranking,
        selector_lines,
        share_cell,
        shares,
    )
    from kit.core.errors import UserError
    from kit.outputs.collsweep import read_dataset, topology_split

    rows = read_dataset(args.out)
    if args.algorithms is not None:
        unknown = sorted(set(args.algorithms) - set(rows["algorithm"].unique().to_list()))
        if unknown:
            raise UserError(f"{', '.join(unknown)} not in the sweep {args.out}",
                            where="option --algorithms",
                            hint="give algorithms the sweep ran: " + ", ".join(
                                sorted(rows["algorithm"].unique().to_list())))
        rows = rows.filter(pl.col("algorithm").is_in(args.algorithms))
    ranked = ranking(rows)
    missing = not_completed(rows)
    split, why = ((args.split, f"{args.split} (option --split)") if args.split is not None
                  else topology_split(args.out))
    found = shares(rows, within=tuple(args.within), split=split,
                   resamples=args.resamples, seed=args.seed)
    if args.report is not None:
        from kit.outputs.report.collectives import write_report

        page = write_report(args.report, rows, found, source=str(args.out),
                            within=list(args.within), split=why)
    if args.json:
        print(json.dumps({"ranking": ranked.to_dicts(), "shares": [s.to_dict() for s in found],
                          "split": split, "split_reason": why, "censoring": CENSORING,
                          "not_completed": missing.to_dicts(),
                          "selectors": selector_lines(found)}, indent=1, default=str))
        return 0
    print("time = median simulated time over repetitions (slowest rank); ratio = time / the "
          "best algorithm's at the same (numproc, size); inf: the point did not complete")
    for (coll, n, size), part in ranked.partition_by(
            "collective", "numproc", "size", as_dict=True, maintain_order=True).items():
        cells = [f"{r['algorithm']} {r['ratio']:.3f}" if math.isfinite(r["ratio"])
                 else f"{r['algorithm']} not completed"
                 for r in part.iter_rows(named=True)]
        best = part["best_time"][0]
        some = "" if part["ratio"].is_finite().all() else "of those that completed "
        head = f"{coll} np={n} size={size}: best {some}{part['best'][0]} " + (
            f"{best:.4g} s" if best is not None else "(none completed)")
        print(head + " | " + ", ".join(cells))
    if missing.height:
        print("\ndid not complete (no simulated time):")
        for (coll, n, size), part in missing.partition_by(
                "collective", "numproc", "size", as_dict=True, maintain_order=True).items():
            print(f"{coll} np={n} size={size}: " + ", ".join(
                f"{r['algorithm']} {r['status']}" for r in part.iter_rows(named=True)))
    print("\nshare of configurations within X % of the best, 95 % bootstrap interval over "
          f"configurations; numproc ranges split at {why}; {CENSORING}")
    xs = list(dict.fromkeys(s.within_percent for s in found))
    print(f"{'collective':<10} {'algorithm':<22} {'numproc':<7} {'n':>4} {'left out':>8}"
          + "".join(f"{f'within {x:g} % (bounds)':>34}" for x in xs))
    table: dict[tuple[str, str, str], dict[float, Any]] = {}
    for s in found:
        table.setdefault((s.collective, s.numprocs, s.algorithm), {})[s.within_percent] = s
    for (coll, numprocs, alg), by_x in table.items():
        first = next(iter(by_x.values()))
        print(f"{coll:<10} {alg:<22} {numprocs:<7} {first.configurations:>4} "
              f"{first.left_out:>8}" + "".join(f"{share_cell(by_x[x]):>34}" for x in xs))
    lines = selector_lines(found)
    if lines:
        print()
    for line in lines:
        print(line)
    if args.report is not None:
        print(f"wrote {page}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from kit.outputs.collvalidate import validate

    doc = validate(args.out, platform=args.platform, collective=args.collective,
                   algorithms=args.algorithms, numprocs=args.np, sizes=args.sizes,
                   runs=args.runs, reps=args.reps, transport=args.transport, seed=args.seed,
                   deterministic=args.deterministic, on_step=lambda text: print(text, flush=True))
    print(f"ratio = median(a) / median(b) over repetitions [95 % bootstrap interval]; real: "
          f"{args.runs} x {args.reps} repetitions over {args.transport}, simulated: the SMPI "
          "twins " + ("without noise (every message at its median)" if args.deterministic
                      else "with noise"))
    for p in doc["pairs"]:
        print(f"{p['collective']} np={p['numproc']} size={p['size']} {p['a']}/{p['b']}: real "
              f"{p['real_ratio']:.3f} [{p['real_lo']:.3f}, {p['real_hi']:.3f}], simulated "
              f"{p['sim_ratio']:.3f} [{p['sim_lo']:.3f}, {p['sim_hi']:.3f}]: {p['verdict']}")
    for q in doc["simulated_not_ok"]:
        print(f"simulated {q['algorithm']} np={q['numproc']} size={q['size']} {q['status']}, "
              f"not compared: {q['reason'][:200]}")
    a = doc["agreement"]
    print(f"agreement where the real difference exceeds the noise: {a['agrees']} of "
          f"{a['decided']} pairs ({a['share']:.2f}, exact 95 % interval [{a['lo']:.2f}, "
          f"{a['hi']:.2f}]); {a['disagrees']} disagree, {a['simulated_ties']} simulated ties, "
          f"{a['undecided']} pairs within the real noise not compared")
    print(f"load average {doc['load_before']:.1f} before, {doc['load_after']:.1f} after on "
          f"{doc['cpus']} CPU(s)" + (" (busy: the real times measure the scheduler too)"
                                     if doc["busy"] else ""))
    print(f"wrote {args.out / 'validation.json'}")
    return 0
