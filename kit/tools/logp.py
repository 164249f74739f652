"""logp_mpi parameter files (``logp_test.out.<Send>.<Recv>.<suffix>``).

The file holds the LogP/LogGP parameters per message size, in seconds, as printed by
logp_test: ``time bytes os os_min os_cnfint or or_min or_cnfint g`` plus one
``# Latency = L`` line. None of them is a single message time, so every row is an aggregate:

| column | op | stat |
|---|---|---|
| os | ``send`` (send overhead) | ``mean`` |
| os_min | ``send`` | ``min`` |
| or | ``recv`` (receive overhead) | ``mean`` |
| or_min | ``recv`` | ``min`` |
| g | ``gap`` (gap between consecutive messages) | ``mean`` |
| L (header) | ``latency``, one row at size 0 | ``mean`` |

The confidence-interval columns are not times and are dropped. n = 1 (logp_test does not
print its iteration counts in this file). Its ``-verbose`` console log repeats the same
numbers and is rejected with a pointer to the parameter file.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from kit.tools.base import HELP_CHECK_ORDER, Tool
from kit.tools.parsing import ParsedRun, Rows, fail, parse_size, parse_time, read_text

_HEADER = re.compile(r"^#\s*LogP network performance data")
_LATENCY = re.compile(r"^#\s*Latency\s*=\s*(\S+)")
COLUMNS = ("time", "bytes", "os", "os_min", "os_cnfint", "or", "or_min", "or_cnfint", "g")
_MAP = (("os", "send", "mean"), ("os_min", "send", "min"), ("or", "recv", "mean"),
        ("or_min", "recv", "min"), ("g", "gap", "mean"))


def looks_like(lines: list[str]) -> bool:
    return bool(lines) and bool(_HEADER.match(lines[0]))


def looks_like_verbose_log(lines: list[str]) -> bool:
    head = "\n".join(lines[:6])
    return "mirroring peer" in head or "measuring with peer" in head


def parse(path: Path) -> ParsedRun:
    lines = read_text(path)
    rows = Rows()
    columns: list[str] | None = None
    latency_row: tuple[int, float] | None = None
    start = None
    seq = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            lat = _LATENCY.match(line)
            if lat:
                latency_row = (lineno, parse_time(path, lineno, lat.group(1), "the latency L"))
            elif line[1:].split()[:2] == ["time", "bytes"]:
                columns = line[1:].split()
                missing = [c for c in ("bytes", "os", "or", "g") if c not in columns]
                if missing:
                    raise fail(path, lineno, f"logp header lacks column(s) {', '.join(missing)}")
            continue
        if columns is None:
            raise fail(path, lineno, "expected the '# time bytes os ...' header before data")
        fields = line.split()
        if len(fields) != len(columns):
            raise fail(path, lineno, f"expected {len(columns)} columns ({' '.join(columns)}), "
                       f"found {len(fields)}")
        record = dict(zip(columns, fields, strict=True))
        if start is None and record.get("time", "").isdigit():
            start = record["time"]
        size = parse_size(path, lineno, record["bytes"])
        for column, op, stat in _MAP:
            if column in record:
                rows.add(op, size, parse_time(path, lineno, record[column], column), seq, stat=stat)
        seq += 1
    if len(rows) == 0:
        raise fail(path, None, "no logp parameter line found")
    if latency_row is not None:
        rows.add("latency", 0, latency_row[1], seq, stat="mean")
    return ParsedRun(tool="logp", sources=[path], rows=rows.frame(), start=_iso(start))


def _iso(epoch: str | None) -> str | None:
    """The first line's Unix time as ISO 8601 UTC (None if absent or absurd)."""
    if epoch is None:
        return None
    try:
        return dt.datetime.fromtimestamp(int(epoch), dt.UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return None


class LogP(Tool):
    """logp_mpi parameter files: per-size means and minima with confidence intervals."""

    name = "logp"
    description = "logp_mpi parameter files (logp_test.out.*): aggregates"
    order = 40
    sniff_order = HELP_CHECK_ORDER + 30

    def sniff(self, path: Path, lines: list[str]) -> bool:
        if looks_like(lines):
            return True
        if looks_like_verbose_log(lines):
            raise fail(path, None, "this is logp_test's -verbose console log; it repeats the "
                       "parameter file", "ingest the parameter file logp_test.out.* instead")
        return False

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = LogP()
