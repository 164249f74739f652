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
from kit.core.errors import ModelError
from kit.fit.validate import SPLIT_METHODS

if TYPE_CHECKING:  # the engine is imported when a command runs, not to parse its options
    import polars as pl

    from kit.model import RegimeModel
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


def _load(args: argparse.Namespace) -> tuple[ModelFile, pl.DataFrame]:
    """The model (fitted, or to fit) with its provenance, and the series' samples.

    Both paths select rows with kit.data.dataset's selector, as fit and the report do.
    """
    import polars as pl

    from kit.data import dataset as ds
    from kit.model.contract import ModelFile
    from kit.model.io import read_model
    from kit.outputs.report.build import series_frame

    series = ds.parse_selector(args.series, "option --series")
    if args.target.is_dir():
        from kit.fit.fitting import provenance

        data = ds.select_series(ds.require_ingested(args.target), series, aggregates=True,
                                where="option --series")
        frame = pl.DataFrame({"size": data.size, "time": data.time, "run_id": data.run_id})
        return (ModelFile(_unfitted(data.keys, args.seed),
                          provenance=provenance(args.target, data.keys, len(data))), frame)
    fitted = read_model(args.target)
    dataset = args.dataset or fitted.dataset
    if dataset is None:
        raise ModelError("the model does not say which dataset it was fitted on",
                         where=str(args.target), hint="give --dataset DIR")
    sel = series or fitted.series or {}
    return fitted, series_frame(dataset, sel)


def _unfitted(keys: dict[str, str], seed: int) -> RegimeModel:
    """The estimator ``pt2pt fit`` would use for this series (aggregates: no noise search)."""
    from kit.model import RegimeModel

    if keys.get("stat", "raw") != "raw":
        return RegimeModel(random_state=seed, noise=False, mixture=False)
    return RegimeModel(random_state=seed)


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from kit.fit.validate import validate_into, validation_table
    from kit.model.io import write_model

    out = args.output or (None if args.target.is_dir() else args.target)
    if out is not None and not args.no_save:
        refuse_read_only(out)  # before the work, not after: a protected model stays as it is
    fitted, frame = _load(args)
    size = frame["size"].to_numpy().astype(float)
    time = frame["time"].to_numpy().astype(float)
    groups = frame["run_id"].to_numpy() if args.split == "group" else None
    if args.target.is_dir():
        fitted.model.fit(size, time)
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
