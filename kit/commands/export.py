"""``pt2pt export MODEL --simgrid``: SMPI configuration from a fitted ping-pong model."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from kit.errors import UserError

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_BW_UNITS = {"Bps": 1.0, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "KiBps": 1024.0,
             "MiBps": 1024.0**2, "GiBps": 1024.0**3, "bps": 1 / 8, "kbps": 1e3 / 8,
             "Mbps": 1e6 / 8, "Gbps": 1e9 / 8}


def parse_quantity(text: str, units: dict[str, float], option: str) -> float:
    """``10us`` / ``1.25GBps`` / ``10Gbps`` / plain SI number, SimGrid's unit names."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or (m.group(2) and m.group(2) not in units):
        raise UserError(f"cannot read '{text}'", where=f"option {option}",
                        hint=f"give a number with an optional unit ({', '.join(units)})")
    value = float(m.group(1)) * (units[m.group(2)] if m.group(2) else 1.0)
    if value <= 0:
        raise UserError(f"'{text}' must be positive", where=f"option {option}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export", help="write SimGrid/SMPI configuration from a model",
        description="Write SMPI configuration for a ping-pong model (one-way time): "
        "network/latency-factor and network/bandwidth-factor strings relative to the "
        "nominal latency and bandwidth of your platform's route, smpi/os and smpi/or from "
        "send/recv models when given, and a JSON of per-regime noise for SimGrid's "
        "network-factor callbacks. Files: smpi-config.txt (--cfg= arguments for smpirun), "
        "smpi-config.xml (<config> block for the platform file), simgrid-noise.json.")
    p.add_argument("model", type=Path, metavar="MODEL", help="ping-pong model JSON")
    p.add_argument("--simgrid", action="store_true", required=True,
                   help="export for SimGrid/SMPI (the only format so far)")
    p.add_argument("-o", "--output", type=Path, metavar="DIR",
                   help="output folder (default: MODEL's name + '-simgrid')")
    p.add_argument("--latency", metavar="L",
                   help="nominal route latency, e.g. 10us (default: the first regime's "
                   "start-up time)")
    p.add_argument("--bandwidth", metavar="B",
                   help="nominal route bandwidth, e.g. 1.25GBps or 10Gbps (default: the last "
                   "regime's asymptotic bandwidth)")
    p.add_argument("--send", type=Path, metavar="MODEL", help="MPI_Send duration model -> smpi/os")
    p.add_argument("--recv", type=Path, metavar="MODEL", help="MPI_Recv duration model -> smpi/or")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.export.simgrid import export_simgrid
    from kit.model.io import load_model

    latency = parse_quantity(args.latency, _TIME_UNITS, "--latency") if args.latency else None
    bandwidth = (parse_quantity(args.bandwidth, _BW_UNITS, "--bandwidth")
                 if args.bandwidth else None)
    model = load_model(args.model)
    send = load_model(args.send) if args.send else None
    recv = load_model(args.recv) if args.recv else None
    result = export_simgrid(model, latency=latency, bandwidth=bandwidth, send_model=send,
                            recv_model=recv)
    out = args.output or args.model.with_name(args.model.stem + "-simgrid")
    for path in result.write(out):
        print(f"wrote {path}")
    print(f"platform route: latency {result.latency:.6g} s, bandwidth {result.bandwidth:.6g} B/s")
    for arg in result.cfg_args():
        print(arg)
    return 0
