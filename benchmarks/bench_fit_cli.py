"""CPU seconds of ``pt2pt fit`` end to end: what a user waits for, not only the estimator.

Why: the estimator benchmarks (bench_fit_cpu.py) time ``RegimeModel.fit`` and the bootstrap
on arrays. The command also reads the series from the dataset, checks run quality, refits on
a training split and scores the held-out rest against the baselines (validation), draws
the intervals with the run ids and measurement order of real data, and writes the model
file; with log-uniform sizes each of those sees ~65,000 distinct sizes at 1 M samples.

A probe CSV of ``--rows`` pingpong rows with log-uniform sizes (bench_ingest.make_csv) is
ingested once; then ``python -m kit fit DATASET -o MODEL`` runs ``--repeat`` times as a fresh
process (CPU of the child from rusage, imports included). ``--compare DIR`` also runs the
kit package found in DIR (``git archive COMMIT kit | tar -x -C DIR``), alternating.

    .venv/bin/python benchmarks/bench_fit_cli.py [--rows 1000000] [--repeat 3] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fit_cpu(kit_dir: str, dataset: Path, out: Path, extra: list[str]) -> float:
    """CPU seconds of one ``pt2pt fit`` as a fresh process using the kit in ``kit_dir``."""
    env = {**os.environ, "PYTHONPATH": kit_dir}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # cwd: not the checkout, whose kit would come first on sys.path
    subprocess.run([sys.executable, "-m", "kit", "fit", str(dataset), "-o", str(out), *extra],
                   env=env, capture_output=True, check=True, cwd=out.parent)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare", metavar="DIR", help="also time the kit package in DIR")
    ap.add_argument("--fit-args", default="", help="more pt2pt fit options, space-separated")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_ingest import make_csv

    from kit.data.ingest import ingest

    here = str(HERE.parent)
    extra = args.fit_args.split()
    print(f"load average at start {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        csv = work / "in" / "run.samples.csv"
        csv.parent.mkdir()
        make_csv(csv, args.rows)
        ingest([csv], work / "ds", campaign="bench", transport="tcp")
        sides = {"now": here, **({"before": args.compare} if args.compare else {})}
        runs: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.repeat):
            for side, kit in sides.items():
                runs[side].append(fit_cpu(kit, work / "ds", work / f"{side}.json", extra))
        line = (f"pt2pt fit {' '.join(extra)} {args.rows:,} rows: CPU median "
                f"{statistics.median(runs['now']):.2f} s "
                f"({', '.join(f'{v:.2f}' for v in runs['now'])})")
        if args.compare:
            old = statistics.median(runs["before"])
            line += (f"; before {old:.2f} s ({', '.join(f'{v:.2f}' for v in runs['before'])})"
                     f" -> {old / statistics.median(runs['now']):.2f}x")
        print(line)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
