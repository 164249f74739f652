"""What identifies one series, without Polars.

A series is what one model is fitted to. ``pt2pt datasets`` lists series from the stored
summary without importing Polars (~0.5 s), so the keys live here rather than in
:mod:`kit.data.schema` (which re-exports them beside the Parquet schemas).
"""

from __future__ import annotations

from collections.abc import Mapping

#: The columns that identify one series (what one model is fitted to). ``pairs`` is there
#: because k concurrent pairs share the network: a model through k = 1, 2, 4 mixed describes
#: none of them. ``program`` names an application run (tool ``app``, op ``app``: the program,
#: its arguments and the rank count, e.g. ``halo 4096 50 np=4``); empty for every other tool.
#: Series values are strings everywhere (series table, selectors, provenance).
SERIES_KEYS: tuple[str, ...] = ("campaign", "tool", "transport", "placement", "host_pair",
                                 "pairs", "program", "op", "stat")


#: Keys a series may lack: empty means "not this kind of series" (program: not an app run);
#: series dicts, selectors and file names leave them out, so nothing changes for them.
OPTIONAL_KEYS: tuple[str, ...] = ("program",)


def series_dict(row: Mapping[str, object]) -> dict[str, str]:
    """A series' key values as strings (``row``: a mapping with every SERIES_KEYS value),
    optional keys left out when empty."""
    out = {k: "" if row[k] is None else str(row[k]) for k in SERIES_KEYS}
    return {k: v for k, v in out.items() if v or k not in OPTIONAL_KEYS}


def pairs_count(value: object) -> int:
    """k of a series from its ``pairs`` value (``"4"``, 4); absent or unreadable means 1.

    Model files and series dicts written before ``pairs`` was a series key lack it: they were
    (nearly always) two-rank runs, so they stand for k = 1.
    """
    try:
        k = int(str(value))
    except (TypeError, ValueError):
        return 1
    return k if k >= 1 else 1


def pairs_label(value: object) -> str:
    """How a series' k is named for people: ``""`` for 1 (most users never run contention,
    so the classic series stays unlabelled), ``"4 pairs"`` otherwise."""
    k = pairs_count(value)
    return "" if k == 1 else f"{k} pairs"


def pairs_short(value: object) -> str:
    """The same rule for file names: ``""`` for 1 (existing names do not change), ``"k4"``."""
    k = pairs_count(value)
    return "" if k == 1 else f"k{k}"


#: What one LogGP estimate pools: every series key but op and stat (its ops are the inputs:
#: pingpong, send, recv, stream), so placements, host pairs and k are never mixed.
LOGGP_KEYS: tuple[str, ...] = tuple(k for k in SERIES_KEYS if k not in ("op", "stat"))
