"""The kit's own probe: ``PREFIX.samples.csv`` + ``PREFIX.meta.json`` (docs/architecture.md).

Probe runs can hold tens of millions of samples, so the CSV is mapped and cut into slices of
whole lines (16 MiB, about 0.4 M rows), hashed as they are taken; each slice is handed to the
orchestrator as a function that makes its frame on the writer's thread, one Parquet part file
each. Memory stays bounded whatever the run's length (Polars' streaming CSV source given the
whole file keeps all of it resident, see BENCHMARKS.md). A slice of the probe's own layout is
parsed and tidied by the compiled ``_probe_rows`` (:func:`_fast_frame`); any other (an odd
float, a bad value) becomes a lazy frame that Polars' streaming engine parses, tidies and
writes. Invalid values do not raise inside Polars; they turn ``op`` null
(the orchestrator checks each written part), and only then :func:`locate_error` re-reads the
CSV line by line to name the first bad line. The file is therefore read once.

Mapping (one CSV row -> one dataset row, plus one for isend/irecv):

| probe op | dataset op | time | stat | n |
|---|---|---|---|---|
| pingpong | pingpong | time / 2 (round trip -> one-way) | raw | 1 |
| send, recv | same | time | raw | 1 |
| isend, irecv | same | time (initiating call + wait) | raw | 1 |
| isend, irecv | isend_call, irecv_call | call (the initiating call alone) | raw | 1 |
| stream | stream | time / count: the window's per-message gap g | raw | count |

A ``stream`` row is one measurement of one window (``count`` back-to-back messages timed
from the first ``MPI_Isend`` until the receiver's zero-byte ack): its ``time`` is the
per-message gap ``g = window time / count`` of that window (LogGP's g + (s-1)·G, plus the
ack's latency spread over the window), stored as a **raw** sample (``n`` = the window's messages)
so it can be fitted and resampled like any other series (:data:`kit.data.schema.OP_QUANTITY`).
Datasets ingested before this rule hold these rows as ``stat=mean``.

A last line without its newline is a line the probe was killed while writing: it is
dropped with a warning and the run is marked incomplete.

Contention runs (``--pairs``) have two more columns, ``pair`` and ``round``: the dataset keeps
``pair``, takes ``seq`` from ``round`` (the plan position, shared by the pairs of a round), and
stores the run's pair count (meta ``pairs``) in ``pairs``. Other runs get pairs 1, pair 0.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import json
import math
import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import polars as pl

from kit.core.checks import Checker, parse_size
from kit.core.errors import IngestError
from kit.core.paths import probe_binary
from kit.core.yamlmarks import PathKey
from kit.tools import binaries, identity
from kit.tools.base import Executable, JobParts, Sniff, Tool
from kit.tools.jobrecord import apply_job_record
from kit.tools.parsing import (
    MAX_SIZE,
    MAX_TIME_S,
    ROW_COLUMNS,
    Companion,
    Frame,
    ParsedRun,
    fail,
    transport_from_env,
)
from kit.tools.records import PROBE_META_SCHEMA, problem, read_record

_ROWS: ModuleType | None
try:  # built by setup.py; without it every slice goes through Polars' CSV reader
    import kit.tools._probe_rows as _ROWS
except ImportError:
    _ROWS = None

if TYPE_CHECKING:
    from kit.tools.base import ToolSpec

#: Meta keys of each rank's CPU and socket, lists in rank order (ParsedRun.cpus/sockets, which
#: kit.data.placement reads); absent in probes that do not record them.
META_CPUS = "cpus"
META_SOCKETS = "sockets"
HEADER = "seq,op,size,count,time,call,warmup"
HEADER_EXT = HEADER + ",pair,round"  # contention mode (--pairs)
COLUMNS = HEADER.split(",")
COLUMNS_EXT = HEADER_EXT.split(",")
OPS = ("pingpong", "send", "recv", "isend", "irecv", "stream")
SUFFIX = ".samples.csv"
META_SUFFIX = ".meta.json"

#: How Polars parses the CSV. Unsigned types and the op as an Enum make the parser itself
#: refuse a negative or overflowing number and an unknown op (the write raises and the
#: orchestrator asks :func:`locate_error` for the line), so the tidy step checks only the
#: ranges the types do not (about 0.1 s of 1 s at 10 M rows: BENCHMARKS.md).
_CSV_SCHEMA = {"seq": pl.UInt32, "op": pl.Enum(OPS), "size": pl.UInt64, "count": pl.UInt32,
               "time": pl.Float64, "call": pl.Float64, "warmup": pl.UInt8}
_CSV_SCHEMA_EXT = {**_CSV_SCHEMA, "pair": pl.UInt16, "round": pl.UInt32}
_MAX_PAIRS = 65535
#: The dataset ops of the compiled parser's op codes, in its enum's order.
_FAST_OPS = (*OPS, "isend_call", "irecv_call")


def _fmt(extended: bool) -> tuple[str, list[str], dict[str, Any]]:
    """Header, columns and CSV schema of a classic (False) or contention (True) file."""
    return (HEADER_EXT, COLUMNS_EXT, _CSV_SCHEMA_EXT) if extended else (
        HEADER, COLUMNS, _CSV_SCHEMA)


def looks_like(first_line: str) -> bool:
    return first_line.strip() in (HEADER, HEADER_EXT)


def meta_path(samples: Path) -> Path:
    name = samples.name
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else samples.stem
    return samples.with_name(stem + META_SUFFIX)


def samples_path(meta: Path) -> Path:
    return meta.with_name(meta.name[: -len(META_SUFFIX)] + SUFFIX)


#: Bytes per slice of the mapped CSV: one lazy frame, one Parquet part file each. Larger
#: slices cost memory (about 5 MiB per MiB), smaller ones a streaming pipeline start each.
BLOCK_BYTES = 16 << 20


def parse(path: Path) -> ParsedRun:
    extended = _check_header(path)
    meta_file = meta_path(path)
    meta = _read_meta(meta_file) if meta_file.is_file() else None
    ops = meta.get("ops") if meta else None
    with_calls = not isinstance(ops, list) or bool({"isend", "irecv"} & set(map(str, ops)))
    pairs = _pairs(meta_file, meta) if extended else 1
    run = ParsedRun(tool="probe", sources=[path], rows=pl.DataFrame(), complete=None,
                    explain=lambda: locate_error(path))
    written = meta.get("samples_written") if meta else None
    expected = written if isinstance(written, int) and not isinstance(written, bool) \
        and written >= 0 else None
    # An ended run's meta counts every line; a killed one's only those flushed before its
    # last meta write, so more lines than that are normal there.
    ended = meta is not None and meta.get("complete") is True
    run.rows = _frames(path, run, with_calls=with_calls, extended=extended, pairs=pairs,
                       expected=expected, ended=ended)
    if meta is None:
        run.warnings.append(f"{path.name}: no {meta_file.name} beside it; run metadata unknown")
        if extended:
            run.warnings.append(f"{path.name}: contention run without its meta: the number "
                                "of pairs is unknown and stored as 0")
    else:
        run.sources.append(meta_file)
        _apply_meta(meta_file, meta, run)
    # In a job directory, job.json's state (cancelled, timeout, unreadable...) counts too.
    return apply_job_record(run, path)


def _check_header(path: Path) -> bool:
    """True for a contention-mode file (pair and round columns), False for a classic one."""
    try:
        with path.open("rb") as fh:
            first = fh.readline()
    except OSError as exc:
        raise fail(path, None, f"cannot read the file ({exc.strerror})") from None
    header = first.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n").decode("utf-8", "replace")
    if header not in (HEADER, HEADER_EXT):
        raise fail(path, 1, f"expected the probe header '{HEADER}' (or '{HEADER_EXT}' from "
                   "a contention run)")
    return header == HEADER_EXT


def _pairs(meta_file: Path, meta: dict[str, Any] | None) -> int:
    """The run's pair count from its meta (0 when there is no meta to say)."""
    if meta is None:
        return 0
    pairs = meta.get("pairs")
    if not isinstance(pairs, int) or isinstance(pairs, bool) or not 1 <= pairs <= _MAX_PAIRS:
        raise fail(meta_file, None, f"'pairs' must be the number of concurrent pairs "
                   f"(1..{_MAX_PAIRS}), found {pairs!r}")
    return pairs


