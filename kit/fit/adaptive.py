"""Adaptive measurement design (issue 60 item 2): measure in rounds; after each round fit,
find where the model is least sure, put the next round's sizes there; stop at a stated
precision or at a budget, and say which.

Why this rule: a median's standard error falls as 1/sqrt(n), so a size decade whose median
interval is ``w`` wide needs about ``n · ((w / target)² − 1)`` more samples to reach
``target``; a break's interval narrows with the samples near it the same way. The next round
shares its samples out between the unmet decades and break neighbourhoods in proportion to
these needs, so every round goes where the stated precision is furthest away, and nothing is
spent where it is already reached (a fixed log-uniform design spends evenly everywhere).

The figures watched are the kit's own (kit.model.uncertainty.bootstrap_intervals, the one
place intervals are computed): the model median's 95 % interval at ``DECADE_POINTS``
log-spaced sizes in every size decade, as a relative half-width ``(hi − lo) / 2 / value``
(the decade's precision is its widest), and each breakpoint's interval, relative to the
break. Sizes are drawn log-uniformly inside the chosen decades (or break intervals) from a
generator seeded by (seed, round), so a design is reproducible; the probe shuffles the order
of every round with the same seed on both ranks.

:func:`run_design` is independent of how samples are obtained (``measure``): the campaign
wiring (kit.fit.adaptive_campaign) runs each round as a planned campaign through run-local,
the tests measure a synthetic truth. Every round's samples are kept and the whole design is
returned as a JSON-ready record.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

#: Sizes per decade at which the model median's interval is evaluated.
DECADE_POINTS = 4
#: Most distinct sizes in one round (the probe's ``list:`` spec is at most 8191 characters);
#: beyond it a round repeats each size more often.
MAX_ROUND_SIZES = 800
#: Bootstrap resamples per round (kit.model.uncertainty.N_BOOT is the fit's default).
ROUND_BOOT = 120

Array = NDArray[np.float64]
Measure = Callable[[int, NDArray[np.int64], int], tuple[Array, Array]]


@dataclass(frozen=True)
class Target:
    """The precision that stops a design: relative half-widths of 95 % intervals."""

    median: float = 0.02           # the model median, in every size decade
    breaks: float | None = 0.05    # every breakpoint (None: breaks not watched)
    level: float = 0.95


@dataclass(frozen=True)
class Budget:
    samples: int                   # all rounds together
    rounds: int = 8


@dataclass(frozen=True)
class Design:
    """An adaptive design: sizes from ``lo`` to ``hi`` B, ``round_samples`` per round (the
    first round log-uniform, as a fixed design would start), each size ``repetitions`` times."""

    lo: int
    hi: int
    target: Target = field(default_factory=Target)
    budget: Budget = field(default_factory=lambda: Budget(200_000))
    round_samples: int = 10_000
    repetitions: int = 4
    seed: int = 1


@dataclass
class Precision:
    """Where the model stands after a round: per decade and per break, the relative
    half-width of its interval and the samples that informed it."""

    decades: list[dict[str, Any]]
    breaks: list[dict[str, Any]]

    def unmet(self, target: Target) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        dec = [d for d in self.decades if not d["width"] <= target.median]
        brk = ([] if target.breaks is None
               else [b for b in self.breaks if not b["width"] <= target.breaks])
        return dec, brk

    def met(self, target: Target) -> bool:
        dec, brk = self.unmet(target)
        return not dec and not brk

    def worst(self) -> float:
        """The widest relative median interval over the decades (inf: not estimable)."""
        return max((d["width"] for d in self.decades), default=math.inf)


def decades(lo: float, hi: float) -> list[tuple[float, float]]:
    """The size decades [10^k, 10^(k+1)) clipped to [max(lo, 1), hi]."""
    lo = max(float(lo), 1.0)
    out: list[tuple[float, float]] = []
    k = math.floor(math.log10(lo))
    while 10.0 ** k <= hi:
        a, b = max(lo, 10.0 ** k), min(float(hi), 10.0 ** (k + 1))
        if b > a or (a == b == hi and not out):
            out.append((a, b))
        k += 1
    return out


def _rel(iv: dict[str, Any]) -> float:
    value, lo, hi = iv.get("value"), iv.get("lo"), iv.get("hi")
    if value is None or lo is None or hi is None or not value > 0:
        return math.inf
    return float((hi - lo) / 2.0 / value)


def precision(model: RegimeModel, size: Array, time: Array, design: Design,
              round_: int) -> Precision:
    """The model's median and break intervals (the kit's bootstrap), per decade and break."""
    from kit.model.uncertainty import bootstrap_intervals

    spans = decades(design.lo, design.hi)
    at = np.concatenate([np.geomspace(a, b, DECADE_POINTS) for a, b in spans])
    iv = bootstrap_intervals(model, size, time, at=at, n_boot=ROUND_BOOT,
                             level=design.target.level,
                             random_state=design.seed * 1000 + round_)
    widths = np.array([_rel(m) for m in iv["medians"]], dtype=float)
    dec = []
    for k, (a, b) in enumerate(spans):
        w = widths[k * DECADE_POINTS:(k + 1) * DECADE_POINTS]
        inside = (size >= a) & (size <= b)
        dec.append({"lo": a, "hi": b, "width": float(np.max(w)), "samples": int(inside.sum())})
    brk = []
    for b in iv["breakpoints"]:
        if b.get("value") is None:
            continue
        lo_b = b["lo"] if b.get("lo") is not None else design.lo
        hi_b = b["hi"] if b.get("hi") is not None else design.hi
        near = (size >= lo_b) & (size <= hi_b)
        brk.append({"value": float(b["value"]), "lo": float(lo_b), "hi": float(hi_b),
                    "width": _rel(b), "samples": int(near.sum())})
    return Precision(dec, brk)


def _need(width: float, target: float, samples: int, floor: int) -> float:
    """Extra samples to narrow ``width`` to ``target`` (1/sqrt(n)), at least ``floor``."""
    if not math.isfinite(width):
        return float(max(samples, floor))
    return max(samples * ((width / target) ** 2 - 1.0), float(floor))


def next_sizes(prec: Precision, design: Design, round_: int, samples: int
               ) -> tuple[NDArray[np.int64], int]:
    """The next round's sizes (one entry per distinct draw) and their repetitions: ``samples``
    shared between the unmet decades and breaks by need, log-uniform inside each."""
    dec, brk = prec.unmet(design.target)
    reps = design.repetitions
    floor = 4 * reps
    spans = [(d["lo"], d["hi"], _need(d["width"], design.target.median, d["samples"], floor))
             for d in dec]
    if design.target.breaks is not None:
        spans += [(max(b["lo"], design.lo, 1.0), min(b["hi"], design.hi),
                   _need(b["width"], design.target.breaks, b["samples"], floor)) for b in brk]
    spans = [s for s in spans if s[1] >= s[0]]
    if not spans:
        return np.zeros(0, dtype=np.int64), reps
    need = np.array([s[2] for s in spans])
    samples = int(min(samples, need.sum()))
    n_sizes = max(1, samples // reps)
    if n_sizes > MAX_ROUND_SIZES:
        reps = math.ceil(samples / MAX_ROUND_SIZES)
        n_sizes = max(1, samples // reps)
    rng = np.random.default_rng([design.seed, round_])
    counts = rng.multinomial(n_sizes, need / need.sum())
    out = [np.exp(rng.uniform(math.log(a), math.log(b), n)) for (a, b, _), n
           in zip(spans, counts, strict=True)]
    sizes = np.rint(np.concatenate(out)).astype(np.int64)
    return np.clip(sizes, design.lo, design.hi), reps


def first_sizes(design: Design) -> tuple[NDArray[np.int64], int]:
    """Round 0: log-uniform over [lo, hi], as the fixed design starts."""
    n = max(1, design.round_samples // design.repetitions)
    rng = np.random.default_rng([design.seed, 0])
    lo = max(design.lo, 1)
    sizes = np.rint(np.exp(rng.uniform(math.log(lo), math.log(design.hi), n))).astype(np.int64)
    return np.clip(sizes, design.lo, design.hi), design.repetitions


def accumulate(measure_round: Measure) -> Measure:
    """A ``measure`` for :func:`run_design` from one that returns a round's samples alone."""
    kept: list[tuple[Array, Array]] = []

    def measure(k: int, sizes: NDArray[np.int64], reps: int) -> tuple[Array, Array]:
        kept.append(measure_round(k, sizes, reps))
        return (np.concatenate([np.asarray(s, dtype=float) for s, _ in kept]),
                np.concatenate([np.asarray(t, dtype=float) for _, t in kept]))
    return measure


