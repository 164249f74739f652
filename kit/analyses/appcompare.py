"""Simulated vs real runs of one program: the figures ``pt2pt predict-app``, the report and
the TUI show (one definition, here).

For one program (its series: the real runs' figures) and one simulated variant (its runs):

* **median ratio** = median(simulated) / median(real), with a 95 % interval: percentile
  bootstrap, the real and the simulated runs resampled independently (a deterministic
  variant has one value: only the real runs vary);
* **level** of the real median among the simulated runs: the share of simulated runs at or
  below it (ties half), and whether it lies **inside** the simulated [p05, p95];
* between the calibrated platform and a baseline: which is **closer** (|ln ratio|), and
  whether they **differ beyond the noise** (their ratio intervals do not overlap): a
  baseline that cannot be told apart from the calibrated platform is a tie, not a loss.

Which real runs are compared at all (:func:`usable_runs`): only those whose ranks had their
CPUs. A simulation gives every rank a CPU of its own (SMPI's hosts); a real run that waited
for one measured the scheduler as much as the network. Measured on the shaped local cluster
(issue 57, 2026-12-06): halo with 1 KiB halos on 2 nodes took 1.2 ms with a core per rank and
144 ms with both ranks pinned to one core (osu_latency 4 KiB: 69 us and 6 ms), and the 4-node
runs, 4 ranks on the machine's 2 cores, were 1.4-34x what the simulation gives. The run quality
verdict (:func:`kit.measure.conditions.judge`, recorded per run) already says which runs waited
(CPU pressure, the load beyond the free CPUs); it is read here, not judged again.

Pure functions on arrays: no dataset, no SimGrid.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

#: Bootstrap resamples of the median ratio's interval, and its level.
N_BOOT = 2000
LEVEL = 0.95
#: Fewest undisturbed real runs a program needs to be compared (fewer: withheld).
MIN_USABLE_RUNS = 2


@dataclass(frozen=True)
class Comparison:
    """One program, one simulated variant, against the real runs."""

    variant: str
    n_real: int
    n_sim: int
    real_p50: float
    sim_p50: float
    sim_p05: float
    sim_p95: float
    ratio: float
    ratio_lo: float
    ratio_hi: float
    #: share of simulated runs at or below the real median (ties count half)
    real_p50_level: float
    #: the real median lies inside the simulated [p05, p95]
    inside: bool

    @property
    def error(self) -> float:
        """|simulated / real - 1| of the medians."""
        return abs(self.ratio - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error": self.error}


def compare(real: ArrayLike, sim: ArrayLike, variant: str, *, seed: int = 0,
            n_boot: int = N_BOOT) -> Comparison:
    """The figures above for ``real`` and ``sim`` (each at least one positive value)."""
    r = np.asarray(real, dtype=np.float64).ravel()
    s = np.asarray(sim, dtype=np.float64).ravel()
    if r.size == 0 or s.size == 0 or not (np.all(r > 0) and np.all(s > 0)):
        raise ValueError("real and simulated runs must be non-empty and positive")
    rng = np.random.default_rng(seed)
    boot_r = np.median(r[rng.integers(0, r.size, (n_boot, r.size))], axis=1)
    boot_s = np.median(s[rng.integers(0, s.size, (n_boot, s.size))], axis=1)
    ratios = boot_s / boot_r
    tail = (1 - LEVEL) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    real_p50, sim_p50 = float(np.median(r)), float(np.median(s))
    p05, p95 = (float(v) for v in np.quantile(s, [0.05, 0.95]))
    level = float((np.sum(s < real_p50) + 0.5 * np.sum(s == real_p50)) / s.size)
    return Comparison(variant=variant, n_real=int(r.size), n_sim=int(s.size),
                      real_p50=real_p50, sim_p50=sim_p50, sim_p05=p05, sim_p95=p95,
                      ratio=sim_p50 / real_p50, ratio_lo=float(lo), ratio_hi=float(hi),
                      real_p50_level=level, inside=p05 <= real_p50 <= p95)


@dataclass(frozen=True)
class RealRuns:
    """The real runs a program is compared with, and why the others were left out."""

    values: list[float]
    #: runs left out: their run quality was ``disturbed``
    dropped: int
    #: why the program is not compared at all (too few undisturbed runs), else None
    withheld: str | None


def usable_runs(values: list[float], verdicts: list[str | None],
                whys: list[str | None]) -> RealRuns:
    """The runs of ``values`` whose run-quality verdict is not ``disturbed`` (``quiet``, or
    unknown: nothing recorded to judge by). With fewer than :data:`MIN_USABLE_RUNS` of them
    the program is withheld, the reason being the disturbed runs' most common one, and every
    run is kept for display."""
    keep = [v for v, verdict in zip(values, verdicts, strict=True) if verdict != "disturbed"]
    dropped = len(values) - len(keep)
    if len(keep) >= MIN_USABLE_RUNS:
        return RealRuns(keep, dropped, None)
    reasons = [w for w, verdict in zip(whys, verdicts, strict=True)
               if verdict == "disturbed" and w]
    common = max(set(reasons), key=reasons.count) if reasons else "run quality disturbed"
    return RealRuns(list(values), 0, (
        f"{dropped} of {len(values)} real runs waited for a CPU ({common}); the simulation "
        "gives every rank a CPU of its own, so the comparison would measure the scheduler"))


def closer(calibrated: Comparison, baseline: Comparison) -> str:
    """``calibrated`` / ``baseline`` (closer to the real median, beyond the noise), or
    ``tie`` (their ratio intervals overlap: the runs cannot tell them apart)."""
    if not (calibrated.ratio_hi < baseline.ratio_lo or baseline.ratio_hi < calibrated.ratio_lo):
        return "tie"
    cal, base = abs(math.log(calibrated.ratio)), abs(math.log(baseline.ratio))
    return "calibrated" if cal < base else "baseline"


def summarise(errors: list[float]) -> dict[str, float]:
    """Median and worst |sim/real - 1| over programs (NaN without any)."""
    if not errors:
        return {"median_error": math.nan, "worst_error": math.nan}
    return {"median_error": float(np.median(errors)), "worst_error": float(max(errors))}
