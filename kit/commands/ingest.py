"""``pt2pt ingest PATH... --dataset DIR``: tool outputs into the tidy dataset."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from kit.core.errors import IngestError
from kit.data.ingest import FORMATS, ingest
from kit.data.ingest.orchestrate import Interrupted, stop_on_signals
from kit.data.schema import PLACEMENTS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="read probe/OSU/SkaMPI/logp/ReproMPI/calibration/CSV outputs into a dataset",
        description="Read tool outputs (files or folders; the format is detected from the "
        "content) into the Parquet dataset DIR. Re-ingesting a file adds nothing. A file "
        "that cannot be read contributes nothing; the others are still ingested and the "
        "exit code is 1. Formats and conversions: docs/ingest-formats.md.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="output files or folders")
    parser.add_argument("--dataset", required=True, metavar="DIR", type=Path,
                        help="dataset folder (created if missing)")
    parser.add_argument("--campaign", help="campaign name (default: the folder of each file)")
    parser.add_argument("--transport",
                        help="transport name, e.g. tcp, ib, shm (default: inferred from the "
                        "probe's MPI environment or from words such as _tcp/_vader in file "
                        "and folder names, else 'unknown')")
    parser.add_argument("--tool", choices=FORMATS, help="force the format instead of detecting it")
    parser.add_argument("--op", help="op of plain 'size,duration' CSV files (default pingpong)")
    parser.add_argument("--placement", choices=PLACEMENTS,
                        help="where the ranks ran (default: from the job record, checked "
                        "against the hosts the run recorded; else from the hosts alone)")
    parser.add_argument("--allow-running", action="store_true",
                        help="also ingest runs whose writer is still at work (the probe's "
                        "lock, or its meta without an end time): the samples written so far, "
                        "as an incomplete run that a later, longer copy replaces; by default "
                        "they are skipped and listed")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    parser.set_defaults(func=run)


def _total_bytes(paths: list[str]) -> int:
    """Bytes under ``paths`` (the bar's total): a quick stat walk, no reading."""
    total = 0
    for given in map(Path, paths):
        files = [given] if given.is_file() else [p for p in given.rglob("*") if p.is_file()]
        for f in files:
            with contextlib.suppress(OSError):
                total += f.stat().st_size
    return max(total, 1)


def run(args: argparse.Namespace) -> int:
    from kit.core import progress

    if args.quiet:
        progress.set_quiet(True)
    try:
        with stop_on_signals(), progress.bar("ingest", description="finding files",
                                             count=False) as shown:
            done: list[int] = [0, 0]  # bytes of the files before the current one, its own size

            def on_file(index: int, n_files: int, path: Path) -> None:
                # Weighted by bytes: one 10 M-row file among small ones is most of the work.
                done[0] += done[1]
                try:
                    done[1] = path.stat().st_size
                except OSError:
                    done[1] = 0
                if index == 0:
                    shown.update(total=float(_total_bytes(args.paths)))
                shown.update(completed=float(done[0]),
                             description=f"file {index + 1}/{n_files}: {path.name}")

            report = ingest(args.paths, args.dataset, campaign=args.campaign,
                            transport=args.transport, tool=args.tool, op=args.op,
                            placement=args.placement,
                            on_file=on_file if shown.shown else None,
                            allow_running=args.allow_running)
    except Interrupted as stop:
        print(interrupted_message(stop, args.dataset), file=sys.stderr)
        return 128 + stop.signum
    if not args.quiet:
        for warning in report.warnings:
            print(f"pt2pt: warning: {warning}", file=sys.stderr)
        for path, reason in report.files_skipped:
            print(f"skipped {path}: {reason}", file=sys.stderr)
    for _path, message in report.files_failed:
        print(f"pt2pt: error: {message}", file=sys.stderr)
    if report.running:
        print(f"pt2pt: note: {len(report.running)} file(s) are still being written and were "
              "not ingested (listed above); run the same command when their runs have ended",
              file=sys.stderr)
    print(report.summary())
    if report.files_failed:
        raise IngestError(f"{len(report.files_failed)} file(s) could not be ingested (listed "
                          "above); everything else was written", where=str(args.dataset),
                          hint="fix or leave out those files and run the same command again",
                          exit_code=1)
    return 0


def interrupted_message(stop: Interrupted, dataset: Path) -> str:
    """What a signal left behind: all of this ingest's runs, or none of them."""
    report = stop.report
    if stop.committed and report is not None:
        done = (f"{report.runs_added} run(s), {report.rows_added} row(s) from "
                f"{report.files_ok} file(s) were committed before stopping")
    else:
        read = f" ({report.files_ok} file(s) had been read)" if report is not None else ""
        done = f"nothing of this ingest was committed{read}; the dataset is as it was before"
    return (f"pt2pt: ingest stopped by {stop.name}: {done}. {dataset} is consistent; run the "
            "same command again to ingest the rest (files already in the dataset are skipped).")
