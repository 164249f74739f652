"""The probe CSV's compiled parser (kit/tools/_probe_rows.c) gives the Polars path's rows.

It takes a strict subset of what the Polars path takes: every slice it takes (classic or
contention mode) must come out exactly as ``probe._tidy`` over Polars' CSV reader makes it
(same ops, same floats to the bit), and every slice it declines must be one the Polars path
then handles (the fallback keeps the nulls and the line-naming messages). The probe's own
output format must be in the subset, or the speed it exists for silently goes. Like the
mixture kernels, it is optional at install time but built wherever this suite runs
(``make venv``, the Containerfile): its absence is a failure, not a skip.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from kit.data.ingest.orchestrate import parse_file, write_part
from kit.tools import probe
from kit.tools.parsing import MAX_SIZE, MAX_TIME_S
from tests.built import extension


@pytest.fixture(autouse=True, scope="module")
def _built() -> None:
    assert probe._ROWS is extension("kit.tools._probe_rows")


def polars_path(data: bytes, with_calls: bool, extended: bool = False,
                pairs: int = 1) -> pl.DataFrame:
    schema = probe._CSV_SCHEMA_EXT if extended else probe._CSV_SCHEMA
    lf = pl.scan_csv(data, schema=schema, has_header=False, truncate_ragged_lines=False,
                     raise_if_empty=False)
    return probe._tidy(lf, with_calls=with_calls, extended=extended, pairs=pairs).collect()


def same_rows(fast: pl.DataFrame, slow: pl.DataFrame) -> None:
    # the fast frame's stat is already the part file's Categorical; values are compared
    assert_frame_equal(fast, slow.with_columns(pl.col("stat").cast(pl.Categorical())),
                       check_exact=True)


def probe_float(x: float) -> str:
    """A time as the probe writes it (output.c: %.9e)."""
    return f"{x:.9e}"


def probe_lines(rng: random.Random, n: int, ops: tuple[str, ...]) -> bytes:
    out = []
    for seq in range(n):
        op = rng.choice(ops)
        size = rng.choice([0, 1, rng.randrange(1, 1 << 22), MAX_SIZE])
        count = rng.randrange(1, 65) if op == "stream" else 1
        t = rng.choice([0.0, 1e-13, rng.lognormvariate(-11, 2), MAX_TIME_S])
        # the probe's timings lie in [1e-13, 1e9) s (output.c), or are 0
        call = probe_float(max(t * rng.random(), 1e-13)) if op in ("isend", "irecv") else ""
        out.append(f"{seq},{op},{size},{count},{probe_float(t)},{call},{int(seq < 3)}\n")
    return "".join(out).encode()


@pytest.mark.parametrize("with_calls", [False, True])
def test_the_probes_own_format_takes_the_fast_path(with_calls: bool) -> None:
    rng = random.Random(7)
    ops = probe.OPS if with_calls else ("pingpong", "send", "recv", "stream")
    data = probe_lines(rng, 3000, ops)
    fast = probe._fast_frame(data, with_calls)
    assert fast is not None
    same_rows(fast, polars_path(data, with_calls))
    if with_calls:  # the isend/irecv rows made their *_call rows
        assert fast.height > 3000 and "isend_call" in fast["op"].to_list()


@pytest.mark.parametrize("with_calls", [False, True])
def test_contention_runs_take_the_fast_path(with_calls: bool) -> None:
    """pair and round after warmup: the round becomes seq, the run's pair count a column."""
    rng = random.Random(11)
    ops = probe.OPS if with_calls else ("pingpong", "send", "recv", "stream")
    lines = probe_lines(rng, 2000, ops).decode().splitlines()
    data = "".join(f"{line},{i % 4},{i // 4}\n" for i, line in enumerate(lines)).encode()
    fast = probe._fast_frame(data, with_calls, True, 4)
    assert fast is not None
    same_rows(fast, polars_path(data, with_calls, True, 4))
    assert fast["seq"].max() == 499 and fast["pairs"].unique().to_list() == [4]


@pytest.mark.parametrize(("tail", "taken"), [
    (",0,0", True), (",65534,4294967295", True),
    (",65535,0", False),  # a pair number the dataset keeps for "none"
    (",0,4294967296", False), (",0", False), (",0,0,0", False), (",-1,0", False), ("", False),
])
def test_contention_edges(tail: str, taken: bool) -> None:
    data = f"0,pingpong,8,1,1.000000000e-06,,0,1,0\n1,send,8,1,1e-06,,0{tail}\n".encode()
    fast = probe._fast_frame(data, True, True, 2)
    assert (fast is not None) == taken
    if fast is not None:
        same_rows(fast, polars_path(data, True, True, 2))


