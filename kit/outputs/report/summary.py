"""The report's first screen: what a user came for, per series, in numbers they can act on.

Latency and effective bandwidth (measured, with the 95 % interval of their median), the sizes
where the protocol switches, how noisy the series is, the held-out score against the floor
and the best honest baseline, and the verdict. Latency, bandwidth, score, best baseline and
verdict are kit.figures' (kit.figures.series.SeriesFigures): the text `pt2pt datasets`, the
demo summary, `pt2pt diff` and the TUI show for the same series. The switch sizes and the
noise are read off the fitted model. The terms are explained once, in :data:`TERMS`, right
under the summary table.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kit.figures import bandwidth, latency, sanity
from kit.figures.baseline import LABELS as BASELINE_LABELS
from kit.figures.score import LEGEND as SCORE_LEGEND
from kit.figures.series import SeriesFigures
from kit.figures.text import format_ratio, format_size
from kit.model.contract import PointToPointModel

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

#: The noise column's sizes: a small and a large message.
SMALL = latency.SMALL_SIZE
LARGE = 4 * 1024 * 1024

#: One sentence per term, in the order a reader meets them in the summary.
TERMS: dict[str, str] = {
    "latency": f"{latency.DEFINITION}; one way for pingpong (half the round trip, as OSU "
               "reports it), the call's duration for send/recv, the per-message gap for "
               "stream. Measured, not modelled: the number `pt2pt datasets` shows.",
    "bandwidth": f"{bandwidth.DEFINITION}. Measured, not modelled.",
    "switch sizes": "message sizes where the model changes regime: the MPI library changes "
                    "protocol (e.g. eager to rendezvous), and time jumps or changes slope.",
    "regime": "a size range in which one curve (family) and one noise distribution describe "
              "the samples; regimes are ordered by size.",
    "family": "the curve of a regime: constant (t = a), linear (t = a + b·size) or power "
              "(t = a·size^b), fitted to the per-size medians.",
    "overlap": "a size window around a switch where samples of both neighbouring regimes "
               "occur; the model mixes the two there.",
    "noise": f"how far single samples scatter around the curve, as time / curve; p95/p50 of "
             f"the model at {SMALL} B and at 4 MiB (or the series' largest size) is the 95th "
             "percentile over the median (1.0 = no spread).",
    "noise families": "lognormal, gamma, weibull, invgauss and fisk are standard positive "
                      "distributions; gmm is a mixture of a few lognormal bands (samples that "
                      "fall into a fast and a slow group).",
    "held-out": "samples kept out of the fit and used only to score it (the split is stated "
                "in each series' validation).",
    "CRPS": "continuous ranked probability score: the distance between the model's predicted "
            "distribution and the held-out samples at one size, relative to their median "
            "(lower is better); it judges the whole distribution, not only the median.",
    "floor": "the held-out samples' own expected CRPS: half their mean absolute difference "
             "at each size. The CRPS is a proper score, so no model's expected CRPS is "
             "lower: a score below 1 is sampling error.",
    "score": SCORE_LEGEND + ".",
    "coverage": "share of held-out samples inside the model's 5th..95th percentile band; "
                "0.90 is ideal, less means the model's noise is too narrow.",
    "robust Hockney": BASELINE_LABELS["hockney_robust"] + ", with pooled noise: the honest "
                      "one-line baseline.",
    "peak": BASELINE_LABELS["peak"] + ": what a data sheet or a best run suggests.",
    "best baseline": "the honest baseline (robust Hockney or peak) with the lowest held-out "
                     "CRPS; when it scores as well as the model, the verdict says the regimes "
                     "add nothing.",
    "textbook line": BASELINE_LABELS["hockney"] + "; shown in the tables, never in a "
                     "verdict (stalls pull it off the median by orders of magnitude).",
    "lookup table": BASELINE_LABELS["lookup"] + "; a pooled model beats it where sizes have "
                    "few samples.",
    "run quality": "quiet: every run was recorded on a quiet node (load, CPU pressure, stolen "
                   "time: kit.measure.conditions) and no stretch of samples stood out; "
                   "disturbed: a run's node was busy or a stretch of its samples sat far "
                   "above the run's quiet level; conditions not recorded: the runs came "
                   "from outside the kit's job scripts.",
}


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
    baselines: str = "–"  # the best honest baseline and its score
    coverage: str = "–"
    verdict: str = ""
    #: run quality's verdict on the runs (kit.fit.runquality): quiet | disturbed | ...
    conditions: str = "–"
    #: regimes whose median falls with size, flagged (kit.figures.sanity); "" when none
    shape: str = ""
    values: dict[str, float] = field(default_factory=dict)


def _quantiles(model: PointToPointModel, size: float) -> tuple[float, float, float]:
    q = np.asarray(model.predict_quantiles(np.array([size], dtype=float), [0.05, 0.5, 0.95]),
                   dtype=float).reshape(-1)
    return float(q[0]), float(q[1]), float(q[2])


def slugify(text: str) -> str:
    """A title's HTML anchor (sections, LogGP blocks; the summary table links to them)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "series"


