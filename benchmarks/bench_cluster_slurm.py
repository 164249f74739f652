"""The cluster view's ground truth over seeds on the local Slurm cluster (issue 58).

Brings up five namespace nodes with one slow link and one slow node (tests/clustertruth.py),
runs the all-pairs campaign once per seed (each seed another random pair order and size
draw) and ``pt2pt cluster`` on it, and counts the seeds where the link and the node were
flagged, where nothing else was, and where both intervals contained the shaped truth. The
load average before each campaign is printed beside it. Needs root; downs its cluster.

    nice .venv/bin/python benchmarks/bench_cluster_slurm.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STATE = Path("/tmp/pt2pt-bench-cluster-5n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first", type=int, default=0)
    a = ap.parse_args()
    from kit.measure import localcluster
    from tests import clustertruth as truth

    os.environ.setdefault("PT2PT_SITE_CONFIG", "/nonexistent/no-site.yaml")
    probe = Path(__file__).resolve().parent.parent / "kit" / "probe" / "pt2pt-probe"
    if probe.exists():
        os.environ.setdefault("PT2PT_PROBE", str(probe))
    cluster = localcluster.up(nodes=truth.NODES, state_dir=STATE, shape=truth.SHAPE,
                              links=truth.LINKS, node_shapes=truth.NODE_SHAPES)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(a.first, a.first + a.seeds):
                load = os.getloadavg()[0]
                t0 = time.monotonic()
                dataset = truth.run_campaign(cluster, Path(tmp) / f"s{seed}", seed=seed)
                verdict, _ = truth.judge(cluster, dataset)
                rows.append((seed, load, time.monotonic() - t0, verdict))
                print(f"seed {seed}: load {load:.1f}, {rows[-1][2]:.0f} s; found "
                      f"{verdict.found}, exact {verdict.exact}, covered {verdict.covered}; "
                      f"{verdict.describe()}", flush=True)
    finally:
        localcluster.down(STATE)
    n = len(rows)
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    loads = sorted(r[1] for r in rows)
    print(f"\n{n} seeds: link and node flagged {sum(r[3].found for r in rows)}/{n}, nothing "
          f"else flagged {sum(r[3].exact for r in rows)}/{n}, both intervals contain the truth "
          f"{sum(r[3].covered for r in rows)}/{n}; median campaign+fit "
          f"{sorted(r[2] for r in rows)[n // 2]:.0f} s wall; load before {loads[0]:.1f}-"
          f"{loads[-1]:.1f} (median {loads[n // 2]:.1f}); children CPU "
          f"{cpu.ru_utime + cpu.ru_stime:.0f} s")
    for label, key, true in (("node", "node", truth.TRUE_NODE), ("link", "link", truth.TRUE_LINK)):
        est = sorted(math.expm1(getattr(r[3], key)["estimate"]) for r in rows
                     if getattr(r[3], key))
        if est:
            print(f"{label} bandwidth estimates (truth {math.expm1(true):+.1%}): median "
                  f"{est[len(est) // 2]:+.1%}, range {est[0]:+.1%} to {est[-1]:+.1%}")


if __name__ == "__main__":
    main()
