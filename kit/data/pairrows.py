"""The rows of a campaign's inter-node series of many node pairs, as one table.

A multi-pair campaign (``pairs: {all-pairs: CAP}``, ``{random: K}``) leaves one series per
host pair (the host pair is a series key). The cluster model (:mod:`kit.fit.clustermodel`)
reads them together: every series that shares campaign, tool, transport, op and statistic,
placed inter-node with one pair at a time (contention runs are a different experiment), and
not an application's (op ``app``: one wall time per run of a whole program, compared with
its simulation by ``pt2pt predict-app``, not a message time of a link). A
pair is a *link* between two nodes whatever the rank order, so ``n3:n1`` and ``n1:n3`` are
the same pair.

Why a module of its own: the selection rule (which series make one cluster, and what is
refused) is shared by ``pt2pt cluster``, the report's pair matrix and the TUI's cluster view,
and must give all three the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from kit.core.errors import UserError
from kit.data.dataset import RAW, describe, require_ingested, runs, scan, series_rows
from kit.data.schema import SERIES_KEYS, UNKNOWN

#: Series keys that must be equal within one cluster (host_pair varies; placement and pairs
#: are fixed to inter-node and 1).
CLUSTER_KEYS: tuple[str, ...] = ("campaign", "tool", "transport", "op", "stat")
#: The op (and tool) of application runs, which no cluster includes.
APP_OP = "app"
#: Fewest distinct node pairs a cluster model is fitted on.
MIN_PAIRS = 3


def pair_key(host_pair: str) -> tuple[str, str] | None:
    """``"n3:n1"`` -> ``("n1", "n3")``; None for an unknown or same-host pair."""
    a, sep, b = host_pair.partition(":")
    if not sep or not a or not b or a == b or UNKNOWN in (a, b):
        return None
    return (a, b) if a < b else (b, a)


def pair_label(pair: tuple[str, str]) -> str:
    """How a link is written in every message: ``n1-n3``."""
    return f"{pair[0]}-{pair[1]}"


@dataclass(frozen=True)
class PairRows:
    """Every raw sample of one cluster's series, indexed by pair, node and run.

    ``pairs[k]`` is a sorted (node, node) tuple, ``ends[k]`` its two indices into ``nodes``;
    ``pair[i]``/``run[i]`` index each sample's pair and run (``runs[j]`` is a run id,
    ``run_pair[j]`` its pair, ``run_start[j]`` its start time as an ISO text or None).
    ``series`` holds the common keys; ``host_pairs[k]`` the host_pair values of pair k as
    the dataset spells them (what a series selector needs).
    """

    series: dict[str, str]
    nodes: list[str]
    pairs: list[tuple[str, str]]
    host_pairs: list[list[str]]
    runs: list[str]
    run_pair: NDArray[np.int64]
    run_start: list[str | None]
    pair: NDArray[np.int64]
    run: NDArray[np.int64]
    size: NDArray[np.float64]
    time: NDArray[np.float64]
    seq: NDArray[np.int64]
    dataset: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ends(self) -> NDArray[np.int64]:
        index = {n: i for i, n in enumerate(self.nodes)}
        return np.array([[index[a], index[b]] for a, b in self.pairs], dtype=np.int64
                        ).reshape(-1, 2)

    def __len__(self) -> int:
        return int(self.size.shape[0])

    def pair_selector(self, k: int) -> dict[str, str]:
        """The series selector of pair ``k`` (its first host_pair spelling)."""
        return {**self.series, "placement": "inter-node", "pairs": "1",
                "host_pair": self.host_pairs[k][0]}

    def select(self, keep_pair: NDArray[np.bool_]) -> PairRows:
        """The rows of the pairs ``keep_pair`` marks (indices renumbered; held-out checks)."""
        keep = np.asarray(keep_pair, dtype=bool)[self.pair]
        hp = np.array([self.host_pairs[k][0] for k in range(len(self.pairs))])[self.pair[keep]]
        run_ids = np.asarray(self.runs)[self.run[keep]]
        starts = dict(zip(self.runs, self.run_start, strict=True))
        return PairRows.of_arrays(hp, run_ids, self.size[keep], self.time[keep],
                                  self.seq[keep], series=self.series, run_start=starts,
                                  dataset=self.dataset)

    @classmethod
    def joined(cls, parts: Sequence[PairRows]) -> PairRows:
        """The samples of several parts as one cluster's rows (e.g. a campaign's two stages;
        run ids must differ between parts, the first part's series keys are kept)."""
        def col(name: str) -> NDArray:
            return np.concatenate([getattr(p, name) for p in parts])

        hp = np.concatenate([np.array([p.host_pairs[k][0] for k in range(len(p.pairs))]
                                      )[p.pair] for p in parts])
        rid = np.concatenate([np.asarray(p.runs)[p.run] for p in parts])
        starts = {r: s for p in parts for r, s in zip(p.runs, p.run_start, strict=True)}
        return cls.of_arrays(hp, rid, col("size"), col("time"), col("seq"),
                             series=parts[0].series, run_start=starts,
                             dataset=parts[0].dataset)

    @classmethod
    def of_arrays(cls, host_pair: NDArray, run_id: NDArray, size: NDArray, time: NDArray,
                  seq: NDArray | None = None, *, series: Mapping[str, str] | None = None,
                  run_start: Mapping[str, str | None] | None = None,
                  dataset: str | None = None) -> PairRows:
        """Index raw arrays (one host_pair and run id per sample) as a cluster's rows.

        Samples of unknown or same-host pairs are left out (and counted in ``notes``).
        """
        hp = np.asarray(host_pair).astype(str)
        labels, inverse = np.unique(hp, return_inverse=True)
        keys = [pair_key(str(lab)) for lab in labels]
        keep = np.array([keys[i] is not None for i in range(len(labels))], dtype=bool)[inverse]
        notes = []
        if not keep.all():
            notes.append(f"{int((~keep).sum()):,} samples of unknown or same-host pairs left "
                         "out")
        pairs = sorted({k for k in keys if k is not None})
        pindex = {p: i for i, p in enumerate(pairs)}
        spell: dict[tuple[str, str], list[str]] = {p: [] for p in pairs}
        for lab, key in zip(labels, keys, strict=True):
            if key is not None:
                spell[key].append(str(lab))
        label_pair = np.array([pindex[k] if k is not None else -1 for k in keys], dtype=np.int64)
        pair = label_pair[inverse][keep]
        rid = np.asarray(run_id).astype(str)[keep]
        runs, run = np.unique(rid, return_inverse=True)
        run_pair = np.zeros(len(runs), dtype=np.int64)
        run_pair[run] = pair
        nodes = sorted({n for p in pairs for n in p})
        starts = run_start or {}
        return cls(series=dict(series or {}), nodes=nodes, pairs=pairs,
                   host_pairs=[sorted(spell[p]) for p in pairs], runs=[str(r) for r in runs],
                   run_pair=run_pair, run_start=[starts.get(str(r)) for r in runs],
                   pair=pair, run=run.astype(np.int64),
                   size=np.asarray(size, dtype=np.float64)[keep],
                   time=np.asarray(time, dtype=np.float64)[keep],
                   seq=(np.asarray(seq, dtype=np.int64)[keep] if seq is not None
                        else np.arange(int(keep.sum()), dtype=np.int64)),
                   dataset=dataset, notes=notes)


