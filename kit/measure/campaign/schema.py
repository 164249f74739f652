"""The campaign file: what to measure, with which MPI, over which transports, where.

A campaign is validated completely before anything is rendered, and every error names the
file and line (from the YAML node marks) and what to write instead. Values that end up on
``#SBATCH`` lines are restricted to a safe character set, because sbatch parses those
lines itself and a newline there would start a new line of shell; every other value is
shell-quoted by the templates, so quotes, ``$(...)``, backticks and ``;`` are inert.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kit import tools as registry
from kit.core.checks import ENV_NAME_RE
from kit.core.checks import Checker as _Checker
from kit.core.yamlmarks import Located, PathKey, load_located_file
from kit.measure.campaign.site import SiteDefaults, load_site
from kit.measure.campaign.transports import TransportTable, load_table
from kit.tools.base import ToolSpec

MPI_FLAVOURS = ("openmpi", "mpich", "intelmpi")
PLACEMENTS = ("intra-node", "inter-node")
LAUNCHERS = ("srun", "mpirun", "mpiexec")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# What may appear on an #SBATCH line: no blanks, quotes, $, `, ;, newlines.
_SBATCH_RE = re.compile(r"^[A-Za-z0-9._:=,/@+%-]{1,200}$")
_TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")


@dataclass(frozen=True)
class Launcher:
    """How ranks are started inside the allocation (``srun --mpi=pmix`` or ``mpirun``)."""

    command: str
    args: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        return (self.command, *self.args)


@dataclass(frozen=True)
class SlurmSettings:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str = "00:10:00"
    extra: tuple[str, ...] = ()
    #: at most this many tasks of one job array run at once (``--array=0-N%T``); 0: no limit
    throttle: int = 0
    #: seconds before the time limit at which the batch script gets TERM to write its record
    signal_lead: int = 60


@dataclass(frozen=True)
class Budget:
    """What a multi-pair campaign may cost (``pairs: {..., budget: {...}}``): the whole
    campaign's Slurm time, and the network it is planned for (round-trip costs)."""

    time_s: int
    latency_s: float = 20e-6
    bandwidth_Bps: float = 1.25e9
    #: one job's start (Slurm, MPI_Init, the transport check, the record): not measuring
    startup_s: float = 5.0
    #: pairs measured at once (0: half the nodes, every node busy in every round)
    concurrent: int = 0
    #: share of ``time`` kept for a second stage (``second-stage: {share, visits}``): more
    #: visits of the pairs the first stage left undecided (kit.analyses.twostage); 0: none
    second_share: float = 0.0
    #: visits of each pair the second stage measures
    second_visits: int = 16
    line: int | None = None


@dataclass(frozen=True)
class PairSpec:
    """Which node pairs to measure: explicit, ``random: K`` or ``all-pairs: CAP``."""

    explicit: tuple[tuple[str, str], ...] = ()
    random: int = 0
    all_pairs: int = 0
    switch: str = "any"  # any | same | across (needs Slurm's topology)
    partition: str | None = None
    seed: int | None = None
    budget: Budget | None = None


@dataclass(frozen=True)
class AdaptiveSpec:
    """``design: adaptive`` (issue 60): measure in rounds until the model's 95 % intervals
    are as narrow as stated (kit.fit.adaptive is the design itself; this is its settings)."""

    median: float = 0.02           # relative half-width of the median, every size decade
    breaks: float | None = 0.05    # relative half-width of every break (None: not watched)
    budget: int = 200_000          # samples over all rounds
    rounds: int = 8
    round_samples: int = 10_000
    repetitions: int = 4           # of each size a round draws


