"""Plain CSV with the header ``size,duration`` (bytes, seconds; the pycewise test-data style).

One row per message, already one-way for ping-pongs, so nothing is converted: tool ``csv``,
op from ``--op`` (default ``pingpong``), stat ``raw``, seq = row order.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kit.tools.base import HELP_CHECK_ORDER, Tool
from kit.tools.parsing import MAX_SIZE, MAX_TIME_S, ROW_COLUMNS, ParsedRun, fail

HEADER = "size,duration"


def looks_like(lines: list[str]) -> bool:
    return bool(lines) and lines[0].strip().replace(" ", "") == HEADER


def parse(path: Path, op: str = "pingpong") -> ParsedRun:
    try:
        frame = pl.read_csv(path, schema={"size": pl.String, "duration": pl.String},
                            has_header=True, raise_if_empty=False)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise fail(path, None, f"cannot read as CSV 'size,duration': {_first_line(exc)}",
                   "each line must be '<bytes>,<seconds>'") from None
    size = frame["size"].str.strip_chars().cast(pl.UInt64, strict=False)
    time = frame["duration"].str.strip_chars().cast(pl.Float64, strict=False)
    bad = (size.is_null() | time.is_null() | time.is_nan() | (time < 0) | (time > MAX_TIME_S)
           | (size > MAX_SIZE))
    if bad.any():
        index = int(bad.arg_true()[0])
        raise fail(path, index + 2, "expected '<size in bytes>,<non-negative seconds>', found "
                   f"{frame['size'][index]!r},{frame['duration'][index]!r}")
    if frame.height == 0:
        raise fail(path, None, "no data line after the 'size,duration' header")
    rows = pl.DataFrame({"size": size, "time": time}).select(
        op=pl.lit(op), size="size", time="time",
        seq=pl.int_range(pl.len(), dtype=pl.UInt32), stat=pl.lit("raw"),
        n=pl.lit(1, pl.UInt32), warmup=pl.lit(False))
    return ParsedRun(tool="csv", sources=[path], rows=rows.cast(pl.Schema(ROW_COLUMNS)))


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class PlainCsv(Tool):
    """Plain ``size,duration`` CSV; the op is the user's (``--op``, default pingpong)."""

    name = "csv"
    description = "plain CSV with the header size,duration (seconds)"
    order = 70
    sniff_order = HELP_CHECK_ORDER - 20

    def sniff(self, path: Path, lines: list[str]) -> bool:
        return looks_like(lines)

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path, op or "pingpong")


TOOL = PlainCsv()
