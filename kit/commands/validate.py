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
from typing import Any

import polars as pl

from kit.errors import ModelError, UserError
from kit.validate import SPLIT_METHODS, validate_into, validation_table


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
                   help="series selector for a dataset (campaign, tool, transport, op, stat)")
    p.add_argument("--split", choices=SPLIT_METHODS, default="repetition",
                   help="held-out samples: a share of every size's repetitions (default), a "
                   "random share of all samples, or whole runs")
    p.add_argument("--test-fraction", type=float, default=0.3, metavar="F",
                   help="share held out (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and draws (default 0)")
    p.add_argument("-o", "--output", type=Path, metavar="MODEL_JSON",
                   help="write the model with its validation here (default for a model file: "
                   "update it in place)")
    p.add_argument("--no-save", action="store_true", help="print only, write nothing")
    p.set_defaults(func=run)


def _load(args: argparse.Namespace) -> tuple[Any, pl.DataFrame, dict[str, Any]]:
    """The model (fitted or to fit), the series' samples and the provenance to save."""
    from kit.fitting import parse_selector
    from kit.model import RegimeModel
    from kit.model.io import load_model
    from kit.report.build import series_frame
    from kit.schema import SERIES_KEYS

    series = parse_selector(args.series, "option --series", SERIES_KEYS)
    if args.target.is_dir():
        from kit import dataset as ds

        table = ds.series_table(args.target)
        for k, v in series.items():
            table = table.filter(pl.col(k) == v)
        if table.height != 1:
            listing = "; ".join(",".join(f"{k}={r[k]}" for k in ("campaign", "tool", "transport",
                                                                   "op", "stat"))
                                for r in table.iter_rows(named=True))
            raise UserError(f"{table.height} series match in {args.target}"
                            + (f": {listing}" if listing else ""), where="option --series",
                            hint="select exactly one with --series KEY=VALUE,...")
        sel = {k: table[k][0] for k in ("campaign", "tool", "transport", "op", "stat")}
        model = RegimeModel(random_state=args.seed)
        return model, series_frame(args.target, sel), {"dataset": str(args.target),
                                                       "series": sel}
    model = load_model(args.target)
    prov = dict(getattr(model, "provenance_", {}) or {})
    dataset = args.dataset or (Path(prov["dataset"]) if prov.get("dataset") else None)
    if dataset is None:
        raise ModelError("the model does not say which dataset it was fitted on",
                         where=str(args.target), hint="give --dataset DIR")
    sel = series or (prov.get("series") if isinstance(prov.get("series"), dict) else {})
    return model, series_frame(dataset, sel), prov


def run(args: argparse.Namespace) -> int:
    from kit.model.io import save_model

    model, frame, prov = _load(args)
    size = frame["size"].to_numpy().astype(float)
    time = frame["time"].to_numpy().astype(float)
    groups = frame["run_id"].to_numpy() if args.split == "group" else None
    if args.target.is_dir():
        model.fit(size, time)
    result = validate_into(model, size, time, method=args.split,
                           test_fraction=args.test_fraction, random_state=args.seed,
                           groups=groups)
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_width_chars=120, float_precision=4):
        print(validation_table(result))
    for r in result["ranges"]:
        parts = [f"{name} {r[name]['crps_over_floor']:.2f}x" for name in result["summary"]
                 if name != "floor" and name in r]
        print(f"sizes {r['size_min']:>10.0f} .. {r['size_max']:<10.0f} floor {r['floor']:.4f}  "
              + "  ".join(parts))
    out = args.output or (None if args.target.is_dir() else args.target)
    if out is not None and not args.no_save:
        save_model(model, out, provenance=prov)
        print(f"validation written to {out}")
    return 0
