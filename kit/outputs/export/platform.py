"""A SimGrid cluster platform for a campaign: N hosts, a link per host to a switch, two models.

Why: a point-to-point model is worth what it predicts about applications, and an application
runs on many hosts with several ranks per host. This module turns a campaign's models into
the platform SMPI runs MPI programs on (issue 57):

* hosts ``node-0 .. node-(N-1)`` (a SimGrid ``<cluster>``), ``cores`` each;
* a private split-duplex link per host to a non-blocking switch (optionally a backbone: the
  switch's capacity), at the **inter-node** model's nominal route: the route between two
  hosts (up link + down link) has exactly the latency and bandwidth the inter-node export is
  relative to, so its factors apply unchanged;
* a loopback link per host for messages between ranks of one host, at the **intra-node**
  model's nominal route;
* the factors of both models, per message size, with their noise, as route classes of the
  kit's network plugin (``kit/outputs/export/smpi/noise_plugin.cpp``): SimGrid's own factor
  strings are global (one curve for every route), the plugin's callbacks see the route's
  hosts and pick ``intra`` (same host) or ``inter``. The plugin is therefore part of the
  platform: every run loads it (``smpirun_args``), with noise or deterministically (every
  message at the model's median);
* the ``--cfg`` lines (``smpi/os``/``smpi/or`` where send/recv were measured, crosstraffic
  off, ``smpi/wtime:0``, TCP-gamma out of the way);
* per-link nominal values (``link_values``: bandwidth and latency of a named link, e.g. one
  host's slower NIC) that a ``<cluster>`` tag cannot say: the plugin sets them when the
  platform is created. This is the hook for per-host/per-link deviations (issue 58);
* a topology (issue 61): flat (one switch, the default) or **cabinets** of K hosts
  (``cabinet``), each its own switch (a ``<cluster>``, the same host links), joined by one
  shared uplink per cabinet (``uplink``, split-duplex) to a core: a message between
  cabinets crosses its cabinet's uplink and the other's, so the hosts of a cabinet share
  them. The route within a cabinet is the flat platform's; one between cabinets adds the
  uplinks (and the cabinets' backbones, when given): a model measured inside one cabinet
  says nothing of the uplink, so its value is the user's (default: one host link's
  bandwidth, no latency, which the notes say). Written as SimGrid's griffon example does,
  one ``<zoneRoute>`` per ordered pair of cabinets (hence at most :data:`MAX_CABINETS`).

What it cannot carry is refused with the reason (:class:`kit.core.errors.ModelError`): a
model the pair export refuses (non-physical factors, overheads longer than the ping-pong, in
either class), a backbone latency at or above the route's, a SimGrid without factor
callbacks (< 3.31), a link value for a link the platform does not have, host or core counts
out of range.

The stable entry point is :func:`cluster_platform`; :meth:`ClusterPlatform.write` puts the
files in a folder (``platform.xml``, ``hostfile``, ``network.tsv``, ``smpi-config.txt``,
``platform.json``) and :func:`load_platform` reads such a folder back. See docs/simgrid.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kit.core.atomicwrite import write_text
from kit.core.errors import ModelError, UserError
from kit.model.contract import PointToPointModel
from kit.outputs.export.shaper import Shaper
from kit.outputs.export.simgrid import SimgridExport, _num, export_simgrid, factor_keys

#: Oldest SimGrid whose network model takes factor callbacks (the plugin needs them).
CALLBACKS_SINCE = (3, 31)
MAX_HOSTS = 65536
MAX_CORES = 4096
#: Cabinets of a platform: the routes between them are written out, one per ordered pair.
MAX_CABINETS = 128
#: Files :meth:`ClusterPlatform.write` writes (and :func:`load_platform` reads).
FILES = ("platform.xml", "hostfile", "network.tsv", "smpi-config.txt", "platform.json")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class LinkValue:
    """A link's nominal bandwidth (B/s) and latency (s)."""

    bandwidth: float
    latency: float


