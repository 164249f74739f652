"""The TUI's door into ``kit``, by concern (this module only gathers the names).

Screens never import ``kit`` directly: a change in kit's API is fixed in one small module,
and screens deal in plain values (arrays, dataclasses) that are cheap to draw and easy to
test. The adapter is split by what it does:

* :mod:`tui.serieskey`: which series, and its label on screen;
* :mod:`tui.loading`: the browser's series table and one series' samples (kit's selector);
* :mod:`tui.binning`: quantile bands and point subsets for drawing;
* :mod:`tui.fitting`: fitting, validation and regimes as values (kit.fit.fitting's rules);
* :mod:`tui.modelfiles`: model files in and out, matching models to series, export;
* :mod:`tui.noiseview`: one regime's noise and its candidate families;
* :mod:`tui.comparing`: the best-within-X % table.

Screens import those modules; these re-exports keep older imports (``from tui import
data``) working.
"""

from __future__ import annotations

from typing import Any

from tui.binning import BAND_QUANTILES, Binned, bin_samples, draw_summaries, min_bin_count
from tui.comparing import BestRow, Share, best_within
from tui.fitting import (
    PREVIEW_MIN_SAMPLES,
    RegimeView,
    breakpoints_of,
    curve,
    fit,
    regimes,
    validate,
)
from tui.loading import Samples, SeriesRow, load_samples, series_rows
from tui.modelfiles import (
    SIMGRID_FILES,
    export_simgrid,
    load_model,
    load_models,
    match_models,
    model_files,
    save_model,
)
from tui.noiseview import NoiseCandidate, NoiseView, noise_view
from tui.serieskey import SeriesKey

__all__ = ["BAND_QUANTILES", "PREVIEW_MIN_SAMPLES", "SIMGRID_FILES", "BestRow", "Binned",
           "NoiseCandidate", "NoiseView", "RegimeView", "Samples", "SeriesKey", "SeriesRow",
           "Share", "best_within", "bin_samples", "breakpoints_of", "curve", "draw_summaries",
           "export_simgrid", "fit", "load_model", "load_models", "load_samples",
           "match_models", "min_bin_count", "model_files", "noise_view", "regimes",
           "save_model", "series_rows", "validate"]


def __getattr__(name: str) -> Any:
    """``FAMILIES`` and ``PREVIEW_SAMPLES``: kit.fit.fitting's, through tui.fitting (lazy)."""
    from tui import fitting

    return getattr(fitting, name)
