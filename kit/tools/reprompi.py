"""ReproMPI ``mpibenchmark`` output: raw, summary and verbose (per-process) tables.

All three start with ``#Command-Line Arguments:`` and ``#@key=value`` lines, then one
table whose header names the columns. ``WARNING:`` lines may appear anywhere (the tool
interleaves them with data) and are ignored.

* raw (``test nrep msize_bytes [errorcode] runtime_sec``): one row per repetition, the
  round trip of ``Send_Recv`` in seconds -> op ``pingpong``, stat ``raw``, time / 2.
* summary (``test msize_bytes total_nrep valid_nrep <stat>_sec ...``): one row per printed
  statistic (mean, median, min, max, ...) -> stat = that name, n = valid_nrep, time / 2.
* verbose ``-v`` (``process test nrep msize_bytes errorcode loc_tstart_sec loc_tend_sec ...``):
  the first ping-pong rank's ``loc_tend - loc_tstart`` is the round trip -> raw, time / 2.

Repetitions whose ``errorcode`` is not 0 are the ones ReproMPI itself declares invalid
(the window-based synchronisation missed its slot); they are not stored, and the
report's warnings say how many were dropped. Operations other than ``Send_Recv`` are
rejected: they are not point-to-point ping-pongs.
"""

from __future__ import annotations

from pathlib import Path

from kit.tools.base import HELP_CHECK_ORDER, Tool
from kit.tools.parsing import (
    ParsedRun,
    Rows,
    fail,
    parse_count,
    parse_size,
    parse_time,
    read_text,
)

_PINGPONG_CALLS = {"Send_Recv"}


def looks_like(lines: list[str]) -> bool:
    first = next((line for line in lines if not line.startswith("WARNING:")), "")
    return first.startswith("#Command-Line Arguments:") and "mpibenchmark" in first


def _without_warnings(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, text) with ReproMPI's WARNING lines removed.

    The warnings go to stderr and may land in the middle of a stdout line
    (``SendWARNING: ... (vm)`` then ``_Recv  67 ...``): the text before the warning is
    glued back onto the next line, which is where the rest of the stdout line went.
    """
    out: list[tuple[int, str]] = []
    carry = ""
    for lineno, line in enumerate(lines, 1):
        cut = line.find("WARNING:")
        if cut >= 0:
            carry += line[:cut]
            continue
        out.append((lineno, carry + line))
        carry = ""
    if carry:
        out.append((len(lines), carry))
    return out


def parse(path: Path) -> ParsedRun:
    lines = read_text(path)
    header: list[str] | None = None
    meta: dict[str, str] = {}
    rows = Rows()
    dropped = 0
    for lineno, raw in _without_warnings(lines):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("ERROR:"):
            raise fail(path, lineno, f"ReproMPI reported an error: {line[6:].strip()}",
                       "this is an error capture, not a measurement; fix the run and re-run it")
        if line.startswith("#@") and "=" in line:
            key, _, value = line[2:].partition("=")
            meta[key.strip()] = value.strip()
            continue
        if line.startswith("#"):
            continue
        fields = line.split()
        if header is None:
            if "test" not in fields or "msize_bytes" not in fields:
                raise fail(path, lineno, "expected the ReproMPI table header "
                           "('test ... msize_bytes ...'), found " + repr(line[:60]))
            header = fields
            continue
        if len(fields) != len(header):
            raise fail(path, lineno, f"expected {len(header)} columns ({' '.join(header)}), "
                       f"found {len(fields)}")
        if fields == header:  # some versions repeat the header per call
            continue
        record = dict(zip(header, fields, strict=True))
        if record["test"] not in _PINGPONG_CALLS:
            raise fail(path, lineno, f"ReproMPI test '{record['test']}' is not a ping-pong",
                       "only Send_Recv with --pingpong-ranks can be ingested")
        if not _row(path, lineno, header, record, meta, rows):
            dropped += 1
    if header is None:
        raise fail(path, None, "no ReproMPI result table found",
                   "the run probably failed; look for ERROR lines in its output")
    if len(rows) == 0:
        raise fail(path, None, "the ReproMPI table has no valid row")
    warnings = []
    if dropped:
        warnings.append(f"{path.name}: {dropped} repetition(s) with a non-zero errorcode "
                        "(invalid per ReproMPI) were not stored")
    mpi_version = meta.get("mpi_version") or meta.get("MPI_version")
    return ParsedRun(tool="reprompi", sources=[path], rows=rows.frame(),
                     tool_version=_commit(meta), mpi_version=mpi_version, warnings=warnings)


def _row(path: Path, lineno: int, header: list[str], record: dict[str, str],
         meta: dict[str, str], rows: Rows) -> bool:
    """Add the row(s) of one table line; False if ReproMPI marked the line invalid."""
    size = parse_size(path, lineno, record["msize_bytes"])
    first_rank = meta.get("pingpong_ranks", "0").split(",")[0].strip()
    if "process" in record and record["process"] != first_rank:
        return True  # the other rank's view of the same exchange: not a new sample
    if "errorcode" in record:
        code = record["errorcode"]
        if not code.lstrip("-").isdigit():
            raise fail(path, lineno, f"expected an integer errorcode, found {code!r}")
        if int(code) != 0:
            return False
    seq = len(rows)
    if "runtime_sec" in record:
        rtt = parse_time(path, lineno, record["runtime_sec"], "runtime_sec")
        rows.add("pingpong", size, rtt / 2, seq)
        return True
    if "loc_tstart_sec" in record and "loc_tend_sec" in record:
        t0 = parse_time(path, lineno, record["loc_tstart_sec"], "loc_tstart_sec")
        t1 = parse_time(path, lineno, record["loc_tend_sec"], "loc_tend_sec")
        if t1 < t0:
            raise fail(path, lineno, "loc_tend_sec is before loc_tstart_sec")
        rows.add("pingpong", size, (t1 - t0) / 2, seq)
        return True
    stats = [c for c in header if c.endswith("_sec")]
    if not stats or "valid_nrep" not in record:
        raise fail(path, lineno, "expected runtime_sec, loc_tstart_sec/loc_tend_sec, or "
                   "summary columns '<stat>_sec' with valid_nrep")
    n = parse_count(path, lineno, record["valid_nrep"], "valid_nrep")
    for column in stats:
        rtt = parse_time(path, lineno, record[column], column)
        rows.add("pingpong", size, rtt / 2, seq, stat=column.removesuffix("_sec"), n=n)
        seq += 1
    return True


def _commit(meta: dict[str, str]) -> str | None:
    sha = meta.get("reproMPIcommitSHA1")
    return f"ReproMPI {sha}" if sha else "ReproMPI"


class ReproMPI(Tool):
    """ReproMPI ``mpibenchmark``: raw, summary and verbose tables."""

    name = "reprompi"
    description = "ReproMPI mpibenchmark output (raw, summary, verbose)"
    order = 50
    sniff_order = HELP_CHECK_ORDER + 50

    def sniff(self, path: Path, lines: list[str]) -> bool:
        return looks_like(lines)

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = ReproMPI()
