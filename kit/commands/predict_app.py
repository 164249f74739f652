"""``pt2pt predict-app``: applications simulated (calibrated, nominal, Hockney) vs real runs
(see kit/outputs/predictapp.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kit.core import argtypes
from kit.core.argtypes import integer, real


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "predict-app", help="simulate every application series of a dataset, compare with "
        "its real runs",
        description="For every op=app series of DATASET (run for real by the campaign tool "
        "'app'), run the same program under SimGrid on the calibrated cluster platform "
        "(pt2pt export MODEL --simgrid --hosts N), on the same links without factors "
        "(nominal) and at the robust Hockney line of the calibration series, and print per "
        "program: the median ratio simulated / real with a 95 %% bootstrap interval, where "
        "the real median lies among the simulated runs (inside p05-p95?), and which of the "
        "calibrated platform and each baseline is closer beyond the noise. Needs SimGrid.")
    p.add_argument("dataset", type=Path, metavar="DATASET")
    p.add_argument("--platform", type=Path, required=True, metavar="DIR",
                   help="the calibrated cluster platform folder")
    p.add_argument("--program", action="append", metavar="NAME",
                   help="only these programs (name, e.g. halo, or the series' program key); "
                   "repeatable")
    p.add_argument("--reps", type=integer(1, 10000, "runs"), metavar="R",
                   help="simulated runs per program (default: as many as real ones, >= 5)")
    p.add_argument("--seed", type=argtypes.seed, default=1, help="first noise seed (default 1)")
    p.add_argument("--compute", choices=("skip", "benchmark"), default="skip",
                   help="the programs' own computation: not simulated (default) or "
                   "benchmarked on this machine")
    p.add_argument("--time-limit", type=real(1.0, 86400.0, "seconds"), default=600.0,
                   metavar="S", help="per simulated run (default 600 s)")
    p.add_argument("--no-hockney", action="store_true", help="leave out the Hockney baseline")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="write the result as JSON (the report's --apps and the TUI read it)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.core.progress import bar
    from kit.outputs.predictapp import predict_app, summary_lines, table_rows, write

    with bar("predict-app", total=None) as progress:
        def step(i: int, n: int, program: str) -> None:
            progress.update(total=n, completed=i - 1, description=program)

        doc = predict_app(args.dataset, args.platform, reps=args.reps, seed=args.seed,
                          compute=args.compute, time_limit=args.time_limit,
                          hockney=not args.no_hockney, programs=args.program,
                          on_program=step)
    if args.output is not None:
        write(doc, args.output)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    rows = table_rows(doc)
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(r[c].ljust(widths[c]) for c in cols))
    for line in summary_lines(doc):
        print(line)
    print(doc["statistic"])
    for note in doc["notes"]:
        print(f"note: {note}")
    if args.output is not None:
        print(f"wrote {args.output}")
    return 0
