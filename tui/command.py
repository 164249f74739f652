"""`pt2pt tui`: registered as a plugin so that `kit` never imports `tui`."""

from __future__ import annotations

import argparse
import os
import sys
import threading


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="explore a dataset and its models in the terminal")
    p.add_argument("dataset", nargs="?", help="dataset directory")
    p.add_argument("--model", help="model JSON to show")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tui.app import run

    rc = run(args.dataset, model=args.model)
    # A fit of a large series may still be computing in a worker thread, and Python joins
    # such threads at exit: the user would wait for a result nobody will see. Nothing is
    # lost by not waiting (exports finish before their dialog closes, and fits write
    # nothing), so leave at once.
    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.main_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc
