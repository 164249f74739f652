"""`pt2pt tui`: registered as a plugin so that `kit` never imports `tui`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tui", help="explore a dataset and its models in the terminal",
        description="Browse the series of a dataset, fit or edit their models, export. Models "
        "given with --model/--models are matched to their series through the series named in "
        "their provenance and shown without refitting.")
    p.add_argument("dataset", nargs="?",
                   help="dataset directory (default: the dataset the first model names)")
    p.add_argument("--model", action="append", default=[], metavar="MODEL.json",
                   help="model JSON to show on its series (repeatable; a directory stands for "
                   "its *.json files)")
    p.add_argument("--models", action="append", default=[], metavar="DIR",
                   help="directory of model JSON files, e.g. DIR/models of 'pt2pt demo' "
                   "(repeatable)")
    p.add_argument("--apps", metavar="FILE",
                   help="a pt2pt predict-app result: the applications view (ctrl+a, or an "
                   "app series) shows it")
    p.add_argument("--collectives", metavar="DIR",
                   help="a pt2pt collectives sweep folder: the collectives view (ctrl+l) ranks "
                   "it")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tui.app import run
    from tui.modelfiles import missing_models

    # Said before the screen opens: a notification inside it is easy to miss.
    for option, folder in (("--models", True), ("--model", False)):
        for raw in getattr(args, option.strip("-")):
            if not Path(raw).expanduser().exists():
                err = missing_models(Path(raw), args.dataset, folder)
                err.where = f"{option} {raw}"
                raise err

    return run(args.dataset, model=args.model, models=args.models, apps=args.apps,
               collectives=args.collectives)
