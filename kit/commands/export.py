"""``pt2pt export MODEL --simgrid``: SMPI configuration from a fitted ping-pong model."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.core import argtypes
from kit.core.argtypes import integer
from kit.core.errors import UserError

if TYPE_CHECKING:
    from kit.model.contract import ModelFile

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_BW_UNITS = {"Bps": 1.0, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "KiBps": 1024.0,
             "MiBps": 1024.0**2, "GiBps": 1024.0**3, "bps": 1 / 8, "kbps": 1e3 / 8,
             "Mbps": 1e6 / 8, "Gbps": 1e9 / 8}


#: What a nominal route can be: 1 ns to 1 day; 1 B/s to 1 PB/s (beyond, SimGrid's factors
#: overflow: a latency of 1e308 s wrote TCP-gamma:inf).
LATENCY_RANGE = (1e-9, 86_400.0)
BANDWIDTH_RANGE = (1.0, 1e15)


def parse_quantity(text: str, units: dict[str, float], option: str,
                   bounds: tuple[float, float]) -> float:
    """``10us`` / ``1.25GBps`` / ``10Gbps`` / plain SI number, SimGrid's unit names, within
    ``bounds`` (in seconds or bytes per second)."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or (m.group(2) and m.group(2) not in units):
        raise UserError(f"cannot read '{text}'", where=f"option {option}",
                        hint=f"give a number with an optional unit ({', '.join(units)})")
    value = float(m.group(1)) * (units[m.group(2)] if m.group(2) else 1.0)
    if value <= 0:
        raise UserError(f"'{text}' must be positive", where=f"option {option}")
    lo, hi = bounds
    if not lo <= value <= hi:
        raise UserError(f"'{text}' is out of range ({value:g}; from {lo:g} to {hi:g} is "
                        "accepted)", where=f"option {option}",
                        hint="give the nominal value of your platform's route")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export", help="write SimGrid/SMPI configuration from a model",
        description="Write SMPI configuration for a ping-pong model (one-way time): "
        "network/latency-factor and network/bandwidth-factor strings relative to the "
        "nominal latency and bandwidth of your platform's route, smpi/os and smpi/or from "
        "send/recv models when given, and the per-regime noise for the kit's SimGrid noise "
        "plugin. Files: smpi-config.txt (--cfg= arguments for smpirun), smpi-config.xml "
        "(<config> block), platform.xml (the measured pair with that block), hostfile, "
        "simgrid-noise.json and simgrid-noise.tsv (read by libpt2pt_noise, see "
        "'pt2pt simulate --noise'). The factors follow what 'pt2pt predict' prints, measured "
        "sizes' own adjustments included. With --send/--recv the network carries the "
        "ping-pong time minus smpi/os and smpi/or; a model whose overheads exceed it, or "
        "that needs non-physical factors, is refused.")
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
    p.add_argument("--isend", type=Path, metavar="MODEL",
                   help="MPI_Isend duration model -> smpi/ois")
    p.add_argument("--simgrid-version", metavar="X.Y",
                   help="write the option names this SimGrid reads (default: the installed "
                   "one, from smpirun --version; 3.32 uses smpi/lat-factor, 3.34+ "
                   "network/latency-factor)")
    p.add_argument("--center", choices=("median", "curve"), default="median",
                   help="what the factors follow: the model's median (pt2pt predict, "
                   "measured sizes included; default) or its regimes' central curves "
                   "(population noise)")
    cluster = p.add_argument_group(
        "cluster platform (issue 57)",
        "With --hosts N: a SimGrid cluster of N hosts instead of the measured pair: a link "
        "per host to a switch at MODEL's route (the inter-node model), a loopback per host at "
        "--intra's, both models' factors and noise in network.tsv for the kit's network "
        "plugin (docs/simgrid.md). Files: platform.xml, hostfile, network.tsv, "
        "smpi-config.txt, platform.json; 'pt2pt simulate --app PROGRAM.c --platform DIR' "
        "runs MPI programs on it.")
    cluster.add_argument("--hosts", type=integer(1, 65536, "hosts"), metavar="N",
                         help="number of hosts (writes a cluster platform)")
    cluster.add_argument("--cores", type=integer(1, 4096, "cores"), default=1, metavar="C",
                         help="cores per host (default 1)")
    cluster.add_argument("--intra", type=Path, metavar="MODEL",
                         help="intra-node ping-pong model (messages between ranks of one "
                         "host; default: they follow MODEL)")
    cluster.add_argument("--backbone", metavar="B,L",
                         help="the switch's capacity and latency, e.g. 10GBps,1us (default: "
                         "non-blocking; with --cabinet, each cabinet's switch)")
    cluster.add_argument("--cabinet", type=integer(1, 65536, "hosts per cabinet"), metavar="K",
                         help="topology: cabinets of K hosts, each cabinet's hosts sharing one "
                         "uplink to a core for their messages to other cabinets (default: "
                         "flat, one switch)")
    cluster.add_argument("--uplink", metavar="B[,L]",
                         help="each cabinet's uplink: bandwidth and optional latency, e.g. "
                         "10Gbps,2us (default: one host link's bandwidth, no latency)")
    cluster.add_argument("--stream", type=Path, metavar="MODEL",
                         help="model of the probe's stream op between the same hosts (pt2pt "
                         "fit DS --series op=stream): each host's messages pass a token bucket "
                         "at its sustained rate, so windows and collectives see that rate while "
                         "a lone message keeps MODEL's factors (docs/simgrid.md)")
    cluster.add_argument("--burst", metavar="BYTES", type=argtypes.size_bytes(),
                         help="with --stream: the bucket's size, e.g. 64K (default: where "
                         "MODEL's ping-pong leaves line speed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.model.io import read_model
    from kit.outputs.export.simgrid import detect_version, export_simgrid

    latency = parse_quantity(args.latency, _TIME_UNITS, "--latency",
                                                LATENCY_RANGE) if args.latency else None
    bandwidth = (parse_quantity(args.bandwidth, _BW_UNITS, "--bandwidth",
                                BANDWIDTH_RANGE)
                 if args.bandwidth else None)
    if args.hosts is None:  # refused before any model file is read
        for option in ("intra", "backbone", "cabinet", "uplink", "stream", "burst"):
            if getattr(args, option) is not None:
                raise UserError("needs --hosts (it describes a cluster platform)",
                                where=f"option --{option}", hint="add --hosts N")
    fitted = read_model(args.model)
    model = fitted.model
    if args.burst is not None and args.stream is None:
        raise UserError("needs --stream (it is the size of the stream's token bucket)",
                        where="option --burst", hint="add --stream STREAM.json")
    others = {opt: read_model(getattr(args, opt))
              for opt in ("send", "recv", "isend", "intra", "stream")
              if getattr(args, opt, None) is not None}
    send = others["send"].model if "send" in others else None
    recv = others["recv"].model if "recv" in others else None
    isend = others["isend"].model if "isend" in others else None
    notes = _quality_notes(fitted, others)
    if args.hosts is not None:
        intra = others["intra"].model if "intra" in others else None
        shaper = _shaper(args, model, others.get("stream"))
        return _run_cluster(args, model, send, recv, intra, latency, bandwidth,
                            fitted.provenance, notes, shaper)
    result = export_simgrid(model, latency=latency, bandwidth=bandwidth, send_model=send,
                            recv_model=recv, isend_model=isend, version=args.simgrid_version,
                            center=args.center,
                            provenance=fitted.provenance)
    out = args.output or args.model.with_name(args.model.stem + "-simgrid")
    for path in result.write(out):
        print(f"wrote {path}")
    if args.simgrid_version is None and detect_version() is None:
        print("note: no SimGrid found (smpirun, pkg-config): wrote the newest syntax; name "
              "yours with --simgrid-version (3.32 and older read smpi/lat-factor)")
    print(f"SimGrid {result.version[0]}.{result.version[1]} option names; platform route: "
          f"latency {result.latency:.6g} s, bandwidth {result.bandwidth:.6g} B/s")
    print(f"run: smpirun -platform {out / 'platform.xml'} -hostfile {out / 'hostfile'} -np 2 APP")
    for arg in result.cfg_args():
        print(arg)
    for note in notes:
        print(f"note: {note}")
    return 0


def _quality_notes(inter: ModelFile, others: dict[str, ModelFile]) -> list[str]:
    """What the platform says about the runs its models were fitted to (each model file's
    ``run_quality``; kit.fit.qualitynote owns the verdict's check and the sentence)."""
    from kit.fit.qualitynote import calibration_note

    files = [(f"the model {inter.name}", inter)] + [
        (f"the --{opt} model {f.name}", f) for opt, f in others.items()]
    return [n for what, f in files if (n := calibration_note(f.run_quality, what))]


def _shaper(args: argparse.Namespace, model: Any, stream: ModelFile | None) -> Any:
    """The token bucket of ``--stream``/``--burst`` (None without ``--stream``)."""
    from kit.outputs.export.shaper import shaper_from_models

    if stream is None:
        return None
    op = (stream.series or {}).get("op")
    if op is not None and op != "stream":
        raise UserError(f"{stream.name} is a model of op={op}, not of the probe's stream op",
                        where="option --stream",
                        hint="fit the stream series: pt2pt fit DS --series op=stream")
    burst = None if args.burst is None else float(args.burst)
    return shaper_from_models(model, stream.model, burst)


def _run_cluster(args: argparse.Namespace, model: Any, send: Any, recv: Any, intra: Any,
                 latency: float | None, bandwidth: float | None,
                 provenance: dict[str, Any], quality_notes: list[str],
                 shaper: Any = None) -> int:
    from kit.outputs.export.platform import LinkValue, cluster_platform

    if args.isend is not None or args.center != "median":
        raise UserError("not with --hosts (the cluster platform follows pt2pt predict, with "
                        "smpi/os and smpi/or only)",
                        where="option --isend" if args.isend else "option --center",
                        hint="leave it out")
    backbone = None
    if args.backbone:
        bw_text, sep, lat_text = args.backbone.partition(",")
        if not sep:
            raise UserError(f"'{args.backbone}' is not BANDWIDTH,LATENCY",
                            where="option --backbone", hint="e.g. --backbone 10GBps,1us")
        backbone = LinkValue(parse_quantity(bw_text, _BW_UNITS, "--backbone", BANDWIDTH_RANGE),
                             parse_quantity(lat_text, _TIME_UNITS, "--backbone",
                                            LATENCY_RANGE))
    uplink = None
    if args.uplink:
        bw_text, sep, lat_text = args.uplink.partition(",")
        uplink = LinkValue(parse_quantity(bw_text, _BW_UNITS, "--uplink", BANDWIDTH_RANGE),
                           parse_quantity(lat_text, _TIME_UNITS, "--uplink", LATENCY_RANGE)
                           if sep else 0.0)
    platform = cluster_platform(model, hosts=args.hosts, cores=args.cores, intra_model=intra,
                                send_model=send, recv_model=recv, latency=latency,
                                bandwidth=bandwidth, backbone=backbone,
                                cabinet=args.cabinet, uplink=uplink,
                                version=args.simgrid_version, provenance=provenance,
                                shaper=shaper)
    platform.notes.extend(quality_notes)
    out = args.output or args.model.with_name(args.model.stem + "-platform")
    for path in platform.write(out):
        print(f"wrote {path}")
    cabinets = f" in cabinets of {platform.cabinet}" if platform.cabinet else ""
    print(f"SimGrid {platform.version[0]}.{platform.version[1]}: {platform.hosts} hosts x "
          f"{platform.cores} cores{cabinets}; inter-node route {platform.inter.latency:.6g} s, "
          f"{platform.inter.bandwidth:.6g} B/s" + (
              f"; intra-node {platform.loopback.latency:.6g} s, "
              f"{platform.loopback.bandwidth:.6g} B/s" if platform.intra else ""))
    for note in platform.notes:
        print(f"note: {note}")
    print("run: pt2pt simulate --app PROGRAM.c --np N --platform " + str(out)
          + "  (or smpirun with the kit's network plugin: docs/simgrid.md)")
    return 0
