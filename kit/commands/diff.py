"""``pt2pt diff A B``: did the network change? Per band and regime, with intervals."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from kit.core import argtypes
from kit.core.atomicwrite import write_text
from kit.core.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "diff", help="did it change? compare two series band by band, with intervals",
        description="Compare series B with series A: per size band the change of p05/p50/p95 "
        "and per regime the change of latency/bandwidth/slope, each with a 95 %% interval "
        "corrected for the number of tests, breakpoints that moved, appeared or vanished, and "
        "a verdict. A and B are dataset folders (DATASET#KEY=V,... selects a series, e.g. "
        "data#campaign=before,transport=tcp) or model files whose dataset is still there; two "
        "dataset folders without a selector are compared series by series (paired by key, "
        "one verdict each). "
        f"Exit code {3} when a --fail-if threshold is exceeded, {4} when no verdict is called "
        "because a side was measured on a disturbed node.")
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
    p.add_argument("--allow-disturbed", action="store_true",
                   help="call a change even when a side was measured on a disturbed node "
                   "(load, CPU pressure or stolen time recorded in runs.parquet); without it "
                   f"the table is shown, no verdict is called and the exit code is {4}")
    p.add_argument("--no-params", action="store_true",
                   help="skip the per-regime parameter comparison")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON ('-' for stdout)")
    p.add_argument("-o", "--output", type=Path, metavar="DIR",
                   help="write diff.html (report page), diff.png and diff.json here")
    p.set_defaults(func=run)


def _both_datasets(args: argparse.Namespace) -> bool:
    """A and B are dataset folders without a selector (and no --series): pair their series."""
    return (args.series is None and "#" not in args.a and "#" not in args.b
            and Path(args.a).is_dir() and Path(args.b).is_dir())


def _run_pairs(args: argparse.Namespace, rules: list[Any], pairs: Any) -> int:
    """Every series of A against the series of B with the same key: one verdict per pair,
    then the list of verdicts (what a user comparing two datasets wants)."""
    from kit.analyses.diff import (
        EXIT_THRESHOLD,
        EXIT_WITHHELD,
        broken,
        dataset_side,
        diff,
        plot_diff,
        render_html,
        summary_lines,
    )

    if not pairs.pairs:
        raise UserError("no series of A matches a series of B", where=f"{args.a} / {args.b}",
                        hint="list both with 'pt2pt datasets DIR', then pick one series "
                        "each: 'pt2pt diff A#KEY=V,... B#KEY=V,...'")
    results, hits, held = [], [], []
    for label, sel_a, sel_b in pairs.pairs:
        a = dataset_side(Path(args.a), sel_a, f"A={args.a}")
        b = dataset_side(Path(args.b), sel_b, f"B={args.b}")
        result = diff(a, b, alpha=args.alpha, min_effect=args.min_effect / 100.0,
                      n_boot=args.bootstrap, seed=args.seed, params=not args.no_params,
                      allow_disturbed=args.allow_disturbed)
        results.append((label, result))
        if args.json != "-":
            print(f"== {label} ==")
            print("\n".join(summary_lines(result)))
            print()
        if result.withheld:
            held.append(label)
        else:
            hits += [f"{label}: {h}" for h in broken(result, rules)]
        if args.output:
            folder = args.output / re.sub(r"[^A-Za-z0-9.=-]+", "_", label)
            write_text(folder / "diff.json", json.dumps(result.as_dict(), indent=1) + "\n")
            plot_diff(result, a, b, folder / "diff.png")
            write_text(folder / "diff.html", render_html(result))
    doc = {"format": "pt2pt-diff-pairs", "format_version": 1, "a": args.a, "b": args.b,
           "pairs": [{"series": label, **r.as_dict()} for label, r in results],
           "only_a": pairs.only_a, "only_b": pairs.only_b}
    text = json.dumps(doc, indent=1) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        print(f"{len(results)} series pair(s), matched by key; one verdict each:")
        width = max(len(label) for label, _ in results)
        for label, r in results:
            print(f"  {label:<{width}}  {r.verdict}")
        for side, names in (("A", pairs.only_a), ("B", pairs.only_b)):
            if names:
                print(f"only in {side} (not compared): {'; '.join(names)}")
        if args.json:
            write_text(Path(args.json), text)
            print(f"wrote {args.json}")
    if args.output:
        write_text(args.output / "diff.json", text)
        print(f"wrote {args.output}/<series>/diff.html, diff.png, diff.json and "
              f"{args.output}/diff.json", file=sys.stderr)
    for h in hits:
        print(f"pt2pt diff: threshold exceeded: {h}", file=sys.stderr)
    if hits:
        return EXIT_THRESHOLD
    if held:
        print(f"pt2pt diff: no verdict for {len(held)} pair(s) measured on a disturbed node "
              f"({'; '.join(held)}); measure again on a quiet node or pass --allow-disturbed",
              file=sys.stderr)
        return EXIT_WITHHELD
    return 0


def run(args: argparse.Namespace) -> int:
    from kit.analyses.diff import (
        EXIT_THRESHOLD,
        EXIT_WITHHELD,
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
    if not args.halves and args.b is not None and _both_datasets(args):
        from kit.analyses.diff import pair_series

        pairs = pair_series(Path(args.a), Path(args.b))
        if len(pairs.pairs) != 1 or pairs.only_a or pairs.only_b:
            return _run_pairs(args, rules, pairs)
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
                  reason=reason, allow_disturbed=args.allow_disturbed)
    text = json.dumps(result.as_dict(), indent=1) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        print("\n".join(summary_lines(result)))
        if args.json:
            write_text(Path(args.json), text)
            print(f"wrote {args.json}")
    if args.output:
        write_text(args.output / "diff.json", text)
        plot_diff(result, a, b, args.output / "diff.png")
        write_text(args.output / "diff.html", render_html(result))
        print(f"wrote {args.output}/diff.html, diff.png and diff.json", file=sys.stderr)
    if result.withheld:
        print(f"pt2pt diff: no verdict, a side was measured on a disturbed node: "
              f"{result.withheld}; measure again on a quiet node or pass --allow-disturbed",
              file=sys.stderr)
        return EXIT_WITHHELD
    hits = broken(result, rules)
    for h in hits:
        print(f"pt2pt diff: threshold exceeded: {h}", file=sys.stderr)
    return EXIT_THRESHOLD if hits else 0
