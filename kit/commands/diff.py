"""``pt2pt diff A B``: did the network change? Per band and regime, with intervals."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from kit.core import argtypes
from kit.core.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "diff", help="did it change? compare two series band by band, with intervals",
        description="Compare series B with series A: per size band the change of p05/p50/p95 "
        "and per regime the change of latency/bandwidth/slope, each with a 95 %% interval "
        "corrected for the number of tests, breakpoints that moved, appeared or vanished, and "
        "a verdict. A and B are dataset folders (DATASET#KEY=V,... selects a series, e.g. "
        "data#campaign=before,transport=tcp) or model files whose dataset is still there. "
        f"Exit code {3} when a --fail-if threshold is exceeded.")
    p.add_argument("a", metavar="A", help="the reference: DATASET[#SELECTOR] or MODEL.json")
    p.add_argument("b", metavar="B", nargs="?",
                   help="the one compared with A (omit with --halves)")
    p.add_argument("--series", metavar="KEY=V,...",
                   help="selector applied to both sides when they do not carry their own")
    p.add_argument("--halves", action="store_true",
                   help="compare the first half of A's runs (in sequence order) with the second")
    p.add_argument("--fail-if", action="append", default=[], metavar="RULE",
                   help="e.g. 'p50 slower > 5%%' or 'bandwidth lower > 3%%' (repeatable); exit 3 "
                   "when a significant change exceeds it")
    p.add_argument("--min-effect", type=argtypes.percent, default=2.0, metavar="PCT",
                   help="smallest change reported, in percent (default 2)")
    p.add_argument("--alpha", type=argtypes.probability, default=0.05,
                   help="family-wise error rate of the intervals (default 0.05)")
    p.add_argument("--bootstrap", type=argtypes.resamples, default=200, metavar="N",
                   help="bootstrap resamples (default 200)")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="random seed of the bootstrap")
    p.add_argument("--no-params", action="store_true",
                   help="skip the per-regime parameter comparison")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON ('-' for stdout)")
    p.add_argument("-o", "--output", type=Path, metavar="DIR",
                   help="write diff.html (report page), diff.png and diff.json here")
    p.set_defaults(func=run)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    from kit.analyses.diff import (
        EXIT_THRESHOLD,
        broken,
        diff,
        halves,
        load_side,
        parse_threshold,
        plot_diff,
        render_html,
        summary_lines,
    )

    rules = [parse_threshold(r) for r in args.fail_if]
    if args.bootstrap < 20:
        raise UserError(f"{args.bootstrap} resamples are too few for an interval",
                        where="--bootstrap", hint="use at least 20 (default 200)")
    if args.min_effect < 0:
        raise UserError("must be >= 0", where="--min-effect")
    reason = None
    if args.halves:
        if args.b is not None:
            raise UserError("--halves compares A with itself; give only A", where="B",
                            hint="drop B or drop --halves")
        a, b = halves(load_side(args.a, series=args.series))
        reason = "drift within the run: its two halves differ"
    else:
        if args.b is None:
            raise UserError("B is missing", where="pt2pt diff",
                            hint="give two series (A B), or one with --halves")
        a = load_side(args.a, series=args.series, label=f"A={args.a}")
        b = load_side(args.b, series=args.series, label=f"B={args.b}")
    result = diff(a, b, alpha=args.alpha, min_effect=args.min_effect / 100.0,
                  n_boot=args.bootstrap, seed=args.seed, params=not args.no_params,
                  reason=reason)
    text = json.dumps(result.as_dict(), indent=1) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        print("\n".join(summary_lines(result)))
        if args.json:
            _write_atomic(Path(args.json), text)
            print(f"wrote {args.json}")
    if args.output:
        _write_atomic(args.output / "diff.json", text)
        plot_diff(result, a, b, args.output / "diff.png")
        _write_atomic(args.output / "diff.html", render_html(result))
        print(f"wrote {args.output}/diff.html, diff.png and diff.json", file=sys.stderr)
    hits = broken(result, rules)
    for h in hits:
        print(f"pt2pt diff: threshold exceeded: {h}", file=sys.stderr)
    return EXIT_THRESHOLD if hits else 0