def test_polars_own_float_format_takes_the_fast_path() -> None:
    """benchmarks/bench_ingest.py writes its CSV with Polars (2.696368148e-6: no padding)."""
    frame = pl.DataFrame({"seq": [0, 1, 2], "op": ["pingpong", "send", "stream"],
                          "size": [1, 2, 3], "count": [1, 1, 8],
                          "time": [2.696368148e-6, 3.1e-5, 0.125], "call": [None, None, None],
                          "warmup": [1, 0, 0]}, schema_overrides={"call": pl.Float64})
    data = frame.write_csv(float_scientific=True, float_precision=9,
                           include_header=False).encode()
    fast = probe._fast_frame(data, False)
    assert fast is not None
    same_rows(fast, polars_path(data, False))


# (line, taken by the fast path): values at the edges of each column's range and the float
# forms either side of the exact fast path
EDGES = [
    ("0,pingpong,0,1,0.0,,0", True),
    ("007,send,010,1,1,,01", True),
    ("4294967295,recv,281474976710656,4294967295,86400,,1", True),
    ("1,send,1,1,1.5E+02,,0", True),
    ("1,send,1,1,5e-0,,0", True),
    ("1,send,1,1,0.000000000000000001234,,0", True),  # 1234e-21
    ("1,send,1,1,0.000000000000000000001234,,0", False),  # 1234e-24
    ("1,send,1,1,9007199254740993e-22,,0", False),  # mantissa above 2^53
    ("1,send,1,1,1234567890123456789012,,0", False),  # more digits than the fast path
    ("1,send,1,1,1e-23,,0", False),  # beyond 10^22 either way
    ("1,send,1,1,1.,,0", False),
    ("1,send,1,1,.5,,0", False),
    ("1,send,1,1,+1.5,,0", False),
    ("1,send,1,1,-1.5,,0", False),
    ("1,send,1,1,nan,,0", False),
    ("1,send,1,1,inf,,0", False),
    ("1,send,1,1,86400.000001,,0", False),  # a day is the most a row may take
    ("4294967296,send,1,1,1,,0", False),
    ("1,send,281474976710657,1,1,,0", False),
    ("1,send,1,0,1,,0", False),
    ("1,send,1,1,1,,2", False),
    ("1,sendx,1,1,1,,0", False),
    ("1,Send,1,1,1,,0", False),
    ("1,isend,1,1,1,-1,0", False),
    ("1,send,1,1,1,,0,", False),
    ("1,send,1,1,1,0", False),
    ("1,send,1,1,1,,0\r", False),
    ("1,send, 1,1,1,,0", False),
    ("", False),
]


@pytest.mark.parametrize(("line", "taken"), EDGES)
def test_edges(line: str, taken: bool) -> None:
    data = f"0,pingpong,8,1,1.000000000e-06,,0\n{line}\n".encode()
    fast = probe._fast_frame(data, True)
    assert (fast is not None) == taken
    if fast is not None:
        same_rows(fast, polars_path(data, True))


def test_isend_without_calls_is_left_to_the_polars_path() -> None:
    """A run whose meta lists no isend/irecv: such a row is invalid there (its call would be
    lost), which the Polars path reports."""
    assert probe._fast_frame(b"0,isend,8,1,1e-06,5e-07,0\n", False) is None
    assert probe._fast_frame(b"0,isend,8,1,1e-06,5e-07,0\n", True) is not None


def mostly(valid: st.SearchStrategy[str], invalid: list[str]) -> st.SearchStrategy[str]:
    """A field valid 14 times in 15, so that whole lines often are."""
    return st.integers(0, 14).flatmap(lambda k: valid if k else st.sampled_from(invalid))


# the probe's own form, short decimal forms, and Python's shortest repr (often 17 digits,
# past the fast path: declined, not misread)
TIMES = st.one_of(st.just("0.000000000e+00"), st.floats(1e-13, 1e9).map(probe_float),
                  st.floats(0, MAX_TIME_S).map(lambda x: f"{x:.6g}"),
                  st.floats(0, 1e-3).map(lambda x: f"{x:.6f}"), st.floats(0, MAX_TIME_S).map(repr))
