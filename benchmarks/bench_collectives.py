"""A 1,024-rank MPI_Alltoall point at 1 MiB under SMPI: < 60 s and < 4 GiB (issue 61).

Builds a flat platform of N hosts x 1 core from the tests' synthetic inter-node model
(``three_linear_regimes(PER_BYTE)``: above 64 KiB 9 x PER_BYTE s/B; the default 9e-10 makes it
8.1e-9 s/B, 123 MB/s, a 1 Gbit/s-class link), then runs ``pt2pt collectives sweep`` as a user
does, one point per numproc, and prints what the sweep recorded per point: host wall time,
CPU seconds of the smpirun (children included) and peak memory (resident anonymous + shared +
page tables, see kit/outputs/collsweep.py), plus the slope of log CPU-s against log numproc
between consecutive counts (the law of cost: an alltoall is numproc^2 messages).
``--shared-malloc global`` measures SimGrid's other shared-buffer mode (the ratio of the two).

    .venv/bin/python benchmarks/bench_collectives.py [--np 128,256,512,1024] [--size 1M]
        [--algorithm pair] [--per-byte 9e-10] [--shared-malloc local|global]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", default="128,256,512,1024")
    ap.add_argument("--size", default="1M")
    ap.add_argument("--algorithm", default="pair")
    ap.add_argument("--memory-limit", default="16", help="GiB")
    ap.add_argument("--per-byte", type=float, default=9e-10)
    ap.add_argument("--shared-malloc", default="local", choices=("local", "global"))
    a = ap.parse_args()
    import polars as pl

    from kit.outputs.export.platform import cluster_platform
    from tests.builders import three_linear_regimes

    nps = [int(n) for n in a.np.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "platform"
        cluster_platform(three_linear_regimes(a.per_byte), hosts=max(nps), cores=1).write(folder)
        out = Path(tmp) / "sweep"
        load = os.getloadavg()[0]
        subprocess.run([sys.executable, "-m", "kit", "collectives", "sweep", str(out),
                        "--platform", str(folder), "--np", a.np, "--sizes", a.size,
                        "--algorithms", a.algorithm, "--reps", "1", "--time-limit", "1800",
                        "--memory-limit", a.memory_limit, "--shared-malloc", a.shared_malloc],
                       check=True)
        rows = pl.read_parquet(out / "collectives.parquet").sort("numproc")
    print(f"load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f}")
    for r in rows.iter_rows(named=True):
        print(f"np={r['numproc']} {a.algorithm} {a.size} {a.shared_malloc}: {r['status']}, "
              f"simulated "
              f"{r['time'] or math.nan:.4g} s, {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} CPU-s, "
              f"peak memory {r['peak_memory_bytes'] / 2**30:.2f} GiB")
    ok = rows.filter(pl.col("status") == "ok")
    pairs = ok.select("numproc", "cpu_s").rows()
    for (n0, c0), (n1, c1) in itertools.pairwise(pairs):
        print(f"CPU-s ~ numproc^{math.log(c1 / c0) / math.log(n1 / n0):.2f} between np {n0} "
              f"and {n1}")


if __name__ == "__main__":
    main()
