"""The report's LogGP part: one table per campaign/transport/tool/placement/pair/k that measured
the ops for it.

LogGP is a property of a campaign (its pingpong, send, recv and stream series together), not
of one series, so it sits beside the per-series sections. Each table shows the parameters of
:mod:`kit.analyses.loggp` per size range with their intervals and definitions; a parameter
that could not be estimated is listed once with the reason instead of a number. Campaigns
that measured pingpong alone get one sentence saying which ops LogGP would need, so a reader
never wonders why the table is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kit.core.errors import UserError
from kit.data.schema import LOGGP_KEYS, pairs_label

#: Ops that make a LogGP table worth showing (pingpong alone gives only T1).
EXTRA_OPS = ("send", "recv", "stream", "gap", "latency")
#: What makes one LogGP table: the series keys but op and stat (the ops are its inputs). Each
#: placement, host pair and k gets its own table: intra- and inter-node ops are never pooled.
GROUP_KEYS = LOGGP_KEYS


@dataclass
class LogGPBlock:
    """One group's (GROUP_KEYS) LogGP table as the template shows it."""

    title: str
    slug: str
    note: str
    ranges: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, str]] = field(default_factory=list)
    loggopsim: str = ""


def _groups(dataset: Path, series: Mapping[str, str] | None) -> pl.DataFrame:
    """One row per GROUP_KEYS value with the list of ops it measured (warm-up excluded)."""
    from kit.data import dataset as ds

    lf = ds.scan(dataset).filter(~pl.col("warmup").fill_null(False))
    for k, v in (series or {}).items():
        if k in GROUP_KEYS:
            lf = lf.filter(pl.col(k).cast(pl.String) == str(v))
    return (lf.group_by([pl.col(k).cast(pl.String) for k in GROUP_KEYS])
            .agg(ops=pl.col("op").cast(pl.String).unique().sort())
            .sort(list(GROUP_KEYS)).collect())


def group_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    """A group's GROUP_KEYS values as strings: how ``breakpoints`` are keyed."""
    return tuple(str(row.get(k)) for k in GROUP_KEYS)


def group_title(row: Mapping[str, Any]) -> str:
    """``campaign / transport / tool, inter-node n1:n2[, 4 pairs]``: what the table pools."""
    where = " ".join(str(row[k]) for k in ("placement", "host_pair") if row.get(k))
    return ", ".join(part for part in (
        " / ".join(str(row[k]) for k in ("campaign", "transport", "tool")), where,
        pairs_label(row.get("pairs"))) if part)


def _fmt(iv: Mapping[str, Any], unit: str) -> dict[str, str]:
    """``value`` and ``interval`` ("[lo, hi]", or why there is none) of one cell; a
    parameter that was not estimated shows a dash (the reason is listed under the table)."""
    if iv.get("value") is None:
        return {"value": "–", "interval": ""}
    scale = 1e6 if unit == "s" else 1e9

    def num(v: Any) -> str:
        return f"{float(v) * scale:.4g}"

    if iv.get("lo") is None or iv.get("hi") is None:
        return {"value": num(iv["value"]),
                "interval": f"(no interval: {iv.get('why', 'not estimable')})"}
    return {"value": num(iv["value"]), "interval": f"[{num(iv['lo'])}, {num(iv['hi'])}]"}


def block_from_result(title: str, result: Mapping[str, Any]) -> LogGPBlock:
    """The template's table from :func:`kit.analyses.loggp.loggp`'s JSON-ready result."""
    from kit.analyses.loggp import DEFINITIONS, PARAMS, UNITS
    from kit.outputs.report.summary import slugify

    regimes = result["regimes"]
    ranges = [f"{r['size_min']:,.0f} – "
              + ("∞" if r["size_max"] is None else f"{r['size_max']:,.0f}") + " B"
              for r in regimes]
    rows, missing = [], []
    for p in PARAMS:
        cells = [_fmt(r[p], UNITS[p]) for r in regimes]
        if all(c["value"] == "–" for c in cells):
            missing.append({"param": p, "what": p, "definition": DEFINITIONS[p],
                            "why": regimes[0][p].get("why", "not estimable")})
            continue
        rows.append({"param": p, "definition": DEFINITIONS[p],
                     "unit": "µs" if UNITS[p] == "s" else "ns/B", "cells": cells})
        for r, rng, c in zip(regimes, ranges, cells, strict=True):
            if c["value"] == "–":
                missing.append({"param": p, "what": f"{p} in {rng}",
                                "definition": DEFINITIONS[p],
                                "why": r[p].get("why", "not estimable")})
    used = result.get("used") or {k: " or ".join(v) for k, v in result["sources"].items()}
    sources = ", ".join(f"{k} from {v}" for k, v in used.items())
    note = (f"{int(float(result['level']) * 100)} % intervals, bootstrap of each op's rows "
            f"({result['n_boot']} resamples); sources: {sources}. Each op's time is fitted "
            "as a + b·size by relative least squares on per-size medians, per size range.")
    sim = result.get("loggopsim") or {}
    shown = ", ".join(f"{k}={v}" for k, v in sim.items() if v is not None)
    return LogGPBlock(title=title, slug="loggp-" + slugify(title), note=note, ranges=ranges,
                      rows=rows, missing=missing,
                      loggopsim=f"LogGOPSim-style (ns, ns/B; first range): {shown}"
                      if shown else "")


def loggp_part(dataset: Path, series: Mapping[str, str] | None = None, *,
               breakpoints: Mapping[tuple[str, ...], list[float]] | None = None,
               random_state: int = 0) -> tuple[list[LogGPBlock], list[str]]:
    """LogGP tables of the campaigns in ``dataset`` (those matching ``series``), and
    one sentence per campaign without them (what is missing and how to measure it).

    ``breakpoints`` (per GROUP_KEYS value tuple) reuses the size ranges the report already
    found on the pingpong series; otherwise :func:`kit.analyses.loggp.loggp` finds them.
    """
    from kit.analyses.loggp import loggp

    blocks: list[LogGPBlock] = []
    notes: list[str] = []
    try:
        groups = _groups(dataset, series)
    except (UserError, OSError, pl.exceptions.PolarsError) as err:
        return [], [f"LogGP not estimated: the dataset could not be read ({err})."]
    # the same note for every host pair of a multi-pair campaign is said once
    only: dict[tuple[str, str], list[str]] = {}
    for row in groups.iter_rows(named=True):
        key = group_key(row)
        title = group_title(row)
        ops = set(row["ops"] or [])
        if not ops & set(EXTRA_OPS):
            base = group_title({**row, "host_pair": None})
            only.setdefault((base, ", ".join(sorted(ops))), []).append(title)
            continue
        sel = dict(zip(GROUP_KEYS, key, strict=True))
        try:
            result = loggp(dataset, sel, breakpoints=(breakpoints or {}).get(key),
                           random_state=random_state)
        except UserError as err:
            notes.append(f"{title}: LogGP not estimated: {err.message}")
            continue
        blocks.append(block_from_result(title, result))
    for (base, ops_text), titles in only.items():
        what = titles[0] if len(titles) == 1 else f"{base} ({len(titles)} host pairs)"
        notes.append(f"{what}: LogGP not estimated: only {ops_text} was measured; o_s, o_r, "
                     "g and G need send, recv and stream series (the probe's --op "
                     "pingpong,send,recv,stream).")
    return blocks, notes
