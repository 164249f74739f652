"""``pt2pt simulate MODEL``: the closed loop through SimGrid/SMPI (see kit/outputs/simulate.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kit.core import argtypes
from kit.core.argtypes import integer, real
from kit.core.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate", help="run the kit's ping-pong in SimGrid with a model's export, compare",
        description="Build the kit's ping-pong with smpicc, run it under smpirun on the "
        "measured pair's platform with the model's SimGrid export, and print simulated / "
        "model ratios at 1 B, 1 KiB, 64 KiB, 1 MiB and the middle of each regime (median; "
        "p05 and p95 with --noise, which loads the kit's noise plugin). With --against "
        "DATASET: refit the model's settings on a training split of the measured series, "
        "simulate the held-out samples' plan with noise and compare with those samples "
        "(ratios per size decade, and each p05/p95's level among the held-out samples). "
        "Needs SimGrid (Debian 12: apt-get install libsimgrid-dev g++). With --app PROGRAM "
        "--np N --platform DIR: build an MPI program with smpicc and run it R times under "
        "smpirun on a cluster platform (pt2pt export --hosts), with the network plugin's "
        "noise, and print the program's figure per run (docs/simgrid.md).")
    p.add_argument("model", type=Path, metavar="MODEL", nargs="?",
                   help="ping-pong model JSON (not with --app)")
    p.add_argument("--noise", action="store_true",
                   help="draw every message's factors from the model's noise (plugin)")
    p.add_argument("--reps", type=argtypes.repetitions, metavar="N",
                   help="ping-pongs per size (default 3, 2500 with --noise: the p95 of a "
                   "heavy tail needs thousands of messages to be known within a few per cent)")
    p.add_argument("--seed", type=argtypes.seed, default=1, help="noise plugin / hold-out seed")
    p.add_argument("--simgrid-version", metavar="X.Y",
                   help="option names to write (default: the installed SimGrid's)")
    p.add_argument("--send", type=Path, metavar="MODEL", help="MPI_Send model -> smpi/os")
    p.add_argument("--recv", type=Path, metavar="MODEL", help="MPI_Recv model -> smpi/or")
    p.add_argument("--export-dir", type=Path, metavar="DIR",
                   help="also keep the export used (platform, config, noise tables) here")
    p.add_argument("--against", type=Path, metavar="DATASET",
                   help="compare with held-out real samples of the model's series in DATASET")
    p.add_argument("--series", metavar="KEY=V,...",
                   help="series in --against DATASET (default: the model's provenance)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    app = p.add_argument_group("applications (issue 57)")
    app.add_argument("--app", metavar="PROGRAM",
                     help="halo (the kit's mini-app), osu_bw, osu_bibw, osu_latency, "
                     "osu_alltoall, osu_allreduce, osu_bcast (OSU 7.4 from a Spack mirror), or "
                     "a .c file")
    app.add_argument("--args", default="", metavar="'ARGS'",
                     help="the program's arguments, one string, e.g. '-w 8192 -i 20'")
    app.add_argument("--np", type=integer(1, 65536, "ranks"), metavar="N", help="MPI ranks")
    app.add_argument("--platform", type=Path, metavar="DIR",
                     help="a cluster platform folder (pt2pt export MODEL --simgrid --hosts N)")
    app.add_argument("--ranks-per-host", type=integer(1, 4096, "ranks per host"), metavar="K",
                     help="default: as few per host as fit")
    app.add_argument("--compute", choices=("skip", "benchmark"), default="skip",
                     help="the program's own computation: not simulated (default; MPI calls "
                     "and explicit smpi_execute phases only) or benchmarked on this machine")
    app.add_argument("--deterministic", action="store_true",
                     help="no noise: every message at its model's median (one run)")
    app.add_argument("--nominal", action="store_true",
                     help="the baseline without factors: the platform's latency and bandwidth "
                     "only")
    app.add_argument("--time-limit", type=real(1.0, 86400.0, "seconds"), default=600.0,
                     metavar="S", help="per run (default 600 s): beyond it the run is a failure")
    app.add_argument("-o", "--output", type=Path, metavar="FILE",
                     help="write the simulated runs as JSON (only when every run succeeded)")
    p.set_defaults(func=run)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def run(args: argparse.Namespace) -> int:
    from kit.model.io import load_model, read_model
    from kit.outputs.simulate import simulate_against, simulate_model

    if args.app is not None:
        return _run_app(args)
    if args.model is None:
        raise UserError("give a MODEL, or --app PROGRAM --np N --platform DIR",
                        where="pt2pt simulate", hint="see pt2pt simulate --help")
    if args.reps is not None and args.reps < 1:
        raise UserError(f"--reps {args.reps} must be at least 1", where="option --reps")
    fitted = read_model(args.model)
    model = fitted.model
    if args.against is not None:
        from kit.data.dataset import model_selector, parse_selector

        # the model's own series; one from before ``pairs`` was a key stands for k = 1
        series = parse_selector(args.series) if args.series else model_selector(fitted.series)
        rows, meta = simulate_against(model, args.against, series=series, seed=args.seed,
                                      version=args.simgrid_version)
        if args.json:
            print(json.dumps({**meta, "rows": [r.to_dict() for r in rows]}, indent=2))
            return 0
        print(f"SimGrid {meta['simgrid_version']}: {meta['simulated']} held-out ping-pongs of "
              f"{meta['dataset']} simulated with noise; ratio = simulated / real")
        print(f"{'':>21} {'':>7} {'simulated / real':^26} {'model / real':^26} "
              f"{'level among real':^35}")
        print(f"{'sizes':>21} {'n real':>7} {'median':>8} {'p05':>8} {'p95':>8} "
              f"{'median':>8} {'p05':>8} {'p95':>8} {'sim p05':>8} {'sim p95':>8} "
              f"{'mod p05':>8} {'mod p95':>8} {'+-':>6}")
        for r in rows:
            d = r.to_dict()
            print(f"[{r.size_lo:>9.0f}, {r.size_hi:>9.0f}) {r.n_real:>7} "
                  f"{d['median_ratio']:>8.3f} {d['p05_ratio']:>8.3f} {d['p95_ratio']:>8.3f} "
                  f"{d['model_median_ratio']:>8.3f} {d['model_p05_ratio']:>8.3f} "
                  f"{d['model_p95_ratio']:>8.3f} {r.sim_p05_level:>8.3f} "
                  f"{r.sim_p95_level:>8.3f} {r.model_p05_level:>8.3f} "
                  f"{r.model_p95_level:>8.3f} {r.level_se:>6.3f}")
        print(meta["note"])
        print(meta["level_note"])
        return 0
    send = load_model(args.send) if args.send else None
    recv = load_model(args.recv) if args.recv else None
    report = simulate_model(model, noise=args.noise, reps=args.reps, seed=args.seed,
                            version=args.simgrid_version, send_model=send, recv_model=recv,
                            export_dir=args.export_dir)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(f"SimGrid {report.simgrid_version}, {'noise plugin' if report.noise else 'no noise'}, "
          f"{report.reps} ping-pong(s) per size; statistic: {report.statistic}; "
          f"baseline: {report.baseline}")
    head = f"{'size':>9} {'where':<14} {'model median':>13} {'sim median':>11} {'ratio':>7}"
    if report.noise:
        head += f" {'p05 ratio':>9} {'p95 ratio':>9} {'p05 level':>9} {'p95 level':>9}"
    print(head)
    for p in report.points:
        mark = "*" if p.extrapolated else " "
        line = (f"{p.size:>8}{mark} {p.label:<14} {p.model_median:>13.4g} "
                f"{p.sim_median:>11.4g} {p.median_ratio:>7.4f}")
        if report.noise:
            line += (f" {_fmt(p.p05_ratio):>9} {_fmt(p.p95_ratio):>9}"
                     f" {_fmt(p.sim_p05_level):>9} {_fmt(p.sim_p95_level):>9}")
        print(line)
    for note in report.notes:
        print(note)
    return 0


def _run_app(args: argparse.Namespace) -> int:
    import shlex

    from kit.outputs.appsim import simulate_app, write_result

    if args.model is not None or args.against is not None:
        raise UserError("--app runs a program on a platform, not a model",
                        where="option --app", hint="leave out MODEL and --against")
    for option in ("np", "platform"):
        if getattr(args, option) is None:
            raise UserError("needed with --app", where=f"option --{option}",
                            hint="e.g. --app halo --np 4 --platform sg-platform/")
    try:
        words = shlex.split(args.args)
    except ValueError as exc:
        raise UserError(f"cannot split {args.args!r} ({exc})", where="option --args",
                        hint="quote it like a shell command line") from None
    sim = simulate_app(args.app, words, np=args.np, platform=args.platform,
                       reps=args.reps or 10, noise=not args.deterministic, seed=args.seed,
                       compute=args.compute, variant="nominal" if args.nominal else "calibrated",
                       ranks_per_host=args.ranks_per_host, time_limit=args.time_limit)
    if args.output is not None:
        write_result(sim, args.output)
    if args.json:
        print(json.dumps(sim.to_dict(), indent=2))
        return 0
    values = sorted(sim.values())
    print(f"SimGrid {sim.simgrid_version}: {sim.label} on {sim.platform} ({sim.variant}"
          f"{', noise' if sim.noise else ''}), {len(values)} run(s) in {sim.elapsed_s:.1f} s")
    print(f"{'run':>4} {'seed':>6} {'size':>10} {'seconds':>13}")
    for i, r in enumerate(sim.runs, 1):
        print(f"{i:>4} {r.seed:>6} {r.size:>10} {r.seconds:>13.6g}")
    mid = values[len(values) // 2] if len(values) % 2 else 0.5 * (
        values[len(values) // 2 - 1] + values[len(values) // 2])
    print(f"median {mid:.6g} s, min {values[0]:.6g}, max {values[-1]:.6g} (the program's "
          "figure per run: halo wall time of the slowest rank; OSU latency or size/bandwidth)")
    for note in sim.notes:
        print(f"note: {note}")
    if args.output is not None:
        print(f"wrote {args.output}")
    return 0