def _frames(path: Path, run: ParsedRun, *, with_calls: bool, extended: bool = False,
            pairs: int = 1, expected: int | None = None, ended: bool = False
            ) -> Iterator[Frame]:
    """Tidy frames, one per slice of BLOCK_BYTES of whole lines, each as a function the
    orchestrator's writer thread calls (:func:`_slice_frame`); marks the run incomplete
    on a torn last line, or when fewer sample lines than the meta file's ``samples_written``
    (``expected``) are there: a copy cut at a line boundary has no torn line to give it away.

    Lines are counted only where a line can make two rows (isend/irecv with their call
    times); otherwise ``run.check_rows`` compares the rows written, and ingest needs no
    numpy. The file is mapped, not read: each slice is one copy out of the mapping, and the pages
    behind it are released once it is taken. A frame's rows are parsed when the orchestrator
    writes it; where the Polars path parses them, a value that breaks the contract turns its
    ``op`` null, or (a field that is not a number) makes the write raise: either way the
    orchestrator calls ``run.explain``.
    """
    lines = 0
    rest = b""
    # The whole file is hashed as it is taken (the run id), while the orchestrator's writer
    # threads parse and write the slices before.
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        first = fh.readline()  # checked by parse()
        digest.update(first)
        header = len(first)
        size = os.fstat(fh.fileno()).st_size
        with (mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size > header
              else contextlib.nullcontext(None)) as mm:
            if mm is not None:
                start, released = header, 0
                end_of_lines = max(mm.rfind(b"\n") + 1, header)
                while start < end_of_lines:
                    stop = mm.rfind(b"\n", start, min(start + BLOCK_BYTES, end_of_lines)) + 1
                    if stop <= start:
                        raise _line_too_long(path)
                    data = mm[start:stop]
                    start = stop
                    digest.update(data)
                    # Taken pages leave this process's resident set (they stay in the page
                    # cache): without this the whole file counts as the ingest's memory.
                    done = start - start % mmap.PAGESIZE
                    if done > released:
                        mm.madvise(mmap.MADV_DONTNEED, released, done - released)
                        released = done
                    if expected is not None and with_calls:
                        lines += _count_lines(data)
                    yield functools.partial(_slice_frame, data, with_calls=with_calls,
                                            extended=extended, pairs=pairs)
                rest = mm[end_of_lines:]
            else:
                rest = fh.read()  # a file of one line has no newline after its header
    digest.update(rest)
    run.digests[path] = digest.hexdigest()
    if len(rest) > BLOCK_BYTES:
        raise _line_too_long(path)
    if rest.strip():
        run.mark_incomplete("truncated last line", f"{path.name}: truncated last line dropped "
                            "(the probe was stopped while writing it); run marked incomplete")
    if expected is None:
        return
    if with_calls:
        _check_written(run, path, lines, expected, ended)
    else:  # a row per line: the orchestrator's row count is the line count
        run.check_rows = lambda rows: _check_written(run, path, rows, expected, ended)


