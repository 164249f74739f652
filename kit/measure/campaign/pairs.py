"""Which node pairs a campaign measures: explicit, ``random: K`` (seeded) or ``all-pairs``.

On a 100-1000-node machine the pair matters (same leaf switch or across the fabric), and a
site wants many pairs measured as a few array jobs. The partition's nodes come from
``sinfo`` and the switches from ``scontrol show topology`` (Slurm's topology/tree plugin),
both read once at plan time; selection is a pure function of those lists and the seed, so a
campaign planned twice against the same cluster gives the same pairs.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping, Sequence

from kit.core.errors import CampaignError
from kit.measure.campaign import slurm
from kit.measure.campaign.schema import PairSpec

_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """``n[1-3,7],m2`` -> ``[n1, n2, n3, n7, m2]`` (Slurm's hostlist syntax, one bracket level)."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        m = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not m:
            names.append(part)
            continue
        prefix, body, suffix = m.groups()
        for item in body.split(","):
            r = _RANGE_RE.match(item)
            if not r:
                raise ValueError(f"bad hostlist range {item!r} in {text!r}")
            lo, hi = r.group(1), r.group(2) or r.group(1)
            width = len(lo) if lo.startswith("0") else 0
            for n in range(int(lo), int(hi) + 1):
                names.append(f"{prefix}{n:0{width}d}{suffix}")
    return names


def parse_topology(text: str) -> dict[str, str]:
    """Node -> its leaf switch, from ``scontrol show topology`` (lowest-level switches)."""
    leaf: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "SwitchName" not in fields or not fields.get("Nodes"):
            continue
        level = int(fields.get("Level", "0") or 0)
        for node in expand_hostlist(fields["Nodes"]):
            if node not in leaf or level < leaf[node][0]:
                leaf[node] = (level, fields["SwitchName"])
    return {node: sw for node, (_lvl, sw) in leaf.items()}


def select_pairs(nodes: Sequence[str], spec: PairSpec, seed: int,
                 switches: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The pairs to measure, in a stable order (sorted within each pair).

    ``switch: same``/``across`` keeps only pairs on one leaf switch / on two; it needs the
    topology (``switches``), else it is an error rather than a silently unfiltered choice.
    """
    if spec.explicit:
        return [tuple(sorted(p)) for p in spec.explicit]  # type: ignore[misc]
    ordered = sorted(dict.fromkeys(nodes))
    candidates = list(itertools.combinations(ordered, 2))
    if spec.switch != "any":
        if not switches:
            raise CampaignError(
                f"'switch: {spec.switch}' needs Slurm's network topology, and "
                "'scontrol show topology' lists no switches here",
                where="campaign pairs", hint="configure topology/tree (topology.conf), or "
                "write 'switch: any'")
        same = spec.switch == "same"
        candidates = [(a, b) for a, b in candidates
                      if a in switches and b in switches
                      and (switches[a] == switches[b]) == same]
    if not candidates:
        raise CampaignError(f"no node pair to choose from ({len(ordered)} node(s), "
                            f"switch: {spec.switch})", where="campaign pairs",
                            hint="use a partition with at least two nodes, or another "
                                 "switch mode")
    rng = random.Random(spec.seed if spec.seed is not None else seed)
    if spec.random:
        if spec.random > len(candidates):
            raise CampaignError(f"random: {spec.random} pairs asked, only {len(candidates)} "
                                "distinct pairs exist", where="campaign pairs",
                                hint=f"ask for at most {len(candidates)}, or use all-pairs")
        return sorted(rng.sample(candidates, spec.random))
    if spec.all_pairs < len(candidates):
        return sorted(rng.sample(candidates, spec.all_pairs))
    return candidates


def partition_nodes(partition: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    argv = ["sinfo", "-h", "-N", "-o", "%N"] + (["-p", partition] if partition else [])
    proc = slurm.run(argv, env)
    nodes = sorted({line.strip() for line in proc.stdout.splitlines() if line.strip()})
    if proc.returncode != 0 or not nodes:
        raise CampaignError(f"cannot list the nodes of partition {partition or '(default)'}: "
                            f"{proc.stderr.strip() or 'sinfo listed none'}",
                            where="campaign pairs", hint="plan on the cluster's login node, "
                            "or list the pairs explicitly: pairs: [[n1, n2]]")
    return nodes


def topology(env: Mapping[str, str] | None = None) -> dict[str, str]:
    proc = slurm.run(["scontrol", "show", "topology"], env)
    return parse_topology(proc.stdout) if proc.returncode == 0 else {}


def resolve(spec: PairSpec, seed: int, default_partition: str | None,
            env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Ask Slurm for the nodes (and switches) when the spec needs them, then select."""
    if spec.explicit:
        return select_pairs([], spec, seed)
    nodes = partition_nodes(spec.partition or default_partition, env)
    switches = topology(env) if spec.switch != "any" else {}
    return select_pairs(nodes, spec, seed, switches)