@dataclass(frozen=True)
class Campaign:
    name: str
    mpi: str
    transports: tuple[str, ...]
    placements: tuple[str, ...]
    tools: tuple[ToolSpec, ...]
    repetitions: int
    seed: int
    launcher: Launcher
    slurm: SlurmSettings
    env: dict[str, str] = field(default_factory=dict)
    description: str = ""
    #: placements per transport (the campaign's, or narrower for e.g. ``{shm: intra-node}``)
    transport_placements: dict[str, tuple[str, ...]] = field(default_factory=dict)
    spack_view: str | None = None
    source: Path | None = None
    pairs: PairSpec | None = None
    #: how the ranks are pinned (kit.measure.campaign.nodestate.bind_cpu): ``cores`` (one
    #: physical core each, the same pair every run), ``none``, or ``cpus:A,B``
    binding: str = "cores"
    #: None: the fixed design the tools' options state; else the adaptive design's settings
    adaptive: AdaptiveSpec | None = None


def _launcher(ck: _Checker, value: Any, path: PathKey) -> Launcher:
    if isinstance(value, dict):
        ck.mapping(value, path, ("command", "args"))
        command = ck.text(value.get("command"), (*path, "command"))
        args = ck.text_list(value.get("args", []), (*path, "args"))
    else:
        text = ck.text(value, path, hint="write e.g. 'srun --mpi=pmix' or 'mpirun'")
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise ck.fail(path, f"cannot split the launcher: {exc}",
                          "balance the quotes") from None
        if not words:
            raise ck.fail(path, "empty launcher", "write 'srun --mpi=pmix' or 'mpirun'")
        command, args = words[0], tuple(words[1:])
    if command not in LAUNCHERS:
        raise ck.fail(path, f"unknown launcher '{command}'",
                      "use 'srun --mpi=pmix' (direct launch) or 'mpirun'")
    return Launcher(command=command, args=args)


def _slurm(ck: _Checker, value: Any, path: PathKey, site: SiteDefaults) -> SlurmSettings:
    value = ck.mapping(value if value is not None else {}, path,
                       ("partition", "account", "qos", "time", "extra", "throttle",
                        "signal_lead"))
    sb_hint = "use only letters, digits and . _ : = , / @ + % -"

    def opt(key: str, default: str | None) -> str | None:
        if value.get(key) is None:
            return default
        return ck.text(value[key], (*path, key), pattern=_SBATCH_RE, hint=sb_hint, raw=True)

    time = opt("time", "00:10:00") or "00:10:00"
    if not _TIME_RE.match(time):
        raise ck.fail((*path, "time"), f"invalid Slurm time {time!r}",
                      "write minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, quoted")
    extra = ck.text_list(value.get("extra", []), (*path, "extra"), pattern=_SBATCH_RE,
                         hint="write each option as one word, e.g. --exclusive or "
                              "--constraint=ib; " + sb_hint)
    for i, item in enumerate(extra):
        if not item.startswith("-"):
            raise ck.fail((*path, "extra", i), f"'{item}' is not an sbatch option",
                          "start each extra option with - or --")
    return SlurmSettings(partition=opt("partition", site.partition),
                         account=opt("account", site.account), qos=opt("qos", site.qos),
                         time=time, extra=extra,
                         throttle=ck.integer(value.get("throttle", 0), (*path, "throttle"),
                                             0, 100_000),
                         signal_lead=ck.integer(value.get("signal_lead", 60),
                                                (*path, "signal_lead"), 1, 3600))


_NODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SWITCH_MODES = ("any", "same", "across")


