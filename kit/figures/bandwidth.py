"""What "bandwidth" means in the kit: one definition, labelled wherever a number is shown.

The demo summary once said 439 MB/s for a tcp ping-pong while ``pt2pt datasets`` and the
TUI said 3.95 GB/s for the same series, and neither said which statistic it was. There is
one definition now:

    effective bandwidth at size S = S / (median one-way time of a message of S bytes)

It is a ratio, not a slope: at small S it is dominated by latency, so the size it was taken
at is part of the figure and every label names it. Where S comes from:

* from the samples (``pt2pt datasets``, the TUI browser): the series' largest octave of
  sizes (S >= size_max / 2), the median over its samples of S / time
  (:data:`TOP_OCTAVE_LABEL`);
* from a model (demo summary): S given explicitly, time = the model's median at S
  (:func:`effective_bandwidth_at`).

:func:`asymptotic_bandwidth` is the other number a user may want (the large-message limit,
1 / slope of the last regime's curve); it is labelled as such and never called "bandwidth"
alone.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Polars only for the summary query; `pt2pt datasets` never needs it
    import polars as pl

DEFINITION = "effective bandwidth at size S = S / median one-way time at S"
#: Column label of the samples' figure (datasets, TUI) and its one-line definition.
TOP_OCTAVE_LABEL = "eff. bw (top octave)"
TOP_OCTAVE_DEFINITION = ("eff. bw (top octave) = median of size / one-way time over the "
                         "series' largest octave of sizes (size >= max / 2)")


def effective_bandwidth(size: float, time: float) -> float:
    """S / t in bytes per second (NaN when the time is not positive)."""
    return float(size) / float(time) if time > 0 else math.nan


def effective_bandwidth_expr(size: pl.Expr, time: pl.Expr) -> pl.Expr:
    """:func:`effective_bandwidth` per row, for Polars queries (the series summary)."""
    import polars as pl

    return size.cast(pl.Float64) / time


def effective_bandwidth_at(model: Any, size: float) -> float:
    """Effective bandwidth at ``size`` from a model's median one-way time there."""
    import numpy as np  # only with a model in hand (numpy is loaded by then anyway)

    median = float(np.asarray(model.predict(np.array([float(size)])))[0])
    return effective_bandwidth(size, median)


def label_at(size: float) -> str:
    """``eff. bw @4 MiB``: the label of :func:`effective_bandwidth_at` for ``size``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"eff. bw @{size / scale:.3g} {unit}"
    return f"eff. bw @{size:.0f} B"


def asymptotic_bandwidth(model: Any) -> float | None:
    """1 / slope of the last regime's central curve at its largest size (bytes per second).

    ``None`` when the last regime is constant (no size-proportional term) or its slope is not
    positive. Labelled "asymptotic bw" wherever shown.
    """
    regimes = getattr(model, "regimes_", None) or []
    if not regimes:
        return None
    last = regimes[-1]
    params = dict(last.params)
    top = float(last.size_max) if math.isfinite(float(last.size_max)) else float(last.size_min)
    if last.family == "linear":
        slope = float(params.get("b", 0.0))
    elif last.family == "power" and top > 0:
        a, b = float(params.get("a", 0.0)), float(params.get("b", 0.0))
        slope = a * b * top ** (b - 1.0)
    else:
        return None
    return 1.0 / slope if slope > 0 else None