def _slice_frame(data: bytes, *, with_calls: bool, extended: bool, pairs: int
                 ) -> pl.DataFrame | pl.LazyFrame:
    """A slice's tidy rows (made on the orchestrator's writer thread): the compiled parser's
    frame, else a lazy frame that Polars' streaming engine parses as it writes it."""
    fast = _fast_frame(data, with_calls, extended, pairs)
    if fast is not None:
        return fast
    return _tidy(pl.scan_csv(data, schema=_fmt(extended)[2], has_header=False,
                             truncate_ragged_lines=False, raise_if_empty=False),
                 with_calls=with_calls, extended=extended, pairs=pairs)


def _fast_frame(data: bytes, with_calls: bool, extended: bool = False, pairs: int = 1
                ) -> pl.DataFrame | None:
    """A slice's tidy rows by the compiled parser (``_probe_rows.c``), or None: not built, or
    a line outside the subset it takes, which the Polars path then parses (with its nulls and
    messages for a bad line).

    Why: Polars' general CSV reader was two thirds of the CPU of a CSV -> Parquet conversion;
    the probe writes one layout, which the kernel parses at a fraction of that and into the
    same values (its floats by Clinger's exact fast path, as a correctly rounded parser
    gives them; the tests hold both paths to the same frames).
    """
    if _ROWS is None:
        return None
    import numpy as np  # only here: an ingest without probe rows does not need it

    cap = _ROWS.lines(data) * (2 if with_calls else 1)
    cols = {"op": np.empty(cap, np.uint8), "time": np.empty(cap), "size": np.empty(cap, np.uint64),
            "seq": np.empty(cap, np.uint32), "n": np.empty(cap, np.uint32),
            "warmup": np.empty(cap, np.uint8),
            "pair": np.empty(cap if extended else 0, np.uint16)}
    rows = _ROWS.parse(data, with_calls, extended, MAX_SIZE, MAX_TIME_S, tuple(cols.values()))
    if rows < 0:
        return None
    # op and stat as the Categoricals the part file stores: a gather of the op names by
    # code, and one value repeated (casting 0.4 M strings took 8-14 ms a column)
    ops = pl.Series("op", _FAST_OPS, dtype=pl.Categorical())
    stat = pl.Series("stat", ["raw"], dtype=pl.Categorical())
    out = [ops.gather(pl.Series(cols["op"][:rows])), pl.Series("time", cols["time"][:rows]),
           pl.Series("size", cols["size"][:rows]), pl.Series("seq", cols["seq"][:rows]),
           stat.new_from_index(0, rows), pl.Series("n", cols["n"][:rows]),
           pl.Series("warmup", cols["warmup"][:rows].view(np.bool_))]
    if extended:
        out += [pl.Series("pairs", [pairs], dtype=pl.UInt16).new_from_index(0, rows),
                pl.Series("pair", cols["pair"][:rows])]
    return pl.DataFrame(out)


