"""The transport table (``jobs/transports.yaml``): how to force each transport, per MPI.

Each entry gives the environment that makes the MPI use exactly this transport and fail
when it is missing (never a silent fallback), the output patterns (with exit codes) that
mean "this transport is not available here", and how to check after the run that it was
really used. The table is data; the templates turn it into shell.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kit.core.errors import CampaignError
from kit.core.paths import JOBS_DIR
from kit.core.yamlmarks import Located, load_located_file

CHECK_KINDS = ("netdev", "ib_counters", "none")


@dataclass(frozen=True)
class TransportEntry:
    flavour: str
    name: str
    description: str
    placements: tuple[str, ...]
    env: dict[str, str]
    #: env overrides applied when the MPI's major version is >= the key
    env_by_major: dict[int, dict[str, str]] = field(default_factory=dict)
    #: env additions for one placement (e.g. TCP between two ranks of one node may use lo)
    env_by_placement: dict[str, dict[str, str]] = field(default_factory=dict)
    unavailable: tuple[str, ...] = ()
    unavailable_rc: tuple[int, ...] = (1,)
    check: str = "none"
    check_env: dict[str, str] = field(default_factory=dict)
    tested_here: bool = False

    def for_placement(self, placement: str) -> TransportEntry:
        """This entry with the placement's env additions merged into ``env``."""
        extra = self.env_by_placement.get(placement)
        return replace(self, env={**self.env, **extra}) if extra else self


@dataclass(frozen=True)
class TransportTable:
    entries: dict[tuple[str, str], TransportEntry]
    skipped_exit: int
    check_failed_exit: int
    clear_env: dict[str, tuple[str, ...]]
    source: str

    def transports(self, flavour: str) -> tuple[str, ...]:
        return tuple(name for (f, name) in self.entries if f == flavour)

    def entry(self, flavour: str, name: str) -> TransportEntry:
        try:
            return self.entries[(flavour, name)]
        except KeyError:
            raise CampaignError(
                f"transport '{name}' is not defined for {flavour}", where=self.source,
                hint=f"use one of: {', '.join(self.transports(flavour))}") from None


def default_table_path() -> Path:
    return JOBS_DIR / "transports.yaml"


def _table_error(loc: Located, path: tuple[str | int, ...], message: str) -> CampaignError:
    return CampaignError(message, where=loc.where(path),
                         hint="fix the transport table (see the comments at its top)")


def _str_map(loc: Located, value: Any, path: tuple[str | int, ...]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _table_error(loc, path, "expected a mapping of variable: value")
    return {str(k): loc.raw.get((*path, k), str(v)) for k, v in value.items()}


def load_table(path: Path | None = None) -> TransportTable:
    """Load and check the transport table."""
    path = path or default_table_path()
    loc = load_located_file(path)
    doc = loc.data
    if not isinstance(doc, dict) or "flavours" not in doc:
        raise _table_error(loc, (), "the table needs a top-level 'flavours' mapping")
    exits = doc.get("exit_codes", {})
    entries: dict[tuple[str, str], TransportEntry] = {}
    clear: dict[str, tuple[str, ...]] = {}
    for flavour, fdoc in doc["flavours"].items():
        fpath: tuple[str | int, ...] = ("flavours", flavour)
        clear[flavour] = tuple(fdoc.get("clear_env", []))
        common = tuple(fdoc.get("unavailable", []))
        for name, t in fdoc.get("transports", {}).items():
            tpath = (*fpath, "transports", name)
            if not isinstance(t, dict) or "env" not in t or "placements" not in t:
                raise _table_error(loc, tpath, f"{flavour}/{name} needs 'env' and 'placements'")
            check = t.get("check", {}) or {}
            kind = check.get("kind", "none")
            if kind not in CHECK_KINDS:
                raise _table_error(loc, (*tpath, "check", "kind"),
                                   f"unknown check kind '{kind}' (use {', '.join(CHECK_KINDS)})")
            entries[(flavour, name)] = TransportEntry(
                flavour=flavour, name=name, description=str(t.get("description", "")),
                placements=tuple(t["placements"]),
                env=_str_map(loc, t["env"], (*tpath, "env")),
                env_by_major={int(k): _str_map(loc, v, (*tpath, "env_by_major", k))
                              for k, v in (t.get("env_by_major") or {}).items()},
                env_by_placement={str(k): _str_map(loc, v, (*tpath, "env_by_placement", k))
                                  for k, v in (t.get("env_by_placement") or {}).items()},
                unavailable=tuple(t.get("unavailable", [])) + common,
                unavailable_rc=tuple(int(x) for x in t.get("unavailable_rc", [1])),
                check=kind, check_env=_str_map(loc, check.get("env"), (*tpath, "check", "env")),
                tested_here=bool(t.get("tested_here", False)))
    return TransportTable(entries=entries, skipped_exit=int(exits.get("skipped", 77)),
                          check_failed_exit=int(exits.get("check_failed", 78)),
                          clear_env=clear, source=str(path))