def _pairs(ck: _Checker, value: Any, path: PathKey) -> PairSpec | None:
    """``pairs: [[a, b], ...]`` or ``{random: K | all-pairs: CAP, switch, partition, seed}``."""
    if value is None:
        return None
    node_hint = "write node names as Slurm knows them (sinfo -N)"
    if isinstance(value, list):
        if not value:
            raise ck.fail(path, "an empty list of node pairs", "list e.g. [[n1, n2]]")
        pairs = []
        for i, item in enumerate(value):
            names = ck.text_list(item, (*path, i), pattern=_NODE_RE, hint=node_hint)
            if len(names) != 2 or names[0] == names[1]:
                raise ck.fail((*path, i), "a node pair is two different node names",
                              "write e.g. [n1, n2]")
            pairs.append((names[0], names[1]))
        return PairSpec(explicit=tuple(pairs))
    doc = ck.mapping(value, path, ("random", "all-pairs", "switch", "partition", "seed",
                                   "budget"))
    if ("random" in doc) == ("all-pairs" in doc):
        raise ck.fail(path, "give exactly one of 'random: K' and 'all-pairs: CAP'",
                      "or list the pairs explicitly: [[n1, n2], [n3, n4]]")
    switch = ck.choices(doc.get("switch", "any"), (*path, "switch"), SWITCH_MODES,
                        "switch mode")[0]
    partition = doc.get("partition")
    if partition is not None:
        partition = ck.text(partition, (*path, "partition"), pattern=_SBATCH_RE,
                            hint="a Slurm partition name")
    seed = doc.get("seed")
    if seed is not None:
        seed = ck.integer(seed, (*path, "seed"), 0, 2**31 - 1)
    budget = _budget(ck, doc["budget"], (*path, "budget")) if "budget" in doc else None
    if "random" in doc:
        return PairSpec(random=ck.integer(doc["random"], (*path, "random"), 1, 1_000_000),
                        switch=switch, partition=partition, seed=seed, budget=budget)
    cap = doc["all-pairs"]
    cap = 1_000_000 if cap is True else ck.integer(cap, (*path, "all-pairs"), 1, 1_000_000)
    return PairSpec(all_pairs=cap, switch=switch, partition=partition, seed=seed,
                    budget=budget)


def time_limit_s(text: str) -> int:
    """Slurm's time formats (MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]) in seconds."""
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        parts += [0] * (3 - len(parts))
        h, m, sec = parts
    elif len(parts) == 1:
        h, m, sec = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, sec = 0, parts[0], parts[1]
    else:
        h, m, sec = parts
    return int(days or 0) * 86400 + h * 3600 + m * 60 + sec


_QUANTITY_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµ/]*)\s*$")
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RATE_UNITS = {"Bps": 1.0, "kBps": 1e3, "MBps": 1e6, "GBps": 1e9, "bps": 0.125,
               "kbps": 125.0, "Mbps": 1.25e5, "Gbps": 1.25e8}


def _quantity(ck: _Checker, value: Any, path: PathKey, units: dict[str, float],
              example: str) -> float:
    m = _QUANTITY_RE.match(str(value))
    if not m or m.group(2) not in units or not float(m.group(1)) > 0:
        raise ck.fail(path, f"'{value}' is not a positive amount in {', '.join(units)}",
                      f"write e.g. {example}")
    return float(m.group(1)) * units[m.group(2)]


def _budget(ck: _Checker, value: Any, path: PathKey) -> Budget:
    """``budget: {time: "04:00:00", latency: 20us, bandwidth: 10Gbps, startup: 5s,
    concurrent: K}``: the campaign's whole Slurm time and the network it is planned for."""
    doc = ck.mapping(value, path, ("time", "latency", "bandwidth", "startup", "concurrent",
                                   "second-stage"))
    if "time" not in doc:
        raise ck.fail(path, "a budget needs 'time' (the whole campaign's Slurm time)",
                      'write e.g. budget: {time: "04:00:00", bandwidth: 10Gbps}')
    text = ck.text(str(doc["time"]), (*path, "time"), pattern=_SBATCH_RE,
                   hint="write minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, quoted")
    if not _TIME_RE.match(text):
        raise ck.fail((*path, "time"), f"invalid Slurm time {text!r}",
                      "write minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, quoted")
    return Budget(
        time_s=time_limit_s(text),
        latency_s=_quantity(ck, doc.get("latency", "20us"), (*path, "latency"), _TIME_UNITS,
                            "latency: 20us"),
        bandwidth_Bps=_quantity(ck, doc.get("bandwidth", "10Gbps"), (*path, "bandwidth"),
                                _RATE_UNITS, "bandwidth: 10Gbps or 1.25GBps"),
        startup_s=_quantity(ck, doc.get("startup", "5s"), (*path, "startup"), _TIME_UNITS,
                            "startup: 5s"),
        concurrent=ck.integer(doc.get("concurrent", 0), (*path, "concurrent"), 0, 1_000_000),
        **_second_stage(ck, doc.get("second-stage"), (*path, "second-stage")),
        line=ck.loc.line(path))