def _check_written(run: ParsedRun, path: Path, lines: int, expected: int,
                   ended: bool = False) -> None:
    """Fewer sample lines than the meta file's ``samples_written``: a truncated copy; more,
    in a run the probe ended: not this run alone (a file concatenated with itself was one
    complete run at double the rows)."""
    if ended and lines > expected:
        raise fail(path, None, f"{lines} sample lines but the meta file says the probe wrote "
                   f"{expected}: the file holds more than this run (two runs concatenated?)",
                   "ingest each run's own samples file with its own meta file")
    if lines < expected:
        run.mark_incomplete(
            f"{lines} of {expected} samples (output cut short)",
            f"{path.name}: {lines} sample lines but the meta file says the probe wrote "
            f"{expected} (a truncated copy?); run marked incomplete")


def _count_lines(data: bytes) -> int:
    """Newlines in ``data``: numpy's vector compare, 1 MiB at a time, is 5x bytes.count."""
    if len(data) < 1 << 20:
        return data.count(b"\n")
    import numpy as np

    view = memoryview(data)
    step = 1 << 20
    return sum(int(np.count_nonzero(np.frombuffer(view[i:i + step], np.uint8) == 10))
               for i in range(0, len(data), step))


def _line_too_long(path: Path) -> IngestError:
    return fail(path, None, f"a line longer than {BLOCK_BYTES >> 20} MiB: not a probe samples "
                "file (or a corrupted one)")


def _tidy(lf: pl.LazyFrame, *, with_calls: bool = True, extended: bool = False,
          pairs: int = 1) -> pl.LazyFrame:
    """Probe rows -> dataset rows in one streaming pass.

    isend/irecv rows carry two values (total and initiating call): with ``with_calls``,
    ops and times are built as 1- or 2-element lists and exploded, so the CSV is still read
    once. Runs whose meta.json lists no isend/irecv skip the lists (about 20 % faster).
    Every invalid value (or missing field) makes ``op`` null; the orchestrator checks op's
    null count after writing.
    """
    op = pl.col("op")
    # seq, op, pair and round are whole by their CSV types (see _CSV_SCHEMA)
    valid = (
        (pl.col("size") <= MAX_SIZE) & (pl.col("count") >= 1)
        & pl.col("time").is_between(0.0, MAX_TIME_S) & (pl.col("warmup") <= 1)
        & (pl.col("call").is_null() | pl.col("call").is_between(0.0, MAX_TIME_S))
    ).fill_null(False)
    if extended:
        valid = valid & (pl.col("pair") < _MAX_PAIRS).fill_null(False)
    time = (pl.when(op == "pingpong").then(pl.col("time") / 2)
            .when(op == "stream").then(pl.col("time") / pl.col("count"))
            .otherwise(pl.col("time")))
    common = {
        "size": pl.col("size"),
        "seq": pl.col("seq"),
        "stat": pl.lit("raw"),  # a stream row is one window's measurement, see above
        "n": pl.col("count"),
        "warmup": pl.col("warmup").cast(pl.Boolean),
    }
    extra = {}
    if extended:  # seq becomes the round: the plan position, as in classic runs
        common["seq"] = pl.col("round")
        extra = {"pairs": pl.lit(pairs, pl.UInt16), "pair": pl.col("pair")}
    # op goes out as the Categorical the part file stores (cast once, from the Enum)
    out = pl.Schema({**ROW_COLUMNS, "op": pl.Categorical()})
    if not with_calls:
        # an isend/irecv row here would lose its call value: flag it like any invalid row
        plain = valid & ~op.is_in(["isend", "irecv"])
        return lf.select(op=pl.when(plain).then(op), time=time, **common, **extra).cast(out)
    has_call = op.is_in(["isend", "irecv"]) & pl.col("call").is_not_null()
    name = op.cast(pl.String)
    return lf.select(
        op=pl.when(~valid).then(None)
        .when(has_call).then(pl.concat_list(name, name + "_call"))
        .otherwise(pl.concat_list(name)),
        time=pl.when(has_call).then(pl.concat_list(time, pl.col("call")))
        .otherwise(pl.concat_list(time)),
        **common, **extra,
    ).explode("op", "time").cast(out)


