"""Ingest throughput and peak memory for a large probe CSV (not a test; see BENCHMARKS.md).

    .venv/bin/python benchmarks/bench_ingest.py --rows 10000000

Writes a probe-format CSV (pingpong, log-uniform sizes, realistic times) into a temp
folder, then ingests it in a fresh child process so that the child's peak RSS
(``ru_maxrss``) measures ingest alone. Prints rows/s, the CSV size, the in-memory size of
the rows as a Polars frame, and the child's peak RSS. Up to
kit.data.dataset.SUMMARY_REFRESH_MAX_ROWS rows the ingest time includes refreshing the series
summary (series.json) after the commit; above it the first reader computes the summary
(timed by bench_tui.py), so the figures here are the ingest's alone.

    .venv/bin/python benchmarks/bench_ingest.py --rows 10000000 --vs-polars 5

also times Polars' own ``scan_csv(...).sink_parquet(...)`` on the same file (zstd level 1, as
the kit writes), alternating the two children N times, and prints per-figure medians and the
kit/Polars ratios of one run (issue 19's target: ingest speed >= 1x Polars' own at <= 0.7x its
peak memory). Polars' conversion does no tidy transform and no run bookkeeping: it is the
floor of "read this CSV, write Parquet" with the same library.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

CHILD = """
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from kit.data.ingest import ingest
t1 = time.perf_counter()
report = ingest([sys.argv[1]], sys.argv[2], campaign="bench", transport="tcp")
t2 = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
from kit.data import dataset as ds
summary = (Path(sys.argv[2]) / ds.SUMMARY_FILE).is_file()
print(json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime, "import_s": t1 - t0,
                  "ingest_s": t2 - t1, "summary": summary, "rows": report.rows_added,
                  "failed": [m for _, m in report.files_failed],
                  "hwm_kib": int(next(line.split()[1] for line in
                                      Path("/proc/self/status").read_text().splitlines()
                                      if line.startswith("VmHWM:")))}))
"""

POLARS_CHILD = """
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
import polars as pl
t1 = time.perf_counter()
pl.scan_csv(sys.argv[1]).sink_parquet(Path(sys.argv[2]) / "out.parquet", compression="zstd",
                                      compression_level=1)
t2 = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime, "import_s": t1 - t0,
                  "ingest_s": t2 - t1,
                  "hwm_kib": int(next(line.split()[1] for line in
                                      Path("/proc/self/status").read_text().splitlines()
                                      if line.startswith("VmHWM:")))}))
