"""Netgauge ``-x loggp`` result files (``ng.out``), which are cheap to support.

Columns: ``size n PRTT(1,0,s) PRTT(n,0,s) PRTT(n,PRTT(1,0,s),s) L o_s o_r g G lsqu(g,G)``,
times in µs, one line per size, every value an aggregate over netgauge's repetitions:

* ``PRTT(1,0,s)`` is the parametrised round trip of one message -> op ``pingpong``,
  stat ``mean``, time = value / 2 (one-way);
* ``o_s`` -> op ``send``, ``o_r`` -> op ``recv``, ``g`` -> op ``gap`` (stat ``mean``);
* ``L`` (constant over the file), ``G`` (per-byte gap) and the fit residual are parameters,
  not times of a message size, and are not stored; ``-nan`` values are skipped.

The console log (``Testing N bytes ...``) carries the same numbers and is rejected.
"""

from __future__ import annotations

import math
from pathlib import Path

from kit.tools.base import HELP_CHECK_ORDER, Tool
from kit.tools.parsing import US, ParsedRun, Rows, fail, parse_size, parse_time, read_text

HEADER_START = "# size n PRTT(1,0,s)"
_MAP = (("PRTT(1,0,s)", "pingpong", 0.5), ("o_s", "send", 1.0), ("o_r", "recv", 1.0),
        ("g", "gap", 1.0))


def looks_like(lines: list[str]) -> bool:
    return bool(lines) and lines[0].startswith(HEADER_START)


def looks_like_console_log(lines: list[str]) -> bool:
    return any("Netgauge v" in line for line in lines[:3])


def parse(path: Path) -> ParsedRun:
    lines = read_text(path)
    columns = lines[0][1:].split()
    if "size" not in columns:
        raise fail(path, 1, "expected the netgauge header '# size n PRTT(1,0,s) ...'")
    rows = Rows()
    seq = 0
    for lineno, raw in enumerate(lines[1:], 2):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != len(columns):
            raise fail(path, lineno, f"expected {len(columns)} columns ({' '.join(columns)}), "
                       f"found {len(fields)}")
        record = dict(zip(columns, fields, strict=True))
        size = parse_size(path, lineno, record["size"])
        for column, op, factor in _MAP:
            token = record.get(column)
            if token is None or token.lstrip("-+").lower() == "nan":
                continue
            value = parse_time(path, lineno, token, column + " in µs", US)
            if not math.isfinite(value):
                continue
            rows.add(op, size, value * factor, seq, stat="mean")
        seq += 1
    if len(rows) == 0:
        raise fail(path, None, "no netgauge result line found")
    return ParsedRun(tool="netgauge", sources=[path], rows=rows.frame())


class Netgauge(Tool):
    """Netgauge ``-x loggp`` result files (ng.out)."""

    name = "netgauge"
    description = "Netgauge -x loggp result files (ng.out)"
    order = 80
    sniff_order = HELP_CHECK_ORDER + 40

    def sniff(self, path: Path, lines: list[str]) -> bool:
        if looks_like(lines):
            return True
        if looks_like_console_log(lines):
            raise fail(path, None, "this is netgauge's console log",
                       "ingest the ng.out result file it wrote instead")
        return False

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = Netgauge()