def locate_error(path: Path) -> IngestError:
    """The first line of a probe CSV that breaks the contract (slow path, errors only)."""
    meta_file = meta_path(path)
    ops = None
    if meta_file.is_file():
        with contextlib.suppress(IngestError):
            ops = _read_meta(meta_file).get("ops")
    listed = set(map(str, ops)) if isinstance(ops, list) else set(OPS)
    try:
        with path.open(newline="", encoding="utf-8", errors="strict") as fh:
            reader = csv.reader(fh)
            extended = next(reader, None) == COLUMNS_EXT
            header = HEADER_EXT if extended else HEADER
            for index, fields in enumerate(reader):
                problem = _check_fields(fields, extended)
                if problem is None and fields[1].strip() not in listed:
                    problem = (f"op {fields[1].strip()!r} is not among the ops listed in "
                               f"{meta_file.name} ({', '.join(sorted(listed))})")
                if problem:
                    return fail(path, index + 2, problem,
                                f"each line must be '{header}' values (docs/architecture.md)")
    except UnicodeDecodeError:
        return fail(path, None, "the file is not UTF-8 text")
    except csv.Error as exc:
        return fail(path, None, f"malformed CSV ({exc})")
    return fail(path, None, "the samples could not be read although every line looks valid",
                "report this as a bug with the file attached")


def _check_fields(fields: list[str], extended: bool = False) -> str | None:
    header, columns, _ = _fmt(extended)
    if len(fields) != len(columns):
        return f"expected {len(columns)} columns ({header}), found {len(fields)}"
    seq, op, size, count, time, call, warmup = (f.strip() for f in fields[:7])
    if extended:
        pair, rnd = (f.strip() for f in fields[7:])
        if not pair.isdigit() or int(pair) >= _MAX_PAIRS:
            return f"expected pair as an integer in 0..{_MAX_PAIRS - 1}, found {pair!r}"
        if not rnd.isdigit() or int(rnd) >= 2**32:
            return f"expected round as a non-negative integer, found {rnd!r}"
    if not seq.isdigit() or int(seq) >= 2**32:
        return f"expected seq as a non-negative integer, found {seq!r}"
    if op not in OPS:
        return f"expected op in {', '.join(OPS)}, found {op!r}"
    if not size.isdigit() or int(size) > MAX_SIZE:
        return f"expected size in bytes (non-negative integer), found {size!r}"
    if not count.isdigit() or not 1 <= int(count) < 2**32:
        return f"expected count as a positive integer, found {count!r}"
    for name, token, optional in (("time", time, False), ("call", call, True)):
        if optional and token == "":
            continue
        try:
            value = float(token)
        except ValueError:
            return f"expected {name} in seconds as a number, found {token!r}"
        if not (math.isfinite(value) and 0 <= value <= MAX_TIME_S):
            return f"expected {name} as finite non-negative seconds, found {token!r}"
    if warmup not in ("0", "1"):
        return f"expected warmup 0 or 1, found {warmup!r}"
    return None


def _read_meta(path: Path) -> dict[str, Any]:
    meta, why = read_record(path)
    if why is not None:
        raise fail(path, None, f"the meta file {why}",
                   "a probe killed before its end writes the meta file again at start-up; "
                   "re-run or remove the broken file")
    if not isinstance(meta, dict):
        raise fail(path, 1, "expected a JSON object with the probe's run metadata")
    return meta


def _text(value: Any) -> str | None:
    """A scalar as text; None for null and for a list/object in a damaged meta file."""
    return str(value) if isinstance(value, str | int | float) else None


def _apply_meta(path: Path, meta: dict[str, Any], run: ParsedRun) -> None:
    bad = problem(meta, PROBE_META_SCHEMA)
    if bad is not None:
        # The samples are fine; the metadata is not trusted: keep what has the right type,
        # mark the run incomplete and say which field was wrong.
        run.mark_incomplete(f"meta file invalid: {path.name}: {bad}",
                            f"{path.name}: {bad}; the run is marked incomplete and that "
                            "field is ignored")
    hosts = meta.get("hosts")
    env = meta.get("env")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        hosts = None
    if not isinstance(env, dict):
        env = None
    run.tool_version = _text(meta.get("probe_version"))
    run.mpi_version = _text(meta.get("mpi_version"))
    run.hosts = [str(h) for h in hosts or []]
    run.env = {str(k): str(v) for k, v in (env or {}).items()}
    run.job_id = _text(meta.get("slurm_job_id"))
    run.start = _text(meta.get("start"))
    run.end = _text(meta.get("end"))
    complete = meta.get("complete") if bad is None else False
    if complete is not True and bad is None:
        reason = meta.get("stop_reason")
        run.mark_incomplete(f"probe stop reason: {reason}" if isinstance(reason, str)
                            else "the probe did not mark the run complete",
                            f"{path.name}: the probe did not mark the run complete")
    elif complete is True and run.complete is None:
        run.complete = True
    run.transport_hint = transport_from_env(run.env, run.hosts)
    # Who the run is beyond its bytes, and who (if anyone) is still writing it.
    run.identity = identity.of("probe", plan_hash=_text(meta.get("plan_hash")),
                               start=run.start, hosts=run.hosts, seed=_text(meta.get("seed")),
                               pairing=json.dumps(meta.get("pairing")))
    if run.end is None and complete is not True and "writer_pid" in meta:
        # a probe that records its writer (older ones do not: their runs count as ended)
        pid = meta.get("writer_pid")
        run.writer = {"host": run.hosts[0] if run.hosts else None,
                      "pid": pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                      "program": "pt2pt-probe"}
    run.cpus = _int_list(meta.get(META_CPUS))
    run.sockets = _int_list(meta.get(META_SOCKETS))
    run.pair_ranks = _first_pair(meta.get("pairing"))
    order = meta.get("order")
    run.order = order if order in ("shuffled", "blocked") else None
    ranks = meta.get("ranks")
    if isinstance(ranks, list) and all(isinstance(r, dict) for r in ranks):
        run.cpus_end = _int_list([r.get("cpu_end") for r in ranks])
    k = meta.get("pairs")
    if run.pair_ranks is None and isinstance(k, int) and not isinstance(k, bool) and k > 1:
        run.pair_ranks = (0, k)  # no pairing recorded: the probe's default, rank i with i + K


