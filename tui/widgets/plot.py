"""A terminal plot widget (log or linear axes) drawn on the braille canvas.

The widget only knows layers in data coordinates; screens decide what to draw. Axis ranges
come from the layers unless fixed, so a plot never needs a second pass over raw samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui.widgets.canvas import BrailleCanvas

Kind = Literal["scatter", "line", "vline", "bars"]


@dataclass(frozen=True)
class Layer:
    """Something to draw: points, a polyline, vertical markers (``x`` only) or histogram bars."""

    kind: Kind
    x: np.ndarray
    y: np.ndarray | None = None
    colour: str = "white"
    dotted: bool = False
    width: float = 0.0  # bars: width of each bar in data units (filled, not one dot column)


@dataclass(frozen=True)
class Span:
    """A coloured range drawn in the strip under the x axis (regimes, overlap windows)."""

    lo: float
    hi: float
    colour: str
    char: str = "━"


@dataclass
class PlotSpec:
    """Everything one plot shows; replaced as a whole so the widget redraws once."""

    layers: list[Layer] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    x_log: bool = True
    y_log: bool = True
    x_format: Callable[[float], str] = field(default=lambda v: f"{v:g}")
    y_format: Callable[[float], str] = field(default=lambda v: f"{v:g}")
    x_range: tuple[float, float] | None = None
    y_range: tuple[float, float] | None = None
    empty_message: str = "no data"


def format_bytes(v: float) -> str:
    """Message sizes as the 1024-based units MPI people read (1K = 1024 B)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= scale * 0.9995:  # 1048575 B reads "1M", not "1.02e+03K"
            q = v / scale
            exact = abs(q - round(q)) < 1e-9
            return f"{q:.0f}{unit}" if exact or q >= 100 else f"{q:.3g}{unit}"
    return f"{v:.0f}"


def format_seconds(v: float) -> str:
    """Durations with an SI prefix, three significant digits."""
    if v <= 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if v >= scale * 0.9999:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.1e}s"


def _log_ticks(lo: float, hi: float, base: float, max_ticks: int) -> list[float]:
    """Powers of ``base`` inside [lo, hi] (log10 units), thinned to at most ``max_ticks``."""
    step_log = math.log10(base)
    first = math.ceil(lo / step_log - 1e-9)
    last = math.floor(hi / step_log + 1e-9)
    ticks = [k * step_log for k in range(first, last + 1)]
    stride = 1
    while len(ticks[::stride]) > max(max_ticks, 1):
        stride += 1
    return ticks[::stride]


