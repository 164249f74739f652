"""``pt2pt compare DATASET --by transport``: who is within X % of the best, per size bin."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.analyses.compare import COMPARE_BY
from kit.core import argtypes


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="per size bin, which transport/tool/MPI is within X %% of the best",
        description="Cut sizes into log-spaced bins; in each, compare every series' median "
        "time with the best one. Prints the share of bins in which each is within X %% of "
        "the best and the per-bin winners; with -o also CSV tables and a plot.")
    p.add_argument("dataset", type=Path, metavar="DATASET", help="dataset folder")
    p.add_argument("--by", choices=tuple(COMPARE_BY), default="transport",
                   help="what to compare (default transport; mpi = MPI library version)")
    p.add_argument("--within", type=argtypes.percent, default=5.0, metavar="PCT",
                   help="tolerance in percent of the best median (default 5)")
    p.add_argument("--op", help="operation (default: pingpong when there are several)")
    p.add_argument("--campaign", help="only this campaign")
    p.add_argument("--series", metavar="KEY=VALUE,...",
                   help="only the series matching these keys (e.g. placement=inter-node)")
    p.add_argument("--per", choices=tuple(COMPARE_BY), metavar="KEY",
                   help="repeat the comparison for each value of a second dimension "
                   "(e.g. --by transport --per placement)")
    p.add_argument("--seed", type=argtypes.seed, default=0,
                   help="seed of the share intervals' bootstrap")
    p.add_argument("--bins-per-decade", type=argtypes.bins_per_decade, default=10, metavar="N",
                   help="size bins per factor 10 (default 10)")
    p.add_argument("-o", "--output", type=Path, metavar="DIR",
                   help="write compare-bins.csv, compare-shares.csv, compare.png here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.analyses.compare import compare, compare_per, load_frame, summary_lines
    from kit.data.dataset import parse_selector, require_ingested

    require_ingested(args.dataset)
    frame = load_frame(args.dataset, by=args.by, op=args.op, campaign=args.campaign,
                       per=args.per, series=parse_selector(args.series, "option --series"))
    opts = {"within": args.within, "bins_per_decade": args.bins_per_decade, "seed": args.seed}
    results = (compare_per(frame, by=args.by, per=args.per, **opts) if args.per
               else [compare(frame, by=args.by, **opts)])
    for result in results:
        print("\n".join(summary_lines(result)))
        if args.output:
            for path in result.write(args.output):
                print(f"wrote {path}")
    return 0
