"""SimGrid platform-calibration CSVs (``<prefix>_{PingPong,Isend,Recv,Test,Iprobe,Wtime}.csv``).

No header; columns ``op, msg_size_bytes, start_time_s, duration_s``; every row is one call.

* ``PingPong``: rows come in pairs, ``MPI_Send`` then ``MPI_Recv`` with the same start time,
  both timed on the initiating rank; the round trip is Send + Recv, so each pair becomes one
  row of op ``pingpong`` with time = (Send + Recv) / 2 (one-way).
* the other files: one row per call, op = the MPI call in lower case without ``MPI_``
  (``isend``, ``recv``, ``test``, ``iprobe``, ``wtime``), time = duration as measured.

Rows are stored in file order (the calibration shuffles sizes), ``seq`` = pair/row index.
The file is read with Polars (the PingPong files have ~66,000 lines).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from kit.tools.base import HELP_CHECK_ORDER, Tool
from kit.tools.parsing import MAX_SIZE, MAX_TIME_S, ROW_COLUMNS, ParsedRun, fail, read_text

_LINE = re.compile(r"^MPI_[A-Za-z]+,\d+,[-+0-9.eE]+,[-+0-9.eE]+$")
_SUFFIX = re.compile(r"_(PingPong|Isend|Recv|Test|Iprobe|Wtime)\.csv$")


def looks_like(lines: list[str]) -> bool:
    return bool(lines) and bool(_LINE.match(lines[0].strip()))


def parse(path: Path) -> ParsedRun:
    lines = read_text(path)
    calls: list[str] = []
    sizes: list[int] = []
    durations: list[float] = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        fields = line.split(",")
        if len(fields) != 4:
            raise fail(path, lineno, "expected 4 comma-separated columns (op, msg_size_bytes, "
                       f"start_time_s, duration_s), found {len(fields)}")
        call, size, _start, duration = fields
        if not call.startswith("MPI_") or not call[4:].isalpha():
            raise fail(path, lineno, f"expected an MPI call name like MPI_Send, found {call!r}")
        if not size.isdigit() or int(size) > MAX_SIZE:
            raise fail(path, lineno, f"expected the message size in bytes, found {size!r}")
        try:
            value = float(duration)
            float(_start)
        except ValueError:
            raise fail(path, lineno, "expected numeric start_time_s and duration_s") from None
        if not 0 <= value <= MAX_TIME_S:  # also rejects nan
            raise fail(path, lineno, f"expected a non-negative duration in seconds, found "
                       f"{duration!r}")
        calls.append(call)
        sizes.append(int(size))
        durations.append(value)
    if not calls:
        raise fail(path, None, "empty calibration file")
    frame = pl.DataFrame({"call": calls, "size": sizes, "time": durations},
                         schema={"call": pl.String, "size": pl.UInt64, "time": pl.Float64})
    if {"MPI_Send", "MPI_Recv"} <= set(calls[:2]) and calls[0] == "MPI_Send":
        rows = _pingpong(path, frame)
    else:
        rows = frame.select(
            op=pl.col("call").str.strip_prefix("MPI_").str.to_lowercase(),
            size="size", time="time",
            seq=pl.int_range(pl.len(), dtype=pl.UInt32),
            stat=pl.lit("raw"), n=pl.lit(1, pl.UInt32), warmup=pl.lit(False))
    return ParsedRun(tool="calibration", sources=[path], rows=rows.cast(pl.Schema(ROW_COLUMNS)))


def _pingpong(path: Path, frame: pl.DataFrame) -> pl.DataFrame:
    """Send/Recv pairs -> one one-way row per pair; any broken pair is a located error."""
    if frame.height % 2:
        raise fail(path, frame.height, "odd number of rows: the last MPI_Send has no MPI_Recv")
    sends = frame.gather_every(2, 0)
    recvs = frame.gather_every(2, 1)
    bad = (sends["call"] != "MPI_Send") | (recvs["call"] != "MPI_Recv") | (
        sends["size"] != recvs["size"])
    if bad.any():
        pair = int(bad.arg_true()[0])
        raise fail(path, 2 * pair + 1, "expected an MPI_Send row followed by an MPI_Recv row "
                   "of the same size (one ping-pong)")
    return pl.DataFrame({
        "op": "pingpong",
        "size": sends["size"],
        "time": (sends["time"] + recvs["time"]) / 2,
        "seq": pl.int_range(sends.height, dtype=pl.UInt32, eager=True),
        "stat": "raw",
        "n": pl.Series([1] * sends.height, dtype=pl.UInt32),
        "warmup": False,
    })


def prefix_of(path: Path) -> str | None:
    """The calibration prefix of a file name (``taurus`` for ``taurus_Recv.csv``)."""
    match = _SUFFIX.search(path.name)
    return path.name[: match.start()] if match else None


class Calibration(Tool):
    """SimGrid platform-calibration CSVs (raw timings of each call)."""

    name = "calibration"
    description = "SimGrid platform-calibration CSVs (<prefix>_PingPong.csv, ...)"
    order = 60
    sniff_order = HELP_CHECK_ORDER - 10  # a CSV: cannot be mistaken for a help text

    def sniff(self, path: Path, lines: list[str]) -> bool:
        return looks_like(lines)

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = Calibration()
