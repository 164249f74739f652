"""``pt2pt status DIR``: where each job of a campaign stands (Slurm + the job's own record)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.measure.campaign.manifest import read_manifest
from kit.measure.campaign.status import job_statuses, render_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status", help="table of a campaign's jobs: Slurm state, result, reason",
        description="Show each job of the campaign DIR: its Slurm state (squeue, then "
        "scontrol show job, then sacct where accounting is enabled) and its own record "
        "(job.json: completed, skipped with the reason, failed, transport check). An "
        "adaptive campaign's DIR: its recorded rounds, then the latest round's jobs.")
    parser.add_argument("campaign_dir", type=Path, metavar="DIR")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kit.fit.adaptive_campaign import describe_rounds, is_adaptive_dir, latest_round

    if is_adaptive_dir(args.campaign_dir):
        print(describe_rounds(args.campaign_dir))
        latest = latest_round(args.campaign_dir)
        if latest is None:
            return 0
        args.campaign_dir = latest
    rows = job_statuses(args.campaign_dir)
    name = read_manifest(args.campaign_dir.resolve())["campaign"]["name"]
    title = f"campaign {name}" + (f", {args.campaign_dir.name}"
                                  if args.campaign_dir.name.startswith("round-") else "")
    Console(width=160).print(render_table(rows, title))
    return 0
