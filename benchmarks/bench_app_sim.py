"""``pt2pt simulate --app`` of the halo mini-app at 64 simulated ranks: under a minute (57).

Builds a cluster platform of 16 hosts x 4 cores from synthetic inter- and intra-node models
(the same shapes as the tests'), then times ``pt2pt simulate --app halo --np 64`` as a user
runs it: wall clock and the CPU seconds of the whole command, children included (smpirun and
SMPI). The build of the program with smpicc is cached; ``--cold`` clears the cache first.

    .venv/bin/python benchmarks/bench_app_sim.py [--np 64] [--repeat 3] [--cold]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="clear the program cache first")
    ap.add_argument("--args", default="-n 16384 -w 8192 -i 20 -c 100")
    a = ap.parse_args()
    from kit.outputs.export.platform import cluster_platform
    from kit.tools.app import cache_root
    from tests.builders import linear_overhead_model, three_linear_regimes

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "platform"
        hosts = max(1, a.np // 4)
        cluster_platform(three_linear_regimes(1e-8), hosts=hosts, cores=4,
                         intra_model=linear_overhead_model(1e-6, 2e-10)).write(folder)
        for i in range(a.repeat):
            if a.cold and i == 0:
                shutil.rmtree(cache_root(), ignore_errors=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "kit", "simulate", "--app", "halo", "--args",
                            a.args, "--np", str(a.np), "--platform", str(folder), "--reps", "1"],
                           check=True, capture_output=True, text=True)
            wall = time.monotonic() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(f"np={a.np} run {i + 1}: {wall:.2f} s wall, {cpu:.2f} CPU-s (children "
                  f"included), load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