FIELDS = {
    "seq": mostly(st.sampled_from(["0", "1", "42", "007", "4294967295"]),
                  ["4294967296", "-1", "", "x", "1.0"]),
    "op": mostly(st.sampled_from(probe.OPS), ["isend_call", "ping", "", "PINGPONG", "send "]),
    "size": mostly(st.sampled_from(["0", "8", "65536", str(MAX_SIZE)]),
                   [str(MAX_SIZE + 1), "1.5", "", "1e3", "-8"]),
    "count": mostly(st.sampled_from(["1", "64", "4294967295"]), ["0", "", "4294967296"]),
    "time": mostly(TIMES, ["", "1e", "1e+", "0x10", "1_0", "1e-22", "1e22", "9" * 20, "1.0.0",
                           repr(2 * MAX_TIME_S), "nan", "-0.0", "1e-400"]),
    "call": mostly(st.one_of(st.just(""), TIMES), ["-0", "1e9", "x", "-5e-07"]),
    "warmup": mostly(st.sampled_from(["0", "1", "01"]), ["2", "", "true", "-1"]),
}


@given(st.lists(st.fixed_dictionaries(FIELDS), min_size=1, max_size=3), st.booleans())
@settings(max_examples=400, deadline=None)
def test_what_the_fast_path_takes_it_reads_as_polars_does(rows: list[dict[str, str]],
                                                           with_calls: bool) -> None:
    data = "".join(",".join(r[k] for k in FIELDS) + "\n" for r in rows).encode()
    fast = probe._fast_frame(data, with_calls)
    if fast is None:
        return
    slow = polars_path(data, with_calls)
    assert slow["op"].null_count() == 0  # nothing the Polars path would call invalid
    same_rows(fast, slow)


def _ingested_parts(tmp_path: Path, csv: Path) -> pl.DataFrame:
    run = parse_file(csv)
    rows, tmps = write_part(run, tmp_path / f"pending-{len(list(tmp_path.iterdir()))}.parquet")
    out = pl.concat([pl.read_parquet(t) for t in tmps])
    for t in tmps:
        t.unlink()
    assert out.height == rows
    return out


def test_ingest_writes_the_same_parts_either_way(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of several slices, one of which the fast path declines (a float outside its
    subset): the part files hold what the Polars path alone writes."""
    rng = random.Random(3)
    body = probe_lines(rng, 4000, probe.OPS).splitlines(keepends=True)
    body[2500] = b"2500,send,8,1,12345678901234567890123e-30,,0\n"
    csv = tmp_path / "in" / "r.samples.csv"
    csv.parent.mkdir()
    csv.write_bytes(probe.HEADER.encode() + b"\n" + b"".join(body))
    monkeypatch.setattr(probe, "BLOCK_BYTES", 20_000)  # about 500 lines a slice
    out = tmp_path / "out"
    out.mkdir()
    fast = _ingested_parts(out, csv)
    monkeypatch.setattr(probe, "_ROWS", None)
    slow = _ingested_parts(out, csv)
    assert_frame_equal(fast, slow, check_exact=True)
    assert fast.height == 4000 + sum(1 for line in body if b",isend," in line or b",irecv," in line)


def _out(rows: int, read_only: int | None = None) -> tuple[object, ...]:
    out: list[object] = [bytearray(rows * k) for k in (1, 8, 8, 4, 4, 1, 2)]
    if read_only is not None:
        out[read_only] = bytes(len(out[read_only]))  # type: ignore[arg-type]
    return tuple(out)


@pytest.mark.parametrize(("with_calls", "extended", "out"), [
    (True, False, _out(1)),  # room for one row, two needed
    (False, True, (*_out(1)[:6], bytearray(0))),  # no room for the pair column
    (False, False, _out(1, read_only=2)),  # a read-only output
    (False, False, _out(1)[:6]),  # a buffer short
])
def test_buffers_too_small_or_read_only_are_refused(with_calls: bool, extended: bool,
                                                    out: tuple[object, ...]) -> None:
    assert probe._ROWS is not None
    line = b"1,send,1,1,1,,0,0,0\n" if extended else b"1,send,1,1,1,,0\n"
    with pytest.raises((ValueError, BufferError, TypeError)):
        probe._ROWS.parse(line, with_calls, extended, MAX_SIZE, MAX_TIME_S, out)