@dataclass
class ClusterPlatform:
    """Everything :func:`cluster_platform` computed; ``write`` puts it into a folder."""

    name: str
    hosts: int
    cores: int
    #: each host's private link (one per direction: ``<name>_link_<i>_UP`` / ``_DOWN``)
    link: LinkValue
    #: each host's loopback (``<name>_link_<i>_loopback``): the intra-node route
    loopback: LinkValue
    #: the switch's capacity (``<name>_backbone``); None: non-blocking
    backbone: LinkValue | None
    inter: SimgridExport
    intra: SimgridExport | None
    config: dict[str, str]
    version: tuple[int, int]
    link_values: dict[str, LinkValue] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: host speed written to the platform (flop/s): what benchmarked computation divides by
    speed: float = 1e9
    prefix: str = "node-"
    #: what each host stands for (``node-i`` is ``labels[i]``), e.g. the measured node's name
    labels: list[str] = field(default_factory=list)
    #: hosts per cabinet (None: flat, one switch); the last cabinet may hold fewer
    cabinet: int | None = None
    #: each cabinet's uplink to the core (``<name>_uplink_<c>_UP`` / ``_DOWN``)
    uplink: LinkValue | None = None
    #: a token bucket on every host's outgoing inter-node traffic (None: none)
    shaper: Shaper | None = None

    # ---------------------------------------------------------------- names
    def host_names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.hosts)]

    def cabinets(self) -> list[range]:
        """The hosts of each cabinet, in order (one range when flat)."""
        k = self.cabinet or self.hosts
        return [range(a, min(a + k, self.hosts)) for a in range(0, self.hosts, k)]

    def _zone(self, host: int) -> str:
        """The ``<cluster>`` id holding ``host`` (SimGrid names its links after it)."""
        return f"{self.name}-cab{host // self.cabinet}" if self.cabinet else self.name

    def link_names(self, host: int) -> dict[str, str]:
        """The SimGrid names of host ``host``'s links (what ``link_values`` keys name)."""
        base = f"{self._zone(host)}_link_{host}"
        return {"up": f"{base}_UP", "down": f"{base}_DOWN", "loopback": f"{base}_loopback"}

    def all_link_names(self) -> list[str]:
        names = [n for i in range(self.hosts) for n in self.link_names(i).values()]
        zones = [self._zone(c.start) for c in self.cabinets()]
        if self.backbone:
            names += [f"{z}_backbone" for z in zones]
        if self.cabinet:
            names += [f"{self.name}_uplink_{c}_{d}" for c in range(len(zones))
                      for d in ("UP", "DOWN")]
        return names

    def with_link_values(self, link_values: Mapping[str, LinkValue],
                         labels: list[str] | None = None) -> ClusterPlatform:
        """This platform with named links' nominal values (checked: known link, bandwidth
        > 0, latency >= 0, finite) and, optionally, a label per host (what each host
        stands for, e.g. the measured node's name; kept in platform.json)."""
        known = set(self.all_link_names())
        for link, value in link_values.items():
            if link not in known:
                raise UserError(f"link {link!r} is not in the platform", where="link values",
                                hint=f"links are named like {self.link_names(0)['up']}, "
                                "..._DOWN, ..._loopback (ClusterPlatform.link_names)")
            if not (value.bandwidth > 0 and value.latency >= 0
                    and math.isfinite(value.bandwidth) and math.isfinite(value.latency)):
                raise UserError(f"link {link}: bandwidth {value.bandwidth} B/s, latency "
                                f"{value.latency} s", where="link values",
                                hint="bandwidth > 0 and latency >= 0, finite")
        if labels is not None and len(labels) != self.hosts:
            raise UserError(f"{len(labels)} host labels for {self.hosts} hosts",
                            where="host labels", hint="give one label per host")
        return replace(self, link_values=dict(link_values),
                       labels=list(labels) if labels is not None else self.labels)

    # ---------------------------------------------------------------- files
    def platform_xml(self) -> str:
        """The ``<cluster>`` (one per cabinet): hosts, private links, loopbacks, the optional
        backbone; with cabinets, their uplinks and the routes between them."""
        bb = (f' bb_bw="{_num(self.backbone.bandwidth)}Bps" '
              f'bb_lat="{_num(self.backbone.latency)}s"' if self.backbone else "")
        head = (
            "<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            f"<!-- pt2pt-kit cluster platform: {self.hosts} hosts x {self.cores} cores"
            + (f" in cabinets of {self.cabinet}" if self.cabinet else "") + ". The\n"
            "     network factors live in network.tsv (route classes intra/inter) and are\n"
            "     applied by libpt2pt_noise (see smpi-config.txt and docs/simgrid.md): run\n"
            "     with it, never with smpi/lat-factor strings. -->\n"
            '<platform version="4.1">\n')

        def cluster(zone: str, hosts: range, indent: str, router: str = "") -> str:
            return (f'{indent}<cluster id="{zone}" prefix="{self.prefix}" suffix="" '
                    f'radical="{hosts.start}-{hosts.stop - 1}" speed="{_num(self.speed)}f" '
                    f'core="{self.cores}" bw="{_num(self.link.bandwidth)}Bps" '
                    f'lat="{_num(self.link.latency)}s" '
                    f'loopback_bw="{_num(self.loopback.bandwidth)}Bps" '
                    f'loopback_lat="{_num(self.loopback.latency)}s"{bb}'
                    + (f' router_id="{router}"' if router else "") + "/>\n")

        if not self.cabinet:
            return head + cluster(self.name, range(self.hosts), "  ") + "</platform>\n"
        assert self.uplink is not None
        cabs = self.cabinets()
        zones = [self._zone(c.start) for c in cabs]
        lines = [f'  <zone id="{self.name}" routing="Full">\n']
        lines += [cluster(z, c, "    ", f"{z}-router") for z, c in zip(zones, cabs, strict=True)]
        lines += [f'    <link id="{self.name}_uplink_{i}" '
                  f'bandwidth="{_num(self.uplink.bandwidth)}Bps" '
                  f'latency="{_num(self.uplink.latency)}s" sharing_policy="SPLITDUPLEX"/>\n'
                  for i in range(len(cabs))]
        # one route per direction: the source cabinet's uplink UP, the destination's DOWN
        for a, za in enumerate(zones):
            for b, zb in enumerate(zones):
                if a != b:
                    lines.append(
                        f'    <zoneRoute src="{za}" dst="{zb}" gw_src="{za}-router" '
                        f'gw_dst="{zb}-router" symmetrical="NO">'
                        f'<link_ctn id="{self.name}_uplink_{a}" direction="UP"/>'
                        f'<link_ctn id="{self.name}_uplink_{b}" direction="DOWN"/>'
                        "</zoneRoute>\n")
        return head + "".join(lines) + "  </zone>\n</platform>\n"

    def hostfile(self, ranks_per_host: int = 1) -> str:
        """SMPI's hostfile: ``ranks_per_host`` consecutive ranks on each host, in order."""
        if not 1 <= ranks_per_host <= self.cores:
            raise UserError(f"{ranks_per_host} ranks per host on hosts of {self.cores} cores",
                            where="ranks per host", hint=f"give 1..{self.cores}")
        return "".join(f"{h}:{ranks_per_host}\n" for h in self.host_names())

    def network_table(self) -> str:
        """The plugin's table: the inter-node class, the intra-node class, the link values."""
        out = ["# pt2pt-kit network table for libpt2pt_noise (route classes, link values)"]
        classes = [("inter", self.inter), ("intra", self.intra)] if self.intra else [
            ("all", self.inter)]
        for label, export in classes:
            out.append(f"class {label}")
            out += [row for row in export.noise_table.splitlines()
                    if row and not row.startswith("#")]
        out += [f"link {name} {_num(v.bandwidth)} {_num(v.latency)}"
                for name, v in sorted(self.link_values.items())]
        if self.shaper:
            out.append(self.shaper.table_line())
        return "\n".join(out) + "\n"

    def cfg_args(self) -> list[str]:
        """``--cfg=key:value`` for smpirun (no factor strings: the plugin sets the factors)."""
        return [f"--cfg={k}:{v}" for k, v in self.config.items()]

    def smpirun_args(self, folder: Path, plugin: Path, *, noise: bool = True,
                     seed: int = 1) -> list[str]:
        """smpirun's arguments for this platform written in ``folder`` (before ``-np``)."""
        env = [f"LD_PRELOAD={plugin}", f"PT2PT_SIMGRID_NOISE={folder / 'network.tsv'}",
               f"PT2PT_SIMGRID_SEED={seed}"]
        if not noise:
            env.append("PT2PT_SIMGRID_DETERMINISTIC=1")
        return ["-wrapper", "env " + " ".join(env), "-platform", str(folder / "platform.xml"),
                *self.cfg_args()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "pt2pt-simgrid-platform", "format_version": 1,
            "name": self.name, "hosts": self.hosts, "cores": self.cores, "prefix": self.prefix,
            "speed_flops": self.speed,
            "link": vars(self.link), "loopback": vars(self.loopback),
            "backbone": vars(self.backbone) if self.backbone else None,
            "cabinet": self.cabinet, "uplink": vars(self.uplink) if self.uplink else None,
            "link_values": {k: vars(v) for k, v in sorted(self.link_values.items())},
            "host_labels": {h: label for h, label in zip(self.host_names(), self.labels,
                                                        strict=False)},
            "simgrid_version": "{}.{}".format(*self.version), "config": self.config,
            "inter": _summary(self.inter), "intra": _summary(self.intra) if self.intra else None,
            "notes": self.notes,
            "shaper": self.shaper.to_dict() if self.shaper else None,
        }

    def write(self, out_dir: Path, ranks_per_host: int = 1) -> list[Path]:
        """Write :data:`FILES` into ``out_dir`` (each atomically)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        texts = {
            "platform.xml": self.platform_xml(),
            "hostfile": self.hostfile(ranks_per_host),
            "network.tsv": self.network_table(),
            "smpi-config.txt": "\n".join(self.cfg_args()) + "\n",
            "platform.json": json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n",
        }
        written = []
        for name, text in texts.items():
            write_text(out_dir / name, text)
            written.append(out_dir / name)
        return written


def _summary(export: SimgridExport) -> dict[str, Any]:
    doc = export.document
    return {"latency_base_s": export.latency, "bandwidth_base_Bps": export.bandwidth,
            "center": doc.get("center"), "segments": len(doc.get("segments", [])),
            "measured_sizes": len(doc.get("measured_sizes", [])),
            "provenance": doc.get("provenance")}


def _check_counts(hosts: int, cores: int) -> None:
    if not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
        raise UserError(f"{hosts!r} hosts", where="option --hosts",
                        hint=f"give a whole number of hosts, 1..{MAX_HOSTS}")
    if not isinstance(cores, int) or not 1 <= cores <= MAX_CORES:
        raise UserError(f"{cores!r} cores per host", where="option --cores",
                        hint=f"give a whole number of cores, 1..{MAX_CORES}")


def cluster_platform(inter_model: PointToPointModel, *, hosts: int, cores: int = 1,
                     intra_model: PointToPointModel | None = None,
                     send_model: PointToPointModel | None = None,
                     recv_model: PointToPointModel | None = None,
                     latency: float | None = None, bandwidth: float | None = None,
                     backbone: LinkValue | None = None,
                     link_values: Mapping[str, LinkValue] | None = None,
                     cabinet: int | None = None, uplink: LinkValue | None = None,
                     version: tuple[int, int] | str | None = None, name: str = "pt2pt",
                     provenance: Mapping[str, Any] | None = None,
                     shaper: Shaper | None = None) -> ClusterPlatform:
    """The cluster platform of ``hosts`` hosts with ``cores`` cores for a campaign's models.

    ``inter_model``: the ping-pong (one-way time) model between two hosts, on every route
    between hosts; ``latency``/``bandwidth`` its route's nominal values (default: the
    export's, from the model). ``intra_model``: between two ranks of one host (None: those
    messages follow the inter-node model too, which the notes say). ``send_model`` /
    ``recv_model``: ``smpi/os`` / ``smpi/or`` (SMPI adds them to every eager message, of
    either class; both classes' network factors carry the ping-pong time minus them).
    ``backbone``: the switch's capacity and latency (default non-blocking); its latency is
    taken out of the host links' so that the route's total stays the model's.
    ``link_values``: nominal values of named links (:meth:`ClusterPlatform.link_names`),
    set by the plugin at load: per-host/per-link deviations. ``cabinet``: hosts per cabinet
    (None: flat), joined by one ``uplink`` per cabinet (default: a host link's bandwidth, no
    latency). ``shaper``: a token bucket on each host's inter-node traffic
    (:mod:`kit.outputs.export.shaper`: the sustained rate a stream sees). Raises ``ModelError`` /
    ``UserError`` with the reason for what SimGrid cannot carry (see the module doc).
    """
    _check_counts(hosts, cores)
    if not _NAME.match(name):
        raise UserError(f"platform name {name!r}", where="name",
                        hint="letters, digits, '.', '_', '-'; starting with a letter")
    inter = export_simgrid(inter_model, latency=latency, bandwidth=bandwidth,
                           send_model=send_model, recv_model=recv_model, version=version,
                           provenance=provenance)
    if inter.version < CALLBACKS_SINCE:
        raise ModelError(f"SimGrid {inter.version[0]}.{inter.version[1]} has no network "
                         "factor callbacks, so a platform with two route classes (intra- and "
                         "inter-node) and noise cannot run on it", where="SimGrid version",
                         hint="use SimGrid 3.31 or newer (Debian 12 ships 3.32)")
    notes: list[str] = []
    intra = None
    if intra_model is not None:
        try:
            intra = export_simgrid(intra_model, send_model=send_model, recv_model=recv_model,
                                   version=inter.version)
        except ModelError as err:
            raise type(err)(f"intra-node model: {err.message}", where=err.where,
                             hint=err.hint) from err
        if cores == 1:
            notes.append("one core per host: the intra-node model is written but no two ranks "
                         "share a host")
    else:
        notes.append("no intra-node model: messages between ranks of one host follow the "
                     "inter-node model (over the host's loopback link)")
    route = LinkValue(inter.bandwidth, inter.latency)
    if backbone is not None:
        if not (backbone.bandwidth > 0 and 0 <= backbone.latency < route.latency):
            raise ModelError(f"backbone {backbone.bandwidth:.4g} B/s, {backbone.latency:.4g} s: "
                             f"its latency must be below the route's {route.latency:.4g} s "
                             "(the host links carry the rest)", where="backbone",
                             hint="give a smaller backbone latency, or none")
        notes.append(f"backbone {backbone.bandwidth:.4g} B/s shared by every inter-node "
                     "message: the models were measured one pair at a time")
    half = (route.latency - (backbone.latency if backbone else 0.0)) / 2
    cabinet, uplink = _topology(hosts, cabinet, uplink, route, notes)
    loop = LinkValue(intra.bandwidth, intra.latency) if intra else route
    config = {k: v for k, v in inter.config.items()
              if k not in factor_keys(inter.version) and k != "network/TCP-gamma"}
    gamma = max(float(e.config.get("network/TCP-gamma", 0)) for e in (inter, intra) if e)
    if gamma > 0:
        config["network/TCP-gamma"] = _num(gamma)
    platform = ClusterPlatform(name=name, hosts=hosts, cores=cores,
                               link=LinkValue(route.bandwidth, half), loopback=loop,
                               backbone=backbone, inter=inter, intra=intra, config=config,
                               version=inter.version, notes=notes, cabinet=cabinet,
                               uplink=uplink, shaper=shaper)
    if shaper is not None:
        notes.append(f"each host's messages to other hosts pass a token bucket of "
                     f"{shaper.rate:.4g} B/s sustained, burst {shaper.burst:.4g} B "
                     f"({shaper.source}): a message on an idle link keeps the ping-pong's "
                     "factors, back-to-back messages wait for the sustained rate")
    if link_values:
        platform = platform.with_link_values(link_values)
    return platform


def _topology(hosts: int, cabinet: int | None, uplink: LinkValue | None, route: LinkValue,
              notes: list[str]) -> tuple[int | None, LinkValue | None]:
    """The checked (cabinet, uplink) of a platform; (None, None) when it is flat."""
    if cabinet is None:
        if uplink is not None:
            raise UserError("an uplink needs cabinets", where="option --uplink",
                            hint="add --cabinet K (hosts per cabinet)")
        return None, None
    if isinstance(cabinet, bool) or not isinstance(cabinet, int) or cabinet < 1:
        raise UserError(f"{cabinet!r} hosts per cabinet", where="option --cabinet",
                        hint=f"give a whole number of hosts, 1..{hosts}")
    count = math.ceil(hosts / cabinet)
    if count > MAX_CABINETS:
        raise UserError(f"{count} cabinets of {cabinet} hosts: the routes between cabinets are "
                        f"written one per ordered pair, at most {MAX_CABINETS} cabinets",
                        where="option --cabinet",
                        hint=f"give at least {math.ceil(hosts / MAX_CABINETS)} hosts per cabinet")
    if count == 1:
        notes.append(f"one cabinet holds all {hosts} hosts: the platform is flat")
        if uplink is not None:
            raise UserError("an uplink needs two cabinets or more", where="option --uplink",
                            hint=f"give --cabinet below {hosts}, or leave --uplink out")
        return None, None
    if uplink is None:
        uplink = LinkValue(route.bandwidth, 0.0)
        how = "one host link's bandwidth and no latency (the default: give --uplink)"
    else:
        if not (uplink.bandwidth > 0 and uplink.latency >= 0 and math.isfinite(
                uplink.bandwidth) and math.isfinite(uplink.latency)):
            raise UserError(f"uplink {uplink.bandwidth} B/s, {uplink.latency} s",
                            where="option --uplink", hint="bandwidth > 0 and latency >= 0")
        how = "as given"
    notes.append(f"{count} cabinets of {cabinet} hosts, each with one uplink of "
                 f"{uplink.bandwidth:.4g} B/s and {uplink.latency:.4g} s ({how}) shared by its "
                 "hosts' messages to other cabinets; the models were measured without it")
    return cabinet, uplink


def load_platform(folder: Path) -> dict[str, Any]:
    """The description (``platform.json``) of a platform folder, checked for its files."""
    missing = [n for n in FILES if not (folder / n).is_file()]
    if missing:
        raise UserError(f"{folder} is not a pt2pt cluster platform: {', '.join(missing)} "
                        "missing", where=str(folder),
                        hint="write one with 'pt2pt export INTER.json --simgrid --hosts N "
                        "[--cores C] [--intra INTRA.json]'")
    try:
        doc = json.loads((folder / "platform.json").read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read platform.json ({exc})", where=str(folder / "platform.json"),
                        hint="write the platform again with 'pt2pt export ... --hosts N'"
                        ) from None
    if not isinstance(doc, dict) or doc.get("format") != "pt2pt-simgrid-platform":
        raise UserError("not a pt2pt platform description", where=str(folder / "platform.json"),
                        hint="write the platform again with 'pt2pt export ... --hosts N'")
    return doc
