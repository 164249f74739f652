"""Real against simulated alltoall algorithms at np 2-4 on this host (issue 61's validation).

Calibrates a platform from this machine's shared-memory ping-pong (``pt2pt demo --quick``:
the probe's shm pingpong model, exported as 1 host x 4 cores with it as the intra-node
model), then runs ``pt2pt collectives validate`` (Open MPI's linear / pairwise /
modified_bruck forced for real against SMPI's basic_linear / pair / bruck) and prints its
table: rankings compared only where the real difference exceeds the noise. The load average
is printed by the command; a busy machine measures the scheduler too.

    .venv/bin/python benchmarks/bench_collvalidate.py [--demo DIR] [--np 2,3,4]
        [--sizes 1K,64K,1M] [--runs 3] [--reps 10] [--transport shm] [--deterministic]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo", type=Path, help="a pt2pt demo output to reuse (default: run "
                    "pt2pt demo --quick in a temporary folder)")
    ap.add_argument("--np", default="2,3,4")
    ap.add_argument("--sizes", default="1K,64K,1M")
    ap.add_argument("--runs", default="3")
    ap.add_argument("--reps", default="10")
    ap.add_argument("--transport", default="shm", choices=("shm", "tcp"))
    ap.add_argument("--deterministic", action="store_true")
    a = ap.parse_args()
    kit = [sys.executable, "-m", "kit"]
    with tempfile.TemporaryDirectory() as tmp:
        demo = a.demo or Path(tmp) / "demo"
        if a.demo is None:
            subprocess.run([*kit, "demo", "-o", str(demo), "--quick", "--no-tui"], check=True,
                           stdout=subprocess.DEVNULL)
        model = demo / "models" / f"{a.transport}-pingpong-probe.json"
        platform = Path(tmp) / "platform"
        subprocess.run([*kit, "export", str(model), "--simgrid", "--hosts", "1", "--cores",
                        "4", "--intra", str(model), "-o", str(platform)], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([*kit, "collectives", "validate", str(Path(tmp) / "val"), "--platform",
                        str(platform), "--np", a.np, "--sizes", a.sizes, "--runs", a.runs,
                        "--reps", a.reps, "--transport", a.transport,
                        *(["--deterministic"] if a.deterministic else [])], check=True)


if __name__ == "__main__":
    main()
