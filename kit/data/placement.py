"""Where the two ranks of a run ran: intra-socket, intra-node or inter-node, and on which hosts.

Placement is part of what a series *is*: on a two-node cluster tcp between two ranks of one
node (loopback) is ten times faster at 1 MiB than tcp across nodes, and one model fitted
through both describes neither. The campaign says what was *meant* (``placement`` of the
job); the hosts the tool recorded say what *happened*. Both are used, and when they disagree
the hosts win (with a warning): a sample is what it measured, not what was planned.

Sockets: when the probe records the physical package of each rank's CPU (meta key
``sockets``: a list of ints in rank order, read with ``sched_getcpu`` and
``/sys/devices/system/cpu/cpuN/topology/physical_package_id``; ``cpus`` holds the CPU
numbers), two ranks on one host and one socket are ``intra-socket``. Without it the
campaign's ``intra-socket`` is kept when the hosts agree it is on one node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kit.data.schema import PLACEMENTS, UNKNOWN


@dataclass(frozen=True)
class Placement:
    """A run's placement, its host pair, how the placement is known, and any disagreement."""

    placement: str
    host_pair: str
    source: str  # one of kit.data.schema.PLACEMENT_SOURCES
    warning: str | None = None


def host_pair(hosts: Sequence[str]) -> str:
    """``n1:n2``: the hosts of ranks 0 and 1 (a one-element list means both on it)."""
    names = [h for h in hosts if h]
    if not names:
        return UNKNOWN
    if len(names) == 1:
        names = names * 2
    return f"{names[0]}:{names[1]}"


def from_hosts(hosts: Sequence[str], sockets: Sequence[int] | None = None) -> str | None:
    """The placement the recorded hosts (and sockets) show, or None when they show nothing."""
    names = [h for h in hosts if h]
    if len(names) < 2:
        return None
    if names[0] != names[1]:
        return "inter-node"
    if sockets is not None and len(sockets) >= 2:
        return "intra-socket" if sockets[0] == sockets[1] else "intra-node"
    return "intra-node"


def _agrees(declared: str, measured: str, sockets_known: bool) -> bool:
    if declared == measured:
        return True
    # Without socket numbers the hosts cannot tell intra-socket from intra-node.
    return declared == "intra-socket" and measured == "intra-node" and not sockets_known


def pair_view(hosts: Sequence[str], sockets: Sequence[int] | None,
              ranks: tuple[int, int]) -> tuple[list[str], list[int] | None]:
    """Hosts and sockets of the two ``ranks`` (a contention run's first pair), in that order.

    Hosts that do not cover both ranks say nothing about the pair (empty: unknown), rather
    than describing two other ranks.
    """
    a, b = ranks
    names = list(hosts)
    if len(names) == 1:  # one host recorded for the whole run: every rank ran there
        names = names * (max(a, b) + 1)
    chosen = [names[a], names[b]] if max(a, b) < len(names) else []
    socks = ([sockets[a], sockets[b]] if sockets is not None and max(a, b) < len(sockets)
             else None)
    return chosen, socks


def resolve(hosts: Sequence[str], declared: str | None = None,
            sockets: Sequence[int] | None = None, *, where: str = "",
            ranks: tuple[int, int] | None = None) -> Placement:
    """Combine the campaign's placement with the hosts the run recorded (see module doc).

    ``ranks``: the two ranks whose placement the run measured, when not 0 and 1 (the probe's
    contention mode pairs rank i with i + K, so ranks 0 and 1 are two initiators).
    """
    if ranks is not None:
        hosts, sockets = pair_view(hosts, sockets, ranks)
    pair = host_pair(hosts)
    measured = from_hosts(hosts, sockets)
    if declared is not None and declared not in PLACEMENTS:
        declared = None
    if measured is None and declared is None:
        return Placement(UNKNOWN, pair, "unknown")
    if measured is None:
        assert declared is not None
        return Placement(declared, pair, "campaign")
    if declared is None:
        return Placement(measured, pair, "hosts")
    if _agrees(declared, measured, sockets is not None and len(sockets) >= 2):
        return Placement(declared, pair, "campaign+hosts")
    prefix = f"{where}: " if where else ""
    return Placement(measured, pair, "hosts-override",
                     f"{prefix}the campaign planned {declared} but the run recorded hosts "
                     f"{pair}, i.e. {measured}; recorded as {measured}")
