"""The cluster model on a synthetic 64-node machine: recall and false discoveries per planted
effect size, the fit's time, held-out pairs' coverage (issue 58).

The population of every pair is a RegimeModel fitted to a shared reference run (a real
cluster's ping-pong); each of the 2,016 pairs is measured in two visits of ``--samples``
sizes (the probe's ``cluster:4M`` plan by default: 22 sizes, eight in each of the
two windows the figures read), with small natural differences between nodes and links
(2 % latency, 2 % bandwidth, 3 % noise level, sd) and 1 % visit-to-visit shifts. Planted:
for each effect size and each figure (latency added, bandwidth lost, noise level gained,
as fractions of the typical pair's), one slow node and two slow links. A finding is true
when its node or link was planted in that figure; a link of a planted node is a false
finding (the node should carry it). Thresholds: 10 % for all three figures
(``pt2pt cluster --threshold 10%``), FDR 5 %.

Oracle: the recall the same test would have if each planted item's estimate were its true
value plus only its sampling error (its standard error as fitted; Benjamini-Hochberg's cut
of the run): ``Phi((truth - threshold) / se - z_cut)`` summed over the planted items. What
the samples per pair allow for the figure's statistic; a recall below it is the model's
(bias, node-vs-link attribution), a recall at it the budget's.

    PYTHONPATH=$PWD nice .venv/bin/python benchmarks/bench_cluster_synth.py \\
        [--seeds 5] [--first-seed 0] [--nodes 64] [--samples 400] [--runs taurus,stampede] \\
        [--held-out 1] [--noise-statistic tail]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from kit.figures.deviation import WORSE, threshold_value

HERE = os.path.dirname(os.path.abspath(__file__))
EFFECTS = (0.05, 0.10, 0.20, 0.30, 0.50)
FIGURES = ("latency", "bandwidth", "noise")


def planted(n_nodes: int, rng: np.random.Generator) -> tuple[dict, dict, dict]:
    """Slow nodes and links: one node and two links per (effect, figure), disjoint."""
    from kit.fit.synthcluster import Effect

    nodes = list(rng.permutation(n_nodes))
    slow_nodes: dict[int, Any] = {}
    slow_links: dict[tuple[int, int], Any] = {}
    what: dict[str, tuple[str, float]] = {}
    used: set[int] = set()
    for e in EFFECTS:
        for fig in FIGURES:
            eff = Effect(**{fig: e})
            i = int(nodes.pop())
            slow_nodes[i] = eff
            used.add(i)
            for _ in range(2):
                a, b = sorted(int(x) for x in rng.choice(
                    [k for k in range(n_nodes) if k not in used], 2, replace=False))
                while (a, b) in slow_links:
                    a, b = sorted(int(x) for x in rng.choice(n_nodes, 2, replace=False))
                slow_links[(a, b)] = eff
    return slow_nodes, slow_links, what


def one_seed(population: Any, n_nodes: int, samples: int, seed: int,
             held: bool, plan: str = "cluster", threshold: float = 0.10) -> dict[str, Any]:
    from kit.analyses.slowlinks import Thresholds, find
    from kit.fit.clustermodel import ClusterModel
    from kit.fit.clustervalidate import held_out
    from kit.fit.synthcluster import SynthCluster, draw

    rng = np.random.default_rng(1000 + seed)
    slow_nodes, slow_links, _ = planted(n_nodes, rng)
    cluster = SynthCluster(n_nodes=n_nodes, nodes_slow=slow_nodes, links_slow=slow_links,
                           samples=samples, plan=plan)
    rows, truth = draw(cluster, population, seed=seed)
    names = cluster.node_names()
    c0, w0 = time.process_time(), time.perf_counter()
    model = ClusterModel(random_state=seed).fit(rows)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    findings = find(model, Thresholds(threshold, threshold, threshold))
    out = score(findings, slow_nodes, slow_links, names, truth, threshold)
    out.update({"cpu": cpu, "wall": wall, "samples": len(rows), "pairs": len(rows.pairs)})
    if held:
        out["held_out"] = held_out(rows, 0.2, seed=seed, max_scored=20_000)
    return out


def score(findings: Any, slow_nodes: dict, slow_links: dict, names: list[str],
          truth: dict[str, Any], threshold: float) -> dict[str, Any]:
    """Found, planted, false and flagged counts of a verdict, and the oracle recall (keys
    (kind, effect), (figure, effect), (kind, figure, effect))."""
    from kit.data.pairrows import pair_label

    by_item = {(f.name, f.figure): f for f in findings.tests}
    # Benjamini-Hochberg's cut of this run: p <= fdr k / m (k flagged; one more if none)
    k_cut = max(len(findings.flagged), 1)
    z_cut = float(ndtri(1.0 - findings.fdr * k_cut / len(findings.tests)))
    plant: dict[tuple[str, str], float] = {}
    for i, eff in slow_nodes.items():
        for fig in FIGURES:
            if getattr(eff, fig):
                plant[(names[i], fig)] = getattr(eff, fig)
    for (a, b), eff in slow_links.items():
        for fig in FIGURES:
            if getattr(eff, fig):
                plant[(pair_label((names[a], names[b])), fig)] = getattr(eff, fig)
    flagged = {(f.name, f.figure) for f in findings.flagged}
    out: dict[str, Any] = {"found": defaultdict(int), "planted": defaultdict(int),
                           "false": defaultdict(int), "flagged": defaultdict(int),
                           "oracle": defaultdict(float)}
    kind_of = {n: "node" for n in names}
    for key, e in plant.items():
        kind = kind_of.get(key[0], "link")
        f = by_item.get(key)
        power = 0.0
        if f is not None and np.isfinite(f.se) and f.se > 0:
            thr = threshold_value(key[1], threshold, findings.populations[key[1]])
            value = _true_value(key[1], e, truth)
            power = float(ndtr(WORSE[key[1]] * (value - thr) / f.se - z_cut))
        for k in ((kind, e), (key[1], e), (kind, key[1], e)):
            out["planted"][k] += 1
            out["found"][k] += key in flagged
            out["oracle"][k] += power
    for key in flagged:
        out["flagged"][key[1]] += 1
        if key not in plant:
            out["false"][key[1]] += 1
    return out


def _true_value(figure: str, effect: float, truth: dict[str, Any]) -> float:
    """A planted effect on its figure's scale: seconds added, ln bandwidth ratio, ln
    tail-width ratio (kit.figures.deviation)."""
    if figure == "latency":
        return effect * float(truth["latency_64B"])
    if figure == "bandwidth":
        return math.log1p(-effect)
    return math.log1p(effect)


def main() -> None:
    sys.path.insert(0, HERE)
    from bench_engine_v2 import CAL, RUNS, read_pingpong

    from kit.fit.fitting import fit_arrays

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed + seeds - 1 (split a run in parts)")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--samples", type=int, default=400, help="samples per visit (2 visits)")
    ap.add_argument("--runs", default="taurus,stampede")
    ap.add_argument("--held-out", type=int, default=1, help="seeds with a held-out check")
    ap.add_argument("--plan", default="cluster", choices=("cluster", "loguniform"),
                    help="sizes of a visit: the probe's cluster:4M list (default) or "
                    "log-uniform 1 B..4 MiB")
    ap.add_argument("--threshold", type=float, default=0.10,
                    help="threshold of all three figures (default 0.10, pt2pt cluster "
                    "--threshold 10%%)")
    ap.add_argument("--noise-statistic", default="tail", choices=("tail", "spread", "tailmean"),
                    help="the noise figure's statistic: the kit's (tail) or a candidate of "
                    "bench_noise_statistic.py swapped in")
    args = ap.parse_args()
    if args.noise_statistic != "tail":
        from bench_noise_statistic import candidates, use

        use(candidates()[args.noise_statistic])
    print("load average at start", os.getloadavg(), "noise statistic", args.noise_statistic)
    for run in args.runs.split(","):
        s, t = read_pingpong(CAL / RUNS[run])
        population = fit_arrays({"stat": "raw"}, s, t)
        found: dict[Any, int] = defaultdict(int)
        oracle: dict[Any, float] = defaultdict(float)
        plant: dict[Any, int] = defaultdict(int)
        false: dict[str, int] = defaultdict(int)
        flagged: dict[str, int] = defaultdict(int)
        cpus, walls, coverage = [], [], []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            r = one_seed(population, args.nodes, args.samples, seed,
                         seed - args.first_seed < args.held_out,
                         args.plan, args.threshold)
            cpus.append(r["cpu"])
            walls.append(r["wall"])
            for k, v in r["found"].items():
                found[k] += v
            for k, v in r["planted"].items():
                plant[k] += v
            for k, v in r["oracle"].items():
                oracle[k] += v
            for k, v in r["false"].items():
                false[k] += v
            for k, v in r["flagged"].items():
                flagged[k] += v
            if "held_out" in r:
                coverage.append((r["held_out"]["coverage"], r["held_out"]["coverage_nodes"]))
            print(f"{run} seed {seed}: {r['pairs']} pairs, {r['samples']:,} samples, fit "
                  f"{r['cpu']:.1f} CPU-s / {r['wall']:.1f} s wall; flagged "
                  f"{dict(r['flagged'])}, false {dict(r['false'])}"
                  + (f"; held-out coverage {r['held_out']['coverage']:.3f} (nodes "
                     f"{r['held_out']['coverage_nodes']:.3f})" if "held_out" in r else ""),
                  flush=True)
            # the table so far after every seed (a long run cut short keeps it)
            done = seed + 1 - args.first_seed
            print(f"\n{run}: recall per effect size (found / planted over {done} seeds)")
            for kind in ("node", "link", *FIGURES):
                cells = [f"{e:.0%}: {found[(kind, e)]}/{plant[(kind, e)]} = "
                         f"{found[(kind, e)] / max(plant[(kind, e)], 1):.2f}" for e in EFFECTS]
                print(f"  {kind:9s} " + "; ".join(cells))
            print("  by kind and figure: found / planted (oracle: expected with sampling "
                  "error only)")
            for kind in ("node", "link"):
                for fig in FIGURES:
                    cells = [f"{e:.0%}: {found[(kind, fig, e)]}/{plant[(kind, fig, e)]} "
                             f"({oracle[(kind, fig, e)]:.2f})" for e in EFFECTS]
                    print(f"  {kind} {fig:9s} " + "; ".join(cells))
            big = [e for e in EFFECTS if e >= 0.20]
            n_big = sum(plant[(kind, e)] for kind in ("node", "link") for e in big)
            f_big = sum(found[(kind, e)] for kind in ("node", "link") for e in big)
            o_big = sum(oracle[(kind, fig, e)] for kind in ("node", "link") for fig in FIGURES
                        for e in big)
            print(f"  effects >= 20 %: recall {f_big}/{n_big} = {f_big / max(n_big, 1):.3f}; "
                  f"oracle {o_big / max(n_big, 1):.3f}")
            total_flag = sum(flagged.values())
            total_false = sum(false.values())
            print(f"  FDR {total_false}/{total_flag} = {total_false / max(total_flag, 1):.3f} "
                  f"(per figure: " + ", ".join(
                      f"{f} {false[f]}/{flagged[f]}" for f in FIGURES) + ")")
            print(f"  fit: median {np.median(cpus):.1f} CPU-s, {np.median(walls):.1f} s wall "
                  f"(max {max(walls):.1f} s)")
            if coverage:
                print(f"  held-out 20 % of pairs: coverage of p05..p95 "
                      f"{', '.join(f'{c:.3f}' for c, _ in coverage)} (nominal 0.90); with the "
                      f"pairs' node effects {', '.join(f'{c:.3f}' for _, c in coverage)}")
    print("load average at end", os.getloadavg())


if __name__ == "__main__":
    main()
