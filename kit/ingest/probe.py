"""The kit's own probe: ``PREFIX.samples.csv`` + ``PREFIX.meta.json`` (docs/architecture.md).

Probe runs can hold tens of millions of samples, so the CSV is read in blocks of whole
lines (8 MiB; Polars parses each block), and the tidy rows are handed to the orchestrator
in frames of about a million rows, each becoming one Parquet part file. Memory stays
bounded whatever the run's length (Polars' own streaming CSV source holds most of the
file in memory on this version, see BENCHMARKS.md). Invalid values do not raise inside
Polars; they turn ``op`` null, and only then :func:`locate_error` re-reads the CSV line by
line to name the first bad line. The fast path therefore reads the file once.

Mapping (one CSV row -> one dataset row, plus one for isend/irecv):

| probe op | dataset op | time | stat | n |
|---|---|---|---|---|
| pingpong | pingpong | time / 2 (round trip -> one-way) | raw | 1 |
| send, recv | same | time | raw | 1 |
| isend, irecv | same | time (initiating call + wait) | raw | 1 |
| isend, irecv | isend_call, irecv_call | call (the initiating call alone) | raw | 1 |
| stream | stream | time / count (per message) | mean | count |

A last line without its newline is a line the probe was killed while writing: it is
dropped with a warning and the run is marked incomplete.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from kit.errors import IngestError
from kit.ingest.common import MAX_SIZE, MAX_TIME_S, ROW_COLUMNS, ParsedRun, fail

HEADER = "seq,op,size,count,time,call,warmup"
COLUMNS = HEADER.split(",")
OPS = ("pingpong", "send", "recv", "isend", "irecv", "stream")
SUFFIX = ".samples.csv"
META_SUFFIX = ".meta.json"

_CSV_SCHEMA = {"seq": pl.Int64, "op": pl.String, "size": pl.Int64, "count": pl.Int64,
               "time": pl.Float64, "call": pl.Float64, "warmup": pl.Int64}


def looks_like(first_line: str) -> bool:
    return first_line.strip() == HEADER


def meta_path(samples: Path) -> Path:
    name = samples.name
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else samples.stem
    return samples.with_name(stem + META_SUFFIX)


def samples_path(meta: Path) -> Path:
    return meta.with_name(meta.name[: -len(META_SUFFIX)] + SUFFIX)


#: Bytes read per block, and rows per yielded frame (one Parquet part file each).
BLOCK_BYTES = 8 << 20
FRAME_ROWS = 1 << 20


def parse(path: Path) -> ParsedRun:
    _check_header(path)
    meta_file = meta_path(path)
    meta = _read_meta(meta_file) if meta_file.is_file() else None
    ops = meta.get("ops") if meta else None
    with_calls = not isinstance(ops, list) or bool({"isend", "irecv"} & set(map(str, ops)))
    run = ParsedRun(tool="probe", sources=[path], rows=pl.DataFrame(), complete=None)
    run.rows = _frames(path, run, with_calls=with_calls)
    if meta is None:
        run.warnings.append(f"{path.name}: no {meta_file.name} beside it; run metadata unknown")
        return run
    run.sources.append(meta_file)
    _apply_meta(meta_file, meta, run)
    return run


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as fh:
            first = fh.readline()
    except OSError as exc:
        raise fail(path, None, f"cannot read the file ({exc.strerror})") from None
    if first.rstrip(b"\r\n").decode("utf-8", "replace") != HEADER:
        raise fail(path, 1, f"expected the probe header '{HEADER}'")


def _frames(path: Path, run: ParsedRun, *, with_calls: bool) -> Iterator[pl.DataFrame]:
    """Tidy frames of about FRAME_ROWS rows; marks the run incomplete on a torn last line."""
    pending: list[pl.DataFrame] = []
    pending_rows = 0
    with path.open("rb") as fh:
        fh.readline()  # header, checked by parse()
        rest = b""
        while block := fh.read(BLOCK_BYTES):
            data = rest + block
            cut = data.rfind(b"\n") + 1
            data, rest = data[:cut], data[cut:]
            if len(rest) > BLOCK_BYTES:
                raise fail(path, None, f"a line longer than {BLOCK_BYTES >> 20} MiB: not a "
                           "probe samples file (or a corrupted one)")
            if not data:
                continue
            frame = _parse_block(path, data, with_calls)
            pending.append(frame)
            pending_rows += frame.height
            if pending_rows >= FRAME_ROWS:
                yield pl.concat(pending)
                pending, pending_rows = [], 0
    if rest.strip():
        run.complete = False
        run.warnings.append(f"{path.name}: truncated last line dropped (the probe was stopped "
                            "while writing it); run marked incomplete")
    if pending:
        yield pl.concat(pending)


def _parse_block(path: Path, data: bytes, with_calls: bool) -> pl.DataFrame:
    try:
        raw = pl.read_csv(data, schema=_CSV_SCHEMA, has_header=False,
                          truncate_ragged_lines=False, raise_if_empty=False)
        frame = _tidy(raw.lazy(), with_calls=with_calls).collect()
    except (pl.exceptions.PolarsError, ValueError):
        raise locate_error(path) from None
    if frame["op"].null_count():
        raise locate_error(path)
    return frame


def _tidy(lf: pl.LazyFrame, *, with_calls: bool = True) -> pl.LazyFrame:
    """Probe rows -> dataset rows in one streaming pass.

    isend/irecv rows carry two values (total and initiating call): with ``with_calls``,
    ops and times are built as 1- or 2-element lists and exploded, so the CSV is still read
    once. Runs whose meta.json lists no isend/irecv skip the lists (about 20 % faster).
    Every invalid value (or missing field) makes ``op`` null; the orchestrator checks op's
    null count after writing.
    """
    op = pl.col("op")
    valid = (
        pl.col("seq").is_between(0, 2**32 - 1) & op.is_in(OPS)
        & pl.col("size").is_between(0, MAX_SIZE) & pl.col("count").is_between(1, 2**32 - 1)
        & pl.col("time").is_between(0.0, MAX_TIME_S) & pl.col("warmup").is_in([0, 1])
        & (pl.col("call").is_null() | pl.col("call").is_between(0.0, MAX_TIME_S))
    ).fill_null(False)
    time = (pl.when(op == "pingpong").then(pl.col("time") / 2)
            .when(op == "stream").then(pl.col("time") / pl.col("count"))
            .otherwise(pl.col("time")))
    common = {
        "size": pl.col("size").cast(pl.UInt64, strict=False),
        "seq": pl.col("seq").cast(pl.UInt32, strict=False),
        "stat": pl.when(op == "stream").then(pl.lit("mean")).otherwise(pl.lit("raw")),
        "n": pl.col("count").cast(pl.UInt32, strict=False),
        "warmup": pl.col("warmup").cast(pl.Boolean, strict=False),
    }
    if not with_calls:
        # an isend/irecv row here would lose its call value: flag it like any invalid row
        plain = valid & ~op.is_in(["isend", "irecv"])
        return lf.select(op=pl.when(plain).then(op), time=time, **common).cast(ROW_COLUMNS)
    has_call = op.is_in(["isend", "irecv"]) & pl.col("call").is_not_null()
    return lf.select(
        op=pl.when(~valid).then(None)
        .when(has_call).then(pl.concat_list(op, op + "_call"))
        .otherwise(pl.concat_list(op)),
        time=pl.when(has_call).then(pl.concat_list(time, pl.col("call")))
        .otherwise(pl.concat_list(time)),
        **common,
    ).explode("op", "time").cast(ROW_COLUMNS)


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
            next(reader, None)
            for index, fields in enumerate(reader):
                problem = _check_fields(fields)
                if problem is None and fields[1].strip() not in listed:
                    problem = (f"op {fields[1].strip()!r} is not among the ops listed in "
                               f"{meta_file.name} ({', '.join(sorted(listed))})")
                if problem:
                    return fail(path, index + 2, problem,
                                f"each line must be '{HEADER}' values (docs/architecture.md)")
    except UnicodeDecodeError:
        return fail(path, None, "the file is not UTF-8 text")
    except csv.Error as exc:
        return fail(path, None, f"malformed CSV ({exc})")
    return fail(path, None, "the samples could not be read although every line looks valid",
                "report this as a bug with the file attached")


def _check_fields(fields: list[str]) -> str | None:
    if len(fields) != len(COLUMNS):
        return f"expected {len(COLUMNS)} columns ({HEADER}), found {len(fields)}"
    seq, op, size, count, time, call, warmup = (f.strip() for f in fields)
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
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise fail(path, None, f"cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise fail(path, None, "the meta file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise fail(path, exc.lineno, f"invalid JSON ({exc.msg})",
                   "a probe killed before its end writes the meta file again at start-up; "
                   "re-run or remove the broken file") from None
    if not isinstance(meta, dict):
        raise fail(path, 1, "expected a JSON object with the probe's run metadata")
    return meta


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _apply_meta(path: Path, meta: dict[str, Any], run: ParsedRun) -> None:
    hosts = meta.get("hosts")
    env = meta.get("env")
    if hosts is not None and not isinstance(hosts, list):
        raise fail(path, None, "'hosts' must be a list of host names in rank order")
    if env is not None and not isinstance(env, dict):
        raise fail(path, None, "'env' must be an object of environment variables")
    run.tool_version = _text(meta.get("probe_version"))
    run.mpi_version = _text(meta.get("mpi_version"))
    run.hosts = [str(h) for h in hosts or []]
    run.env = {str(k): str(v) for k, v in (env or {}).items()}
    run.job_id = _text(meta.get("slurm_job_id"))
    run.start = _text(meta.get("start"))
    run.end = _text(meta.get("end"))
    complete = meta.get("complete")
    if complete is not True:
        run.complete = False
        run.warnings.append(f"{path.name}: the probe did not mark the run complete")
    elif run.complete is None:
        run.complete = True
    run.transport_hint = transport_from_env(run.env, run.hosts)


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
