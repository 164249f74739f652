"""``pt2pt datasets DIR``: the series of a dataset, one line each."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kit.dataset import RUNS_FILE, series_table
from kit.errors import UserError
from kit.schema import SERIES_KEYS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "datasets",
        help="list the series of a dataset (counts, size range, small time, large bandwidth)",
        description="One line per series (campaign, tool, transport, op, stat): samples "
        "outside warm-up, size range, median time of messages <= 64 B, and the median "
        "bandwidth over the top octave of sizes.",
    )
    parser.add_argument("dataset", type=Path, metavar="DIR", help="dataset folder")
    parser.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    parser.set_defaults(func=run)


def _seconds(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def _bandwidth(value: float | None) -> str:
    if value is None or math.isnan(value) or math.isinf(value):
        return "-"
    return f"{value / 1e6:.4g} MB/s"


def run(args: argparse.Namespace) -> int:
    table = series_table(args.dataset)
    if not (Path(args.dataset) / RUNS_FILE).is_file():
        # A folder without a runs table holds no ingested run: an empty listing would hide
        # a wrong path (e.g. the campaign folder instead of its dataset).
        raise UserError("no pt2pt-kit dataset here: nothing has been ingested into this folder",
                        where=str(args.dataset),
                        hint="give the folder passed to 'pt2pt ingest --dataset' or "
                        "'pt2pt collect --dataset'")
    if args.csv:
        print(table.write_csv(), end="")
        return 0
    out = Table(title=f"{args.dataset}: {table.height} series")
    for key in SERIES_KEYS:
        out.add_column(key)
    for name in ("samples", "size min", "size max", "small median", "large bw"):
        out.add_column(name, justify="right")
    for row in table.iter_rows(named=True):
        out.add_row(*(str(row[k]) for k in SERIES_KEYS), str(row["n_samples"]),
                    str(row["size_min"]), str(row["size_max"]),
                    _seconds(row["small_median_s"]), _bandwidth(row["large_bw_Bps"]))
    Console(width=160).print(out)
    return 0