def _second_stage(ck: _Checker, value: Any, path: PathKey) -> dict[str, Any]:
    """``second-stage: {share: 0.4, visits: 16}``: the share of the budget's time a second
    stage may spend, and how many visits each pair it measures gets."""
    if value is None:
        return {}
    doc = ck.mapping(value, path, ("share", "visits"))
    share = doc.get("share")
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share < 1:
        raise ck.fail((*path, "share"), f"expected a share of the budget's time between 0 and "
                      f"1, found {share!r}", "write e.g. second-stage: {share: 0.4, visits: 16}")
    visits = ck.integer(doc.get("visits", 16), (*path, "visits"), 1, 10_000)
    return {"second_share": float(share), "second_visits": visits}


def _tools(ck: _Checker, value: Any, path: PathKey, base: Path | None) -> tuple[ToolSpec, ...]:
    """The ``tools:`` list: each entry's keys and values are checked by its tool's own
    module (kit.tools), so a new tool brings its own options schema."""
    names = registry.plannable()
    if not isinstance(value, list) or not value:
        raise ck.fail(path, "'tools' must be a non-empty list",
                      "add e.g. '- tool: probe' with its ops, sizes and samples")
    specs = []
    for i, entry in enumerate(value):
        p = (*path, i)
        if not isinstance(entry, dict) or "tool" not in entry:
            raise ck.fail(p, "each tool entry needs 'tool:'",
                          f"write '- tool: NAME' with NAME one of {', '.join(names)}")
        tool = ck.choices(entry["tool"], (*p, "tool"), names, "tool")[0]
        handler = registry.get(tool)
        ck.mapping(entry, p, ("tool", "optional", *(handler.option_keys or ())))
        options = handler.options(ck, entry, p, base)
        optional = ck.boolean(entry.get("optional", False), (*p, "optional"))
        specs.append(ToolSpec(tool=tool, options=options, optional=optional,
                              line=ck.loc.line(p)))
    return tuple(specs)


