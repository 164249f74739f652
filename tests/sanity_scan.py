"""Finds figures physics forbids in what the kit printed or wrote, unless they are flagged.

The property tests (tests/test_sanity.py, tests/test_demo.py) run every command on every kind
of data and hand their output here. A line that carries kit.figures.sanity's flag, or says
"not estimated", is the kit refusing or flagging a figure with its reason: that is allowed.
Anything else with a negative time, a bandwidth at or below zero or above the ceiling, a
SimGrid factor <= 0, a NaN or infinity printed as a number, a percent interval reaching -100 %
(a ratio of zero) or astronomically wide, or a contention bandwidth read at a few bytes, is a
violation: a number a user would take as measured. A refusal (the paragraph of a
``pt2pt: error:``) may name the figure it refuses: it is the reason, not a measurement.
"""

from __future__ import annotations

import html
import re

from kit.figures.sanity import CEILING_BPS, FLAG

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RATE_UNITS = {"B/s": 1.0, "kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}
_NUM = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?"
_TIME = re.compile(rf"(?<![\w.\-+])({_NUM})\s*(ms|us|µs|ns|s)\b(?!/)")
_RATE = re.compile(rf"(?<![\w.\-+])({_NUM})\s*(B/s|kB/s|MB/s|GB/s)")
_NAN = re.compile(r"(?<![\w])(nan|NaN|[-+]?inf)(?=\s*(?:s|us|µs|ns|ms|B/s|MB/s|GB/s|%|\]|,|$))")
_PCT_ZERO = re.compile(r"\[\s*-100(?:\.0*)?\s*(?:%\s*)?,")
_PCT_HUGE = re.compile(r"\d(?:\.\d+)?e\+?(\d+)(?:\s*%|\]\s*%)")
_FACTOR = re.compile(r"(lat-factor|bw-factor|latency-factor|bandwidth-factor)[:=]([^\s\"<]+)")
_CONTENTION_AT = re.compile(r"per-pair eff\. bw @(\d+) B\b")
_TAG = re.compile(r"<[^>]+>")


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def exempt(line: str) -> bool:
    return FLAG in line or "not estimated" in line or "not physical" in line


def violations(text: str, where: str = "") -> list[str]:
    """Every unflagged figure physics forbids in ``text`` (HTML tags are stripped)."""
    if "<html" in text[:2000].lower() or "<table" in text:
        text = html.unescape(_TAG.sub(" ", text))
    found = []
    refusing = False
    for line in text.splitlines():
        # a refusal's paragraph runs from "pt2pt: error:" to the next blank line
        refusing = line.startswith("pt2pt: error:") or (refusing and bool(line.strip()))
        if refusing or exempt(line):
            continue
        for m in _TIME.finditer(line):
            if _value(m.group(1)) < 0:
                found.append(f"negative time {m.group(0)!r}")
        for m in _RATE.finditer(line):
            v = _value(m.group(1)) * _RATE_UNITS[m.group(2)]
            if v <= 0 or v > CEILING_BPS:
                found.append(f"bandwidth {m.group(0)!r}")
        for m in _NAN.finditer(line):
            found.append(f"non-finite number {m.group(0)!r}")
        if _PCT_ZERO.search(line):
            found.append("interval reaching -100 % (a ratio of 0)")
        for m in _PCT_HUGE.finditer(line):
            if int(m.group(1)) >= 4:
                found.append(f"interval end {m.group(0)!r}")
        for m in _FACTOR.finditer(line):
            for entry in m.group(2).split(";"):
                parts = entry.split(":")
                try:
                    values = [float(v) for v in (parts[1:] if len(parts) > 1 else parts)]
                except ValueError:
                    continue
                if any(v <= 0 for v in values):
                    found.append(f"SimGrid {m.group(1)} entry {entry!r} <= 0")
        for m in _CONTENTION_AT.finditer(line):
            if int(m.group(1)) < 64:
                found.append(f"contention bandwidth read at {m.group(1)} B")
    return [f"{where}: {v}" if where else v for v in found]
