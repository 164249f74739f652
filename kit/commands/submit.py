"""``pt2pt submit DIR [--dry-run]``: sbatch every planned job, recording the job ids."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.measure.campaign.submit import format_submissions, submit


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "submit", help="submit a planned campaign's jobs with sbatch",
        description="Submit every job of the planned campaign DIR with sbatch, in the "
        "planned (shuffled) order, and record the Slurm job ids in DIR/submitted.json. "
        "Jobs already recorded there are not submitted again.")
    parser.add_argument("campaign_dir", type=Path, metavar="DIR")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the sbatch commands without running them")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(format_submissions(submit(args.campaign_dir, dry_run=args.dry_run)))
    return 0
