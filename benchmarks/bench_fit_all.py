"""``pt2pt fit --all``: every series of a dataset fitted in worker processes (issue 19).

Target: on 2 cores the batch uses >= 1.7 cores, measured in one run as CPU seconds / wall
seconds of the parallel batch (the machine is shared: a ratio taken in one run is steadier
than comparing two wall times). The same series are also fitted with ``jobs=1`` (in this
process) for the sequential wall time and the same-models check.

CPU is counted in full: this process, plus the forkserver and every worker it forked and
reaped (``/proc/<forkserver>/stat`` utime+stime+cutime+cstime), imports included.

    .venv/bin/python benchmarks/bench_fit_all.py [--series 6] [--samples 60000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from kit.data.dataset import matching_series
from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.fitall import fit_all
from kit.fit.fitting import FitOptions


def make_dataset(root: Path, n_series: int, n: int) -> Path:
    truth = synth.ethernet_like()
    ds = root / "dataset"
    for i in range(n_series):
        s, t = synth.sample(truth, n, lo=1, hi=2**22, seed=100 + i)
        csv = root / f"series{i}.csv"
        with csv.open("w") as fh:
            fh.write("size,duration\n")
            np.savetxt(fh, np.column_stack([s, t]), fmt=["%d", "%.9e"], delimiter=",")
        ingest([csv], ds, campaign=f"s{i}")
        csv.unlink()
    return ds


def _forkserver_cpu() -> float:
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick  # utime stime cutime cstime


def run_once(ds: Path, series: list[dict[str, str]], out: Path, jobs: int,
             opts: FitOptions) -> tuple[float, float, list]:
    fs0, c0, w0 = _forkserver_cpu(), time.process_time(), time.perf_counter()
    results = fit_all(ds, series, out, opts, jobs=jobs)
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0 + _forkserver_cpu() - fs0
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    return wall, cpu, results


def _model(path: Path | None) -> dict:
    """A model file without the one field that is not a result: the bootstrap's seconds."""
    doc = json.loads(Path(str(path)).read_text())
    doc.get("intervals", {}).pop("seconds", None)
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=6)
    ap.add_argument("--samples", type=int, default=60_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="parallel batches (median reported)")
    args = ap.parse_args()
    opts = FitOptions()
    with tempfile.TemporaryDirectory(prefix="bench-fit-all-") as tmp:
        root = Path(tmp)
        ds = make_dataset(root, args.series, args.samples)
        found = matching_series(ds, {}, aggregates=False)
        series = [{k: str(v) for k, v in r.items() if k != "n"}
                  for r in found.iter_rows(named=True)]
        print(f"{len(series)} series x {args.samples:,} samples; load average at start "
              f"{os.getloadavg()}", flush=True)
        ratios, walls = [], []
        for rep in range(args.repeat):
            wall, cpu, par = run_once(ds, series, root / f"par{rep}", args.jobs, opts)
            ratios.append(cpu / wall)
            walls.append(wall)
            print(f"  jobs={args.jobs} run {rep + 1}: wall {wall:.1f} s, CPU {cpu:.1f} s, "
                  f"CPU/wall {cpu / wall:.2f}, load {os.getloadavg()[0]:.1f}", flush=True)
        seq_wall, seq_cpu, seq = run_once(ds, series, root / "seq", 1, opts)
        print(f"  jobs=1: wall {seq_wall:.1f} s, CPU {seq_cpu:.1f} s", flush=True)
        same = all(_model(a.path) == _model(b.path) for a, b in zip(par, seq, strict=True))
        print(f"median CPU/wall with jobs={args.jobs}: {statistics.median(ratios):.2f} "
              f"(runs {', '.join(f'{r:.2f}' for r in ratios)}); wall speed-up vs jobs=1 "
              f"{seq_wall / statistics.median(walls):.2f}x; same models as sequential: {same}; "
              f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
