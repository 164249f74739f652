"""``pt2pt validate MODEL|DATASET``: held-out scores of a model next to the baselines.

With a model file, its series is read again from the dataset named in its provenance (or
``--dataset``), a copy with the same parameters is refitted on a training split, scored on
the held-out rest, and the result is stored in the model file (``validation``), so the
report and the TUI show it without recomputing. With a dataset folder, the selected series
is fitted here; ``-o`` saves that model with its validation.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from kit.core import argtypes
from kit.core.atomicwrite import refuse_read_only
from kit.fit.validate import SPLIT_METHODS

if TYPE_CHECKING:  # the engine is imported when a command runs, not to parse its options
    from kit.fit.fitting import SeriesSamples
    from kit.model.contract import ModelFile


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "validate", help="score a model on held-out samples against Hockney and peak baselines",
        description="Refit on a training split, score the held-out samples per size (CRPS "
        "relative to the held-out median, against the floor of the training samples' own "
        "distribution; median and p95 errors; [p05, p95] coverage) for the model, the "
        "Hockney line and the peak model. A model file gets the result written into it.")
    p.add_argument("target", type=Path, metavar="MODEL|DATASET",
                   help="model JSON written by 'pt2pt fit', or a dataset folder")
    p.add_argument("--dataset", type=Path, metavar="DIR",
                   help="dataset of the model's series (default: the model's provenance)")
    p.add_argument("--series", metavar="KEY=VALUE,...",
                   help="series selector for a dataset (campaign, tool, transport, placement, "
                   "host_pair, op, stat)")
    p.add_argument("--split", choices=SPLIT_METHODS, default="repetition",
                   help="held-out samples: a share of every size's repetitions (default), a "
                   "random share of all samples, or whole runs")
    p.add_argument("--test-fraction", type=argtypes.fraction, default=0.3, metavar="F",
                   help="share held out (default 0.3)")
    p.add_argument("--seed", type=argtypes.seed, default=0,
                   help="seed of the split and draws (default 0)")
    p.add_argument("-o", "--output", type=Path, metavar="MODEL_JSON",
                   help="write the model with its validation here (default for a model file: "
                   "update it in place)")
    p.add_argument("--no-save", action="store_true", help="print only, write nothing")
    p.set_defaults(func=run)


def _load(args: argparse.Namespace) -> tuple[ModelFile, SeriesSamples]:
    """The model (fitted, or to fit) with its provenance, and the rows it was fitted on.

    Both read the series as ``pt2pt fit`` does (kit.fit.fitting: kit.data.dataset's rows,
    run quality's exclusions), so the rows scored are the rows fitted.
    """
    from kit.data import dataset as ds
    from kit.fit import fitting
    from kit.model.io import read_model

    series = ds.parse_selector(args.series, "option --series")
    if args.target.is_dir():
        opts = fitting.FitOptions(aggregates=True, seed=args.seed, validate=False,
                                  intervals=False)
        dataset = ds.require_ingested(args.target)
        keys = ds.resolve_series(dataset, series, aggregates=True, where="option --series")
        result = fitting.fit_series(dataset, keys, opts)
        return result.fitted, result.samples
    fitted = read_model(args.target)
    return fitted, fitting.read_model_series(fitted, args.dataset, series or None)


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from kit.fit.validate import validate_into, validation_table
    from kit.model.io import write_model

    out = args.output or (None if args.target.is_dir() else args.target)
    if out is not None and not args.no_save:
        refuse_read_only(out)  # before the work, not after: a protected model stays as it is
    fitted, samples = _load(args)
    size, time = samples.size, samples.time
    groups = samples.frame["run_id"].to_numpy() if args.split == "group" else None
    result = validate_into(fitted.model, size, time, method=args.split,
                           test_fraction=args.test_fraction, random_state=args.seed,
                           groups=groups)
    fitted.validation = result
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_width_chars=120, float_precision=4):
        print(validation_table(result))
    for r in result["ranges"]:
        parts = [f"{name} {r[name]['crps_over_floor']:.2f}x" for name in result["summary"]
                 if name != "floor" and name in r]
        print(f"sizes {r['size_min']:>10.0f} .. {r['size_max']:<10.0f} floor {r['floor']:.4f}  "
              + "  ".join(parts))
    if fitted.aggregate:
        print("note: fitted to aggregates (the tool's per-size statistic): these scores are "
              "for that statistic, not for single messages")
    if out is not None and not args.no_save:
        write_model(fitted, out)
        print(f"validation written to {out}")
    return 0