def _transports(ck: _Checker, value: Any, mpi: str, table: TransportTable,
                placements: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """Transport names, and the placements of each (``{shm: intra-node}`` narrows one)."""
    known = table.transports(mpi)
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ck.fail(("transports",), "expected a non-empty list of transports",
                      f"choose from: {', '.join(known)}")
    names: list[str] = []
    where: dict[str, tuple[str, ...]] = {}
    for i, item in enumerate(items):
        path: PathKey = ("transports", i) if isinstance(value, list) else ("transports",)
        own: tuple[str, ...] | None = None
        if isinstance(item, dict):
            if len(item) != 1:
                raise ck.fail(path, "a transport with its own placement is one 'name: placement'",
                              "write e.g. '{shm: intra-node}'")
            item, raw = next(iter(item.items()))
            own = ck.choices(raw, (*path, item), PLACEMENTS, "placement")
        name = ck.choices(item, path, known, f"transport for {mpi}")[0]
        if name in names:
            raise ck.fail(path, f"transport '{name}' is listed twice", "list each one once")
        entry = table.entry(mpi, name)
        for placement in own or placements:
            if placement not in entry.placements:
                raise ck.fail(path,
                              f"transport '{name}' cannot be measured {placement} "
                              f"(it works only {' or '.join(entry.placements)})",
                              f"remove '{name}', or narrow it with "
                              f"'{{{name}: {entry.placements[0]}}}'")
        names.append(name)
        where[name] = own or placements
    return tuple(names), where


_TOP_KEYS = ("name", "description", "mpi", "transports", "placement", "tools", "repetitions",
             "seed", "launcher", "slurm", "env", "spack_view", "pairs", "binding", "design")

_DESIGN_HINT = ("write 'design: fixed' (the default), 'design: adaptive', or "
                "'design: {adaptive: {median: 0.02, breaks: 0.05, budget: 200000, rounds: 8, "
                "round_samples: 10000, repetitions: 4}}'")


def _fraction(ck: _Checker, value: Any, path: PathKey) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ck.fail(path, f"expected a relative half-width between 0 and 1, found {value!r}",
                      "write e.g. 0.02 for ±2 %")
    return float(value)


def _design(ck: _Checker, value: Any, path: PathKey, tools: tuple[ToolSpec, ...],
            n_series: int) -> AdaptiveSpec | None:
    """``fixed`` | ``adaptive`` | ``{adaptive: {...}}``; adaptive measures one probe series."""
    if value is None or value == "fixed":
        return None
    if value == "adaptive":
        doc: dict[str, Any] = {}
    elif isinstance(value, dict) and list(value) == ["adaptive"]:
        inner = value["adaptive"] if value["adaptive"] is not None else {}
        doc = ck.mapping(inner, (*path, "adaptive"),
                         ("median", "breaks", "budget", "rounds", "round_samples",
                          "repetitions"))
        path = (*path, "adaptive")
    else:
        raise ck.fail(path, f"unknown design {value!r}", _DESIGN_HINT)
    if (len(tools) != 1 or tools[0].tool != "probe" or len(tools[0].options["ops"]) != 1
            or n_series != 1):
        raise ck.fail(path, "an adaptive design measures one series: one '- tool: probe' "
                      "entry with one op, over one transport and one placement",
                      "keep one probe entry with e.g. 'ops: [pingpong]' and one transport "
                      "and placement, or write 'design: fixed'")
    default = AdaptiveSpec()
    breaks = doc.get("breaks", default.breaks)
    spec = AdaptiveSpec(
        median=_fraction(ck, doc.get("median", default.median), (*path, "median")),
        breaks=None if breaks is None else _fraction(ck, breaks, (*path, "breaks")),
        budget=ck.integer(doc.get("budget", default.budget), (*path, "budget"), 1,
                          1_000_000_000),
        rounds=ck.integer(doc.get("rounds", default.rounds), (*path, "rounds"), 1, 1000),
        round_samples=ck.integer(doc.get("round_samples", default.round_samples),
                                 (*path, "round_samples"), 1, 10_000_000),
        repetitions=ck.integer(doc.get("repetitions", default.repetitions),
                               (*path, "repetitions"), 1, 10_000))
    if spec.round_samples < spec.repetitions:
        raise ck.fail((*path, "round_samples"), f"a round of {spec.round_samples} samples "
                      f"cannot repeat a size {spec.repetitions} times",
                      "raise round_samples or lower repetitions")
    return spec

_BINDING_HINT = ("write 'binding: cores' (each rank on a physical core of its own, the same "
                 "cores every run; the default), 'binding: none' (the scheduler places and "
                 "moves them) or 'binding: {cpus: [2, 3]}' (rank r on the r-th CPU listed)")


def _binding(ck: _Checker, value: Any, path: PathKey) -> str:
    """``cores`` | ``none`` | ``{cpus: [A, B, ...]}`` as the policy string jobs are given."""
    if value is None:
        return "cores"
    if isinstance(value, dict):
        doc = ck.mapping(value, path, ("cpus",))
        cpus = doc.get("cpus")
        if not isinstance(cpus, list) or not cpus:
            raise ck.fail((*path, "cpus"), "expected a list of CPU numbers", _BINDING_HINT)
        listed = [ck.integer(c, (*path, "cpus", i), 0, 65535) for i, c in enumerate(cpus)]
        return "cpus:" + ",".join(str(c) for c in listed)
    if value not in ("cores", "none"):
        raise ck.fail(path, f"unknown binding {value!r}", _BINDING_HINT)
    return str(value)


def validate(loc: Located, *, table: TransportTable, site: SiteDefaults,
             base: Path | None = None) -> Campaign:
    """Turn a located YAML document into a :class:`Campaign`, or raise at the bad line."""
    ck = _Checker(loc)
    doc = ck.mapping(loc.data, (), _TOP_KEYS)
    for key in ("name", "mpi", "transports", "tools"):
        if key not in doc:
            raise ck.fail((), f"the required key '{key}' is missing",
                          f"add '{key}:' at the top level")
    name = ck.text(doc["name"], ("name",), pattern=_NAME_RE,
                   hint="use letters, digits, '.', '_' and '-' (at most 64, no blanks)")
    mpi = ck.choices(doc["mpi"], ("mpi",), MPI_FLAVOURS, "MPI flavour")[0]
    placements = ck.choices(doc.get("placement", ["intra-node"]), ("placement",), PLACEMENTS,
                            "placement")
    transports, per_transport = _transports(ck, doc["transports"], mpi, table, placements)
    launcher_value = doc.get("launcher", site.launcher or "srun --mpi=pmix")
    launcher = _launcher(ck, launcher_value, ("launcher",))
    env_raw = doc.get("env") if doc.get("env") is not None else {}
    env_doc = ck.mapping(env_raw, ("env",), tuple(env_raw) if isinstance(env_raw, dict) else ())
    env: dict[str, str] = {}
    forced_by = {tname: set(entry.env).union(*(o.keys() for o in entry.env_by_major.values()))
                 for tname in transports for entry in [table.entry(mpi, tname)]}
    for key, value in env_doc.items():
        if not ENV_NAME_RE.match(key):
            raise ck.fail(("env", key), f"invalid environment variable name '{key}'",
                          "use letters, digits and _, not starting with a digit")
        env[key] = ck.text(value, ("env", key), raw=True)
        for tname, forced in forced_by.items():
            if key in forced:
                raise ck.fail(("env", key),
                              f"'{key}' is set by the transport table for '{tname}'; "
                              "overriding it would change the transport silently",
                              "remove it here, or add a transport variant to "
                              "jobs/transports.yaml")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ck.fail(("description",), "expected text", "quote the description")
    spack_view = doc.get("spack_view", site.spack_view)
    if spack_view is not None:
        spack_view = ck.text(spack_view, ("spack_view",))
    tools = _tools(ck, doc["tools"], ("tools",), base)
    return Campaign(
        name=name, mpi=mpi, transports=transports, placements=placements,
        transport_placements=per_transport, tools=tools,
        repetitions=ck.integer(doc.get("repetitions", 1), ("repetitions",), 1, 10_000),
        seed=ck.integer(doc.get("seed", 1), ("seed",), 0, 2**31 - 1),
        launcher=launcher, slurm=_slurm(ck, doc.get("slurm"), ("slurm",), site), env=env,
        description=description, spack_view=spack_view, source=None,
        pairs=_pairs(ck, doc.get("pairs"), ("pairs",)),
        binding=_binding(ck, doc.get("binding"), ("binding",)),
        adaptive=_design(ck, doc.get("design"), ("design",), tools,
                         sum(len(per_transport[t]) for t in transports)))


def load_campaign(path: Path, *, table: TransportTable | None = None,
                  site: SiteDefaults | None = None) -> Campaign:
    """Read, validate and return the campaign at ``path``."""
    loc = load_located_file(path)
    campaign = validate(loc, table=table or load_table(), site=site or load_site(),
                        base=path.resolve().parent)
    return replace(campaign, source=path.resolve())
