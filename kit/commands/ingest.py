"""``pt2pt ingest PATH... --dataset DIR``: tool outputs into the tidy dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.errors import IngestError
from kit.ingest import FORMATS, ingest


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
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = ingest(args.paths, args.dataset, campaign=args.campaign,
                    transport=args.transport, tool=args.tool, op=args.op)
    if not args.quiet:
        for warning in report.warnings:
            print(f"pt2pt: warning: {warning}", file=sys.stderr)
        for path, reason in report.files_skipped:
            print(f"skipped {path}: {reason}", file=sys.stderr)
    for _path, message in report.files_failed:
        print(f"pt2pt: error: {message}", file=sys.stderr)
    print(report.summary())
    if report.files_failed:
        raise IngestError(f"{len(report.files_failed)} file(s) could not be ingested (listed "
                          "above); everything else was written", where=str(args.dataset),
                          hint="fix or leave out those files and run the same command again",
                          exit_code=1)
    return 0
