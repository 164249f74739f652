"""Probe fidelity against OSU's osu_latency, and the cost of the probe's shuffled order.

Three measurements per transport (vader = shared memory, tcp over loopback) and size, in rounds
that alternate the tools so that load from other work hits all of them alike:

1. **Back to back, one size per run** — the conditions of `osu_latency -m S:S -z -i N -x W`:
   the probe runs `--sizes list:S --samples N --warmup W` (a one-size plan is back to back
   whatever the order). Reported: P50 of the one-way latency (round trip / 2) of each tool,
   and probe/OSU as the median of the per-round ratios (target 0.95-1.05); the same for the
   mean (OSU's average column), the claim statistic at vader 8 B, where both tools' samples
   alternate between two levels and a run's P50 lands on either (tests/test_real_tools.py,
   CLAIM_STAT). Use thousands of samples: at vader 64 KiB / 1 MiB `osu_latency`'s first few
   ms of iterations are slower (kit/probe/README.md, "64 KiB over vader").
2. **Blocked vs shuffled, all sizes in one run** — `--sizes list:<all> --order blocked` (each
   size's repetitions back to back, OSU's sweep) and `--order shuffled` (the probe's default).
   shuffled/blocked isolates what random order costs (caches, branch predictors, the MPI
   library's per-size state).
3. **History** — in the shuffled runs, the P50 of each size given the size of the sample just
   before it: whether a size pays for what ran before it (same-size predecessor = the
   back-to-back condition).
4. **Loop efficiency** — `loop_seconds` / sum of the recorded round trips of the blocked run
   (target <= 1.1 on vader).

OSU is not part of the kit: build it from source (docs/performance-history.md gives the
commands) and pass
`--osu PATH/osu_latency` or set `OSU_LATENCY`. Without it only the probe columns are printed.

    .venv/bin/python benchmarks/bench_probe_fidelity.py [--osu /tmp/osu/osu_latency]
        [--rounds 5] [--samples 2000] [--sizes 8,1K,64K,1M]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from kit.figures.estimate import median_interval

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "kit" / "probe" / "pt2pt-probe"
PROBE_BIN = PROBE
TRANSPORTS = {
    "vader": ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
    "tcp": ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include",
            "lo"],
}
_SUFFIX = {"K": 1 << 10, "M": 1 << 20}


def parse_size(text: str) -> int:
    mult = _SUFFIX.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult != 1 else text) * mult


def mpirun(transport: str, scratch: Path, argv: list[str]) -> str:
    cmd = ["mpirun", "-np", "2", *TRANSPORTS[transport],
           "--mca", "btl_vader_backing_directory", str(scratch),
           "--mca", "orte_tmpdir_base", str(scratch), *argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_MCA_", "UCX_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True,
                          timeout=900).stdout


def osu_p50(osu: str, transport: str, scratch: Path, size: int, n: int,
            warm: int) -> tuple[float, float]:
    """P50 and mean one-way latency in µs from osu_latency -z (its own percentile rule)."""
    out = mpirun(transport, scratch, [osu, "-m", f"{size}:{size}", "-z", "-i", str(n),
                                      "-x", str(warm)])
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == str(size):
            return float(fields[2]), float(fields[1])
    raise RuntimeError(f"no result line for {size} B in osu_latency output:\n{out}")


def probe_run(transport: str, scratch: Path, sizes: str, n: int, warm: int,
              order: str, binary: Path | None = None) -> tuple[dict[int, float], float]:
    """P50 one-way latency in µs per size, and loop_seconds / sum of round trips (the
    sizes' means go to MEANS, the claim statistic at vader 8 B: tests/test_real_tools.py).

    ``binary`` (a baseline build) is run without --order, which older probes lack; with one
    size the order does not matter."""
    prefix = scratch / "probe"
    for old in scratch.glob("probe.*"):  # the probe refuses to overwrite a run's files
        old.unlink()
    order_args = [] if binary else ["--order", order]
    mpirun(transport, scratch, [str(binary or PROBE_BIN), "--sizes", sizes, "--samples",
                                str(n), "--warmup", str(warm), *order_args, "--seed", "1",
                                "--output", str(prefix)])
    by_size: dict[int, list[float]] = {}
    total = 0.0
    previous = -1
    with open(f"{prefix}.samples.csv", newline="") as f:
        for row in csv.DictReader(f):
            t, size = float(row["time"]), int(row["size"])
            total += t
            if row["warmup"] == "0":
                by_size.setdefault(size, []).append(t / 2 * 1e6)
                if binary is None and "," in sizes:  # runs with several sizes only
                    HISTORY.setdefault((transport, order, size, previous), []).append(
                        t / 2 * 1e6)
            previous = size
    meta = json.loads(Path(f"{prefix}.meta.json").read_text())
    MEANS.update({s: statistics.fmean(v) for s, v in by_size.items()})
    return {s: statistics.median(v) for s, v in by_size.items()}, meta["loop_seconds"] / total


#: mean one-way µs per size of the last probe_run
MEANS: dict[int, float] = {}
#: one-way µs per (transport, order, size, size of the previous sample), pooled over rounds
HISTORY: dict[tuple[str, str, int, int], list[float]] = {}


def fmt_spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def fmt_ratio(num: list[float], den: list[float] | None) -> str:
    """Median of the per-round ratios num/den with its distribution-free interval (the
    statistic tests/test_real_tools.py holds to ±5 %), or '-' where den was not measured."""
    if not den:
        return "-"
    ratio = median_interval([a / b for a, b in zip(num, den, strict=True)])
    if ratio.lo is None or ratio.hi is None:
        return f"{ratio.value:.3f} (too few rounds for an interval)"
    return f"{ratio.value:.3f} [{ratio.lo:.3f}, {ratio.hi:.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osu", default=os.environ.get("OSU_LATENCY")
                        or shutil.which("osu_latency"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--sizes", default="8,1K,64K,1M")
    parser.add_argument("--transports", default="vader,tcp")
    parser.add_argument("--probe", type=Path, default=None,
                        help="a pt2pt-probe binary (default: build kit/probe)")
    parser.add_argument("--baseline-probe", type=Path, default=None,
                        help="another pt2pt-probe build (e.g. before a change) to compare "
                        "one-size P50s with, in the same rounds")
    args, _ = parser.parse_known_args()
    global PROBE_BIN
    PROBE_BIN = args.probe or PROBE
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    transports = args.transports.split(",")
    if args.probe is None:
        subprocess.run(["make", "-C", str(PROBE.parent)], check=True, capture_output=True)
    if not args.osu:
        print("osu_latency not found (--osu PATH or OSU_LATENCY): probe columns only")
    scratch = Path(tempfile.mkdtemp(prefix="pt2pt-bench-fidelity-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    osu: dict[tuple[str, int], list[float]] = {}
    single: dict[tuple[str, int], list[float]] = {}
    osu_mean: dict[tuple[str, int], list[float]] = {}
    single_mean: dict[tuple[str, int], list[float]] = {}
    baseline: dict[tuple[str, int], list[float]] = {}
    blocked: dict[tuple[str, int], list[float]] = {}
    shuffled: dict[tuple[str, int], list[float]] = {}
    eff: dict[tuple[str, str], list[float]] = {}
    load0 = os.getloadavg()
    try:
        for rnd in range(args.rounds):
            for t in transports:
                for size in sizes:
                    key = (t, size)
                    steps = ["osu", "probe", "baseline"]
                    if rnd % 2:
                        steps.reverse()
                    for step in steps:
                        if step == "osu" and args.osu:
                            o_p50, o_mean = osu_p50(args.osu, t, scratch, size, args.samples,
                                                    args.warmup)
                            osu.setdefault(key, []).append(o_p50)
                            osu_mean.setdefault(key, []).append(o_mean)
                        elif step == "probe":
                            p50, _ = probe_run(t, scratch, f"list:{size}", args.samples,
                                               args.warmup, "blocked")
                            single.setdefault(key, []).append(p50[size])
                            single_mean.setdefault(key, []).append(MEANS[size])
                        elif step == "baseline" and args.baseline_probe:
                            p50, _ = probe_run(t, scratch, f"list:{size}", args.samples,
                                               args.warmup, "shuffled", args.baseline_probe)
                            baseline.setdefault(key, []).append(p50[size])
                spec = "list:" + ",".join(map(str, sizes))
                for order, store in (("blocked", blocked), ("shuffled", shuffled)):
                    p50, e = probe_run(t, scratch, spec, args.samples, args.warmup, order)
                    eff.setdefault((t, order), []).append(e)
                    for size in sizes:
                        store.setdefault((t, size), []).append(p50[size])
        load1 = os.getloadavg()
        osu_path = Path(args.osu).resolve() if args.osu else None
        print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; "
              f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end; {args.rounds} rounds, "
              f"{args.samples} samples + {args.warmup} warm-up per size and tool; "
              f"osu_latency: {osu_path}\n")
        print("P50 one-way latency in µs, median over rounds (min-max); ratios are medians of "
              "per-round ratios [their ~95 % distribution-free interval].\n")
        print("| transport | size B | OSU P50 | probe P50 (one size) | probe/OSU "
              "| probe/OSU mean | probe blocked P50 | probe shuffled P50 | shuffled/blocked "
              "| shuffled/OSU |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for t in transports:
            for size in sizes:
                key = (t, size)
                o = osu.get(key)
                ratio = fmt_ratio(single[key], o)
                sb = fmt_ratio(shuffled[key], blocked[key])
                so = fmt_ratio(shuffled[key], o)
                mean_ratio = fmt_ratio(single_mean[key], osu_mean.get(key))
                print(f"| {t} | {size} | {fmt_spread(o) if o else '-'} "
                      f"| {fmt_spread(single[key])} | {ratio} | {mean_ratio} "
                      f"| {fmt_spread(blocked[key])} "
                      f"| {fmt_spread(shuffled[key])} | {sb} | {so} |")
        if baseline:
            print(f"\nBaseline probe {args.baseline_probe}, same rounds, one size per run:\n")
            print("| transport | size B | baseline P50 | baseline/OSU | probe/baseline |")
            print("|---|---|---|---|---|")
            for t in transports:
                for size in sizes:
                    key = (t, size)
                    bo = fmt_ratio(baseline[key], osu.get(key))
                    pb = fmt_ratio(single[key], baseline[key])
                    print(f"| {t} | {size} | {fmt_spread(baseline[key])} | {bo} | {pb} |")
        print("\nloop_seconds / sum of recorded round trips (all sizes in one run):\n")
        print("| transport | blocked | shuffled |")
        print("|---|---|---|")
        for t in transports:
            print(f"| {t} | {fmt_spread(eff[(t, 'blocked')])} "
                  f"| {fmt_spread(eff[(t, 'shuffled')])} |")
        print("\nShuffled runs: P50 one-way µs of a size (rows) given the size of the sample "
              "just before it (columns), pooled over rounds; in brackets: / same-size "
              "predecessor.\n")
        for t in transports:
            print(f"| {t}: size \\ previous | " + " | ".join(map(str, sizes)) + " |")
            print("|---" * (len(sizes) + 1) + "|")
            for size in sizes:
                same = statistics.median(HISTORY.get((t, "shuffled", size, size), [math.nan]))
                cells = []
                for prev in sizes:
                    v = HISTORY.get((t, "shuffled", size, prev))
                    cell = statistics.median(v) if v else math.nan
                    cells.append(f"{cell:.3f} (×{cell / same:.2f})")
                print(f"| {size} | " + " | ".join(cells) + " |")
            print()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
