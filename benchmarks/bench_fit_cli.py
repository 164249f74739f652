"""CPU seconds and peak memory of ``pt2pt fit`` end to end: what a user waits for.

Why: the estimator benchmarks (bench_fit_cpu.py) time ``RegimeModel.fit`` and the bootstrap
on arrays. The command also imports its libraries, reads the series from the dataset, checks
run quality, refits on a training split and scores the held-out rest against the baselines
(validation), draws the intervals with the run ids and measurement order of real data, and
writes the model file; with log-uniform sizes each of those sees ~65,000 distinct sizes at
1 M samples.

The input is a probe CSV of ``--rows`` pingpong rows with log-uniform sizes
(bench_ingest.make_csv), or with ``--taurus`` the 33,100 ping-pongs of the shared taurus
calibration run. Each side ingests it with its own kit, then ``pt2pt fit DATASET -o MODEL``
runs ``--repeat`` times per side as a fresh process, the sides alternating; CPU seconds and
peak RSS are the fit process's own (child_usage.py), imports included.

``--compare-python PY --compare-kit DIR`` adds a second side: another checkout (e.g. the
wave-1 code, ``git worktree add /tmp/w1 3cedc7e`` with its own ``make venv``) run by its own
interpreter. Ratios are this code over that one, median over median.

    .venv/bin/python benchmarks/bench_fit_cli.py [--rows 1000000 | --taurus] [--repeat 5]
        [--compare-python /tmp/w1/.venv/bin/python --compare-kit /tmp/w1] [--fit-args ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TAURUS = (HERE.parent.parent / "shared" / "reference-data" / "platform-calibration"
          / "taurus_26_07_2016_calibration" / "taurus-2016-06-09--1_PingPong.csv")


def _env(kit_dir: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": kit_dir, "PT2PT_QUIET": "1"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--taurus", action="store_true",
                    help="fit the shared taurus calibration run (33,100 samples) instead")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare-python", help="interpreter of the other side")
    ap.add_argument("--compare-kit", help="checkout whose kit package the other side runs")
    ap.add_argument("--fit-args", default="", help="more pt2pt fit options, space-separated")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from child_usage import run

    extra = args.fit_args.split()
    sides = {"now": (sys.executable, str(HERE.parent))}
    if args.compare_python:
        sides["before"] = (args.compare_python, args.compare_kit or "")
    print(f"load average at start {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.taurus:
            source, what = TAURUS, "taurus (33,100 samples)"
        else:
            from bench_ingest import make_csv

            source = work / "in" / "run.samples.csv"
            source.parent.mkdir()
            make_csv(source, args.rows)
            what = f"{args.rows:,} log-uniform rows"
        for side, (python, kit) in sides.items():
            # cwd: not a checkout, whose kit would come first on sys.path
            subprocess.run([python, "-m", "kit", "ingest", "--dataset", str(work / side),
                            "--campaign", "bench", "--transport", "tcp", str(source)],
                           env=_env(kit), cwd=work, check=True, capture_output=True)
        cpu: dict[str, list[float]] = {s: [] for s in sides}
        rss: dict[str, list[float]] = {s: [] for s in sides}
        for _ in range(args.repeat):
            for side, (python, kit) in sides.items():
                _, c, m, _ = run([python, "-m", "kit", "fit", str(work / side), "-o",
                                  str(work / f"{side}.json"), *extra], _env(kit), cwd=tmp)
                cpu[side].append(c)
                rss[side].append(m * 1024)
        size = (work / "now.json").stat().st_size
    for side in sides:
        print(f"{side}: pt2pt fit {' '.join(extra)} {what}: CPU median "
              f"{statistics.median(cpu[side]):.2f} s ({', '.join(f'{v:.2f}' for v in cpu[side])})"
              f", peak RSS median {statistics.median(rss[side]):.0f} MiB")
    if "before" in sides:
        med = {k: {s: statistics.median(v) for s, v in d.items()} for k, d in
               (("cpu", cpu), ("rss", rss))}
        print(f"now / before: CPU {med['cpu']['now'] / med['cpu']['before']:.2f}x, "
              f"peak RSS {med['rss']['now'] / med['rss']['before']:.2f}x")
    print(f"model file (now): {size / 1e6:.2f} MB")
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