def _lin_ticks(lo: float, hi: float, max_ticks: int) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / max(max_ticks, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    return list(np.arange(start, hi + step * 1e-9, step))


def _nearest_dot(v: np.ndarray | float) -> np.ndarray:
    """The nearest dot (or cell), halves rounded up, and so are values within 1e-9 below
    a half.

    Some positions fall on a half dot by construction (a histogram's log-spaced edges sit at
    fixed fractions of the padded axis, whatever the data); ``np.rint`` then rounds each by
    the last bit of the arithmetic, and the picture changed with the 1e-10 any refit moves
    a curve by."""
    return np.floor(np.asarray(v, dtype=float) + (0.5 + 1e-9))


class Plot(Widget):
    """Draws a :class:`PlotSpec`: y labels on the left, x labels and the span strip below."""

    DEFAULT_CSS = """
    Plot { height: 1fr; width: 1fr; }
    """

    can_focus = True  # so the screen's arrow keys reach it rather than a table

    spec: reactive[PlotSpec] = reactive(PlotSpec, always_update=True)
    y_label_width = 8

    def _bounds(self, spec: PlotSpec) -> tuple[float, float, float, float] | None:
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for layer in spec.layers:
            x = np.asarray(layer.x, dtype=float)
            if layer.kind != "vline" and layer.y is not None:
                y = np.asarray(layer.y, dtype=float)
                ok = np.isfinite(x) & np.isfinite(y)
                if spec.x_log:
                    ok &= x > 0
                if spec.y_log:
                    ok &= y > 0
                xs.append(x[ok])
                ys.append(y[ok])
        x = np.concatenate(xs) if xs else np.empty(0)
        y = np.concatenate(ys) if ys else np.empty(0)
        if x.size == 0:
            return None
        tx = np.log10(x) if spec.x_log else x
        ty = np.log10(y) if spec.y_log else y
        x0, x1 = spec.x_range or (float(tx.min()), float(tx.max()))
        y0, y1 = spec.y_range or (float(ty.min()), float(ty.max()))
        if spec.x_range is None:
            pad = max((x1 - x0) * 0.02, 0.05 if spec.x_log else 1e-12)
            x0, x1 = x0 - pad, x1 + pad
        if spec.y_range is None:
            pad = max((y1 - y0) * 0.04, 0.05 if spec.y_log else abs(y1) * 0.05 + 1e-12)
            y0, y1 = (y0 - pad if spec.y_log else min(y0, 0.0)), y1 + pad
        return x0, x1, y0, y1

    def render(self) -> Text:
        spec = self.spec
        width, height = self.size.width, self.size.height
        strip_rows = 1 if spec.spans else 0
        plot_w = width - self.y_label_width - 1
        plot_h = height - 1 - strip_rows
        if plot_w < 4 or plot_h < 2:
            return Text("(too small)")
        bounds = self._bounds(spec)
        if bounds is None:
            return Text(spec.empty_message, style="dim")
        x0, x1, y0, y1 = bounds
        canvas = BrailleCanvas(plot_w, plot_h)

        def to_px(v: np.ndarray) -> np.ndarray:
            t = np.log10(np.clip(v, 1e-300, None)) if spec.x_log else v
            return _nearest_dot((t - x0) / (x1 - x0) * (canvas.dot_width - 1))

        def to_py(v: np.ndarray) -> np.ndarray:
            t = np.log10(np.clip(v, 1e-300, None)) if spec.y_log else v
            return _nearest_dot((y1 - t) / (y1 - y0) * (canvas.dot_height - 1))

        for layer in spec.layers:
            x = np.asarray(layer.x, dtype=float)
            if layer.kind == "vline":
                for px in to_px(x):
                    if np.isfinite(px):
                        canvas.vline(int(px), layer.colour, dotted=layer.dotted)
                continue
            y = np.asarray(layer.y, dtype=float)
            if layer.kind == "scatter":
                ok = np.isfinite(x) & np.isfinite(y)
                canvas.points(to_px(x[ok]), to_py(y[ok]), layer.colour)
            elif layer.kind == "line":
                canvas.polyline(to_px(x), to_py(y), layer.colour)
            elif layer.kind == "bars":
                base = canvas.dot_height - 1
                left, right = to_px(x - layer.width / 2), to_px(x + layer.width / 2)
                for x0_, x1_, py in zip(left, right, to_py(y), strict=True):
                    if not (np.isfinite(x0_) and np.isfinite(py)) or py > base:
                        continue
                    cols = np.arange(int(x0_), max(int(x1_), int(x0_) + 1))
                    rows = np.arange(int(max(py, 0)), base + 1)
                    gx, gy = np.meshgrid(cols, rows)
                    canvas.points(gx.ravel(), gy.ravel(), layer.colour)

        lines = self._frame(canvas, spec, (x0, x1, y0, y1), width)
        if spec.spans:
            lines.append(self._strip(spec, x0, x1, plot_w))
        return Text("\n").join(lines)

    def _frame(self, canvas: BrailleCanvas, spec: PlotSpec, bounds: Sequence[float],
               width: int) -> list[Text]:
        x0, x1, y0, y1 = bounds
        rows = canvas.rows()
        labels: dict[int, str] = {}
        y_ticks = (_log_ticks(y0, y1, 10, max(len(rows) // 3, 2)) if spec.y_log
                   else _lin_ticks(y0, y1, max(len(rows) // 3, 2)))
        for t in y_ticks:
            at = int(_nearest_dot((y1 - t) / (y1 - y0) * (len(rows) - 1)))
            if 0 <= at < len(rows):
                labels[at] = spec.y_format(10**t if spec.y_log else t)
        axis = Style(color="grey50")
        out: list[Text] = []
        for i, row in enumerate(rows):
            label = labels.get(i, "")
            line = Text(label.rjust(self.y_label_width)[: self.y_label_width], style=axis)
            line.append("┤" if i in labels else "│", axis)
            line.append_text(row)
            out.append(line)
        plot_w = canvas.width
        axis_chars = [" "] * plot_w
        max_ticks = max(plot_w // 9, 2)
        x_ticks = (_log_ticks(x0, x1, 2 if spec.x_format is format_bytes else 10, max_ticks)
                   if spec.x_log else _lin_ticks(x0, x1, max_ticks))
        for t in x_ticks:
            col = int(_nearest_dot((t - x0) / (x1 - x0) * (plot_w - 1)))
            label = spec.x_format(10**t if spec.x_log else t)
            start = min(max(col - len(label) // 2, 0), plot_w - len(label))
            if all(c == " " for c in axis_chars[max(start - 1, 0): start + len(label) + 1]):
                axis_chars[start: start + len(label)] = list(label)
        x_axis = Text(" " * self.y_label_width + "└", style=axis)
        x_axis.append("".join(axis_chars), axis)
        out.append(x_axis)
        return out

    def _strip(self, spec: PlotSpec, x0: float, x1: float, plot_w: int) -> Text:
        cells: list[tuple[str, str | None]] = [(" ", None)] * plot_w
        for span in spec.spans:
            lo = math.log10(max(span.lo, 1e-300)) if spec.x_log else span.lo
            hi = math.log10(max(span.hi, 1e-300)) if spec.x_log else span.hi
            c0 = max(int(_nearest_dot((lo - x0) / (x1 - x0) * (plot_w - 1))), 0)
            c1 = min(int(_nearest_dot((hi - x0) / (x1 - x0) * (plot_w - 1))), plot_w - 1)
            for c in range(c0, c1 + 1):
                cells[c] = (span.char, span.colour)
        text = Text(" " * (self.y_label_width + 1))
        for char, colour in cells:
            text.append(char, colour)
        return text
