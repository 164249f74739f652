"""`pt2pt tui`: registered as a plugin so that `kit` never imports `tui`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="explore a dataset and its models in the terminal")
    p.add_argument("dataset", nargs="?", help="dataset directory")
    p.add_argument("--model", help="model JSON to show")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tui.app import run

    return run(args.dataset, model=args.model)
