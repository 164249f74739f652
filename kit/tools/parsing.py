"""What every parser returns, and the small helpers they share.

A parser turns one measurement run (a file, or a file plus its companions) into a
:class:`ParsedRun`: tidy rows without the campaign/run/tool/transport columns, which the
orchestrator adds, plus whatever run metadata the tool printed. Parsers raise
:class:`~kit.core.errors.IngestError` naming the file and line for anything they cannot read,
so one bad file never takes the others down with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kit.core.errors import IngestError

#: Columns a parser produces (the orchestrator adds campaign, run_id, tool, transport).
ROW_COLUMNS: dict[str, pl.DataType] = {
    "op": pl.String(),
    "size": pl.UInt64(),
    "time": pl.Float64(),
    "seq": pl.UInt32(),
    "stat": pl.String(),
    "n": pl.UInt32(),
    "warmup": pl.Boolean(),
}

#: Largest message size we accept: anything bigger is a parse accident, not a message.
MAX_SIZE = 1 << 48
#: Largest time per row we accept (one day); larger values mean a wrong unit or corruption.
MAX_TIME_S = 86_400.0

US = 1e-6


#: One part file's rows: a frame, or a function that makes it on the writer's thread (the
#: probe's slices are parsed there, beside the next slice's hashing).
Frame = pl.DataFrame | pl.LazyFrame | Callable[[], pl.DataFrame | pl.LazyFrame]


def make_frame(frame: Frame) -> pl.DataFrame | pl.LazyFrame:
    """The frame an item of ``ParsedRun.rows`` stands for (a callable one is made here, on
    the caller's thread)."""
    return frame() if callable(frame) else frame


@dataclass
class ParsedRun:
    """One run as read from its files; the orchestrator turns it into dataset rows."""

    tool: str
    sources: list[Path]
    #: The rows, or (large inputs) an iterator of frames, each written as its own part file.
    #: A lazy frame is parsed while it is written; ``explain`` then names what is wrong.
    #: A callable frame is made on the writer's thread.
    rows: pl.DataFrame | Iterator[Frame]
    tool_version: str | None = None
    mpi_version: str | None = None
    hosts: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    job_id: str | None = None
    start: str | None = None
    end: str | None = None
    complete: bool | None = True
    transport_hint: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: Why ``complete`` is False, for runs.parquet's ``incomplete_reason`` ("; "-joined).
    incomplete_reason: str | None = None
    #: For lazy frames: the error for rows that fail to parse or come out with a null ``op``
    #: (the parser's contract for invalid values), found only when the frame is written.
    explain: Callable[[], IngestError] | None = None

    def mark_incomplete(self, reason: str, warning: str | None = None) -> None:
        """Record that the run stopped early, why (runs.parquet), and warn the user."""
        self.complete = False
        self.incomplete_reason = (reason if not self.incomplete_reason
                                  else f"{self.incomplete_reason}; {reason}")
        if warning is not None:
            self.warnings.append(warning)
    #: The placement the campaign planned (job.json), checked against ``hosts`` at ingest.
    placement: str | None = None
    #: An application run's program, arguments and rank count (tool app; a series key).
    program: str = ""
    #: CPU and socket (physical package) of each rank, rank order, when the tool recorded them.
    cpus: list[int] = field(default_factory=list)
    sockets: list[int] = field(default_factory=list)
    #: each rank's CPU when measuring ended (probe meta ``ranks[].cpu_end``)
    cpus_end: list[int] = field(default_factory=list)
    #: sample order (``shuffled`` | ``blocked``), when the tool says (else the tool's own)
    order: str | None = None
    #: the node's load etc. around the run (``conditions`` of job.json) and the binding
    conditions: dict[str, Any] | None = None
    binding: str | None = None
    #: The ranks of the run's first pair (initiator, peer) when they are not 0 and 1: in the
    #: probe's contention mode ranks 0 and 1 are two initiators, often on one node.
    pair_ranks: tuple[int, int] | None = None
    #: SHA-256 (hex) of sources the parser read whole while its rows were written (the
    #: probe's samples file): the orchestrator takes the run id from them instead of
    #: reading the file a second time. Set once the last frame has been taken.
    digests: dict[Path, str] = field(default_factory=dict)
    #: Called by the orchestrator with the number of rows written, before the run is
    #: recorded: a parser that knows how many rows there should be checks them here.
    check_rows: Callable[[int], None] | None = None
    #: The run's identity beyond its bytes (kit.tools.identity.of): a longer copy of
    #: the same run replaces a shorter one. None: identified by its bytes alone.
    identity: str | None = None
    #: {host, pid, program} of the process writing the files, when the tool recorded one
    #: and no end time (kit.tools.identity.live_writer asks whether it still runs).
    writer: dict[str, Any] | None = None


class Companion(Exception):
    """The file is read together with ``primary`` and contributes nothing on its own."""

    def __init__(self, primary: Path, reason: str) -> None:
        self.primary = primary
        self.reason = reason
        super().__init__(reason)


class Rows:
    """Accumulates tidy rows column by column (cheaper than a list of dicts)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in ROW_COLUMNS}

    def add(self, op: str, size: int, time: float, seq: int, *, stat: str = "raw",
            n: int = 1, warmup: bool = False) -> None:
        c = self.cols
        c["op"].append(op)
        c["size"].append(size)
        c["time"].append(time)
        c["seq"].append(seq)
        c["stat"].append(stat)
        c["n"].append(n)
        c["warmup"].append(warmup)

    def __len__(self) -> int:
        return len(self.cols["op"])

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.cols, schema=ROW_COLUMNS)


def fail(path: Path, line: int | None, message: str, hint: str | None = None) -> IngestError:
    """An IngestError located at ``path:line`` (line 1-based; None for the whole file)."""
    where = f"{path}:{line}" if line is not None else str(path)
    return IngestError(message, where=where, hint=hint)


#: No tool writes a line this long: a longer one is not a tool output (a 1 GB single-line
#: file once made the CSV reader take 24 GB).
MAX_LINE_BYTES = 1 << 20
#: Text outputs read whole (OSU, SkaMPI, logp, ReproMPI, netgauge, calibration) are at most
#: this large; the probe's and plain CSV files, which can be huge, are read in blocks.
MAX_TEXT_BYTES = 256 << 20
#: Bytes of whole lines per block of :func:`line_blocks` (its memory budget, with one line).
BLOCK_BYTES = 16 << 20
_BOM = b"\xef\xbb\xbf"
_LONG_LINE = re.compile(b"[^\n]{%d}" % (MAX_LINE_BYTES + 1))
_LONG_TEXT_LINE = re.compile(b"[^\n\r]{%d}" % (MAX_LINE_BYTES + 1))
_NOT_TEXT = "pass only text outputs of the supported tools"


def _too_long(path: Path, line: int) -> IngestError:
    return fail(path, line, f"a line longer than {MAX_LINE_BYTES >> 20} MiB: not the output "
                "of a supported tool", _NOT_TEXT)


def read_text(path: Path) -> list[str]:
    """The file's lines (any of \\n, \\r\\n, \\r ends a line; a byte order mark is
    dropped); undecodable bytes, NUL bytes, a line over :data:`MAX_LINE_BYTES` or a file over
    :data:`MAX_TEXT_BYTES` are an IngestError naming the line."""
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise fail(path, None, f"the file is {size:,} bytes, more than the "
                       f"{MAX_TEXT_BYTES >> 20} MiB a text output of this tool can be", _NOT_TEXT)
        with open(path, "rb") as fh:
            data = fh.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise fail(path, None, f"cannot read the file ({exc.strerror})") from None
    long_line = _LONG_TEXT_LINE.search(data)  # before decoding: no copy of a huge line
    if long_line is not None:
        raise _too_long(path, data.count(b"\n", 0, long_line.start()) + 1)
    try:
        text = data.removeprefix(_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise fail(path, line, "the file is not UTF-8 text", _NOT_TEXT) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise fail(path, line, "the file contains NUL bytes (a binary or corrupted file)",
                   _NOT_TEXT)
    return text.splitlines()


def line_blocks(path: Path, *, skip_header: bool = True) -> Iterator[tuple[int, bytes]]:
    """(line number of the block's first line, whole lines) of ``path`` in blocks of about
    :data:`BLOCK_BYTES`, streamed: memory stays at a block whatever the file's size.

    Line ends are made ``\\n`` (``\\r\\n`` and a lone ``\\r`` too: CR-only files once made
    Polars abort the process), a byte order mark is dropped, the header line is skipped when
    asked, a line over :data:`MAX_LINE_BYTES` and a NUL byte are IngestErrors at their line.
    """
    line = 1
    carry = b""
    first = True  # the file's first read (a byte order mark is dropped from it)
    header = skip_header  # the header line is still to be skipped
    cr_pending = False
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(BLOCK_BYTES)
            eof = not chunk
            if first:
                chunk, first = chunk.removeprefix(_BOM), False
            if cr_pending and chunk.startswith(b"\n"):
                chunk = chunk[1:]  # the \n of a \r\n cut between two reads
            cr_pending = chunk.endswith(b"\r")
            data = carry + chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if b"\x00" in data:
                raise fail(path, line + data[: data.index(b"\x00")].count(b"\n"),
                           "the file contains NUL bytes (a binary or corrupted file)", _NOT_TEXT)
            end = len(data) if eof else data.rfind(b"\n") + 1
            whole, carry = data[:end], data[end:]
            if len(carry) > MAX_LINE_BYTES:
                raise _too_long(path, line + whole.count(b"\n"))
            if whole and header:
                cut = whole.find(b"\n") + 1 or len(whole)
                if cut > MAX_LINE_BYTES:
                    raise _too_long(path, 1)
                whole, line, header = whole[cut:], 2, False
            if whole:
                found = _LONG_LINE.search(whole)
                if found is not None:
                    raise _too_long(path, line + whole.count(b"\n", 0, found.start()))
                yield line, whole
                line += whole.count(b"\n") + (0 if whole.endswith(b"\n") else 1)
            if eof:
                return


def parse_size(path: Path, line: int, token: str, what: str = "message size") -> int:
    """A non-negative integer size in bytes."""
    if not token.isdigit():
        raise fail(path, line, f"expected the {what} as a non-negative integer, found {token!r}")
    value = int(token)
    if value > MAX_SIZE:
        raise fail(path, line, f"{what} {value} is implausibly large (more than 2^48 bytes)")
    return value


def parse_count(path: Path, line: int, token: str, what: str) -> int:
    """A positive integer that fits a u32 (repetition counts and the like)."""
    if not token.isdigit() or not 0 < int(token) < 2**32:
        raise fail(path, line, f"expected {what} as a positive integer, found {token!r}")
    return int(token)


def parse_time(path: Path, line: int, token: str, what: str, scale: float = 1.0) -> float:
    """A finite non-negative duration, multiplied by ``scale`` to get seconds."""
    try:
        value = float(token)
    except ValueError:
        raise fail(path, line, f"expected {what} as a number, found {token!r}") from None
    if not math.isfinite(value) or value < 0:
        raise fail(path, line, f"expected {what} as a finite non-negative number, found {token!r}")
    seconds = value * scale
    if seconds > MAX_TIME_S:
        raise fail(path, line, f"{what} {token} is implausibly large (more than a day)")
    return seconds


def require_rows(path: Path, rows: Rows, what: str) -> None:
    """A file that parsed but held no measurement is an error, not an empty success."""
    if len(rows) == 0:
        raise fail(path, None, f"no {what} found in the file",
                   "check that the run finished and wrote its results")


_TRANSPORT_WORDS = (
    ("tcp", "tcp"), ("eth", "tcp"), ("sockets", "tcp"),
    ("vader", "shm"), ("shm", "shm"), ("loopback", "shm"), ("sm", "shm"),
    ("ib", "ib"), ("ucx", "ib"), ("verbs", "ib"), ("openib", "ib"), ("infiniband", "ib"),
    ("opa", "opa"), ("psm2", "opa"), ("ofi", "ofi"),
)


def transport_from_name(*names: str) -> str | None:
    """A transport named by a word of a file or folder name (``osu_bw_tcp_7.4`` -> tcp).

    Only whole words separated by ``_ - . /`` count, so "smp" or "tcpdump" do not match.
    """
    for name in names:
        words = [w for w in re.split(r"[_\-./\s]+", name.lower()) if w]
        for word, transport in _TRANSPORT_WORDS:
            if word in words:
                return transport
    return None


def transport_from_env(env: dict[str, str], hosts: list[str] | None = None) -> str | None:
    """The transport selected by the MPI environment variables the probe recorded.

    Both ranks on one host with a shared-memory component enabled means shared memory,
    whatever network components are also listed (MPI prefers shared memory on-node).
    """
    low = {k: v.lower() for k, v in env.items()}
    btl = low.get("OMPI_MCA_btl", "")
    tls = low.get("UCX_TLS", "")
    provider = low.get("FI_PROVIDER", "")
    fabrics = low.get("I_MPI_FABRICS", "")
    words = {w.strip("^ ") for v in (btl, tls, provider, fabrics) for w in v.replace(
        ":", ",").split(",") if w.strip()}
    if btl.startswith("^"):
        words = set()
    shm = {"self", "vader", "sm", "shm", "posix", "sysv", "cma", "knem", "xpmem"}
    same_host = bool(hosts) and len(set(hosts or [])) == 1
    if same_host and words & (shm - {"self"}):
        return "shm"
    for candidates, transport in (
        ({"tcp", "sockets"}, "tcp"),
        ({"rc", "ud", "dc", "rc_x", "ud_x", "dc_x", "rc_verbs", "ud_verbs", "openib", "verbs",
          "mlx", "ib"}, "ib"),
        ({"psm2", "opa"}, "opa"),
    ):
        if words & candidates:
            return transport
    if words and words <= shm:
        return "shm"
    return None


_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def safe_name(name: str) -> str:
    """A campaign/transport name usable as a hive partition value (no '/', '=', spaces)."""
    cleaned = _SAFE.sub("_", name).strip("._") or "unknown"
    return cleaned[:120]
