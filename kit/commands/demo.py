"""`pt2pt demo`: the whole workflow on this machine, in one command."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from kit.core import argtypes


def register(sub: argparse._SubParsersAction) -> None:
    from kit.outputs.demo import DEFAULT_CAMPAIGN

    p = sub.add_parser(
        "demo", help="run the demo campaign locally, fit, export, report, open the TUI",
        description="Plan the demo campaign, run it on this machine without Slurm (probe "
        "pingpong/send/recv over shared memory and TCP, plus OSU/SkaMPI when installed), ingest "
        "the samples, fit and validate one model per series, export SimGrid configuration, write "
        "the HTML report, print a summary, and open the TUI on the dataset and its models when "
        "attached to a terminal (otherwise print that command). "
        "Running it again reuses what is there.")
    p.add_argument("-o", "--output", default="demo-out", metavar="DIR",
                   help="where everything goes (default: ./demo-out)")
    p.add_argument("--campaign", default=str(DEFAULT_CAMPAIGN), metavar="YAML",
                   help="campaign file (default: jobs/campaigns/local-demo.yaml)")
    p.add_argument("--quick", action="store_true",
                   help="fewer samples and one repetition (about a minute)")
    p.add_argument("--rerun", action="store_true", help="measure again even if jobs finished")
    p.add_argument("--no-tui", action="store_true", help="do not open the TUI at the end")
    p.add_argument("--wait-idle", nargs="?", type=argtypes.wait_minutes, const=10.0, default=0.0,
                   metavar="MINUTES",
                   help="when the load average says the machine is busy, wait up to MINUTES "
                   "(default 10) for it to drop before measuring; without it the demo measures "
                   "at once and warns")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from kit.outputs.demo import (
        baseline_table,
        crosscheck,
        run_demo,
        summary_table,
        tui_command,
        verdicts_text,
        warnings_text,
    )

    err = Console(stderr=True)
    result = run_demo(Path(args.output), campaign=Path(args.campaign), quick=args.quick,
                      rerun=args.rerun, console=err, wait_idle_s=60.0 * args.wait_idle)
    # A log (CI, a pipe) gets the full table width instead of 80 columns.
    out = Console() if sys.stdout.isatty() else Console(width=120)
    out.print(summary_table(result.series))
    for line in verdicts_text(result.series):
        out.print(f"verdict: {line}", soft_wrap=True, markup=False, highlight=False)
    for line in warnings_text(result.series):
        out.print(f"WARNING run quality: {line}", soft_wrap=True, markup=False,
                  highlight=False)
    baselines = baseline_table(result.series)
    if baselines is not None:
        out.print(baselines)
    others = crosscheck(result.dataset, result.series)
    if others.table is not None:
        out.print(others.table)
    for line in others.withheld:
        out.print(f"cross-check: {line}", soft_wrap=True, markup=False, highlight=False)
    out.print(f"dataset:  {result.dataset}")
    out.print(f"models:   {result.out / 'models'}")
    for cfg in result.simgrid:
        out.print(f"simgrid:  {cfg}")
    if result.report:
        out.print(f"report:   {result.report}")
    for note in result.notes:  # after the tables: the last thing read before the TUI opens
        out.print(f"note:     {note}", soft_wrap=False, markup=False, highlight=False)
    failed = [r for r in result.series if r.error]
    tui_cmd = tui_command(result)  # with the fitted models: the TUI shows them, no refit
    if not args.no_tui and sys.stdin.isatty() and sys.stdout.isatty():
        rc = subprocess.call([sys.executable, "-m", "kit", *tui_cmd[1:]])
        if rc != 0:
            out.print(f"The TUI did not start (exit {rc}); open it with: {shlex.join(tui_cmd)}",
                      soft_wrap=True, markup=False, highlight=False)
    else:
        # One line however long the paths: users copy it, tests parse it.
        out.print(f"explore:  {shlex.join(tui_cmd)}", soft_wrap=True, markup=False,
                  highlight=False)
    return 1 if not result.series or len(failed) == len(result.series) else 0
