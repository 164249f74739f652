"""``pt2pt diff`` targets: detection rates over 50 seeds and cost relative to one fit.

Targets (issue "pt2pt diff"): latency +10 %, bandwidth -5 % and a break moved by 20 % each
detected in >= 95 % of 50 seeds; two samples of the same truth called "same" in >= 95 %;
runtime <= 2x one fit. Cost is CPU seconds (this machine is shared and noisy): the diff of two
4,000-sample series against one default ``RegimeModel().fit`` of one of them, in one run.

    python benchmarks/bench_diff.py [--seeds 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kit.analyses.diff import diff
from kit.model import RegimeModel
from tests.test_diff import side, truth


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    args = ap.parse_args()
    os.environ["PT2PT_FULL_STATS"] = "1"
    from tests import test_diff

    test_diff.SEEDS = args.seeds
    print(f"load average {os.getloadavg()[0]:.1f}; {args.seeds} seeds per scenario")
    for kind, label in (("same", "same truth called same"), ("lat", "latency +10 % found"),
                        ("bw", "bandwidth -5 % found"), ("brk", "break moved 20 % found")):
        hit, n = test_diff.rate(kind)
        print(f"  {label:<26} {hit}/{n} = {hit / n:.0%} (target >= 95 %)")
    ratios = []
    for seed in range(5):
        a, b = side(truth(), 100 + seed, "A"), side(truth(lat=1.1), 200 + seed, "B")
        t0 = time.process_time()
        RegimeModel(random_state=seed).fit(a.size, a.time)
        t_fit = time.process_time() - t0
        t0 = time.process_time()
        diff(a, b, seed=seed)
        ratios.append((time.process_time() - t0) / t_fit)
    print(f"  diff / one fit (CPU s, median of 5): {statistics.median(ratios):.2f} "
          "(target <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
