"""The report's first screen: what a user came for, per series, in numbers they can act on.

Latency, bandwidth (with its definition and a p05..p95 interval), the sizes where the protocol
switches, how noisy the series is, and whether the model beats the simple baselines on
held-out samples. Every figure is read off the fitted model (its predictive distribution),
so the summary, the plots and the SimGrid export tell the same story. The terms these
numbers use are explained once, in :data:`TERMS`, right under the summary table.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kit.figures import sanity
from kit.figures.bandwidth import DEFINITION, effective_bandwidth

#: "Latency" is the model's median time at this size (bytes), or at the series' smallest
#: size when it starts above it.
SMALL = 64
#: "Bandwidth" is this size (bytes) over the model's median time at it, or the series'
#: largest size when it stops below it.
LARGE = 4 * 1024 * 1024

#: One sentence per term, in the order a reader meets them in the summary.
TERMS: dict[str, str] = {
    "latency": f"the model's median time for a {SMALL} B message (one way for pingpong: half "
               "the round trip, as OSU reports it; the call's duration for send/recv; for "
               "stream the per-message gap, window time / messages per window), with "
               "the model's 5th..95th percentile in brackets.",
    "bandwidth": f"the kit's one definition ({DEFINITION}), with S = {LARGE // 2**20} MiB "
                 "(or the series' largest size) and the model's median time, in MB/s = "
                 "10^6 B/s; the brackets divide S by the 95th and 5th percentile times.",
    "switch sizes": "message sizes where the model changes regime: the MPI library changes "
                    "protocol (e.g. eager to rendezvous), and time jumps or changes slope.",
    "regime": "a size range in which one curve (family) and one noise distribution describe "
              "the samples; regimes are ordered by size.",
    "family": "the curve of a regime: constant (t = a), linear (t = a + b·size) or power "
              "(t = a·size^b), fitted to the per-size medians.",
    "overlap": "a size window around a switch where samples of both neighbouring regimes "
               "occur; the model mixes the two there.",
    "noise": "how far single samples scatter around the curve, as time / curve; p95/p50 is "
             "the 95th percentile over the median (1.0 = no spread).",
    "noise families": "lognormal, gamma, weibull, invgauss and fisk are standard positive "
                      "distributions; gmm is a mixture of a few lognormal bands (samples that "
                      "fall into a fast and a slow group).",
    "held-out": "samples kept out of the fit and used only to score it (the split is stated "
                "in each series' validation).",
    "CRPS": "continuous ranked probability score: the distance between the model's predicted "
            "distribution and the held-out samples at one size, in seconds (lower is better); "
            "it judges the whole distribution, not only the median.",
    "floor": "the CRPS of the training samples' own distribution against the held-out ones: "
             "the best any model can do given how much the measurements scatter.",
    "CRPS / floor": "the model's CRPS over the floor: 1.0 is as good as the data allows, 2.0 "
                    "is twice as far off.",
    "coverage": "share of held-out samples inside the model's 5th..95th percentile band; "
                "0.90 is ideal, less means the model's noise is too narrow.",
    "Hockney": "the textbook baseline t = alpha + size / beta (one latency, one bandwidth) "
               "fitted by least squares to the per-size means, as calibration scripts and "
               "student reports do, with pooled noise; its robust variant fits the per-size "
               "medians by relative error. A per-regime model should beat both clearly where "
               "protocols switch.",
    "run quality": "quiet: every run was recorded on a quiet node (load, CPU pressure, stolen "
                   "time: kit.measure.conditions) and no stretch of samples stood out; "
                   "disturbed: a run's node was busy or a stretch of its samples sat far "
                   "above the run's quiet level; conditions not recorded: the runs came "
                   "from outside the kit's job scripts.",
    "peak": "the optimistic baseline: the smallest time seen plus size over the highest "
            "bandwidth seen, what a data sheet or a best run suggests.",
}


def format_size(v: float) -> str:
    """Bytes in the 1024-based units MPI people read (64 KiB protocol switches)."""
    if not math.isfinite(v):
        return "∞"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale * 0.9995:
            q = v / scale
            return f"{q:.0f} {unit}" if q >= 99.95 else f"{q:.3g} {unit}"
    return f"{v:.0f} B"


def format_time(v: float) -> str:
    if not math.isfinite(v):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(v) >= scale * 0.9995:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.2g} s"


def format_rate(v: float) -> str:
    if not math.isfinite(v) or v <= 0:
        return "–"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} B/s"


@dataclass
class SeriesSummary:
    """One row of the summary table (strings ready for the template) and its raw numbers."""

    title: str
    slug: str
    n_samples: str = "–"
    latency: str = "–"
    latency_size: str = ""
    bandwidth: str = "–"
    bandwidth_size: str = ""
    switches: str = "–"
    noise: str = "–"
    score: str = "–"
    baselines: str = "–"
    coverage: str = "–"
    verdict: str = ""
    #: run quality's verdict on the runs (kit.fit.runquality): quiet | disturbed | ...
    conditions: str = "–"
    #: regimes whose median falls with size, flagged (kit.figures.sanity); "" when none
    shape: str = ""
    values: dict[str, float] = field(default_factory=dict)


def _quantiles(model: Any, size: float) -> tuple[float, float, float]:
    q = np.asarray(model.predict_quantiles(np.array([size], dtype=float), [0.05, 0.5, 0.95]),
                   dtype=float).reshape(-1)
    return float(q[0]), float(q[1]), float(q[2])


def format_ratio(v: float) -> str:
    """Ratios from 0.2 to 20 000 (a loaded machine's p95/p50): two decimals, then integers."""
    if not math.isfinite(v):
        return "–"
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


def _verdict(score: float, hockney: float, coverage: float, peak: float = math.nan) -> str:
    """One sentence a reader can act on, from the held-out numbers."""
    if not math.isfinite(score):
        return "not validated: run 'pt2pt validate' on the model to score it"
    parts = []
    if score <= 1.25:
        parts.append("good: close to the floor")
    elif score <= 2.0:
        parts.append("usable: within 2× of the floor")
    else:
        parts.append("poor: over 2× the floor, check the regimes")
    if math.isfinite(peak) and peak <= score * 1.05:
        parts.append("but the peak baseline scores as well (the regimes add little here)")
    elif math.isfinite(hockney) and hockney > 0:
        ratio = hockney / score
        parts.append(f"{format_ratio(ratio)}× closer than Hockney" if ratio >= 1.1 else
                     "no better than Hockney (one line would do)")
    if math.isfinite(coverage) and coverage < 0.8:
        parts.append("noise band too narrow (coverage < 0.8)")
    return "; ".join(parts)


def slugify(text: str) -> str:
    """A title's HTML anchor (sections, LogGP blocks; the summary table links to them)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "series"


def _centre(model: Any, size: Any) -> Any:
    """The regimes' central curves (fitted to per-size medians), without the per-size
    shifts of stored sizes: the shape a regime claims, not one size's own noise."""
    curve = getattr(model, "curve", None)
    return curve(size) if curve is not None else model.predict(size)


def _median_near(size: Any, time: Any, lo: float, hi: float) -> float | None:
    inside = (size >= lo) & (size < hi)
    return float(np.median(time[inside])) if int(inside.sum()) >= 5 else None


def _step_note(model: Any, at: float, samples: tuple[Any, Any] | None) -> str:
    """"" when the model's median does not fall at the switch ``at``; else the drop, as the
    samples confirm it (a faster protocol above the switch) or flagged (kit.figures.sanity):
    a curve that steps down where the samples do not is a fit's artefact, not a network."""
    before, after = (float(v) for v in np.asarray(
        _centre(model, np.array([max(at - 1.0, 1.0), at])), dtype=float))
    drops = sanity.steps_down([at - 1.0, at], [before, after])
    if not drops:
        return ""
    drop = drops[0][1]
    seen = None
    if samples is not None:
        size, time = (np.asarray(a, dtype=float) for a in samples)
        below, above = _median_near(size, time, at / 1.25, at), _median_near(size, time, at,
                                                                              at * 1.25)
        if below is not None and above is not None:
            seen = 1 - above / below
    what = f"the median drops {drop:.0%} here"
    if seen is not None and seen >= drop / 2:
        return f" ({what}, as the samples do ({seen:.0%}): a faster protocol above it)"
    why = (f"the samples around it drop {max(seen, 0.0):.0%}" if seen is not None
           else "no samples to confirm it")
    return " " + sanity.flag("", f"{what} but {why}: a fitted curve's step, not the "
                             "network's").strip()


def _falls_within(model: Any, regimes: Any) -> str:
    """Regimes whose central curve falls with size (kit.figures.sanity.steps_down), flagged;
    "" when none."""
    flagged = []
    for k, r in enumerate(regimes):
        lo = max(float(r.size_min), 1.0)
        hi = float(r.size_max) if math.isfinite(float(r.size_max)) else lo * 1e3
        hi = max(hi - 1.0, lo) if k < len(regimes) - 1 else hi
        grid = np.geomspace(lo, max(hi, lo * (1 + 1e-9)), 24)
        med = np.asarray(_centre(model, grid), dtype=float)
        found = sanity.steps_down(grid.tolist(), med.tolist())
        if found:
            size, drop = max(found, key=lambda f: f[1])
            flagged.append(sanity.flag(f"regime {k + 1}", f"its median falls {drop:.0%} "
                                       f"with size near {format_size(size)}: larger messages "
                                       "faster within one regime"))
    return "; ".join(flagged)


def summarise(model: Any, *, title: str, slug: str, n_samples: int | None = None,
              validation: Mapping[str, Any] | None = None,
              samples: tuple[Any, Any] | None = None) -> SeriesSummary:
    """The summary row of one fitted series (every number from the model); ``samples``
    (size, time) confirm or flag a median that steps down at a switch."""
    row = SeriesSummary(title=title, slug=slug)
    regimes = model.regimes_
    lo = max(float(regimes[0].size_min), 1.0)
    hi = float(regimes[-1].size_max)
    if n_samples is not None:
        row.n_samples = f"{n_samples:,}"
    small = max(float(SMALL), lo)
    p05, p50, p95 = _quantiles(model, small)
    row.latency = f"{format_time(p50)} [{format_time(p05)}–{format_time(p95)}]"
    row.latency_size = format_size(small)
    large = min(float(LARGE), hi) if math.isfinite(hi) and hi > small else float(LARGE)
    b05, b50, b95 = _quantiles(model, large)
    bw = effective_bandwidth(large, b50)
    row.bandwidth = (f"{format_rate(bw)} [{format_rate(large / b95)}–{format_rate(large / b05)}]"
                     if b05 > 0 else format_rate(bw))
    row.bandwidth_size = format_size(large)
    switches = []
    for r_prev, r in itertools.pairwise(regimes):
        text = format_size(float(r.size_min))
        ov = getattr(r_prev, "overlap", None)
        if ov is not None:
            text += f" (overlap {format_size(float(ov.size_lo))}–{format_size(float(ov.size_hi))})"
        switches.append(text + _step_note(model, float(r.size_min), samples))
    row.switches = ", ".join(switches) if switches else "none (one regime)"
    row.shape = _falls_within(model, regimes)
    spread_small = p95 / p50 if p50 > 0 else math.nan
    spread_large = b95 / b50 if b50 > 0 else math.nan
    row.noise = (f"{format_ratio(spread_small)} at {format_size(small)}, "
                 f"{format_ratio(spread_large)} at {format_size(large)}")
    summary = (validation or {}).get("summary") or {}
    score = float(summary.get("model", {}).get("crps_over_floor", math.nan))
    hockney = float(summary.get("hockney", {}).get("crps_over_floor", math.nan))
    peak = float(summary.get("peak", {}).get("crps_over_floor", math.nan))
    coverage = float(summary.get("model", {}).get("coverage", math.nan))
    if math.isfinite(score):
        row.score = format_ratio(score)
        row.baselines = ", ".join(f"{name} {format_ratio(v)}" for name, v in
                                  (("Hockney", hockney), ("peak", peak)) if math.isfinite(v))
        row.baselines = row.baselines or "–"
    if math.isfinite(coverage):
        row.coverage = f"{coverage:.2f}"
    row.verdict = _verdict(score, hockney, coverage, peak)
    row.values = {"latency_s": p50, "bandwidth_Bps": bw, "latency_size": small,
                  "bandwidth_size": large, "score": score, "hockney": hockney,
                  "coverage": coverage, "spread_small": spread_small,
                  "spread_large": spread_large}
    return row
