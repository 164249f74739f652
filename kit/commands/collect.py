"""``pt2pt collect DIR --dataset D``: ingest finished jobs, list failed/skipped/missing."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.data.collect import collect, format_report


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collect", help="ingest a campaign's outputs into a dataset",
        description="Ingest the outputs of every finished job of the campaign DIR into the "
        "dataset D, with campaign, transport and tool taken from the manifest. Cancelled "
        "runs keep the samples written before they stopped (run marked incomplete). Lists "
        "the jobs that were skipped (transport unavailable), failed, or are missing. Exit "
        "code 1 when a job failed or is missing; running it again adds only what is new.")
    parser.add_argument("campaign_dir", type=Path, metavar="DIR")
    parser.add_argument("--dataset", type=Path, required=True, metavar="D",
                        help="dataset directory (created if missing)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = collect(args.campaign_dir, args.dataset)
    print(format_report(report))
    return 0 if report.ok else 1
