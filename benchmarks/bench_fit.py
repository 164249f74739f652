"""Speed of a full RegimeModel fit (segmentation + families + overlap + bands + noise).

Targets (git show 1da3baf:BENCHMARKS.md, "Fit"): 1 M raw samples <= 5 s, 10 M <= 60 s on
the 2-core machine.
Also compares with pycewise (segmented linear regression, PyPI) on its own reference run
(``../shared/reference-data/pycewise/pingpong_remote.csv``): time and per-size median error.

    .venv/bin/python benchmarks/bench_fit.py [--sizes 100000,1000000,10000000] [--no-pycewise]
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

import numpy as np

from kit.fit import synth
from kit.model import RegimeModel

REPO = Path(__file__).resolve().parent.parent
PYCEWISE_DATA = REPO.parent / "shared" / "reference-data" / "pycewise" / "pingpong_remote.csv"


def per_size_median_error(size: np.ndarray, time_: np.ndarray, predict) -> float:
    order = np.argsort(size, kind="stable")
    s, t = size[order], time_[order]
    sizes, starts = np.unique(s, return_index=True)
    med = np.array([np.median(v) for v in np.split(t, starts[1:])])
    return float(np.median(np.abs(np.asarray(predict(sizes)) / med - 1)))


def bench_scaling(ns: list[int]) -> None:
    print("| samples | fit (s) | regimes | two-band regimes | outliers |")
    print("|---:|---:|---:|---:|---:|")
    truth = synth.ethernet_like()
    for n in ns:
        s, t = synth.sample(truth, n, lo=1, hi=2**22, seed=1)
        gc.collect()
        t0 = time.perf_counter()
        model = RegimeModel().fit(s, t)
        dt = time.perf_counter() - t0
        bands = sum(r.is_mixture for r in model.regimes_)
        print(f"| {n:,} | {dt:.2f} | {len(model.regimes_)} | {bands} | {model.n_outliers_:,} |",
              flush=True)
        del s, t, model


def bench_pycewise() -> None:
    import pycewise

    data = np.loadtxt(PYCEWISE_DATA, delimiter=",", skiprows=1)
    s, t = data[:, 0], data[:, 1]
    t0 = time.perf_counter()
    model = RegimeModel().fit(s, t)
    ours = time.perf_counter() - t0
    err_ours = per_size_median_error(s, t, model.predict)
    t0 = time.perf_counter()
    reg = pycewise.compute_regression(list(s), list(t), mode="BIC")
    theirs = time.perf_counter() - t0
    err_theirs = per_size_median_error(s, t, lambda x: [reg.predict(float(v)) for v in x])
    print(f"\npycewise reference run: {PYCEWISE_DATA.name}, {len(s):,} samples, "
          f"{len(np.unique(s))} sizes")
    print("| tool | fit (s) | breakpoints | per-size median rel. error (median over sizes) |")
    print("|---|---:|---:|---:|")
    print(f"| kit RegimeModel | {ours:.2f} | {len(model.breakpoints_)} | {err_ours:.3%} |")
    print(f"| pycewise 0.1.4 (BIC) | {theirs:.2f} | {len(reg.breakpoints)} | {err_theirs:.3%} |")
    print(f"time ratio pycewise / kit: {theirs / ours:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--no-pycewise", action="store_true")
    args = ap.parse_args()
    bench_scaling([int(v) for v in args.sizes.split(",")])
    if not args.no_pycewise:
        bench_pycewise()


if __name__ == "__main__":
    main()
