"""A synthetic cluster with known slow nodes and links: the cluster model's ground truth.

Every pair's samples are the population's (a fitted :class:`kit.model.RegimeModel` of a
real run, or any object with ``predict`` and ``sample``) changed by what its two nodes and
its link add, plus a run-level shift per visit:

* latency: ``L`` seconds added to every message (``latency`` effect x the population's
  median at 64 B as the campaign's sizes see it, :func:`latency_reference`);
* bandwidth: the transfer part of the time (``size / B`` of the population's median, B its
  effective bandwidth at the largest size) divided by ``1 - bandwidth``;
* noise: the ln ratio of each sample to its median multiplied by ``1 + noise``.

Unplanted nodes and links get small random effects (``spread``): a real machine's pairs
differ a little, and the detector must not call that slow. The planted table says which
nodes and links are slow and by how much, on the model's own scales
(:func:`truth_of`), for recall and false-discovery counts.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from kit.data.pairrows import PairRows, pair_label
from kit.tools.probe import cluster_sizes


class Population(Protocol):
    def predict(self, size: Any) -> NDArray: ...

    def sample(self, size: Any, n: int = 1, random_state: Any = None) -> NDArray: ...


@dataclass(frozen=True)
class Effect:
    """Fractions: latency added (of the population's 64 B median), bandwidth lost, tail
    width gained."""

    latency: float = 0.0
    bandwidth: float = 0.0
    noise: float = 0.0


@dataclass
class SynthCluster:
    """Nodes, planted effects, natural spread and the campaign's shape."""

    n_nodes: int = 8
    nodes_slow: dict[int, Effect] = field(default_factory=dict)
    links_slow: dict[tuple[int, int], Effect] = field(default_factory=dict)
    #: sd of the unplanted effects (each figure's fraction), nodes and links
    spread: Effect = field(default_factory=lambda: Effect(0.02, 0.02, 0.03))
    #: sd of a visit's multiplicative shift of all its times (run conditions)
    visit_sd: float = 0.01
    visits: int = 2
    samples: int = 400
    size_min: float = 1.0
    size_max: float = 4.0 * 2**20
    prefix: str = "n"
    #: "loguniform" (size_min..size_max) or "cluster": the probe's ``sizes: cluster:MAX`` list
    #: (kit.tools.probe.cluster_sizes), each size equally often, shuffled
    plan: str = "loguniform"

    def node_names(self) -> list[str]:
        width = len(str(self.n_nodes))
        return [f"{self.prefix}{i:0{width}d}" for i in range(1, self.n_nodes + 1)]


def draw(cluster: SynthCluster, population: Population, seed: int = 0,
         campaign: str = "synthetic") -> tuple[PairRows, dict[str, Any]]:
    """The samples of every pair (all pairs, ``visits`` each) and the effects drawn.

    Returns (rows, truth): ``truth["nodes"][name]`` / ``truth["links"][label]`` hold the
    effects actually applied (planted + spread) as :class:`Effect` fractions, and
    ``truth["planted_nodes"]`` / ``truth["planted_links"]`` the names planted.
    """
    rng = np.random.default_rng(seed)
    names = cluster.node_names()
    N = cluster.n_nodes
    sp = cluster.spread
    node_eff = [_jitter(cluster.nodes_slow.get(i, Effect()), sp, rng) for i in range(N)]
    pairs = list(itertools.combinations(range(N), 2))
    link_eff = {p: _jitter(cluster.links_slow.get(p, Effect()), sp, rng) for p in pairs}
    _menu, m64, bw_pop = _references(cluster, population)
    L, keep_bw, k = _pair_effects(pairs, node_eff, link_eff, m64)
    rows = _sample(cluster, population, [(names[i], names[j]) for i, j in pairs], L, keep_bw,
                   k, cluster.visits, 0, rng, campaign)
    truth = {"nodes": {names[i]: node_eff[i] for i in range(N)},
             "links": {pair_label((names[i], names[j])): link_eff[(i, j)] for i, j in pairs},
             "planted_nodes": {names[i]: eff for i, eff in cluster.nodes_slow.items()},
             "planted_links": {pair_label((names[i], names[j])): eff
                               for (i, j), eff in cluster.links_slow.items()},
             "latency_64B": m64, "bandwidth_top": bw_pop}
    return rows, truth


def draw_visits(cluster: SynthCluster, population: Population, truth: dict[str, Any],
                pairs: list[tuple[str, str]], visits: int, seed: int = 0,
                first_visit: int | None = None, campaign: str = "synthetic") -> PairRows:
    """More visits of some pairs of a drawn cluster (a second stage): the same node and link
    effects as ``truth`` (:func:`draw`'s), fresh samples and visit shifts; visits are
    numbered from ``first_visit`` (default: after the cluster's own), so run ids differ."""
    rng = np.random.default_rng(seed)
    _menu, m64, _bw = _references(cluster, population)
    node_eff = [truth["nodes"][n] for n in cluster.node_names()]
    index = {n: i for i, n in enumerate(cluster.node_names())}
    ends = [(index[a], index[b]) for a, b in pairs]
    link_eff = {(i, j): truth["links"][pair_label((a, b))]
                for (i, j), (a, b) in zip(ends, pairs, strict=True)}
    L, keep_bw, k = _pair_effects(ends, node_eff, link_eff, m64)
    start = cluster.visits if first_visit is None else first_visit
    return _sample(cluster, population, list(pairs), L, keep_bw, k, visits, start, rng,
                   campaign)


def _references(cluster: SynthCluster, population: Population
                ) -> tuple[NDArray | None, float, float]:
    """(the sizes menu or None, the 64 B latency reference, the top size's bandwidth)."""
    menu = np.array(cluster_sizes(int(cluster.size_max)), dtype=float) \
        if cluster.plan == "cluster" else None
    top = float(cluster.size_max)
    return menu, latency_reference(population, menu), \
        top / float(population.predict(np.array([top]))[0])


def _pair_effects(pairs: list[tuple[int, int]], node_eff: list[Effect],
                  link_eff: dict[tuple[int, int], Effect], m64: float
                  ) -> tuple[NDArray, NDArray, NDArray]:
    """Per pair: seconds added, bandwidth kept, noise factor (its nodes' and link's)."""
    L, keep_bw, k = np.empty(len(pairs)), np.empty(len(pairs)), np.empty(len(pairs))
    for p, (i, j) in enumerate(pairs):
        e = (node_eff[i], node_eff[j], link_eff[(i, j)])
        L[p] = sum(x.latency for x in e) * m64
        keep_bw[p] = math.prod(1.0 - x.bandwidth for x in e)
        k[p] = math.prod(1.0 + x.noise for x in e)
    return L, keep_bw, k


def _sample(cluster: SynthCluster, population: Population, pairs: list[tuple[str, str]],
            L: NDArray, keep_bw: NDArray, k: NDArray, V: int, first_visit: int,
            rng: np.random.Generator, campaign: str) -> PairRows:
    """``V`` visits of ``cluster.samples`` samples of each pair, its effects applied."""
    menu, _m64, bw_pop = _references(cluster, population)
    lo, hi = math.log(cluster.size_min), math.log(cluster.size_max + 1)
    P, S = len(pairs), cluster.samples
    # one draw for every sample of every visit (a population call per visit was most of the
    # time at 2,016 pairs), then each pair's effects by index
    pair = np.repeat(np.arange(P), V * S)
    visit = np.tile(np.repeat(np.arange(V), S), P)
    if menu is not None:
        s = menu[rng.integers(0, len(menu), P * V * S)]
    else:
        s = np.floor(np.exp(rng.uniform(lo, hi, P * V * S)))
    # the population's terms once per distinct size, not per sample (per sample they were
    # most of the draw: ~4 min of CPU at 2,016 pairs): each size's draws in one call, the
    # k-th sample of a size takes its k-th draw
    distinct, at = np.unique(s, return_inverse=True)
    counts = np.bincount(at, minlength=len(distinct))
    order = np.argsort(at, kind="stable")
    rank = np.empty(len(s), dtype=np.int64)
    rank[order] = np.arange(len(s)) - np.repeat(np.cumsum(counts) - counts, counts)
    base = population.sample(distinct, int(counts.max()), rng)[at, rank]
    med = population.predict(distinct)[at]
    transfer = np.minimum(s / bw_pop, med)
    med_p = med + transfer * (1.0 / keep_bw[pair] - 1.0) + L[pair]
    shift = np.exp(rng.normal(0.0, cluster.visit_sd, P * V)) if cluster.visit_sd else \
        np.ones(P * V)
    t = med_p * np.exp(k[pair] * np.log(base / med)) * shift[pair * V + visit]
    labels = np.array([f"{a}:{b}" for a, b in pairs])
    hp = labels[pair]
    rid = np.char.add(np.char.add(hp, "/v"), (visit + first_visit).astype(str))
    seq = np.tile(np.arange(S), P * V)
    return PairRows.of_arrays(hp, rid, s, t, seq,
                              series={"campaign": campaign, "tool": "synthetic",
                                      "transport": "synthetic", "op": "pingpong",
                                      "stat": "raw"})


def latency_reference(population: Population, menu: NDArray | None = None) -> float:
    """The typical latency at 64 B that a latency effect is a fraction of.

    What the cluster verdict's threshold is a fraction of: the population's median at 64 B
    as a campaign over ``menu`` sees it (interpolated in ln size between the measured
    sizes around 64 B); with no menu (log-uniform sizes, 64 B measured) the median at
    64 B. Not the population's own 64 B value when 64 B is not measured: a reference run
    fitted with per-size adjustments can be 30 % faster at exactly 64 B than at 53 B and
    141 B, and an effect planted as a fraction of that would be a smaller fraction of
    what the verdict quotes.
    """
    if menu is None or 64.0 in menu or not (menu.min() < 64.0 < menu.max()):
        return float(population.predict(np.array([64.0]))[0])
    lm = np.log(population.predict(menu))
    return float(np.exp(np.interp(math.log(64.0), np.log(menu), lm)))


def _jitter(planted: Effect, sd: Effect, rng: np.random.Generator) -> Effect:
    """The planted effect, or (unplanted) a small random one of either sign."""
    def one(value: float, s: float) -> float:
        return value if value else float(rng.normal(0.0, s)) if s else 0.0

    return Effect(one(planted.latency, sd.latency), one(planted.bandwidth, sd.bandwidth),
                  max(one(planted.noise, sd.noise), -0.5))


def write_probe_runs(rows: PairRows, folder: Path) -> list[Path]:
    """Each run of ``rows`` as the probe's output files (``pt2pt ingest`` reads them).

    One ``run-<k>.samples.csv`` + ``.meta.json`` per run, hosts from its pair, ping-pong
    times written as round trips (the probe's convention; ingest halves them).
    """
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    order = np.argsort(rows.run, kind="stable")
    starts = np.searchsorted(rows.run[order], np.arange(len(rows.runs) + 1))
    for k in range(len(rows.runs)):
        idx = order[starts[k]:starts[k + 1]]
        a, b = rows.pairs[int(rows.run_pair[k])]
        prefix = folder / f"run-{k:05d}"
        lines = ["seq,op,size,count,time,call,warmup"]
        lines += [f"{i},pingpong,{int(s)},1,{2 * t:.9e},,0"
                  for i, (s, t) in enumerate(zip(rows.size[idx], rows.time[idx], strict=True))]
        csv = prefix.with_suffix(".samples.csv")
        csv.write_text("\n".join(lines) + "\n")
        meta = {"probe_version": "0.1.0", "argv": ["synthcluster"],
                "mpi_version": "synthetic", "hosts": [a, b],
                "timer": {"name": "mpi", "resolution_s": 1e-9, "overhead_s": 0.0},
                "seed": k, "sizes": {"spec": "loguniform", "samples": len(idx)},
                "ops": ["pingpong"], "warmup": 0, "env": {}, "slurm_job_id": None,
                "start": f"2026-01-01T00:{k // 60 % 60:02d}:{k % 60:02d}Z", "end": None,
                "samples_written": len(idx), "complete": True}
        prefix.with_suffix(".meta.json").write_text(json.dumps(meta))
        out.append(csv)
    return out