def _first_pair(value: Any) -> tuple[int, int] | None:
    """Ranks (initiator, peer) of pair 0 from the meta's ``pairing``; None when absent or
    malformed (placement then falls back to ranks 0 and 1, right for two-rank runs)."""
    if not isinstance(value, list) or not value:
        return None
    first = _int_list(value[0])
    if len(first) != 2 or min(first) < 0 or first[0] == first[1]:
        return None
    return first[0], first[1]


def _int_list(value: Any) -> list[int]:
    """A rank-ordered list of ints (CPU or socket numbers), or [] if absent or malformed."""
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return []
    return [int(v) for v in value]


# --- campaign: the options of a `- tool: probe` entry, the binary, the command ----------

_SIZE = r"\d+[KMG]?"
_SIZES_RE = re.compile(
    rf"^(loguniform:{_SIZE}:{_SIZE}|grid:{_SIZE}:{_SIZE}:\d+(\.\d+)?|list:{_SIZE}(,{_SIZE})*"
    rf"|cluster:{_SIZE})$")
#: Sizes of the cluster plan per part: the latency window (1 B..1 KiB), the size range
#: between, the bandwidth window (the top two octaves up to MAX).
CLUSTER_WINDOW_SIZES = 8
CLUSTER_MIDDLE_SIZES = 6


def cluster_sizes(size_max: int) -> list[int]:
    """The size list of ``sizes: cluster:MAX``: a campaign over many node pairs.

    The cluster model (``pt2pt cluster``) reads a pair's latency from sizes up to 1 KiB and
    its bandwidth from the slope over the top two octaves; a log-uniform plan puts a tenth
    of its samples in the second. This one puts eight sizes in each window and six between
    (for the population's regimes), so every visit of a pair has about a third of its
    samples in each window; the probe measures each size ``samples`` times, shuffled.
    """
    top = max(int(size_max), 4096)

    def geom(lo: float, hi: float, n: int) -> list[float]:
        return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]

    parts = (geom(1, 1024, CLUSTER_WINDOW_SIZES),
             geom(2048, max(top / 8, 4096), CLUSTER_MIDDLE_SIZES),
             geom(top / 4, top, CLUSTER_WINDOW_SIZES))
    return sorted({round(v) for part in parts for v in part})


_SIZE_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
#: The probe's limits on ``--sizes`` (kit/probe/options.c): the specification's length, the
#: entries of a list, and the largest message (an MPI count is a C int).
MAX_SPEC_CHARS = 8191
MAX_LIST_SIZES = 4096
MAX_MESSAGE = 2**31 - 1


def _bytes_or_none(text: str) -> int | None:
    """parse_bytes of options.c: digits, an optional K/M/G (either case), within 64 bits."""
    mult = _SIZE_SUFFIX.get(text[-1:].upper(), 1) if text else 1
    digits = text[:-1] if mult != 1 else text
    if not digits.isdigit() or not digits.isascii():
        return None
    value = int(digits) * mult
    return value if value < 2**64 else None


