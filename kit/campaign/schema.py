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

from kit.campaign.site import SiteDefaults, load_site
from kit.campaign.transports import TransportTable, load_table
from kit.campaign.yamlmarks import Located, PathKey, load_located_file
from kit.errors import CampaignError

MPI_FLAVOURS = ("openmpi", "mpich", "intelmpi")
PLACEMENTS = ("intra-node", "inter-node")
PROBE_OPS = ("pingpong", "send", "recv", "isend", "irecv", "stream")
TOOLS = ("probe", "osu", "skampi")
LAUNCHERS = ("srun", "mpirun", "mpiexec")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# What may appear on an #SBATCH line: no blanks, quotes, $, `, ;, newlines.
_SBATCH_RE = re.compile(r"^[A-Za-z0-9._:=,/@+%-]{1,200}$")
_TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SIZE = r"\d+[KMG]?"
_SIZES_RE = re.compile(
    rf"^(loguniform:{_SIZE}:{_SIZE}|grid:{_SIZE}:{_SIZE}:\d+(\.\d+)?|list:{_SIZE}(,{_SIZE})*)$")
_OSU_RE = re.compile(r"^osu_[a-z0-9_]{1,40}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


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


@dataclass(frozen=True)
class ToolSpec:
    """One tool entry; ``options`` holds the tool-specific, already validated settings."""

    tool: str
    options: dict[str, Any]
    optional: bool = False
    line: int = 0


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


def parse_size(text: str) -> int:
    """``4M`` -> 4194304 (suffixes are powers of 1024, as the probe reads them)."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


class _Checker:
    """Validation helpers that turn a bad value into a CampaignError at its line."""

    def __init__(self, loc: Located) -> None:
        self.loc = loc

    def fail(self, path: PathKey, message: str, hint: str) -> CampaignError:
        return CampaignError(message, where=self.loc.where(path), hint=hint)

    def mapping(self, value: Any, path: PathKey, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, found {type(value).__name__}",
                            "write 'key: value' lines indented under it")
        for key in value:
            if key not in allowed:
                raise self.fail((*path, key), f"unknown key '{key}'",
                                f"allowed keys here: {', '.join(allowed)}")
        return value

    def text(self, value: Any, path: PathKey, *, pattern: re.Pattern[str] | None = None,
             hint: str = "", raw: bool = False) -> str:
        if raw and path in self.loc.raw and not isinstance(value, bool):
            value = self.loc.raw[path]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(path, f"expected a text value, found {value!r}", hint or "quote it")
        text = str(value)
        if _CONTROL_RE.search(text):
            raise self.fail(path, "newlines and control characters are not allowed here",
                            hint or "write the value on one line")
        if pattern is not None and not pattern.match(text):
            raise self.fail(path, f"invalid value {text!r}", hint)
        return text

    def integer(self, value: Any, path: PathKey, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.fail(path, f"expected an integer from {lo} to {hi}, found {value!r}",
                            f"write a whole number between {lo} and {hi}")
        return value

    def boolean(self, value: Any, path: PathKey) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, found {value!r}",
                            "write true or false")
        return value

    def text_list(self, value: Any, path: PathKey, **kw: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, found {value!r}",
                            "write a YAML list, e.g. [a, b]")
        return tuple(self.text(v, (*path, i), **kw) for i, v in enumerate(value))

    def choices(self, value: Any, path: PathKey, allowed: tuple[str, ...],
                what: str) -> tuple[str, ...]:
        items = self.text_list(value, path)
        if not items:
            raise self.fail(path, f"at least one {what} is needed",
                            f"choose from: {', '.join(allowed)}")
        for i, item in enumerate(items):
            if item not in allowed:
                raise self.fail((*path, i) if isinstance(value, list) else path,
                                f"unknown {what} '{item}'", f"choose from: {', '.join(allowed)}")
        if len(set(items)) != len(items):
            raise self.fail(path, f"a {what} is listed twice", "list each one once")
        return items


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
                       ("partition", "account", "qos", "time", "extra"))
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
                         time=time, extra=extra)


def _probe(ck: _Checker, entry: dict[str, Any], path: PathKey) -> dict[str, Any]:
    ops = ck.choices(entry.get("ops", ["pingpong"]), (*path, "ops"), PROBE_OPS, "probe op")
    sizes = ck.text(entry.get("sizes", "loguniform:0:4M"), (*path, "sizes"), pattern=_SIZES_RE,
                    hint="write loguniform:MIN:MAX, grid:MIN:MAX:FACTOR or list:A,B,C "
                         "(sizes in bytes, suffix K/M/G allowed)")
    kind, _, rest = sizes.partition(":")
    if kind in ("loguniform", "grid"):
        lo, hi = (parse_size(p) for p in rest.split(":")[:2])
        if lo > hi:
            raise ck.fail((*path, "sizes"), f"MIN {lo} is larger than MAX {hi}",
                          "swap the two bounds")
    return {
        "ops": list(ops),
        "sizes": sizes,
        "samples": ck.integer(entry.get("samples", 1000), (*path, "samples"), 1, 10_000_000),
        "warmup": ck.integer(entry.get("warmup", 20), (*path, "warmup"), 0, 1_000_000),
        "max_seconds": ck.integer(entry.get("max_seconds", 0), (*path, "max_seconds"),
                                  0, 10_000_000),
        "timer": ck.text(entry.get("timer", "mpi"), (*path, "timer"),
                         pattern=re.compile(r"^(mpi|monotonic)$"), hint="use mpi or monotonic"),
        "extra_args": list(ck.text_list(entry.get("extra_args", []), (*path, "extra_args"))),
    }


def _osu(ck: _Checker, entry: dict[str, Any], path: PathKey) -> dict[str, Any]:
    benchmarks = ck.text_list(entry.get("benchmarks", ["osu_latency"]), (*path, "benchmarks"),
                              pattern=_OSU_RE, hint="name OSU benchmarks such as osu_latency, "
                                                    "osu_bw, osu_bibw")
    if not benchmarks:
        raise ck.fail((*path, "benchmarks"), "no benchmark listed", "list e.g. [osu_latency]")
    return {"benchmarks": list(benchmarks),
            "options": list(ck.text_list(entry.get("options", []), (*path, "options")))}


def _skampi(ck: _Checker, entry: dict[str, Any], path: PathKey,
            base: Path | None) -> dict[str, Any]:
    if "ski" not in entry:
        raise ck.fail(path, "a skampi entry needs 'ski' (the .ski input template)",
                      "add e.g. 'ski: pingpong.ski' (relative to the campaign file)")
    ski = Path(ck.text(entry["ski"], (*path, "ski")))
    if not ski.is_absolute() and base is not None:
        ski = base / ski
    if not ski.is_file():
        raise ck.fail((*path, "ski"), f"the .ski template {ski} does not exist",
                      "give a path relative to the campaign file")
    raw = entry.get("params") if entry.get("params") is not None else {}
    params = ck.mapping(raw, (*path, "params"), tuple(raw) if isinstance(raw, dict) else ())
    for key in params:
        if not _ENV_NAME_RE.match(key):
            raise ck.fail((*path, "params", key), f"invalid template variable '{key}'",
                          "use letters, digits and _")
    return {"ski": str(ski.resolve()),
            "params": {k: ck.text(v, (*path, "params", k)) for k, v in params.items()},
            "options": list(ck.text_list(entry.get("options", []), (*path, "options")))}


_TOOL_KEYS = {
    "probe": ("ops", "sizes", "samples", "warmup", "max_seconds", "timer", "extra_args"),
    "osu": ("benchmarks", "options"),
    "skampi": ("ski", "params", "options"),
}


def _tools(ck: _Checker, value: Any, path: PathKey, base: Path | None) -> tuple[ToolSpec, ...]:
    if not isinstance(value, list) or not value:
        raise ck.fail(path, "'tools' must be a non-empty list",
                      "add e.g. '- tool: probe' with its ops, sizes and samples")
    specs = []
    for i, entry in enumerate(value):
        p = (*path, i)
        if not isinstance(entry, dict) or "tool" not in entry:
            raise ck.fail(p, "each tool entry needs 'tool:'",
                          f"write '- tool: NAME' with NAME one of {', '.join(TOOLS)}")
        tool = ck.choices(entry["tool"], (*p, "tool"), TOOLS, "tool")[0]
        ck.mapping(entry, p, ("tool", "optional", *_TOOL_KEYS[tool]))
        if tool == "probe":
            options = _probe(ck, entry, p)
        elif tool == "osu":
            options = _osu(ck, entry, p)
        else:
            options = _skampi(ck, entry, p, base)
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
             "seed", "launcher", "slurm", "env", "spack_view")


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
    for key, value in env_doc.items():
        if not _ENV_NAME_RE.match(key):
            raise ck.fail(("env", key), f"invalid environment variable name '{key}'",
                          "use letters, digits and _, not starting with a digit")
        env[key] = ck.text(value, ("env", key), raw=True)
        for tname in transports:
            entry = table.entry(mpi, tname)
            forced = set(entry.env).union(*(o.keys() for o in entry.env_by_major.values()))
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
    return Campaign(
        name=name, mpi=mpi, transports=transports, placements=placements,
        transport_placements=per_transport,
        tools=_tools(ck, doc["tools"], ("tools",), base),
        repetitions=ck.integer(doc.get("repetitions", 1), ("repetitions",), 1, 10_000),
        seed=ck.integer(doc.get("seed", 1), ("seed",), 0, 2**31 - 1),
        launcher=launcher, slurm=_slurm(ck, doc.get("slurm"), ("slurm",), site), env=env,
        description=description, spack_view=spack_view, source=None)


def load_campaign(path: Path, *, table: TransportTable | None = None,
                  site: SiteDefaults | None = None) -> Campaign:
    """Read, validate and return the campaign at ``path``."""
    loc = load_located_file(path)
    campaign = validate(loc, table=table or load_table(), site=site or load_site(),
                        base=path.resolve().parent)
    return replace(campaign, source=path.resolve())
