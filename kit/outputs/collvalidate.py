"""``pt2pt collectives validate``: real against simulated collective algorithms at np 2-4.

Why: the 2015 study's ranking is a simulated one; at the scale this machine allows the kit
checks it against the real thing. For each Open MPI algorithm with an SMPI twin
(``kit.measure.collreal.OMPI_TWINS``), each numproc and size: ``runs`` real mpiruns of the
driver with the algorithm forced (``reps`` repetitions each; rounds interleave every
algorithm, numproc and size so that a drift of the machine falls on all), and the simulated
twin on the platform folder (``pt2pt export --hosts H --cores C --intra MODEL``: every rank
on one host, so the intra-node model carries the messages, like the real shm/tcp run on
this host) with the same number of repetitions, noise on (``deterministic``: without noise,
every message at its model's median: the simulated order of the medians, no interval)
(``kit.outputs.collsweep``, its own resumable sweep in ``OUT/simulated``). The comparison is
``kit.analyses.collagree`` (rankings compared only where the real difference exceeds the
noise; a configuration where a simulated twin did not complete, e.g. SMPI's pair at a
numproc that is not a power of two, compares the others). ``OUT/validation.json`` holds the
real times, the load average before and after, every pair's verdict, the agreement and the
simulated points that did not complete.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from kit.analyses.collagree import agreement, verdicts
from kit.core.atomicwrite import make_dirs, write_text
from kit.measure import collreal
from kit.measure.machine import current_load
from kit.outputs import collsweep

FORMAT = "pt2pt-collectives-validation"


def validate(out: Path, *, platform: Path, collective: str, algorithms: list[str],
             numprocs: list[int], sizes: list[int], runs: int = 3, reps: int = 10,
             transport: str = "shm", seed: int = 1, deterministic: bool = False,
             on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the real and simulated twins and write ``out/validation.json`` (module doc)."""
    pairs = collreal.twins(collective, algorithms)
    collreal.environment(transport)  # an unknown transport is refused before anything runs
    make_dirs(out)
    before = current_load()
    # deterministic: every repetition is the same simulated run, two show it
    sweep = collsweep.Sweep(platform, {collective: [s for _, _, s in pairs]}, numprocs, sizes,
                            reps=2 if deterministic else runs * reps, seed=seed,
                            noise=not deterministic, ranks_per_host=max(numprocs))
    sim_points = collsweep.run_sweep(sweep, out / "simulated")
    rows: list[dict[str, Any]] = []
    for run in range(runs):
        for n in numprocs:
            for size in sizes:
                for name, value, smpi in pairs:
                    if on_step is not None:
                        on_step(f"real run {run + 1}/{runs}: {collective} {name} np={n} "
                                f"size={size}")
                    times = collreal.run_real(collective, value, n, size, reps=reps,
                                              transport=transport)
                    rows += [{"collective": collective, "algorithm": smpi, "ompi": name,
                              "numproc": n, "size": size, "run": run, "rep": i, "time": t}
                             for i, t in enumerate(times)]
    after = current_load()
    real = pl.DataFrame(rows)
    sim = collsweep.frame(sim_points).filter(pl.col("status") == "ok")
    found = verdicts(real, sim, seed=seed)
    summary = agreement(found)
    doc = {
        "format": FORMAT, "collective": collective, "transport": transport,
        "platform": str(platform.resolve()), "numprocs": numprocs, "sizes": sizes,
        "runs": runs, "reps": reps, "noise": not deterministic,
        "twins": [{"ompi": n, "value": v, "smpi": s} for n, v, s in pairs],
        "load_before": before.load1, "load_after": after.load1,
        "busy": before.busy or after.busy, "cpus": before.cpus, "busy_limit": before.limit,
        "statistic": "median of the repetitions (slowest rank's time); ratio a/b with a 95 % "
                     "percentile bootstrap interval; a pair is compared only where the real "
                     "interval excludes 1; agreement with the exact binomial 95 % interval",
        "real": rows, "pairs": [p.to_dict() for p in found], "agreement": summary.to_dict(),
        # e.g. SMPI's pair refuses a numproc that is not a power of two (Open MPI's does not)
        "simulated_not_ok": [{"algorithm": p.algorithm, "numproc": p.numproc, "size": p.size,
                              "status": p.status, "reason": p.reason}
                             for p in sim_points if p.status != "ok"],
    }
    write_text(out / "validation.json", json.dumps(doc, indent=1) + "\n")
    return doc