def size_spec_problem(spec: str) -> str | None:
    """Why the probe would refuse ``--sizes SPEC`` (the same rules as its options.c, plus the
    largest MPI message), or None. Plan checks a campaign's sizes with it, so a job never
    fails on sizes the plan accepted."""
    usage = "use loguniform:MIN:MAX, grid:MIN:MAX:FACTOR or list:A,B,C (bytes, suffixes K/M/G)"
    if len(spec) > MAX_SPEC_CHARS:
        return f"the specification is longer than {MAX_SPEC_CHARS} characters"
    kind, _, rest = spec.partition(":")
    fields = rest.split(":") if rest else []
    if kind in ("loguniform", "grid"):
        if len(fields) != (3 if kind == "grid" else 2):
            return f"wrong number of fields; {usage}"
        lo, hi = _bytes_or_none(fields[0]), _bytes_or_none(fields[1])
        if lo is None or hi is None:
            return "MIN and MAX must be byte counts like 0, 512, 64K or 4M (below 2^64)"
        if lo > hi:
            return f"MIN ({lo}) > MAX ({hi}); give MIN <= MAX"
        if kind == "grid":
            try:
                factor = float(fields[2])
            except ValueError:
                factor = math.nan
            if not (factor > 1.0 and math.isfinite(factor)):
                return "FACTOR must be a number > 1, e.g. 2 or 1.5"
    elif kind == "list":
        if len(fields) != 1 or not fields[0]:
            return usage
        items = fields[0].split(",")
        if len(items) > MAX_LIST_SIZES:
            return f"more than {MAX_LIST_SIZES} sizes in the list"
        values = [_bytes_or_none(item) for item in items]
        if None in values:
            bad = items[values.index(None)]
            return f"'{bad}' is not a byte count like 0, 512, 64K or 4M"
        hi = max(v for v in values if v is not None)
    else:
        return f"unknown kind '{kind}'; {usage}"
    if hi > MAX_MESSAGE:
        return (f"the largest message ({hi} B) exceeds {MAX_MESSAGE} B, the largest MPI int "
                "count; lower MAX")
    return None


def _options(ck: Checker, entry: dict[str, Any], path: PathKey) -> dict[str, Any]:
    ops = ck.choices(entry.get("ops", ["pingpong"]), (*path, "ops"), OPS, "probe op")
    sizes = ck.text(entry.get("sizes", "loguniform:0:4M"), (*path, "sizes"), pattern=_SIZES_RE,
                    hint="write loguniform:MIN:MAX, grid:MIN:MAX:FACTOR, list:A,B,C or "
                         "cluster:MAX (sizes in bytes, suffix K/M/G allowed)")
    kind, _, rest = sizes.partition(":")
    if kind == "cluster":
        sizes = "list:" + ",".join(map(str, cluster_sizes(parse_size(rest))))
    samples = entry.get("samples", 1000)
    if kind in ("loguniform", "grid"):
        lo, hi = (parse_size(p) for p in rest.split(":")[:2])
        if lo > hi:
            raise ck.fail((*path, "sizes"), f"MIN {lo} is larger than MAX {hi}",
                          "swap the two bounds")
    why = size_spec_problem(sizes)  # the probe's own rules: a job never fails on them
    if why is not None:
        raise ck.fail((*path, "sizes"), f"the probe would refuse sizes '{sizes[:60]}"
                      f"{'...' if len(sizes) > 60 else ''}': {why}",
                      "fix the size specification")
    return {
        "ops": list(ops),
        "sizes": sizes,
        # auto: as many as a multi-pair campaign's budget allows (kit.measure.campaign.pairplan)
        "samples": 0 if samples == "auto" else ck.integer(samples, (*path, "samples"), 1,
                                                          10_000_000),
        "warmup": ck.integer(entry.get("warmup", 20), (*path, "warmup"), 0, 1_000_000),
        "max_seconds": ck.integer(entry.get("max_seconds", 0), (*path, "max_seconds"),
                                  0, 10_000_000),
        "timer": ck.text(entry.get("timer", "mpi"), (*path, "timer"),
                         pattern=re.compile(r"^(mpi|monotonic)$"), hint="use mpi or monotonic"),
        # sample order: shuffled (the kit's design) or blocked (each size's repetitions back
        # to back, as OSU sweeps: what a like-for-like cross-check with OSU needs)
        "order": ck.text(entry.get("order", "shuffled"), (*path, "order"),
                         pattern=re.compile(r"^(shuffled|blocked)$"),
                         hint="use shuffled (default) or blocked"),
        "extra_args": _extra_args(ck, entry.get("extra_args", []), (*path, "extra_args")),
        "concurrent_pairs": _concurrent(ck, entry.get("concurrent_pairs"),
                                        (*path, "concurrent_pairs")),
    }


#: Probe options a campaign may pass through ``extra_args``: how it measures, never where it
#: writes (``--output``) or what the campaign's own keys say (ops, sizes, seed, order...).
EXTRA_ARGS = ("--flush-every", "--fsync-interval", "--window", "--inject-delay-us",
              "--repeat-fraction", "--repeat-count")
EXTRA_FLAGS = ("--bidirectional",)


