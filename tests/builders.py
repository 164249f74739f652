"""Models built from synthetic truth, shared by the test files that need the same shapes."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from kit.data import dataset as ds
from kit.fit import synth
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


def forget_checksums(dataset: Path) -> None:
    """Make ``dataset`` look written before part checksums existed (runs.parquet ``parts``
    null), for tests that rewrite part files the way an older kit wrote them."""
    runs_file = dataset / ds.RUNS_FILE
    meta = pl.read_parquet_metadata(runs_file)
    (pl.read_parquet(runs_file).with_columns(parts=pl.lit(None, pl.String))
     .write_parquet(runs_file, metadata=meta))


def linear_overhead_model(a: float, b: float) -> RegimeModel:
    """One linear regime ``a + b*s`` (a send or receive duration, for smpi/os and smpi/or)."""
    truth = synth.Truth([synth.TrueRegime(1, "linear", {"a": a, "b": b},
                                          synth.TrueNoise("lognormal", 0.03))])
    size, time = synth.sample(truth, 600, grid=20, lo=1, hi=2**21, seed=3)
    return RegimeModel(breakpoints=[], families=["linear"], mixture=False,
                       overlap=False).fit(size, time)


def dataset_snapshot(dataset: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Samples and runs of a dataset in a stable order, to compare before/after a change."""
    samples = ds.scan(dataset).collect().sort("run_id", "seq", "op", "stat")
    return samples, ds.runs(dataset).sort("run_id")


#: The probe's contention-mode CSV header (kit.tools.probe.HEADER_EXT).
CONTENTION_HEADER = "seq,op,size,count,time,call,warmup,pair,round\n"


def write_contention_run(folder: Path, k: int, rounds: list[tuple[int, list[float]]],
                         meta: dict, *, op: str = "pingpong", prefix: str = "run") -> Path:
    """A probe ``--pairs k`` run: one (size, [one-way time of each pair]) per round.

    Pingpong rows hold the round trip, as the probe writes them; ``meta`` is written beside
    (with ``pairs``, ``contention`` and the probe's default ``pairing`` i:i+k unless given).
    """
    import json

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for r, (size, times) in enumerate(rounds):
        for p, t in enumerate(times):
            stored = 2 * t if op == "pingpong" else t
            lines.append(f"{len(lines)},{op},{size},1,{stored:.9e},,0,{p},{r}")
    samples = folder / f"{prefix}.samples.csv"
    samples.write_text(CONTENTION_HEADER + "\n".join(lines) + "\n")
    full = {"pairs": k, "contention": True, "pairing": [[i, i + k] for i in range(k)],
            **meta, "samples_written": max(meta.get("samples_written", 0), len(lines))}
    (folder / f"{prefix}.meta.json").write_text(json.dumps(full))
    return samples


def adaptive_campaign(name: str, *, seed: int = 4, budget: int = 600, round_samples: int = 200,
                      launcher: str = "mpirun", slurm: str = "") -> str:
    """The adaptive probe campaign the adaptive-design tests run (driver, run-local, Slurm):
    one tcp ping-pong series over 1 B - 64 KiB, a ±0.1 % median target the budget stops
    first. ``slurm``: the campaign's slurm line (without the key), for submit."""
    slurm_line = f"slurm: {slurm}\n" if slurm else ""
    return (f"name: {name}\nmpi: openmpi\ntransports: [tcp]\nplacement: intra-node\n"
            f"seed: {seed}\nlauncher: {launcher}\n{slurm_line}"
            "tools:\n  - tool: probe\n    ops: [pingpong]\n    sizes: loguniform:1:64K\n"
            "    warmup: 5\ndesign:\n"
            f"  adaptive: {{median: 0.001, breaks: null, budget: {budget}, rounds: 4, "
            f"round_samples: {round_samples}, repetitions: 2}}\n")