def clusters(dataset: str | Path, selector: Mapping[str, str] | None = None) -> pl.DataFrame:
    """Candidate clusters: CLUSTER_KEYS with the number of distinct host pairs and rows."""
    lf = series_rows(scan(dataset), {**(selector or {}), "placement": "inter-node",
                                     "pairs": "1"}, aggregates=False)
    lf = lf.filter(pl.col("op").cast(pl.String) != APP_OP)
    return (lf.group_by([pl.col(k).cast(pl.String) for k in CLUSTER_KEYS])
            .agg(n_pairs=pl.col("host_pair").n_unique(), n=pl.len())
            .sort(CLUSTER_KEYS).collect(engine="streaming"))


def read_pairs(dataset: str | Path, selector: Mapping[str, str] | None = None, *,
               where: str = "--series") -> PairRows:
    """The raw samples of the one cluster ``selector`` picks (UserError listing the choices).

    Raw rows only, not warm-up, finite times (:func:`kit.data.dataset.series_predicate`).
    """
    path = require_ingested(dataset)
    selector = dict(selector or {})
    bad = [k for k in selector if k not in SERIES_KEYS]
    if bad:
        raise UserError(f"unknown series key {bad[0]!r}", where=where,
                        hint=f"use {', '.join(CLUSTER_KEYS)}")
    if APP_OP in (selector.get("op"), selector.get("tool")):
        raise UserError("an application's runs (op app) are not node pairs' message times: "
                        "the cluster model leaves them out", where=where,
                        hint="compare them with their simulation: pt2pt predict-app DATASET "
                        "--platform DIR; pick the probe's series here")
    for key, fixed in (("placement", "inter-node"), ("pairs", "1"), ("stat", RAW)):
        if selector.get(key, fixed) != fixed:
            raise UserError(f"{key}={selector[key]}: the cluster model reads {key}={fixed} "
                            "series only", where=where,
                            hint=f"drop {key} from the selector")
    selector.pop("host_pair", None)
    found = clusters(path, selector)
    if found.height == 0:
        raise UserError(f"no inter-node raw samples match {describe(selector) or 'the dataset'}",
                        where=str(path), hint="measure node pairs with a campaign "
                        "'pairs: {all-pairs: N}' (or {random: K}) and pick its series with "
                        "--series campaign=...,transport=...")
    if found.height > 1:
        listing = "; ".join(f"{describe(r)} ({r['n_pairs']} pairs, {r['n']:,} rows)"
                            for r in found.iter_rows(named=True))
        raise UserError(f"{found.height} campaign series match, the cluster model reads one: "
                        f"{listing}", where=where,
                        hint="add keys to --series (campaign, tool, transport, op) to pick one")
    row = found.row(0, named=True)
    chosen = {k: str(row[k]) for k in CLUSTER_KEYS}
    frame = (series_rows(scan(path), {**chosen, "placement": "inter-node", "pairs": "1"},
                         aggregates=False)
             .select(pl.col("host_pair").cast(pl.String), pl.col("run_id").cast(pl.String),
                     pl.col("size").cast(pl.Float64), pl.col("time").cast(pl.Float64),
                     pl.col("seq").cast(pl.Int64))
             .collect())
    starts = _run_starts(path)
    rows = PairRows.of_arrays(frame["host_pair"].to_numpy(), frame["run_id"].to_numpy(),
                              frame["size"].to_numpy(), frame["time"].to_numpy(),
                              frame["seq"].to_numpy(), series=chosen, run_start=starts,
                              dataset=str(path))
    if len(rows.pairs) < MIN_PAIRS:
        raise UserError(f"{describe(chosen)} has {len(rows.pairs)} node pair(s) with raw "
                        f"inter-node samples; a cluster model needs at least {MIN_PAIRS}",
                        where=str(path), hint="measure more pairs: 'pairs: {all-pairs: N}' "
                        "in the campaign")
    return rows


def _run_starts(dataset: Path) -> dict[str, str | None]:
    table = runs(dataset).select("run_id", "start")
    return dict(zip(table["run_id"].to_list(), table["start"].to_list(), strict=True))
