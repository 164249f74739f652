"""``pt2pt fit DATASET -o model.json``: fit the regime model to one series of a dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.errors import UserError
from kit.fitting import fit_dataset, parse_selector


def _sizes_list(text: str, where: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"cannot read {text!r} as comma-separated sizes in bytes", where=where,
                        hint="e.g. 1420,65536") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fit", help="fit per-regime models with noise to one series of a dataset",
        description="Segment the series on log(size) (number of regimes by BIC), pick a family "
        "per regime (constant, linear, power), fit two-band mixtures, overlaps and noise, and "
        "write the model as JSON. With a single series in the dataset no --series is needed.")
    parser.add_argument("dataset", type=Path, metavar="DATASET", help="dataset folder")
    parser.add_argument("--series", metavar="KEY=V,...",
                        help="select one series: campaign=..,tool=..,transport=..,op=..")
    parser.add_argument("--breakpoints", metavar="B1,B2,..",
                        help="fix the regime boundaries (bytes) instead of searching them")
    parser.add_argument("--max-regimes", type=int, default=6, metavar="N",
                        help="most regimes the search may use (default 6)")
    parser.add_argument("--min-support", type=int, default=None, metavar="N",
                        help="fewest samples per regime (default: max(20, 1%% of samples))")
    parser.add_argument("--no-overlap", action="store_true", help="sharp boundaries only")
    parser.add_argument("--no-mixture", action="store_true", help="no two-band regimes")
    parser.add_argument("--seed", type=int, default=0, help="random state for subsampling/EM")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="MODEL.json",
                        help="where to write the model")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.model.io import save_model

    if args.max_regimes < 1:
        raise UserError("must be at least 1", where="--max-regimes")
    bps = _sizes_list(args.breakpoints, "--breakpoints") if args.breakpoints else None
    model = fit_dataset(args.dataset, parse_selector(args.series), breakpoints=bps,
                        max_regimes=args.max_regimes, min_support=args.min_support,
                        overlap=not args.no_overlap, mixture=not args.no_mixture,
                        random_state=args.seed)
    save_model(model, args.output)
    regimes = ", ".join(f"[{r.size_min:.0f}, {r.size_max:.0f}) {r.family}"
                        + (" 2-band" if r.is_mixture else "") for r in model.regimes_)
    print(f"{args.output}: {len(model.regimes_)} regime(s): {regimes}; "
          f"{model.n_outliers_} outlier(s) of {model.n_samples_} samples", file=sys.stderr)
    return 0
