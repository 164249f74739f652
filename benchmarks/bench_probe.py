"""Probe efficiency: how much of a run's wall time is spent inside the timed MPI calls.

efficiency = wall time of the measurement loop / sum of the recorded durations, for 100 000
8-byte ping-pongs on vader (shared memory) and on tcp over loopback; 1.0 would mean the probe
costs nothing between samples (target <= 1.3). The loop time is `loop_seconds` from the meta
JSON, so MPI_Init/Finalize are excluded; the whole mpirun wall time is reported beside it.
Also reports the timer overhead the probe measures at start for both timers.

    .venv/bin/python benchmarks/bench_probe.py [--runs 3] [--samples 100000]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "kit" / "probe" / "pt2pt-probe"
TRANSPORTS = {
    "vader": ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
    "tcp": ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include",
            "lo"],
}


def one_run(transport: str, timer: str, samples: int, scratch: Path) -> dict[str, float]:
    prefix = scratch / f"{transport}-{timer}"
    cmd = ["mpirun", "-np", "2", *TRANSPORTS[transport],
           "--mca", "btl_vader_backing_directory", str(scratch),
           "--mca", "orte_tmpdir_base", str(scratch),
           str(PROBE), "--sizes", "list:8", "--samples", str(samples), "--warmup", "1000",
           "--timer", timer, "--output", str(prefix)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_MCA_", "UCX_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    wall = time.monotonic() - t0
    meta = json.loads(Path(f"{prefix}.meta.json").read_text())
    with open(f"{prefix}.samples.csv", newline="") as f:
        times = [float(r["time"]) for r in csv.DictReader(f)]
    measured = sum(times)
    return {
        "median_rtt_us": statistics.median(times) * 1e6,
        "efficiency": meta["loop_seconds"] / measured,
        "gap_us": (meta["loop_seconds"] - measured) / len(times) * 1e6,
        "process_efficiency": wall / measured,
        "loop_s": meta["loop_seconds"],
        "timer_overhead_ns": meta["timer"]["overhead_s"] * 1e9,
        "timer_resolution_ns": meta["timer"]["resolution_s"] * 1e9,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100_000)
    args = parser.parse_args()
    subprocess.run(["make", "-C", str(PROBE.parent)], check=True, capture_output=True)
    scratch = Path(tempfile.mkdtemp(prefix="pt2pt-bench-probe-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.2f} at start; {args.runs} runs of "
              f"{args.samples} x 8 B pingpong (+1000 warm-up), medians\n")
        print("| transport | timer | loop / measured | mpirun wall / measured | loop s "
              "| median 8 B round trip µs | outside timed region µs/sample "
              "| timer overhead ns | timer resolution ns |")
        print("|---|---|---|---|---|---|---|---|---|")
        for transport in TRANSPORTS:
            for timer in ("mpi", "monotonic"):
                runs = [one_run(transport, timer, args.samples, scratch)
                        for _ in range(args.runs)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                spread = ", ".join(f"{r['efficiency']:.3f}" for r in runs)
                print(f"| {transport} | {timer} | {med['efficiency']:.3f} ({spread}) "
                      f"| {med['process_efficiency']:.2f} | {med['loop_s']:.3f} "
                      f"| {med['median_rtt_us']:.2f} | {med['gap_us']:.3f} "
                      f"| {med['timer_overhead_ns']:.0f} | {med['timer_resolution_ns']:.0f} |")
        print(f"\nload {os.getloadavg()[0]:.2f} at end")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
