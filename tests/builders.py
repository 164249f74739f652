"""Models built from synthetic truth, shared by the test files that need the same shapes."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from kit import dataset as ds
from kit import synth
from kit.model import RegimeModel


def three_linear_regimes(per_byte: float) -> RegimeModel:
    """Three linear regimes (breaks at 4 KiB and 64 KiB) fitted with the breaks given.

    ``per_byte`` scales the slopes (1e-9: ~1 GB/s, 1e-10: ~10 GB/s): the SimGrid loop and the
    export's factor tables each want their own bandwidth, the same shape otherwise.
    """
    truth = synth.Truth([
        synth.TrueRegime(1, "linear", {"a": 20e-6, "b": 1 * per_byte},
                         synth.TrueNoise("lognormal", 0.05)),
        synth.TrueRegime(4096, "linear", {"a": 35e-6, "b": 4 * per_byte},
                         synth.TrueNoise("gamma", 0.05)),
        synth.TrueRegime(65537, "linear", {"a": 80e-6, "b": 9 * per_byte},
                         synth.TrueNoise("lognormal", 0.03)),
    ])
    size, time = synth.sample(truth, 3000, grid=30, lo=1, hi=2**21, seed=11)
    return RegimeModel(breakpoints=[4096, 65537], families=["linear"] * 3, mixture=False,
                       overlap=False).fit(size, time)


def dataset_snapshot(dataset: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Samples and runs of a dataset in a stable order, to compare before/after a change."""
    samples = ds.scan(dataset).collect().sort("run_id", "seq", "op", "stat")
    return samples, ds.runs(dataset).sort("run_id")
