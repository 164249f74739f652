"""``pt2pt cluster DATASET``: one model of a campaign's node pairs, and its slow links and nodes."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from kit.core.argtypes import integer, real

FAIL_KINDS = ("any", "node", "link")


def _fraction(text: str) -> float:
    """``10%`` or ``0.1`` -> 0.1, in (0, 10]."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction; write e.g. 10% or 0.1"
                                         ) from None
    if not (math.isfinite(value) and 0 < value <= 10):
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction above 0 (e.g. 10%)")
    return value


_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def _latency_threshold(text: str) -> tuple[float, bool]:
    """``10%`` / ``0.1`` (of the typical pair's latency) or ``50us`` (absolute seconds)."""
    raw = text.strip()
    for unit in sorted(_TIME_UNITS, key=len, reverse=True):
        if raw.endswith(unit) and not raw.endswith("%"):
            try:
                value = float(raw[: -len(unit)]) * _TIME_UNITS[unit]
            except ValueError:
                break
            if math.isfinite(value) and 0 < value <= 3600:
                return value, True
            break
    else:
        return _fraction(raw), False
    raise argparse.ArgumentTypeError(f"{text!r}: write a share (10%) or a time (50us, 2ms)")


def _fail_kinds(text: str) -> str:
    if text not in FAIL_KINDS:
        raise argparse.ArgumentTypeError(f"{text!r}: choose one of {', '.join(FAIL_KINDS)}")
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cluster",
        help="one model of a campaign's node pairs: slow links and nodes, with intervals",
        description="Fits the inter-node series of many node pairs of one campaign together "
        "(population + per-node and per-link deviations in latency, bandwidth and noise level, "
        "shrunk by how much each pair measured) and prints the slow nodes and links: each "
        "node and link is tested against the threshold, the false-discovery rate is controlled "
        "over all tests (Benjamini-Hochberg), and every finding has a 95 %% interval. A node "
        "whose pairs are all slow is reported as the node. DATASET may also be a cluster model "
        "written with -o.",
        epilog="Exit status: 0; 1 when --fail-if is given and a finding matches it (a health "
        "check); 2 on a usage or input error.")
    p.add_argument("dataset", type=Path, metavar="DATASET",
                   help="dataset folder (or a cluster model JSON written with -o)")
    p.add_argument("--series", metavar="KEY=VALUE,...",
                   help="pick the campaign series (campaign, tool, transport, op) when the "
                   "dataset holds several multi-pair campaigns")
    p.add_argument("--threshold", type=_fraction, metavar="SHARE",
                   help="one threshold for all three figures, e.g. 10%% (default: latency "
                   "+10%%, bandwidth -10%%, noise level +25%%)")
    p.add_argument("--latency-threshold", type=_latency_threshold, metavar="SHARE|TIME",
                   help="latency added beyond which a node or link is slow: a share of the "
                   "typical pair's latency (10%%) or a time (50us)")
    p.add_argument("--bandwidth-threshold", type=_fraction, metavar="SHARE",
                   help="bandwidth lost beyond which a node or link is slow (10%%)")
    p.add_argument("--noise-threshold", type=_fraction, metavar="SHARE",
                   help="growth of the noise level (tail width) beyond which it is flagged")
    p.add_argument("--fdr", type=real(0.0, 0.5, "false-discovery rate", lo_open=True),
                   default=0.05, metavar="Q",
                   help="false-discovery rate over all tests (default 0.05)")
    p.add_argument("--fail-if", type=_fail_kinds, nargs="?", const="any", metavar="KIND",
                   help="health check: exit 1 when a finding is flagged (KIND: any (default), "
                   "node or link)")
    p.add_argument("-o", "--output", type=Path, metavar="MODEL.json",
                   help="write the cluster model (population, nodes, links) as JSON")
    p.add_argument("--json", type=Path, metavar="FILE",
                   help="write every test and the verdict as JSON ('-': stdout, no text)")
    two = p.add_argument_group(
        "two stages", "measure more where the verdict is undecided (campaign budget "
        "second-stage: {share, visits}; kit.analyses.twostage)")
    two.add_argument("--undecided", type=Path, metavar="FILE",
                     help="write the pairs to measure again as a campaign's 'pairs:' list")
    two.add_argument("--capacity", type=integer(1, 10**7, "capacity"), metavar="K",
                     help="at most K pairs (the plan's budget.second_stage.pairs)")
    two.add_argument("--second-stage", type=Path, metavar="DATASET2",
                     help="the dataset of the second stage: the final, combined verdict")
    p.add_argument("--seed", type=integer(0, 2**32 - 1, "seed"), default=0,
                   help="seed of the population fit's subsample (default 0)")
    sim = p.add_argument_group(
        "heterogeneous SimGrid platform",
        "--simgrid DIR writes a cluster platform of the measured nodes (docs/simgrid.md): the "
        "typical pair on every route, each node's latency and bandwidth deviation on its "
        "host's links, the node names as host labels (platform.json).")
    sim.add_argument("--simgrid", type=Path, metavar="DIR", help="write the platform into DIR")
    sim.add_argument("--cores", type=integer(1, 4096, "cores"), default=1, metavar="C",
                     help="cores per host (default 1)")
    sim.add_argument("--intra", type=Path, metavar="MODEL",
                     help="intra-node ping-pong model for ranks of one host")
    p.set_defaults(func=run)


