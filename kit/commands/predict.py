"""``pt2pt predict`` and ``pt2pt sample``: a model file's predictions as CSV on stdout."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from kit.core import argtypes
from kit.core.errors import UserError
from kit.core.inputs import read_bytes

#: The largest message size the kit reads (ingest's bound too).
MAX_SIZE = 1 << 48
#: Draws made by one ``model.sample`` call of ``pt2pt sample`` (8 MiB of float64).
SAMPLE_BLOCK = 1 << 20
#: A sizes file lists message sizes: 64 MiB is millions of them.
MAX_SIZES_FILE_BYTES = 64 << 20


def read_sizes(sizes: str | None, sizes_file: Path | None) -> np.ndarray:
    """Sizes from ``--sizes 1,2`` or a file (one per line or comma-separated; # comments)."""
    if (sizes is None) == (sizes_file is None):
        raise UserError("give exactly one of --sizes and --sizes-file", where="--sizes",
                        hint="e.g. --sizes 1,1024,65536")
    items: list[tuple[str, str]] = []
    if sizes is not None:
        items = [("--sizes", v) for v in sizes.split(",") if v.strip()]
    else:
        assert sizes_file is not None
        raw = read_bytes(sizes_file, "sizes file", limit=MAX_SIZES_FILE_BYTES)
        try:
            lines = raw.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError as exc:
            raise UserError(f"not UTF-8 text (invalid byte at offset {exc.start})",
                            where=str(sizes_file), hint="give one size in bytes per line") \
                from None
        for no, line in enumerate(lines, 1):
            line = line.split("#", 1)[0].strip()
            if no == 1 and line.lower() == "size":
                continue  # a CSV header
            items += [(f"{sizes_file}:{no}", v) for v in line.split(",") if v.strip()]
    out = []
    for where, v in items:
        try:
            val = float(v)
        except ValueError:
            raise UserError(f"{v.strip()!r} is not a size in bytes", where=where,
                            hint="give whole numbers of bytes, e.g. 1,1024,65536") from None
        if not np.isfinite(val) or val < 0:
            raise UserError(f"size {v.strip()} must be >= 0 bytes", where=where)
        if val > MAX_SIZE:  # beyond any message: a typo or a wrong unit
            raise UserError(f"size {v.strip()} is more than 2^48 bytes (256 TiB)", where=where,
                            hint="give message sizes in bytes")
        out.append(val)
    if not out:
        raise UserError("no sizes given", where="--sizes-file" if sizes_file else "--sizes")
    return np.asarray(out)


def _fmt_size(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else repr(float(s))


def register(subparsers: argparse._SubParsersAction) -> None:
    for name, helptext in (("predict", "median, p05 and p95 (seconds) per size, as CSV"),
                           ("sample", "draw times from a model's predictive distribution, CSV")):
        p = subparsers.add_parser(name, help=helptext, description=helptext + ".")
        p.add_argument("model", type=Path, metavar="MODEL", help="model JSON from 'pt2pt fit'")
        p.add_argument("--sizes", metavar="S1,S2,..", help="comma-separated sizes (bytes)")
        p.add_argument("--sizes-file", type=Path, metavar="F",
                       help="file with sizes, one per line or comma-separated")
        if name == "sample":
            p.add_argument("-n", type=argtypes.draws, default=1, metavar="N", help="draws per size")
            p.add_argument("--seed", type=argtypes.seed, default=None, help="random seed")
            p.set_defaults(func=run_sample)
        else:
            p.set_defaults(func=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    from kit.model.io import load_model

    sizes = read_sizes(args.sizes, args.sizes_file)
    model = load_model(args.model)
    q = model.predict_quantiles(sizes, [0.5, 0.05, 0.95])
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["size", "median", "p05", "p95"])
    for s, row in zip(sizes, q, strict=True):
        w.writerow([_fmt_size(s), *(f"{v:.9e}" for v in row)])
    return 0


def run_sample(args: argparse.Namespace) -> int:
    from kit.model.io import load_model

    if args.n < 1:
        raise UserError("must be at least 1", where="-n")
    sizes = read_sizes(args.sizes, args.sizes_file)
    model = load_model(args.model)
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["size", "time"])
    # Bounded memory: sizes x n draws may be 10^11 numbers; they are drawn and written a
    # block at a time (one call, and the same numbers as before, up to SAMPLE_BLOCK draws).
    rng = np.random.default_rng(args.seed)
    per_call = max(1, SAMPLE_BLOCK // args.n)
    for start in range(0, len(sizes), per_call):
        chunk = sizes[start:start + per_call]
        for first in range(0, args.n, SAMPLE_BLOCK):
            count = min(args.n - first, SAMPLE_BLOCK)
            draws = model.sample(chunk, count, random_state=rng)
            for s, row in zip(chunk, draws, strict=True):
                label = _fmt_size(s)
                w.writerows([label, f"{v:.9e}"] for v in row)
    return 0
