"""How figures are written: sizes in 1024-based units, times, rates in 10^3-based units,
ratios; the same text on every surface (a rounding of its own would be a second number)."""

from __future__ import annotations

import math


def format_size(v: float) -> str:
    """Bytes in the 1024-based units MPI people read (64 KiB protocol switches)."""
    if not math.isfinite(v):
        return "∞"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale * 0.9995:
            q = v / scale
            return f"{q:.0f} {unit}" if q >= 99.95 else f"{q:.3g} {unit}"
    return f"{v:.0f} B"


def format_time(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(v) >= scale * 0.9995:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.2g} s"


def format_rate(v: float | None) -> str:
    """Bytes per second in MB/s = 10^6 B/s (and GB/s, kB/s)."""
    if v is None or not math.isfinite(v) or v <= 0:
        return "–"
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} B/s"


def format_ratio(v: float | None) -> str:
    """Ratios from 0.2 to 20 000 (a loaded machine's p95/p50): two decimals, then integers."""
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_RATE_UNITS = (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3), ("B/s", 1.0))


def format_with_interval(value: float, lo: float | None, hi: float | None, kind: str) -> str:
    """``34.7 µs [34.4–35.1]``: the value in its unit, the interval in the same unit
    (``kind``: ``time`` or ``rate``); the value alone when there is no interval."""
    text = format_time(value) if kind == "time" else format_rate(value)
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return text
    units = _TIME_UNITS if kind == "time" else _RATE_UNITS
    scale = next((sc for unit, sc in units if text.endswith(f" {unit}")), 1.0)
    return f"{text} [{_three(lo / scale)}–{_three(hi / scale)}]"


def _three(v: float) -> str:
    """Three significant digits, never an exponent (an interval can span units)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
