"""Coverage of the model median's 95 % intervals next to regime breaks (issue 60).

A synthetic truth with jumps at 128 B and 64 KiB and no slow band (its curve is the true
median: kit.fit.synth's noises have median 1) is measured with a fixed log-uniform design
(``--samples`` per seed, 1 B - 4 MiB); the model is fitted and the kit's bootstrap
intervals (kit.model.uncertainty.bootstrap_intervals, the one place intervals are computed)
are asked for the median at NEAR sizes within a factor 1.25 of each true break on either
side, and at FAR sizes (every decade's log-spaced points, at least a factor 2 from a
break). Reported: the share of intervals holding the true median in each group over all
seeds, with its 95 % Clopper-Pearson interval (nominal: 0.95), and where the misses are.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_break_coverage.py [--seeds 20]
        [--samples 20000]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import stats

from kit.fit import synth
from kit.model import RegimeModel
from kit.model.uncertainty import bootstrap_intervals

#: The breaks of kit.fit.synth.jumps.
BREAKS = (128.0, 65537.0)
#: Check sizes next to each break: below it and from it on, within a factor 1.25.
NEAR_BELOW = (0.8, 0.9, 0.99)
NEAR_ABOVE = (1.0, 1.1, 1.25)


def check_sizes() -> tuple[np.ndarray, np.ndarray]:
    """(sizes, near a break?)."""
    near = np.unique(np.floor([b * f for b in BREAKS for f in NEAR_BELOW + NEAR_ABOVE]))
    far = np.geomspace(1.5, 2**22, 40)
    far = far[np.all([np.abs(np.log(far / b)) > np.log(2) for b in BREAKS], axis=0)]
    at = np.r_[near, np.floor(far)]
    return at, np.r_[np.ones(len(near), bool), np.zeros(len(far), bool)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--samples", type=int, default=20000)
    args = ap.parse_args()
    tr = synth.jumps()
    at, near = check_sizes()
    true = tr.median(at)
    hits = np.zeros((args.seeds, len(at)), dtype=bool)
    c0 = time.process_time()
    for seed in range(args.seeds):
        s, t = synth.sample(tr, args.samples, 1, 2**22, seed=seed)
        model = RegimeModel().fit(s, t)
        iv = bootstrap_intervals(model, s, t, at=at, random_state=seed)
        hits[seed] = [m["lo"] is not None and m["lo"] <= v <= m["hi"]
                      for m, v in zip(iv["medians"], true, strict=True)]
        miss = [f"{int(z)}" for z, h, n in zip(at, hits[seed], near, strict=True)
                if n and not h]
        print(f"seed {seed}: breaks {[round(b) for b in model.breakpoints_]}, near "
              f"{hits[seed, near].mean():.2f}, far {hits[seed, ~near].mean():.2f}; "
              f"missed near: {', '.join(miss) or '-'}", flush=True)
    for name, m in (("near a break", near), ("far from breaks", ~near)):
        k, n = int(hits[:, m].sum()), hits[:, m].size
        ci = stats.binomtest(k, n).proportion_ci(0.95)
        print(f"{name}: {k}/{n} = {k / n:.3f} (95 % CI {ci.low:.3f}-{ci.high:.3f}; "
              f"nominal 0.95)")
    by_size = ", ".join(f"{int(z)} {hits[:, i].mean():.2f}"
                        for i, z in enumerate(at) if near[i])
    print(f"per near size: {by_size}")
    print(f"{time.process_time() - c0:.0f} CPU-s, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
