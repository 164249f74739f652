"""What a node's or a link's deviation from the population means, and how it is written.

The cluster model (:mod:`kit.fit.clustermodel`) keeps three figures per pair and node, each
on the scale where its causes add up:

* ``latency``: seconds added to the one-way time at a small size (delays add);
* ``bandwidth``: ln of the asymptotic bandwidth (1 / slope of time over size at the largest
  sizes: a slower NIC multiplies the transfer time, and per-message overheads cancel);
* ``noise``: ln of the ratio of the upper tail's width (``ln(p95/p50)`` of time at a size).

This module turns those values into what a user reads (µs, per cent) and the verdict
sentences ("n7 adds 38 µs [31, 45] to every pair it is in"; "link n3-n9 bandwidth -42 %
[-47, -36]"), so the CLI, the report and the TUI print the same words for the same finding.
Pure functions, no model or dataset import.
"""

from __future__ import annotations

import math

from kit.figures.text import format_size

FIGURES = ("latency", "bandwidth", "noise")
#: The direction in which a deviation is bad: +1 larger is worse, -1 smaller is worse.
WORSE = {"latency": 1, "bandwidth": -1, "noise": 1}
#: What each figure is, in one sentence (report legend, TUI help, --help epilog).
MEANING = {
    "latency": "time a pair adds to the population's one-way time at a small size "
               "(median of its samples in the latency window)",
    "bandwidth": "change of a pair's asymptotic bandwidth (1 / slope of one-way time over "
                 "size at the largest sizes, Theil-Sen), against the typical pair's",
    "noise": "change of the width of a pair's upper tail (p95/p50 of time at one size, in "
             "ln units), against the population's",
}


def _time_unit(seconds: float) -> tuple[str, float]:
    a = abs(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if a >= scale * 0.9995:
            return unit, scale
    return "ns", 1e-9


def format_seconds(seconds: float) -> str:
    """``38.2 µs``, ``11.1 ms``: a time (or a time added) in its unit, three digits."""
    if not math.isfinite(seconds):
        return "–"
    unit, scale = _time_unit(seconds)
    return f"{_g(seconds / scale)} {unit}"


def _g(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def quoted_size(b: float | None) -> str:
    """The size a figure is quoted at: ``64 B``, ``4 MiB``."""
    if b is None or not math.isfinite(b):
        return "–"
    return format_size(b)  # kit.figures.text's, the one way a size is written


def value_of(figure: str, typical: float, deviation: float) -> float:
    """A pair's own figure from the typical pair's and its deviation: latency in seconds,
    bandwidth in B/s, noise as p95/p50 (the tail width ``ln(p95/p50)`` times the ratio)."""
    if not (math.isfinite(typical) and math.isfinite(deviation)):
        return math.nan
    if figure == "latency":
        return typical + deviation
    if figure == "bandwidth":
        return typical * math.exp(deviation)
    return float(typical ** math.exp(deviation)) if typical > 0 else math.nan


def display(figure: str, value: float) -> float:
    """A deviation in its display unit: seconds (latency), per cent (bandwidth, noise)."""
    if figure == "latency":
        return value
    return 100.0 * math.expm1(value)


def threshold_value(figure: str, threshold: float, population: float,
                    absolute: bool = False) -> float:
    """The threshold on the figure's own scale (the slow side of it).

    ``threshold`` is a fraction (0.10 = 10 %) of the population's value for latency, of its
    bandwidth, of its tail width; ``absolute`` (latency only) means seconds.
    """
    if figure == "latency":
        return threshold if absolute else threshold * population
    if figure == "bandwidth":
        return math.log1p(-min(threshold, 0.999))
    return math.log1p(threshold)


def amount(figure: str, value: float, lo: float | None = None, hi: float | None = None) -> str:
    """``+38 µs [31, 45]``, ``-42 % [-47, -36]``: a deviation and its interval."""
    if not math.isfinite(value):
        return "not estimated"
    if figure == "latency":
        unit, scale = _time_unit(value if value else (hi or 0.0))
        text = f"{value / scale:+.3g} {unit}"
        if lo is not None and hi is not None:
            text += f" [{_g(lo / scale)}, {_g(hi / scale)}]"
        return text
    text = f"{display(figure, value):+.3g} %"
    if lo is not None and hi is not None:
        text += f" [{display(figure, lo):.3g}, {display(figure, hi):.3g}]"
    return text


def sentence(kind: str, name: str, figure: str, value: float, lo: float, hi: float,
             where: str) -> str:
    """The verdict line of one flagged node (``kind`` node) or link.

    ``where``: the size the figure is quoted at (``at 64 B``). Node: "n7 adds 38 µs [31, 45]
    to every pair it is in (latency at 64 B)"; link: "link n3-n9 bandwidth -42 % [-47, -36]
    (at 4 MiB)".
    """
    if figure == "latency":
        body = "adds " + amount(figure, value, lo, hi).lstrip("+")
        if kind == "node":
            return f"{name} {body} to every pair it is in (latency {where})"
        return f"link {name} {body} (latency {where})"
    label = "bandwidth (asymptotic)" if figure == "bandwidth" else "noise level"
    text = amount(figure, value, lo, hi)
    if kind == "node":
        return f"{name}: {label} {text} on every pair it is in ({where})"
    return f"link {name} {label} {text} ({where})"
