"""``pt2pt loggp DATASET``: LogGP parameters (L, o_s, o_r, g, G) per size range, with intervals."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kit.core import argtypes
from kit.core.atomicwrite import write_text
from kit.core.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "loggp", help="LogGP parameters (L, o_s, o_r, g, G) of one campaign, with intervals",
        description="Derive LogGP parameters per size range from the pingpong, send, recv and "
        "stream series of one campaign/transport/tool/placement/host pair/k (or logp_mpi / "
        "Netgauge rows), with bootstrap intervals; intra- and inter-node ops are never "
        "pooled. Prints a table; --json writes a file LogGOPSim-style "
        "simulators can read (see docs/architecture.md 'LogGP').")
    p.add_argument("dataset", type=Path, metavar="DATASET", help="dataset folder")
    p.add_argument("--series", metavar="KEY=V,...",
                   help="select one group: campaign=..,transport=..,tool=..,placement=..")
    p.add_argument("--breakpoints", metavar="B1,B2,..",
                   help="size ranges (bytes); default: the pingpong series' regimes")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the parameters as JSON")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=run)


def _fmt(iv: dict[str, Any], unit: str) -> str:
    from kit.model.uncertainty import format_interval

    scale, suffix = (1e6, "us") if unit == "s" else (1e9, "ns/B")
    return format_interval(iv, lambda v: f"{v * scale:.4g} {suffix}")


def run(args: argparse.Namespace) -> int:
    from kit.analyses.loggp import PARAMS, UNITS, loggp
    from kit.data.dataset import parse_selector

    sel = parse_selector(args.series, "--series")
    bps = None
    if args.breakpoints:
        try:
            bps = [float(v) for v in args.breakpoints.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"cannot read {args.breakpoints!r} as sizes", where="--breakpoints",
                            hint="e.g. 65536") from None
    result = loggp(args.dataset, sel, breakpoints=bps, random_state=args.seed)
    print(f"LogGP, {int(result['level'] * 100)} % bootstrap intervals "
          f"({result['n_boot']} resamples); sources: "
          + ", ".join(f"{k}<-{v}" for k, v in result["used"].items()))
    for reg in result["regimes"]:
        hi = reg["size_max"]
        print(f"sizes [{reg['size_min']:,.0f}, {'inf' if hi is None else f'{hi:,.0f}'}) B")
        for p in PARAMS:
            print(f"  {p:<4} {_fmt(reg[p], UNITS[p])}")
    if args.json:
        write_text(args.json, json.dumps(result, indent=1, allow_nan=False) + "\n")
        print(f"written: {args.json}", file=sys.stderr)
    return 0
