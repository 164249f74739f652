"""Turn data and models into plot layers. Pure functions: screens call them, tests can too."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tui import binning, fitting, noiseview
from tui.widgets.plot import Layer, PlotSpec, Span, format_bytes, format_seconds

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

#: One colour per regime, in size order; distinct on dark and light terminals.
REGIME_COLOURS = ("#4e9af1", "#f39c4a", "#54c16b", "#e0555b", "#b48ef0", "#e5c546",
                  "#4fd1c5", "#f07bbf")
#: Series colours in the compare view.
SERIES_COLOURS = ("#4e9af1", "#f39c4a", "#54c16b", "#e0555b", "#b48ef0", "#e5c546")
NO_MODEL = "grey62"
BAND = "grey42"
SELECTED = "bold #ffff5f"


def regime_colour(i: int) -> str:
    return REGIME_COLOURS[i % len(REGIME_COLOURS)]


def regime_index(size: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Index of the regime each size falls in, given the inner boundaries (breakpoints)."""
    return np.searchsorted(np.asarray(edges, dtype=float), size, side="right")


def series_spec(binned: binning.Binned, model: RegimeModel | None, breakpoints: Sequence[float],
                selected_bp: int | None, mode: str) -> PlotSpec:
    """The series view: samples (raw subset or per-bin medians), bands, fit, breakpoints."""
    layers: list[Layer] = []
    edges = list(breakpoints)
    views = fitting.regimes(model) if model is not None else []
    n_reg = len(edges) + 1
    colours = [regime_colour(i) for i in range(n_reg)] if model is not None else [NO_MODEL]

    def by_regime(kind: str, x: np.ndarray, y: np.ndarray, *, dim: bool = False) -> None:
        idx = regime_index(x, edges) if model is not None else np.zeros(x.shape, dtype=int)
        for r in range(len(colours)):
            sel = idx == r
            if sel.any():
                colour = f"dim {colours[r]}" if dim else colours[r]
                layers.append(Layer(kind, x[sel], y[sel], colour))  # type: ignore[arg-type]

    q = binned.quantiles
    if mode == "raw":
        by_regime("scatter", binned.points_size, binned.points_time, dim=True)
        layers.append(Layer("line", binned.size, q[0.01], BAND, dotted=True))
        layers.append(Layer("line", binned.size, q[0.99], BAND, dotted=True))
    else:
        for lo, hi in ((0.05, 0.95), (0.25, 0.75)):
            layers.append(Layer("line", binned.size, q[lo], BAND))
            layers.append(Layer("line", binned.size, q[hi], BAND))
        by_regime("scatter", binned.size, q[0.5])
    if model is not None and binned.size.size:
        lo_size = float(min(binned.size.min(), binned.points_size.min()))
        hi_size = float(max(binned.size.max(), binned.points_size.max()))
        grid, median, _q05, q95 = fitting.curve(model, lo_size, hi_size)
        fitted_edges = fitting.breakpoints_of(model)
        idx = regime_index(grid, fitted_edges)
        for r in range(len(fitted_edges) + 1):
            sel = idx == r
            if sel.any():
                layers.append(Layer("line", grid[sel], q95[sel], f"dim {regime_colour(r)}",
                                    dotted=True))
                layers.append(Layer("line", grid[sel], median[sel], f"bold {regime_colour(r)}"))
    for i, bp in enumerate(edges):
        colour = SELECTED if i == selected_bp else "#d0d0d0"
        layers.append(Layer("vline", np.array([bp]), colour=colour, dotted=i != selected_bp))
    spans = _regime_spans(views, binned) if views else []
    return PlotSpec(layers=layers, spans=spans, x_format=format_bytes, y_format=format_seconds,
                    x_range=_log_range(binned), empty_message="no samples")


def _log_range(binned: binning.Binned) -> tuple[float, float] | None:
    sizes = np.concatenate([binned.size, binned.points_size])
    sizes = sizes[sizes > 0]
    if sizes.size == 0:
        return None
    lo, hi = math.log10(sizes.min()), math.log10(sizes.max())
    pad = max((hi - lo) * 0.02, 0.05)
    return lo - pad, hi + pad


def _regime_spans(views: list[fitting.RegimeView], binned: binning.Binned) -> list[Span]:
    top = float(max(binned.size.max(), binned.points_size.max())) * 2 if binned.size.size else 1
    spans = [Span(max(v.size_min, 1.0), min(v.size_max, top), regime_colour(v.index))
             for v in views]
    spans += [Span(v.overlap[0], v.overlap[1], "white", "▒") for v in views if v.overlap]
    return spans


def histogram_spec(noise: noiseview.NoiseView, colour: str, bins: int = 60) -> PlotSpec:
    """Noise view: histogram of ln(time / fitted median) on a log-ratio axis, fitted beside.

    The bins are log-spaced over the whole range, so a heavy tail up to 10^4 is a long
    shoulder instead of squeezing everything into one bar; the y axis is the density of
    ln(ratio) for both the samples (a step line) and the chosen family (bold line).
    """
    ratio = noise.ratio[np.isfinite(noise.ratio) & (noise.ratio > 0)]
    if ratio.size == 0:
        return PlotSpec(x_log=True, y_log=False, empty_message="no samples in this regime")
    lo, hi = float(ratio.min()), float(ratio.max())
    hi = max(hi, lo * 1.01)
    edges = np.geomspace(lo, hi, bins + 1)
    counts, _ = np.histogram(ratio, bins=edges)
    dens = counts / (ratio.size * np.diff(np.log(edges)))
    xs = np.repeat(edges, 2)[1:-1]
    ys = np.repeat(dens, 2)
    layers = [Layer("line", xs, ys, f"dim {colour}")]
    keep = (noise.density_x >= lo) & (noise.density_x <= hi) & np.isfinite(noise.density_y)
    if keep.any():
        layers.append(Layer("line", noise.density_x[keep], noise.density_y[keep], "bold white"))
    layers.append(Layer("vline", np.array([1.0]), colour="grey50", dotted=True))
    return PlotSpec(layers=layers, x_log=True, y_log=False,
                    x_format=lambda v: f"{v:.3g}", y_format=lambda v: f"{v:.3g}")


def compare_spec(binned: Sequence[binning.Binned]) -> PlotSpec:
    """Compare view: per-bin medians of several series with their 5-95 % bands."""
    layers: list[Layer] = []
    for i, b in enumerate(binned):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        layers.append(Layer("line", b.size, b.quantiles[0.05], f"dim {colour}", dotted=True))
        layers.append(Layer("line", b.size, b.quantiles[0.95], f"dim {colour}", dotted=True))
        layers.append(Layer("line", b.size, b.quantiles[0.5], f"bold {colour}"))
    return PlotSpec(layers=layers, x_format=format_bytes, y_format=format_seconds)
