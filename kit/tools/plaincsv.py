"""Plain CSV with the header ``size,duration`` (bytes, seconds; the pycewise test-data style).

One row per message, already one-way for ping-pongs, so nothing is converted: tool ``csv``,
op from ``--op`` (default ``pingpong``), stat ``raw``, seq = row order.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from kit.tools.base import HELP_CHECK_ORDER, Tool
from kit.tools.parsing import (
    MAX_SIZE,
    MAX_TIME_S,
    ROW_COLUMNS,
    ParsedRun,
    fail,
    line_blocks,
)

HEADER = "size,duration"


def looks_like(lines: list[str]) -> bool:
    return bool(lines) and lines[0].strip().replace(" ", "") == HEADER


def parse(path: Path, op: str = "pingpong") -> ParsedRun:
    """The file as frames of about BLOCK_BYTES of lines each (streamed: a file of any size
    costs a block of memory; CR-only and CRLF line ends and a byte order mark are fine)."""
    run = ParsedRun(tool="csv", sources=[path], rows=pl.DataFrame())
    run.rows = _frames(path, op)
    return run


def _frames(path: Path, op: str) -> Iterator[pl.DataFrame]:
    seq = 0
    try:
        for first, block in line_blocks(path):
            frame = _block(path, first, block)
            rows = pl.DataFrame({"size": frame["size"], "time": frame["time"]}).select(
                op=pl.lit(op), size="size", time="time",
                seq=pl.int_range(seq, seq + pl.len(), dtype=pl.UInt32), stat=pl.lit("raw"),
                n=pl.lit(1, pl.UInt32), warmup=pl.lit(False))
            seq += rows.height
            yield rows.cast(pl.Schema(ROW_COLUMNS))
    except OSError as exc:
        raise fail(path, None, f"cannot read the file ({exc.strerror})") from None
    if seq == 0:
        raise fail(path, None, "no data line after the 'size,duration' header")


def _block(path: Path, first: int, block: bytes) -> pl.DataFrame:
    """size (UInt64) and time (Float64) of a block of whole lines; a bad line is an error
    naming it (``first`` is the block's first line number)."""
    try:
        frame = pl.read_csv(io.BytesIO(block), has_header=False,
                            schema={"size": pl.String, "duration": pl.String},
                            raise_if_empty=False)
    except pl.exceptions.PolarsError as exc:
        for k, line in enumerate(block.split(b"\n")):
            if line and line.count(b",") != 1:
                raise fail(path, first + k, "expected '<size in bytes>,<non-negative "
                           f"seconds>', found {line[:80].decode('utf-8', 'replace')!r}") from None
        raise fail(path, None, f"cannot read as CSV 'size,duration': {_first_line(exc)}",
                   "each line must be '<bytes>,<seconds>'") from None
    size = frame["size"].str.strip_chars().cast(pl.UInt64, strict=False)
    time = frame["duration"].str.strip_chars().cast(pl.Float64, strict=False)
    bad = (size.is_null() | time.is_null() | time.is_nan() | (time < 0) | (time > MAX_TIME_S)
           | (size > MAX_SIZE))
    if bad.any():
        index = int(bad.arg_true()[0])
        raise fail(path, first + index, "expected '<size in bytes>,<non-negative seconds>', "
                   f"found {frame['size'][index]!r},{frame['duration'][index]!r}")
    return pl.DataFrame({"size": size, "time": time})


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
