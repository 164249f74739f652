"""``pt2pt run-local DIR|CAMPAIGN``: run the planned jobs with bash, without Slurm."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.core import argtypes
from kit.core.errors import UserError
from kit.data.collect import collect, format_report
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.runlocal import run_local_with_progress


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run-local", help="run a campaign's jobs on this machine with bash (no Slurm)",
        description="Run the same rendered job scripts that 'pt2pt submit' would queue, one "
        "after the other in the planned (shuffled) order, with 'mpirun -n 2' on this host. "
        "Give a planned directory, or a campaign YAML file (planned first into -o DIR). "
        "Jobs already completed or skipped are not run again unless --rerun. Inter-node "
        "jobs are recorded as skipped. A campaign with 'design: adaptive' (the file, or the "
        "folder 'pt2pt plan' made of it) runs in rounds (OUT/round-KK), collected into "
        "--dataset (default OUT/dataset), until its precision target (exit 0) or its budget "
        "(exit 3); OUT/design.json records every round; the same command resumes an "
        "interrupted run (recorded rounds are not run again).")
    parser.add_argument("target", type=Path, metavar="DIR|CAMPAIGN")
    parser.add_argument("-o", "--output", type=Path, metavar="DIR",
                        help="where to plan a CAMPAIGN file (default: ./<file stem>)")
    parser.add_argument("--dataset", type=Path, metavar="D",
                        help="collect the outputs into this dataset afterwards")
    parser.add_argument("--rerun", action="store_true", help="run finished jobs again")
    parser.add_argument("--wait-idle", nargs="?", type=argtypes.wait_minutes, const=10.0,
                        default=0.0, metavar="MINUTES",
                        help="when the load average says the machine is busy, wait up to "
                        "MINUTES (default 10) for it to drop before measuring; without it the "
                        "jobs run at once and a warning says the timings include the load")
    parser.set_defaults(func=run)


def _adaptive(campaign: Path) -> bool:
    from kit.measure.campaign.schema import load_campaign

    return load_campaign(campaign).adaptive is not None


def _run_adaptive(args: argparse.Namespace, out: Path) -> int:
    from kit.fit.adaptive_campaign import prepare, run_adaptive, use_dataset
    from kit.measure.campaign.runlocal import run_local_with_progress

    if args.target.is_file():
        prepare(args.target, out, args.dataset)
    else:
        use_dataset(out, args.dataset)
    record = run_adaptive(out, run=run_local_with_progress)
    return 0 if record["reached"] else 3


def run(args: argparse.Namespace) -> int:
    from kit.fit.adaptive_campaign import is_adaptive_dir

    target: Path = args.target
    if target.is_file() and _adaptive(target):
        return _run_adaptive(args, args.output or Path.cwd() / target.stem)
    if target.is_dir() and is_adaptive_dir(target) and args.output is None:
        return _run_adaptive(args, target)
    if target.is_file():
        out = args.output or Path.cwd() / target.stem
        if (out / "manifest.json").is_file():
            print(f"using the existing plan in {out}")
        else:
            plan_campaign(target, out)
            print(f"planned {target} into {out}")
        campaign_dir = out
    elif target.is_dir():
        if args.output is not None:
            raise UserError("-o is only for a campaign file", where="option -o",
                            hint=f"{target} is already a planned directory; drop -o")
        campaign_dir = target
    else:
        raise UserError("no such file or directory", where=str(target),
                        hint="give a campaign YAML file or a directory made by 'pt2pt plan'")
    from rich.console import Console

    from kit.measure.campaign.manifest import pending_jobs
    from kit.measure.machine import check_machine

    busy = None
    if pending_jobs(campaign_dir, args.rerun):
        busy = check_machine(Console(stderr=True), 60.0 * args.wait_idle,
                             again=f"pt2pt run-local {campaign_dir} --rerun --wait-idle")
    results = run_local_with_progress(campaign_dir, rerun=args.rerun)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.state] = counts.get(r.state, 0) + 1
    print("run-local: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if busy:
        print("run-local: measured on a busy machine (see the warning above)")
    rc = 0 if all(r.state in ("completed", "skipped") for r in results) else 1
    if args.dataset is not None:
        report = collect(campaign_dir, args.dataset)
        print(format_report(report))
        rc = rc or (0 if report.ok else 1)
    return rc
