"""``pt2pt contention DATASET``: latency and per-pair bandwidth against k concurrent pairs."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.core.atomicwrite import write_text


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "contention", help="latency and bandwidth against the number of concurrent pairs k",
        description="For each group of series that differ only in k (the probe's --pairs): per "
        "k, the median one-way time at the smallest size every k measured, the per-pair "
        "effective bandwidth (size / median time) at the largest, both with 95 %% "
        "distribution-free intervals, their ratio to k = 1 beside the ideal 1/k, and the "
        "aggregate bandwidth (k x per-pair).")
    p.add_argument("dataset", type=Path, metavar="DATASET", help="dataset folder")
    p.add_argument("--series", metavar="KEY=VALUE,...",
                   help="only series matching these keys (e.g. transport=tcp,op=pingpong)")
    p.add_argument("--json", type=Path, metavar="FILE",
                   help="also write the figures as JSON to FILE ('-': stdout, no table)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from kit.analyses import contention as ct
    from kit.core.errors import UserError
    from kit.data.dataset import parse_selector, require_ingested

    require_ingested(args.dataset)
    groups = ct.contention(args.dataset, parse_selector(args.series, "option --series"))
    if not groups:
        raise UserError(ct.NO_CONTENTION + (f" among the series matching {args.series}"
                                            if args.series else ""),
                        where=str(args.dataset), hint=ct.NO_CONTENTION_HINT, exit_code=1)
    doc = {"dataset": str(args.dataset), "level": ct.LEVEL,
           "groups": [g.to_dict() for g in groups]}
    if args.json is not None:
        text = json.dumps(doc, indent=2)
        if str(args.json) == "-":
            print(text)
            return 0
        write_text(args.json, text + "\n")
    console = Console(width=160)
    for group in groups:
        table = Table(title=group.title, caption="x k=1 = this k's figure / k = 1's; ideal 1/k "
                      "= a fair share of one link; CI = distribution-free interval for the "
                      "median (order statistics)")
        for i, name in enumerate(ct.headers(group)):
            table.add_column(name, justify="left" if i == 0 else "right")
        for cells in ct.table_rows(group):
            table.add_row(*cells)
        if group.rows:
            console.print(table)
        else:
            console.print(f"[bold]{group.title}[/]", highlight=False)
        for note in group.notes:
            console.print(f"note: {note}", highlight=False)
    if args.json is not None:
        console.print(f"wrote {args.json}", highlight=False)
    return 0
