"""The bounded-memory fit (issue 19): peak memory at 10^8 rows, and what the subsample costs.

1. ``--rows`` (default 100 M) synthetic raw samples (``kit.fit.synth.ethernet_like``, ``--grid``
   300 log-spaced sizes 1 B-4 MiB, probe-like) are generated in chunks of 10 M and ingested
   as one series (one run per chunk); nothing is kept after the run (a temporary folder).
2. ``pt2pt fit`` runs on it in a process of its own with the default ``--max-samples``; its
   peak RSS and CPU time are reported, with and without the validation and bootstrap
   intervals. The peak is the fit's own (benchmarks/child_usage.py: before, ``ru_maxrss`` of
   a child started by this process included this process's peak, the generated data's).
3. At ``--compare-rows`` (default 10 M) the full fit (``--max-samples 0``) is compared with
   subsampled fits at 200 log-spaced sizes, median and max over sizes: the relative
   difference of the predicted p50/p95/p99, and the level error (:func:`quantile_error`).

    .venv/bin/python benchmarks/bench_fit_bounded.py [--rows 100000000] [--compare-rows 10000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CHUNK = 10_000_000


def make_dataset(root: Path, rows: int, seed: int = 1, grid: int = 300) -> Path:
    import polars as pl

    from kit.data.ingest import ingest
    from kit.fit import synth

    ds = root / f"ds{rows}"
    truth = synth.ethernet_like()
    done = 0
    while done < rows:
        n = min(CHUNK, rows - done)
        s, t = synth.sample(truth, n, lo=1, hi=2**22, seed=seed + done, grid=grid or None)
        csv = root / "chunk.csv"
        pl.DataFrame({"size": s.astype(np.int64), "duration": t}).write_csv(csv)
        del s, t
        report = ingest([csv], ds, campaign="big")
        assert report.files_ok and not report.files_failed
        csv.unlink()
        done += n
        print(f"  ingested {done:,} rows", flush=True)
    return ds


def run_fit(ds: Path, out: Path, *extra: str) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS GiB, stderr) of ``pt2pt fit`` in a process of its own: the
    peak is the fit's, not this benchmark's (which generated the data; child_usage.py)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from child_usage import run

    env = {**os.environ, "PYTHONPATH": str(REPO), "PT2PT_QUIET": "1"}
    return run([sys.executable, "-m", "kit", "fit", str(ds), "-o", str(out), *extra], env)


def quantile_error(full: Path, sub: Path) -> dict[str, tuple[float, float, float, float]]:
    """Per level: (median, max) over the grid of the relative quantile difference, then of
    the level error ``|F_full(Q_sub(q)) - q|`` (probability units).

    Why both: where a size's two bands hold shares near a level (the median where the slow
    band holds half the samples), that quantile sits in the gap between the bands and jumps
    from one band to the other with the share: a 1 % difference in the share moves it 3x,
    which the relative difference reports as 200 %. The level error says how far off in
    probability the subsample's quantile is under the full fit: there, a point or two.
    """
    from kit.model.io import load_model

    a, b = load_model(full), load_model(sub)
    grid = np.geomspace(1, 2**22, 200)
    levels = np.array([0.5, 0.95, 0.99])
    qa = a.predict_quantiles(grid, levels)
    qb = b.predict_quantiles(grid, levels)
    rel = np.abs(qb / qa - 1)
    lev = np.abs(a.cdf(grid, qb) - levels)
    return {name: (float(np.median(rel[:, k])), float(np.max(rel[:, k])),
                   float(np.median(lev[:, k])), float(np.max(lev[:, k])))
            for k, name in enumerate(("p50", "p95", "p99"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--compare-rows", type=int, default=10_000_000)
    ap.add_argument("--caps", default="1000000,4000000", help="--max-samples to compare")
    ap.add_argument("--grid", type=int, default=300,
                    help="distinct sizes (0: log-uniform integers, ~all distinct at 10^7)")
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--skip-compare", action="store_true")
    args = ap.parse_args()
    print(f"load average at start {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-bounded-", dir="/var/tmp") as tmp:
        root = Path(tmp)
        if not args.skip_compare:
            ds = make_dataset(root, args.compare_rows, grid=args.grid)
            wall, cpu, rss, _ = run_fit(ds, root / "full.json", "--max-samples", "0",
                                        "--no-intervals", "--no-validate")
            print(f"{args.compare_rows:,} rows, full fit: wall {wall:.1f} s, CPU {cpu:.1f} s, "
                  f"peak RSS {rss:.2f} GiB", flush=True)
            for cap in args.caps.split(","):
                out = root / f"sub{cap}.json"
                wall, cpu, rss, _ = run_fit(ds, out, "--max-samples", cap, "--no-intervals",
                                            "--no-validate")
                err = quantile_error(root / "full.json", out)
                cells = ", ".join(f"{k} median {v[0]:.2%} max {v[1]:.2%} (level error median "
                                  f"{v[2]:.4f} max {v[3]:.4f})" for k, v in err.items())
                print(f"  --max-samples {int(cap):,}: wall {wall:.1f} s, CPU {cpu:.1f} s, peak "
                      f"RSS {rss:.2f} GiB; vs full: {cells}", flush=True)
            import shutil

            shutil.rmtree(ds)
        if not args.skip_big:
            ds = make_dataset(root, args.rows, grid=args.grid)
            for extra in (("--no-intervals", "--no-validate"), ()):
                wall, cpu, rss, _ = run_fit(ds, root / "big.json", *extra)
                what = " ".join(extra) or "(with validation and intervals)"
                print(f"{args.rows:,} rows, default --max-samples {what}: wall {wall:.1f} s, "
                      f"CPU {cpu:.1f} s, peak RSS {rss:.2f} GiB", flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
