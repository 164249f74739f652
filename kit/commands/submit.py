"""``pt2pt submit DIR [--dry-run]``: sbatch every planned job, recording the job ids; an
adaptive campaign's DIR is run round by round through Slurm."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.core.errors import UserError
from kit.measure.campaign.submit import format_submissions, submit


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "submit", help="submit a planned campaign's jobs with sbatch",
        description="Submit every job of the planned campaign DIR with sbatch, in the "
        "planned (shuffled) order, and record the Slurm job ids in DIR/submitted.json. "
        "Jobs already recorded there are not submitted again. A DIR planned from a campaign "
        "with 'design: adaptive' is run round by round: each round planned into "
        "DIR/round-KK, submitted, waited for, collected into its dataset (DIR/dataset, or "
        "--dataset) and fitted, until its precision target (exit 0) or its budget (exit 3); "
        "the same command resumes an interrupted run (recorded rounds are not run again).")
    parser.add_argument("campaign_dir", type=Path, metavar="DIR")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the sbatch commands without running them")
    parser.add_argument("--dataset", type=Path, metavar="D",
                        help="adaptive campaigns: collect the rounds into D (set before the "
                        "first round is recorded)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.fit.adaptive_campaign import is_adaptive_dir

    if is_adaptive_dir(args.campaign_dir):
        return _adaptive(args)
    if args.dataset is not None:
        raise UserError("--dataset is for adaptive campaigns", where="option --dataset",
                        hint=f"collect {args.campaign_dir} with 'pt2pt collect "
                             f"{args.campaign_dir} --dataset D' once its jobs have ended")
    print(format_submissions(submit(args.campaign_dir, dry_run=args.dry_run)))
    return 0


def _adaptive(args: argparse.Namespace) -> int:
    from kit.fit.adaptive_campaign import run_adaptive, use_dataset
    from kit.measure.campaign.wait import submit_and_wait

    if args.dry_run:
        raise UserError("an adaptive campaign's rounds are chosen as it runs: there is no "
                        "list of sbatch commands to show before it starts",
                        where="option --dry-run", hint=f"drop --dry-run, or look at a round "
                        f"with 'pt2pt submit {args.campaign_dir}/round-00 --dry-run'")
    use_dataset(args.campaign_dir, args.dataset)
    try:
        record = run_adaptive(args.campaign_dir, run=submit_and_wait)
    except KeyboardInterrupt:
        print(f"pt2pt: the round's jobs stay in Slurm's queue; 'pt2pt submit "
              f"{args.campaign_dir}' again waits for them and goes on", file=sys.stderr)
        raise
    return 0 if record["reached"] else 3
