"""``pt2pt report DATASET|MODEL -o DIR``: HTML page with plots and the validation table."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.core import argtypes


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="HTML report: log-log plots, residual histograms, validation",
        description="For a model file: plots of its series (samples from the dataset in its "
        "provenance or --dataset) and its stored validation. For a dataset folder: every "
        "series (or those matching --series) is fitted and validated, one section each. "
        "Writes DIR/index.html and PNG figures.")
    p.add_argument("target", type=Path, metavar="DATASET|MODEL",
                   help="dataset folder or model JSON")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                   help="output folder (created)")
    p.add_argument("--dataset", type=Path, metavar="DIR",
                   help="for a model: dataset with its samples (default: its provenance)")
    p.add_argument("--series", metavar="KEY=VALUE,...",
                   help="for a dataset: only series matching these keys")
    p.add_argument("--no-validate", action="store_true",
                   help="for a dataset: skip the held-out validation (faster)")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="seed of fits, splits and draws")
    p.add_argument("--apps", type=Path, metavar="FILE",
                   help="for a dataset: a pt2pt predict-app result (-o FILE), shown as the "
                   "applications section")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.data.dataset import parse_selector, require_ingested
    from kit.outputs.report.build import report_dataset, report_model_file

    if args.target.is_dir():
        from kit.outputs.predictapp import read

        require_ingested(args.target)
        apps = read(args.apps) if args.apps else None
        path = report_dataset(args.target, args.output,
                              series=parse_selector(args.series, "option --series"),
                              validate=not args.no_validate, random_state=args.seed, apps=apps)
    else:
        path = report_model_file(args.target, args.output, dataset=args.dataset)
    print(f"wrote {path}")
    return 0
