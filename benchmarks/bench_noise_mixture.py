"""The noise's Gaussian-mixture fits of one whole-run fit: how close to the likelihood
maximum each kit gets, and at what CPU cost (issue 15's fit time).

A whole-run fit of a shared reference run makes some fifty mixture fits (two and three
components, on up to 1,250 log-ratios each). Their inputs are recorded once (with this
checkout's ``kit``) and then fitted again by each kit in a fresh process, alternating the
kits ``--rounds`` times. Per kit the report gives the median CPU seconds of all the fits and,
per input, how far its log-likelihood falls below the best either kit reached (the
reference maximum): how many are more than 1 unit short, the median and the worst.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_noise_mixture.py \\
        [--run taurus] [--rounds 3] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np
from with_kit import call

HERE = os.path.dirname(os.path.abspath(__file__))


def record_inputs(run: str, path: str) -> int:
    """Fit ``run`` once, saving every mixture EM input (log-ratios, components) to ``path``."""
    from bench_engine_v2 import CAL, RUNS, read_pingpong

    import kit.model.noise as noise
    from kit.model import RegimeModel

    seen: list[tuple[np.ndarray, int]] = []
    original = noise._em_gmm

    def recording(lr: np.ndarray, k: int, *args: Any, **kwargs: Any) -> Any:
        seen.append((np.array(lr, copy=True), int(k)))
        return original(lr, k, *args, **kwargs)

    noise._em_gmm = recording  # type: ignore[assignment]
    try:
        s, t = read_pingpong(CAL / RUNS[run])
        RegimeModel(random_state=0).fit(s, t)
    finally:
        noise._em_gmm = original  # type: ignore[assignment]
    arrays: dict[str, Any] = {f"lr{i}": lr for i, (lr, _) in enumerate(seen)}
    arrays["k"] = np.array([k for _, k in seen])
    np.savez(path, **arrays)
    return len(seen)


def fit_recorded(path: str) -> dict[str, Any]:
    """Fit every recorded input with the ``kit`` on sys.path: log-likelihoods and CPU."""
    from kit.model.noise import _em_gmm

    data = np.load(path)
    inputs = [(data[f"lr{i}"], int(k)) for i, k in enumerate(data["k"])]
    c0 = time.process_time()
    lls = [float(_em_gmm(lr, k)[3]) for lr, k in inputs]
    return {"cpu": time.process_time() - c0, "ll": lls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="taurus")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", metavar="DIR", help="also fit with the kit package in DIR")
    args = ap.parse_args()
    here = os.path.dirname(HERE)
    kits = {"after": here} | ({"before": args.compare} if args.compare else {})
    print("load average at start", os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "inputs.npz")
        n = call(here, "bench_noise_mixture", "record_inputs", args.run, path)
        print(f"{n} mixture fits recorded from one fit of {args.run}", file=sys.stderr)
        cpu: dict[str, list[float]] = {name: [] for name in kits}
        ll: dict[str, np.ndarray] = {}
        for _ in range(args.rounds):
            for name in reversed(list(kits)):  # before first in each round
                res = call(kits[name], "bench_noise_mixture", "fit_recorded", path)
                cpu[name].append(res["cpu"])
                ll[name] = np.asarray(res["ll"])
    print("load average at end", os.getloadavg())
    best = np.max(np.stack(list(ll.values())), axis=0)
    print(f"| kit | CPU of the {n} fits, median [min] | short of the best by > 1 unit "
          "| median shortfall | worst |")
    print("|---|---:|---:|---:|---:|")
    for name in kits:
        gap = best - ll[name]
        print(f"| {name} | {statistics.median(cpu[name]):.3f} s [{min(cpu[name]):.3f}] "
              f"| {int(np.sum(gap > 1))} of {n} | {float(np.median(gap)):.2f} "
              f"| {float(gap.max()):.2f} |")


if __name__ == "__main__":
    main()