"""


def make_csv(path: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(0, np.log(4 << 20), rows)).astype(np.uint64)
    times = (2e-6 + sizes / 5e9) * rng.lognormal(0, 0.3, rows)
    frame = pl.DataFrame({
        "seq": np.arange(rows, dtype=np.uint32), "op": "pingpong", "size": sizes,
        "count": 1, "time": times, "call": None, "warmup": (np.arange(rows) < 100).astype(int),
    }, schema_overrides={"call": pl.Float64})
    frame.write_csv(path, float_scientific=True, float_precision=9)
    meta = {"probe_version": "bench", "mpi_version": "n/a", "hosts": ["a", "b"],
            "ops": ["pingpong"], "env": {}, "complete": True, "samples_written": rows}
    path.with_name(path.name.replace(".samples.csv", ".meta.json")).write_text(json.dumps(meta))


def _watch_memory(proc: subprocess.Popen) -> dict[str, int]:
    """Peak RssAnon / RssFile (bytes) of a running child, from /proc, until it exits."""
    peak = {"RssAnon": 0, "RssFile": 0}
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                key, _, value = line.partition(":")
                if key in peak:
                    peak[key] = max(peak[key], int(value.split()[0]) * 1024)
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.01)
    return peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keep", type=Path, help="work in this folder instead of a temp one")
    parser.add_argument("--vs-polars", type=int, default=0, metavar="N",
                        help="alternate N kit ingests with N Polars scan_csv->sink_parquet "
                             "conversions of the same file and print medians and ratios")
    args = parser.parse_args()
    if args.vs_polars:
        return vs_polars(args.rows, args.vs_polars, args.keep)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        csv = work / "in" / "bench.samples.csv"
        csv.parent.mkdir(exist_ok=True)
        t0 = time.perf_counter()
        make_csv(csv, args.rows)
        gen_s = time.perf_counter() - t0
        frame_bytes = pl.scan_csv(csv).head(100_000).collect().estimated_size() * (
            args.rows / 100_000)
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(csv), str(work / "ds")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = _watch_memory(proc)
        out, err = proc.communicate()
        if proc.returncode:
            print(out, err, file=sys.stderr)
            return 1
        result = subprocess.CompletedProcess(proc.args, 0, out, err)
        stats = json.loads(result.stdout.strip().splitlines()[-1])
        if stats["failed"] or stats["rows"] != args.rows:
            print(result.stdout, result.stderr, file=sys.stderr)
            return 1
        rss = stats["hwm_kib"] * 1024
        part_bytes = sum(p.stat().st_size for p in (work / "ds").rglob("*.parquet"))
        print(f"rows                 {args.rows:,}")
        print(f"csv size             {csv.stat().st_size / 2**20:,.0f} MiB (generated in "
              f"{gen_s:.1f} s)")
        print(f"in-memory (polars)   {frame_bytes / 2**20:,.0f} MiB")
        print(f"ingest wall time     {stats['ingest_s']:.2f} s (+ {stats['import_s']:.2f} s "
              "imports)")
        print("series summary       " + ("refreshed by the ingest (included above)"
                                        if stats["summary"] else
                                        "left to the first reader (above "
                                        "SUMMARY_REFRESH_MAX_ROWS; see bench_tui.py)"))
        print(f"throughput           {args.rows / stats['ingest_s'] / 1e6:.2f} M rows/s (wall)")
        print(f"cpu time (child)     {stats['cpu_s']:.2f} s user+sys, imports included: "
              f"{args.rows / stats['cpu_s'] / 1e6:.2f} M rows per CPU-second")
        print(f"peak RSS (child)     {rss / 2**20:,.0f} MiB (VmHWM: heap + mapped files + "
              "interpreter)")
        print(f"peak anon memory     {peak['RssAnon'] / 2**20:,.0f} MiB (RssAnon sampled "
              "every 10 ms; the process's own heap)")
        print(f"peak file-backed     {peak['RssFile'] / 2**20:,.0f} MiB (RssFile: mapped "
              "libraries and files)")
        print(f"parquet written      {part_bytes / 2**20:,.0f} MiB")
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"load average         {' '.join(load)} (at the end; 2 vCPUs)")
    return 0


def _child(code: str, csv: Path, out: Path) -> dict[str, float]:
    """Run one child (kit ingest or Polars' conversion) into a fresh ``out``; its stats."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-c", code, str(csv), str(out)], capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"child failed:\n{proc.stdout}\n{proc.stderr}")
    stats: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return stats


def vs_polars(rows: int, repeat: int, keep: Path | None) -> int:
    """Kit ingest against Polars' own CSV->Parquet on one file, alternating, medians."""
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or Path(tmp)
        csv = work / "in" / "bench.samples.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        make_csv(csv, rows)
        runs: dict[str, list[dict[str, float]]] = {"kit": [], "polars": []}
        load0 = Path("/proc/loadavg").read_text().split()[0]
        for _ in range(repeat):
            runs["kit"].append(_child(CHILD, csv, work / "ds"))
            runs["polars"].append(_child(POLARS_CHILD, csv, work / "pl"))
        load1 = Path("/proc/loadavg").read_text().split()[0]

        def med(who: str, key: str) -> float:
            return float(statistics.median(r[key] for r in runs[who]))

        print(f"rows {rows:,}, csv {csv.stat().st_size / 2**20:,.0f} MiB, {repeat} runs each "
              f"alternating, load average {load0} -> {load1} (2 vCPUs); medians:")
        print(f"{'':24}{'kit ingest':>12}{'polars':>12}{'kit/polars':>12}")
        for key, label, scale in (("ingest_s", "wall s (no imports)", 1.0),
                                  ("cpu_s", "CPU s (with imports)", 1.0),
                                  ("hwm_kib", "peak RSS MiB (VmHWM)", 1 / 1024)):
            k, p = med("kit", key) * scale, med("polars", key) * scale
            print(f"{label:24}{k:12.2f}{p:12.2f}{k / p:12.2f}")
        speed = med("polars", "ingest_s") / med("kit", "ingest_s")
        print(f"speed kit / polars (rows/s, wall): {speed:.2f}x; "
              f"memory kit / polars: {med('kit', 'hwm_kib') / med('polars', 'hwm_kib'):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
