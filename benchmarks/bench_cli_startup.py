"""CLI start-up: wall and CPU time of `pt2pt --version` and `pt2pt datasets`.

Targets (issue 19): each <= 0.3 s wall and <= 0.6 s CPU.

Each command runs in a fresh interpreter (`python -m kit ...`, as the `pt2pt` script does),
`--runs` times; medians are reported. CPU is user + system time of the child process
(`resource.getrusage(RUSAGE_CHILDREN)` deltas). `--help` imports every command module and
stands for what every call cost before the CLI learnt to import only the command it runs.
`datasets` reads a small dataset (one probe run of 1000 samples) made in a temp folder.

    .venv/bin/python benchmarks/bench_cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def timed(args: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one `python -m kit ARGS`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kit", *args], env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args, _ = parser.parse_known_args()
    from kit.data.ingest import ingest

    with tempfile.TemporaryDirectory(prefix="pt2pt-bench-cli-") as tmp:
        csv = Path(tmp) / "run.samples.csv"
        csv.write_text("seq,op,size,count,time,call,warmup\n" + "".join(
            f"{i},pingpong,{(i * 37) % 65536},1,{1e-6 + i * 1e-9:.9e},,0\n"
            for i in range(1000)))
        ingest([csv], Path(tmp) / "ds", campaign="bench", transport="shm")
        cases = {"--version": ["--version"], "datasets (small)": ["datasets", f"{tmp}/ds"],
                 "--help (imports every command)": ["--help"],
                 "fit --help": ["fit", "--help"], "validate --help": ["validate", "--help"]}
        load0 = os.getloadavg()[0]
        results = {name: [timed(argv) for _ in range(args.runs)] for name, argv in cases.items()}
        load1 = os.getloadavg()[0]
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}; load average {load0:.2f} at start, "
          f"{load1:.2f} at end; {args.runs} runs each, medians (min-max)\n")
    print("| command | wall s | CPU s |")
    print("|---|---|---|")
    for name, runs in results.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"| `pt2pt {name}` | {statistics.median(walls):.3f} ({min(walls):.3f}-"
              f"{max(walls):.3f}) | {statistics.median(cpus):.3f} ({min(cpus):.3f}-"
              f"{max(cpus):.3f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