def fit_round(size: Array, time: Array, seed: int) -> Any:
    from kit.model import RegimeModel

    return RegimeModel(random_state=seed).fit(size, time)


def _next_round(prec: Precision, design: Design, k: int, total: int
                ) -> tuple[str | None, NDArray[np.int64], int]:
    """After round ``k`` left ``prec`` with ``total`` samples: why to stop (None: go on),
    and round ``k + 1``'s sizes and repetitions."""
    none = np.zeros(0, dtype=np.int64)
    if prec.met(design.target):
        return "target", none, 0
    left = design.budget.samples - total
    if left < design.repetitions:
        return "budget", none, 0
    if k + 1 >= design.budget.rounds:
        return "rounds", none, 0
    sizes, reps = next_sizes(prec, design, k + 1, min(design.round_samples, left))
    return ("unreachable" if len(sizes) == 0 else None), sizes, reps


def run_design(measure: Measure, design: Design,
               on_round: Callable[[dict[str, Any]], None] | None = None,
               done: list[dict[str, Any]] | None = None
               ) -> tuple[dict[str, Any], Array, Array]:
    """Measure round after round until ``design.target`` or the budget; returns the design's
    record (every round: sizes, repetitions, samples, the precision it left), and all samples.

    ``measure(round, sizes, repetitions)`` measures the round (each size ``repetitions``
    times) and returns every sample measured so far, this round's included (a campaign's
    dataset keeps them all; :func:`accumulate` makes such a function of one that returns
    the round's samples alone).

    ``done``: the records of rounds already measured (an interrupted run resumed): the next
    round is drawn from the last one's precision, exactly as the uninterrupted run drew it
    (every draw is seeded by (seed, round)), and those rounds are not measured again.
    """
    size = np.zeros(0)
    time = np.zeros(0)
    rounds: list[dict[str, Any]] = list(done or [])
    if rounds:
        last = rounds[-1]
        stopped, sizes, reps = _next_round(Precision(last["decades"], last["breaks"]),
                                           design, last["round"], last["total_samples"])
        if stopped:
            return describe(design, rounds, stopped), size, time
    else:
        sizes, reps = first_sizes(design)
    for k in range(len(rounds), design.budget.rounds):
        before = rounds[-1]["total_samples"] if rounds else 0
        size, time = (np.asarray(a, dtype=float) for a in measure(k, sizes, reps))
        model = fit_round(size, time, design.seed)
        prec = precision(model, size, time, design, k)
        record = {"round": k, "sizes": sizes.tolist(), "repetitions": reps,
                  "samples": len(size) - before, "total_samples": len(size),
                  "regimes": len(model.regimes_),
                  "breakpoints": [float(b) for b in model.breakpoints_],
                  "decades": prec.decades, "breaks": prec.breaks,
                  "met": prec.met(design.target)}
        rounds.append(record)
        if on_round:
            on_round(record)
        stopped, sizes, reps = _next_round(prec, design, k, len(size))
        if stopped:
            return describe(design, rounds, stopped), size, time
    return describe(design, rounds, "rounds"), size, time


def describe(design: Design, rounds: list[dict[str, Any]], stopped: str) -> dict[str, Any]:
    """The design record a dataset keeps (``design.json``), with its stop reason in words."""
    last = rounds[-1] if rounds else None
    total = last["total_samples"] if last else 0
    reason = {"target": "the precision target was reached",
              "budget": f"the sample budget ({design.budget.samples}) was spent",
              "rounds": f"the round budget ({design.budget.rounds}) was spent",
              "unreachable": "what is unmet lies outside the sizes the design may measure"
              }[stopped]
    return {"design": "adaptive", "format": 1,
            "method": "rounds; after each, the model's 95 % bootstrap intervals of its median "
                      f"at {DECADE_POINTS} sizes per decade and of its breaks; the next round's "
                      "sizes in the unmet decades and break intervals, in proportion to the "
                      "samples each needs (n·((width/target)²−1)), log-uniform inside them",
            "settings": asdict(design), "stopped": stopped, "reason": reason,
            "reached": bool(last and last["met"]), "total_samples": total,
            "worst_median_width": (max((d["width"] for d in last["decades"]), default=None)
                                   if last else None),
            "rounds": rounds}