def _extra_args(ck: Checker, value: Any, path: PathKey) -> list[str]:
    words = list(ck.text_list(value, path))
    i = 0
    while i < len(words):
        name = words[i].split("=", 1)[0]
        if name in EXTRA_FLAGS:
            i += 1
            continue
        if name not in EXTRA_ARGS:
            raise ck.fail((*path, i), f"'{words[i]}' is not a probe option extra_args may set "
                          "(outputs go to the job folder; ops, sizes, samples, seed, warmup, "
                          "timer, order and max_seconds have their own keys)",
                          f"use the entry's own keys, or one of {', '.join(EXTRA_ARGS)}, "
                          f"{', '.join(EXTRA_FLAGS)}")
        if "=" not in words[i]:
            if i + 1 >= len(words) or words[i + 1].startswith("--"):
                raise ck.fail((*path, i), f"'{words[i]}' needs a value",
                              f"write e.g. [{words[i]}, \"64\"]")
            i += 1
        i += 1
    return words


def _concurrent(ck: Checker, value: Any, path: PathKey) -> list[int]:
    """``concurrent_pairs: [1, 2, 4]``: the probe's contention mode (``--pairs K``, 2K ranks)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    ks = [ck.integer(v, (*path, i), 1, 64) for i, v in enumerate(items)]
    if not ks or len(set(ks)) != len(ks):
        raise ck.fail(path, "list each number of concurrent pairs once",
                      "write e.g. concurrent_pairs: [1, 2, 4]")
    return ks


def find_probe(view: Path | None = None) -> Path | None:
    """The probe the jobs will run: ``PT2PT_PROBE``, then the deployment (the Spack view,
    then ``pt2pt-probe`` on PATH), and only then the planning checkout's own build, which
    compute nodes see only when the checkout sits on a shared filesystem."""
    if os.environ.get("PT2PT_PROBE"):
        return Path(os.environ["PT2PT_PROBE"]).absolute()
    if view is not None and binaries.executable(view / "bin" / "pt2pt-probe"):
        return view / "bin" / "pt2pt-probe"
    found = binaries.which("pt2pt-probe")
    if found is not None:
        return found
    path = probe_binary()
    return path.resolve() if path is not None else None


def _probe_command(spec: ToolSpec, probe: Path, seed: int, job_dir: Path,
                   k: int = 0) -> list[str]:
    o = spec.options
    cmd = [str(probe), "--op", ",".join(o["ops"]), "--sizes", o["sizes"],
           "--samples", str(o["samples"]), "--seed", str(seed), "--warmup", str(o["warmup"]),
           "--timer", o["timer"], "--output", str(job_dir / "probe")]
    if k:
        cmd += ["--pairs", str(k)]
    if o["max_seconds"]:
        cmd += ["--max-seconds", str(o["max_seconds"])]
    if o.get("order", "shuffled") != "shuffled":
        cmd += ["--order", o["order"]]
    return cmd + list(o["extra_args"])


class Probe(Tool):
    """The kit's own probe (kit/probe): raw samples of every op."""

    name = "probe"
    description = "pt2pt-probe: raw per-message samples (PREFIX.samples.csv + meta.json)"
    order = 10
    option_keys = ("ops", "sizes", "samples", "warmup", "max_seconds", "timer", "extra_args",
                   "concurrent_pairs", "order")
    template = "probe.sbatch.j2"
    sniff_order = 10

    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        return _options(ck, entry, path)

    def find(self, what: str, view: Path) -> Path | None:
        return find_probe(view)

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        return [Executable(None, "pt2pt-probe", "the probe (pt2pt-probe)",
                           "build it with 'make -C kit/probe' or set PT2PT_PROBE",
                           find_probe(view))]

    def concurrency(self, spec: ToolSpec) -> list[int]:
        return list(spec.options.get("concurrent_pairs") or [0])

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        return JobParts(template="probe.sbatch.j2", command=[str(binary)],
                        outputs=["probe.samples.csv"], meta_file="probe.meta.json")

    def command(self, spec: ToolSpec, command: list[str], *, seed: int, job_dir: Path,
                k: int = 0) -> list[str]:
        return _probe_command(spec, Path(command[0]), seed, job_dir, k)

    def record_ops(self, spec: ToolSpec) -> list[str] | None:
        return list(spec.options["ops"])

    def sniffers(self) -> list[tuple[int, Sniff]]:
        # the samples file first; a meta.json alone is looked at after every other format
        return [(self.sniff_order, self.sniff), (100, self._lone_meta)]

    def sniff(self, path: Path, lines: list[str]) -> bool:
        return looks_like(lines[0] if lines else "")

    def _lone_meta(self, path: Path, lines: list[str]) -> bool:
        first = lines[0] if lines else ""
        if first.lstrip().startswith("{") and path.name.endswith(META_SUFFIX):
            samples = samples_path(path)
            if samples.is_file():
                raise Companion(samples, f"read with {samples.name}")
            raise fail(path, None, f"probe metadata without its samples file {samples.name}",
                       "ingest the PREFIX.samples.csv; its meta.json is read with it")
        return False

    def companions(self, path: Path) -> list[Path]:
        meta = meta_path(path)
        return [meta] if meta.is_file() else []

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = Probe()