def thresholds_of(args: argparse.Namespace) -> Any:
    from kit.analyses.slowlinks import DEFAULT_THRESHOLDS, Thresholds

    base = dict(DEFAULT_THRESHOLDS)
    if args.threshold is not None:
        base = {k: args.threshold for k in base}
    absolute = False
    if args.latency_threshold is not None:
        base["latency"], absolute = args.latency_threshold
    if args.bandwidth_threshold is not None:
        base["bandwidth"] = args.bandwidth_threshold
    if args.noise_threshold is not None:
        base["noise"] = args.noise_threshold
    if base["bandwidth"] >= 1:
        from kit.core.errors import UserError

        raise UserError(f"a bandwidth loss of {base['bandwidth']:.0%} is not possible",
                        where="option --bandwidth-threshold", hint="give a share below 100%")
    return Thresholds(latency=base["latency"], bandwidth=base["bandwidth"],
                      noise=base["noise"], latency_absolute=absolute)


def run(args: argparse.Namespace) -> int:
    import json

    from kit.analyses.clusterview import describe_model, fit_or_read
    from kit.analyses.slowlinks import find
    from kit.core.atomicwrite import write_text
    from kit.data.dataset import parse_selector

    selector = parse_selector(args.series, "option --series")
    if args.second_stage is not None:
        from kit.analyses.twostage import verdict
        from kit.data.pairrows import read_pairs

        model, findings = verdict(read_pairs(args.dataset, selector),
                                  # its own campaign: every key of --series but that one
                                  read_pairs(args.second_stage,
                                             {k: v for k, v in selector.items()
                                              if k != "campaign"},
                                             where="option --second-stage"),
                                  thresholds_of(args), args.fdr, seed=args.seed)
        source = str(args.dataset)
    else:
        model, source = fit_or_read(args.dataset, selector, seed=args.seed)
        findings = find(model, thresholds_of(args), args.fdr)
    if args.undecided is not None:
        _undecided(args, model, findings)
    if args.output is not None:
        from kit.fit.clustermodel import save_cluster_model

        save_cluster_model(model, args.output, provenance={"dataset": source})
    doc = findings.to_dict()
    if args.json is not None:
        text = json.dumps(doc, indent=1, allow_nan=False)
        if str(args.json) == "-":
            print(text)
            return _health(findings, args.fail_if, quiet=True)
        write_text(args.json, text + "\n")
    for line in describe_model(model, findings):
        print(line)
    if args.simgrid is not None:
        _simgrid(args, model, findings)
    elif args.intra is not None:
        from kit.core.errors import UserError

        raise UserError("needs --simgrid DIR (it is the platform's intra-node model)",
                        where="option --intra", hint="add --simgrid DIR")
    if args.output is not None:
        print(f"wrote {args.output}")
    if args.json is not None:
        print(f"wrote {args.json}")
    return _health(findings, args.fail_if)


def _undecided(args: argparse.Namespace, model: Any, findings: Any) -> None:
    """Write the first stage's undecided pairs as a campaign's explicit ``pairs:`` list."""
    from kit.analyses.twostage import StageDesign, undecided
    from kit.core.atomicwrite import write_text

    capacity = args.capacity or len(model.pairs_)
    chosen = [model.pairs_[k] for k in undecided(findings, StageDesign(1, 1, capacity))]
    lines = ["# pairs the first stage left undecided, most suspicious first "
             f"({len(chosen)}, at most {capacity})", "pairs:"]
    lines += [f"  - [{a}, {b}]" for a, b in chosen]
    write_text(args.undecided, "\n".join(lines) + "\n")
    print(f"wrote {args.undecided}: {len(chosen)} undecided pair(s) to measure again "
          "(a campaign with these pairs and the second stage's repetitions; then "
          "pt2pt cluster DATASET --second-stage DATASET2)")


def _health(findings: Any, fail_if: str | None, quiet: bool = False) -> int:
    """Exit status of the health check (0 without --fail-if)."""
    if fail_if is None:
        return 0
    hits = [f for f in findings.flagged if fail_if == "any" or f.kind == fail_if]
    what = {"any": "a node or link", "node": "a node", "link": "a link"}[fail_if]
    if not quiet:
        verdict = "FAILED" if hits else "passed"
        print(f"health check {verdict}: rule --fail-if {fail_if} = exit 1 when {what} is "
              f"flagged; {len(hits)} flagged")
    return 1 if hits else 0


def _simgrid(args: argparse.Namespace, model: Any, findings: Any) -> None:
    from kit.model.io import load_model
    from kit.outputs.export.clusterlinks import cluster_model_platform, describe_links

    intra = load_model(args.intra) if args.intra else None
    platform = cluster_model_platform(model, cores=args.cores, intra_model=intra,
                                      findings=findings)
    for path in platform.write(args.simgrid):
        print(f"wrote {path}")
    for line in describe_links(model, platform):
        print(f"  {line}")
    for note in platform.notes:
        print(f"note: {note}")
    print(f"run: pt2pt simulate --app PROGRAM.c --np N --platform {args.simgrid}")
