"""What identifies one series, without Polars.

A series is what one model is fitted to. ``pt2pt datasets`` lists series from the stored
summary without importing Polars (~0.5 s), so the keys live here rather than in
:mod:`kit.data.schema` (which re-exports them beside the Parquet schemas).
"""

from __future__ import annotations

#: The columns that identify one series (what one model is fitted to). ``pairs`` is there
#: because k concurrent pairs share the network: a model through k = 1, 2, 4 mixed describes
#: none of them. Series values are strings everywhere (series table, selectors, provenance).
SERIES_KEYS: tuple[str, ...] = ("campaign", "tool", "transport", "placement", "host_pair",
                                 "pairs", "op", "stat")


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
