"""Cost of the bootstrap intervals against the fit they wrap (issue 16: at most 3x).

CPU time of the calling process (``time.process_time``): the machine is shared, and
wall-clock time would measure the neighbours. Prints one line per data set.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from kit.fit import synth
from kit.model import RegimeModel
from kit.model.uncertainty import bootstrap_intervals


def measure(name: str, size: np.ndarray, t: np.ndarray) -> None:
    c0 = time.process_time()
    model = RegimeModel().fit(size, t)
    c1 = time.process_time()
    iv = bootstrap_intervals(model, size, t)
    c2 = time.process_time()
    fit, boot = c1 - c0, c2 - c1
    print(f"{name:<34} n={len(size):>7,}  regimes={len(model.regimes_)}  fit {fit:6.2f} s  "
          f"intervals ({iv['n_boot']} resamples) {boot:6.2f} s  ratio {boot / fit:4.2f}x")


def main() -> int:
    truth = synth.ethernet_like()
    for n in (5_000, 20_000, 100_000):
        size, t = synth.sample(truth, n, seed=1)
        measure("synthetic ethernet_like log-uniform", size, t)
    if len(sys.argv) > 1:
        import polars as pl
        frame = pl.read_csv(sys.argv[1])
        measure(sys.argv[1].rsplit("/", 1)[-1], frame[frame.columns[0]].to_numpy().astype(float),
                frame[frame.columns[1]].to_numpy().astype(float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