def _centre(model: RegimeModel, size: Any) -> Any:
    """The regimes' central curves (fitted to per-size medians), without the per-size
    shifts of stored sizes: the shape a regime claims, not one size's own noise."""
    curve = getattr(model, "curve", None)
    return curve(size) if curve is not None else model.predict(size)


def _median_near(size: Any, time: Any, lo: float, hi: float) -> float | None:
    inside = (size >= lo) & (size < hi)
    return float(np.median(time[inside])) if int(inside.sum()) >= 5 else None


def _step_note(model: RegimeModel, at: float, samples: tuple[Any, Any] | None) -> str:
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


def _falls_within(model: RegimeModel, regimes: Any) -> str:
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


def summarise(model: RegimeModel, figures: SeriesFigures, *, title: str, slug: str,
              n_samples: int | None = None,
              samples: tuple[Any, Any] | None = None) -> SeriesSummary:
    """The summary row of one fitted series: ``figures`` (kit.figures) for latency,
    bandwidth, score, best baseline and verdict; the model for the switches and the noise;
    ``samples`` (size, time) confirm or flag a median that steps down at a switch."""
    row = SeriesSummary(title=title, slug=slug)
    regimes = model.regimes_
    lo = max(float(regimes[0].size_min), 1.0)
    hi = float(regimes[-1].size_max)
    if n_samples is not None:
        row.n_samples = figures.samples_text(n_samples)
    cells = figures.cells()
    row.latency, row.bandwidth = cells["latency"], cells["bandwidth"]
    row.latency_size = figures.latency_label().removeprefix("latency ")
    row.bandwidth_size = figures.bandwidth_label().removeprefix("eff. bw ")
    switches = []
    for r_prev, r in itertools.pairwise(regimes):
        text = format_size(float(r.size_min))
        ov = r_prev.overlap
        if ov is not None:
            text += f" (overlap {format_size(float(ov.size_lo))}–{format_size(float(ov.size_hi))})"
        switches.append(text + _step_note(model, float(r.size_min), samples))
    row.switches = ", ".join(switches) if switches else "none (one regime)"
    row.shape = _falls_within(model, regimes)
    small = max(float(SMALL), lo)
    large = min(float(LARGE), hi) if math.isfinite(hi) and hi > small else float(LARGE)
    _, p50, p95 = _quantiles(model, small)
    _, b50, b95 = _quantiles(model, large)
    spread_small = p95 / p50 if p50 > 0 else math.nan
    spread_large = b95 / b50 if b50 > 0 else math.nan
    row.noise = (f"{format_ratio(spread_small)} at {format_size(small)}, "
                 f"{format_ratio(spread_large)} at {format_size(large)}")
    row.score = cells["score"]
    row.baselines = cells["best baseline"]
    note = figures.score_note()
    if note:
        row.score += f" ({note})"
    if figures.coverage is not None and math.isfinite(figures.coverage):
        row.coverage = f"{figures.coverage:.2f}"
    row.verdict = figures.verdict or "not validated: run 'pt2pt validate' on the model to " \
        "score it"
    row.values = {"latency_s": figures.latency.value or math.nan,
                  "bandwidth_Bps": figures.bandwidth.value or math.nan,
                  "score": figures.score.value if figures.score else math.nan,
                  "spread_small": spread_small, "spread_large": spread_large}
    return row
