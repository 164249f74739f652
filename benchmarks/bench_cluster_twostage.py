"""Fixed vs two-stage cluster campaigns at equal total samples: recall and false discoveries
per planted effect size on the synthetic 64-node machine (issue 58, budget option).

Per seed (the planted machine of bench_cluster_synth.py: one slow node and two slow links
per effect size and figure, taurus population, threshold 10 % on all figures, FDR 5 %):

* **first stage**: every pair, ``--visits`` visits of ``--samples`` (the probe's cluster:4M
  sizes), its verdict alone (``stage 1``);
* **two-stage**: the undecided links of the first stage (kit.analyses.twostage.undecided),
  as many as ``--share`` of the whole budget holds (kit.measure.campaign.pairplan.
  second_stage_pairs), ``--second-visits`` more visits each; the verdict of
  kit.analyses.twostage.combine;
* **fixed**: every pair, the same visits, samples per visit raised so that the total
  equals the two-stage total (within one sample per visit).

    PYTHONPATH=$PWD nice -n 19 .venv/bin/python benchmarks/bench_cluster_twostage.py \\
        [--seeds 5] [--first-seed 0] [--nodes 64] [--share 0.4] [--second-visits 16] \\
        [--no-fixed]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DESIGNS = ("stage 1", "two-stage", "fixed")


def one_seed(population: Any, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    from bench_cluster_synth import planted, score

    from kit.analyses.slowlinks import Thresholds, find
    from kit.analyses.twostage import StageDesign, combine, second_view, undecided
    from kit.data.pairrows import pair_label
    from kit.fit.clustermodel import ClusterModel
    from kit.fit.synthcluster import SynthCluster, draw, draw_visits
    from kit.measure.campaign.pairplan import second_stage_pairs

    th = Thresholds(args.threshold, args.threshold, args.threshold)
    rng = np.random.default_rng(1000 + seed)
    slow_nodes, slow_links, _ = planted(args.nodes, rng)
    cluster = SynthCluster(n_nodes=args.nodes, nodes_slow=slow_nodes, links_slow=slow_links,
                           samples=args.samples, visits=args.visits, plan="cluster")
    names = cluster.node_names()
    rows1, truth = draw(cluster, population, seed=seed)
    out: dict[str, Any] = {"cpu": defaultdict(float)}

    def fit(rows: Any, key: str) -> Any:
        c0 = time.process_time()
        model = ClusterModel(random_state=seed).fit(rows)
        out["cpu"][key] += time.process_time() - c0
        return model

    m1 = fit(rows1, "stage 1")
    f1 = find(m1, th)
    out["stage 1"] = score(f1, slow_nodes, slow_links, names, truth, args.threshold)
    jobs = len(rows1.pairs) * args.visits
    design = StageDesign(args.visits, args.second_visits,
                         second_stage_pairs(jobs, args.share, args.second_visits))
    idx = undecided(f1, design)
    chosen = [m1.pairs_[k] for k in idx]
    rows2 = draw_visits(cluster, population, truth, chosen, args.second_visits,
                        seed=100_000 + seed)
    m2 = fit(second_view(rows1, rows2, set(chosen)), "two-stage")
    final = combine(f1, find(m2, th), {pair_label(p) for p in chosen}, design)
    out["two-stage"] = score(final, slow_nodes, slow_links, names, truth, args.threshold)
    total = len(rows1) + len(rows2)
    planted_links = {pair_label((names[a], names[b])) for a, b in slow_links}
    out["chosen"] = {"pairs": len(chosen), "capacity": design.capacity,
                     "planted": len(planted_links & {pair_label(p) for p in chosen}),
                     "planted_all": len(planted_links)}
    out["total"] = {"stage 1": len(rows1), "two-stage": total}
    if not args.no_fixed:
        per_visit = round(total / jobs)
        fixed = SynthCluster(n_nodes=args.nodes, nodes_slow=slow_nodes, links_slow=slow_links,
                             samples=per_visit, visits=args.visits, plan="cluster")
        rows_f, truth_f = draw(fixed, population, seed=seed)
        ff = find(fit(rows_f, "fixed"), th)
        out["fixed"] = score(ff, slow_nodes, slow_links, names, truth_f, args.threshold)
        out["total"]["fixed"] = len(rows_f)
    return out


def main() -> None:
    sys.path.insert(0, HERE)
    from bench_cluster_synth import EFFECTS, FIGURES
    from bench_engine_v2 import CAL, RUNS, read_pingpong

    from kit.fit.fitting import fit_arrays

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--samples", type=int, default=400, help="samples per visit")
    ap.add_argument("--visits", type=int, default=2, help="first-stage visits of every pair")
    ap.add_argument("--share", type=float, default=0.4,
                    help="share of the whole budget the second stage may spend")
    ap.add_argument("--second-visits", type=int, default=16)
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--run", default="taurus")
    ap.add_argument("--no-fixed", action="store_true", help="skip the fixed design")
    args = ap.parse_args()
    print("load average at start", os.getloadavg(), vars(args), flush=True)
    s, t = read_pingpong(CAL / RUNS[args.run])
    population = fit_arrays({"stat": "raw"}, s, t)
    acc: dict[str, dict[str, dict[Any, float]]] = {
        d: {k: defaultdict(float) for k in ("found", "planted", "false", "flagged")}
        for d in DESIGNS}
    totals: dict[str, list[int]] = defaultdict(list)
    cpu: dict[str, list[float]] = defaultdict(list)
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        r = one_seed(population, args, seed)
        for d in DESIGNS:
            if d not in r:
                continue
            for k in acc[d]:
                for key, v in r[d][k].items():
                    acc[d][k][key] += v
            totals[d].append(r["total"][d])
        for d, c in r["cpu"].items():
            cpu[d].append(c)
        print(f"seed {seed}: chosen {r['chosen']}; totals {r['total']}; fit CPU-s "
              f"{ {d: round(c, 1) for d, c in r['cpu'].items()} }; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        done = seed + 1 - args.first_seed
        print(f"\nafter {done} seeds: recall found/planted per effect size; FDR false/flagged")
        for d in DESIGNS:
            a = acc[d]
            if not a["planted"]:
                continue
            big = [e for e in EFFECTS if e >= 0.20]
            nb = sum(a["planted"][(k, e)] for k in ("node", "link") for e in big)
            fb = sum(a["found"][(k, e)] for k in ("node", "link") for e in big)
            fl, fa = sum(a["flagged"].values()), sum(a["false"].values())
            print(f"  {d:9s} total {np.median(totals[d]):,.0f} samples (median); >= 20 %: "
                  f"{fb:.0f}/{nb:.0f} = {fb / max(nb, 1):.3f}; FDR {fa:.0f}/{fl:.0f} = "
                  f"{fa / max(fl, 1):.3f} (" + ", ".join(
                      f"{f} {a['false'][f]:.0f}/{a['flagged'][f]:.0f}" for f in FIGURES) + ")")
            for fig in FIGURES:
                cells = [f"{e:.0%} {a['found'][(fig, e)]:.0f}/{a['planted'][(fig, e)]:.0f}"
                         for e in EFFECTS]
                print(f"      {fig:9s} " + "; ".join(cells))
        print("  fit CPU-s medians: " + ", ".join(
            f"{d} {np.median(c):.1f}" for d, c in cpu.items()), flush=True)
    print("load average at end", os.getloadavg())


if __name__ == "__main__":
    main()
