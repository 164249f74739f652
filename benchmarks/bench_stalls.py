"""Where do a ping-pong's stalls come from? (issue 57)

On the shaped local cluster (200 Mbit/s tbf) 10 % of the probe's ping-pongs up to 1 KiB took
more than 4 ms (p50 9 us). A simulated program pays such a stall per message when the noise
holds it, so before modelling it, this script asks the raw samples of a dataset what the
stalls are. Per run (samples in ``seq`` order, one process per probe run):

- **carry-over**: the probe interleaves ops (pingpong, send, recv, isend). A ``send`` or
  ``isend`` is timed until it completes *locally*; its bytes may still be queued behind the
  shaped link when the next sample starts. A stall that follows such a sample and grows with
  its bytes (``size / rate - its time``: the backlog it left) is carry-over of the
  measurement, not noise of the op measured.
- **the rest** (stalls after a pingpong or a recv): share per message, rate per second of the
  run's wall time (approximated by the sum of the samples' elapsed times: a ping-pong's
  ``time`` is half its round trip, so it counts twice), clustering (Fano factor of the counts
  in 1 s windows: 1 for a Poisson process, above for bursts), and whether the excess over the
  size's median grows with the size (slope of log excess on log size: 0 additive,
  1 multiplicative).

A *stall*: ``time`` above ``STALL_FACTOR`` x the median of its op and size in the run and at
least ``STALL_MIN_S`` above it.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_stalls.py DATASET [--op pingpong]
        [--rate-bps 25e6] [--max-size 1024] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np
import polars as pl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kit.data import dataset as ds
from kit.fit.carryover import ASYNC_OPS

STALL_FACTOR = 3.0
STALL_MIN_S = 1e-3
WINDOW_S = 1.0


def run_frames(dataset: str) -> dict[str, pl.DataFrame]:
    frame = (ds.scan(dataset).filter((pl.col("tool") == "probe") & (pl.col("stat") == "raw"))
             .filter(~pl.col("op").cast(pl.String).str.ends_with("_call"))
             .select("run_id", "op", "size", "time", "seq", "warmup").collect())
    return {str(r): f.sort("seq") for (r,), f in frame.group_by("run_id")}


def characterise(runs: dict[str, pl.DataFrame], op: str, max_size: int, rate: float
                 ) -> dict[str, Any]:
    rows: dict[str, list[Any]] = {k: [] for k in (
        "stall", "after_async", "prev_bytes", "backlog", "excess", "size", "wall", "run")}
    for f in runs.values():
        f = f.with_columns(pl.col("op").cast(pl.String))
        ops = np.asarray(f["op"].to_list())
        size = f["size"].to_numpy().astype(float)
        time = f["time"].to_numpy()
        elapsed = np.where(ops == "pingpong", 2.0 * time, time)
        wall = np.cumsum(elapsed) - elapsed  # start of each sample, approximately
        med = (f.with_columns(pl.col("time").median().over("op", "size").alias("m"))["m"]
               .to_numpy())
        pick = np.nonzero((ops == op) & ~f["warmup"].to_numpy())[0]
        pick = pick[pick > 0]
        prev = pick - 1
        excess = time[pick] - med[pick]
        rows["stall"].append((time[pick] > STALL_FACTOR * med[pick]) & (excess > STALL_MIN_S))
        rows["after_async"].append(np.isin(ops[prev], list(ASYNC_OPS)) & (ops[prev] != op))
        rows["prev_bytes"].append(size[prev])
        rows["backlog"].append(np.maximum(size[prev] / rate - time[prev], 0.0))
        rows["excess"].append(excess)
        rows["size"].append(size[pick])
        rows["wall"].append(wall[pick])
        rows["run"].append(np.full(len(pick), len(rows["run"])))
    a = {k: np.concatenate(v) for k, v in rows.items()}
    small = a["size"] <= max_size
    out: dict[str, Any] = {"op": op, "max_size": max_size, "runs": len(runs)}
    for name, sel in (("after_async", a["after_async"]), ("after_sync", ~a["after_async"])):
        k = small & sel
        out[name] = {"n": int(k.sum()), "stall_share": float(a["stall"][k].mean()) if k.any()
                     else None}
    # carry-over: the stall against the backlog the previous sample left
    by_bytes = []
    for lo in (1, 1024, 16384, 65536, 262144, 1048576):
        k = small & a["after_async"] & (a["prev_bytes"] >= lo) & (a["prev_bytes"] < 4 * lo)
        if k.sum() >= 10:
            by_bytes.append({"prev_bytes": [lo, 4 * lo], "n": int(k.sum()),
                             "stall_share": float(a["stall"][k].mean()),
                             "median_excess_ms": float(np.median(a["excess"][k]) * 1e3),
                             "median_backlog_ms": float(np.median(a["backlog"][k]) * 1e3)})
    out["after_async_by_prev_bytes"] = by_bytes
    k = small & a["after_async"]
    if k.sum() > 10:
        out["spearman_excess_backlog"] = float(pl.DataFrame(
            {"e": a["excess"][k], "b": a["backlog"][k]}).select(
                pl.corr("e", "b", method="spearman")).item())
    # the rest: stalls not explained by carry-over, all sizes of the op
    rest = ~a["after_async"]
    stalls = rest & a["stall"]
    wall_s = float(sum(a["wall"][a["run"] == r].max() for r in np.unique(a["run"])))
    out["rest"] = {"n": int(rest.sum()), "stalls": int(stalls.sum()),
                   "share_per_message": float(stalls.sum() / max(rest.sum(), 1)),
                   "rate_per_wall_s": float(stalls.sum() / wall_s) if wall_s else None,
                   "wall_s_approx": wall_s}
    if stalls.any():
        out["rest"]["excess_ms_p50_p95_max"] = [
            float(x) * 1e3 for x in np.quantile(a["excess"][stalls], [0.5, 0.95, 1.0])]
        counts = np.concatenate([np.bincount((a["wall"][stalls & (a["run"] == r)]
                                              // WINDOW_S).astype(int),
                                             minlength=int(a["wall"][a["run"] == r].max()
                                                           // WINDOW_S) + 1)
                                 for r in np.unique(a["run"])])
        out["rest"]["fano_1s"] = float(counts.var() / counts.mean()) if counts.mean() else None
        sizes = a["size"][stalls]
        if len(np.unique(sizes)) >= 3:
            slope = np.polyfit(np.log(sizes), np.log(a["excess"][stalls]), 1)[0]
            out["rest"]["slope_log_excess_on_log_size"] = float(slope)
        # clustering in seq: a stall right after a stall of the same op
        consecutive = 0
        for r in np.unique(a["run"]):
            s = a["stall"][(a["run"] == r) & rest]
            consecutive += int((s[1:] & s[:-1]).sum())
        share = float(stalls.sum() / max(rest.sum(), 1))
        out["rest"]["stall_after_stall"] = {"observed": consecutive,
                                            "independent": float(share * stalls.sum())}
    return out


def reference_stalls(folder: str, min_s: float, window_s: float = 0.1) -> dict[str, Any]:
    """The same questions on a platform-calibration run's PingPong phase (real start times;
    its ops run in separate phases, so carry-over between ops cannot occur there)."""
    import glob

    path = glob.glob(os.path.join(folder, "*_PingPong.csv"))[0]
    raw = pl.read_csv(path, has_header=False, new_columns=["op", "size", "start", "d"])
    pairs = (raw.with_row_index("i").with_columns((pl.col("i") // 2).alias("k"))
             .group_by("k").agg(pl.col("size").first(), pl.col("start").first(),
                                pl.col("d").sum().alias("rtt")).sort("start"))
    pairs = pairs.with_columns(pl.col("rtt").median().over("size").alias("m"))
    excess = (pairs["rtt"] - pairs["m"]).to_numpy()
    stall = (pairs["rtt"] > STALL_FACTOR * pairs["m"]).to_numpy() & (excess > min_s)
    start = pairs["start"].to_numpy() - pairs["start"].min()
    prev = np.concatenate([[False], stall[:-1]])
    out: dict[str, Any] = {"run": os.path.basename(folder.rstrip("/")), "n": len(stall),
                           "wall_s": float(start.max()), "stalls": int(stall.sum()),
                           "share_per_message": float(stall.mean()),
                           "rate_per_wall_s": float(stall.sum() / start.max()),
                           "min_excess_s": min_s}
    if stall.sum() >= 3:
        counts = np.bincount((start[stall] // window_s).astype(int),
                             minlength=int(start.max() // window_s) + 1)
        out[f"fano_{window_s:g}s"] = float(counts.var() / counts.mean())
        out["excess_ms_p50_p95_max"] = [float(x) * 1e3 for x in
                                        np.quantile(excess[stall], [0.5, 0.95, 1.0])]
        sizes = pairs["size"].to_numpy()[stall]
        if len(np.unique(sizes)) >= 3:
            out["slope_log_excess_on_log_size"] = float(
                np.polyfit(np.log(sizes), np.log(excess[stall]), 1)[0])
        out["stall_after_stall"] = {"observed": int((stall & prev).sum()),
                                    "independent": float(stall.mean() * stall.sum())}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset", nargs="?")
    p.add_argument("--reference", nargs="*", default=[],
                   help="platform-calibration run folders (../shared/reference-data/...)")
    p.add_argument("--reference-min-s", type=float, default=1e-4,
                   help="least excess over the size's median round trip called a stall there")
    p.add_argument("--op", default="pingpong")
    p.add_argument("--max-size", type=int, default=1024)
    p.add_argument("--rate-bps", type=float, default=25e6,
                   help="the shaped link's rate, bytes/s, for the backlog (200 Mbit/s: 25e6)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    out: dict[str, Any] = {}
    if args.dataset:
        out = characterise(run_frames(args.dataset), args.op, args.max_size, args.rate_bps)
    if args.reference:
        out["reference"] = [reference_stalls(f, args.reference_min_s) for f in args.reference]
    out["load_average"] = os.getloadavg()
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
