"""Probe CSV + meta.json ingest, on small files written by the test and on a real probe run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest

from kit.data import dataset as ds
from kit.data.ingest import ingest
from tests.builders import forget_checksums
from tests.conftest import mpi_env

HEADER = "seq,op,size,count,time,call,warmup\n"


def write_run(folder: Path, prefix: str, lines: list[str], meta: dict | None = None,
              *, newline_at_end: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    samples = folder / f"{prefix}.samples.csv"
    body = HEADER + "\n".join(lines) + ("\n" if newline_at_end else "")
    samples.write_text(body)
    if meta is not None:
        # an ended run's meta counts its lines (a fixture may say fewer: a truncated copy)
        meta = {**meta, "samples_written": max(meta.get("samples_written", 0), len(lines))}
        (folder / f"{prefix}.meta.json").write_text(json.dumps(meta))
    return samples


META = {
    "probe_version": "0.1.0", "argv": ["pt2pt-probe"], "mpi_version": "Open MPI v4.1.4",
    "hosts": ["node1", "node2"], "timer": {"name": "mpi", "resolution_s": 1e-9,
                                          "overhead_s": 3e-8},
    "seed": 1, "sizes": {"spec": "list:8", "samples": 1}, "ops": ["pingpong"], "warmup": 1,
    "env": {"OMPI_MCA_btl": "self,tcp", "SLURM_JOB_ID": "42"}, "slurm_job_id": "42",
    "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "samples_written": 2,
    "complete": True,
}


def test_ops_are_mapped_as_documented(tmp_path):
    meta = dict(META, ops=["pingpong", "send", "isend", "stream"])
    write_run(tmp_path / "in", "r", [
        "0,pingpong,8,1,2.0e-06,,1",
        "1,pingpong,8,1,3.0e-06,,0",
        "2,send,16,1,5.0e-07,,0",
        "3,isend,32,1,9.0e-07,2.5e-07,0",
        "4,stream,1024,64,6.4e-05,,0",
    ], meta)
    report = ingest([tmp_path / "in"], tmp_path / "ds", campaign="c1")
    assert report.ok and report.files_ok == 1 and report.rows_added == 6
    rows = ds.scan(tmp_path / "ds").sort("seq", "op").collect()
    got = {(r["seq"], r["op"]): r for r in rows.iter_rows(named=True)}
    assert got[(0, "pingpong")]["warmup"] is True
    assert got[(1, "pingpong")]["time"] == pytest.approx(1.5e-6)  # one-way
    assert got[(2, "send")]["time"] == pytest.approx(5.0e-7)
    assert got[(3, "isend")]["time"] == pytest.approx(9.0e-7)
    assert got[(3, "isend_call")]["time"] == pytest.approx(2.5e-7)
    stream = got[(4, "stream")]
    assert (stream["time"], stream["stat"], stream["n"]) == (pytest.approx(1e-6), "raw", 64)
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["transport"] == "tcp"  # OMPI_MCA_btl=self,tcp on two hosts
    assert (run["campaign"], run["job_id"], run["hosts"]) == ("c1", "42", "node1,node2")
    assert run["complete"] is True and run["mpi_version"] == "Open MPI v4.1.4"
    assert json.loads(run["env"])["OMPI_MCA_btl"] == "self,tcp"
    assert len(json.loads(run["sources"])) == 2


def test_truncated_last_line_is_dropped_and_run_incomplete(tmp_path):
    write_run(tmp_path / "in", "r", ["0,pingpong,8,1,2.0e-06,,0", "1,pingpong,8,1,2.0e-0"],
              META, newline_at_end=False)
    report = ingest([tmp_path / "in"], tmp_path / "ds")
    assert report.ok and report.rows_added == 1
    assert any("truncated last line" in w for w in report.warnings)
    assert ds.runs(tmp_path / "ds")["complete"].to_list() == [False]


def test_meta_incomplete_and_missing(tmp_path):
    write_run(tmp_path / "a", "r", ["0,pingpong,8,1,2.0e-06,,0"], dict(META, complete=False))
    write_run(tmp_path / "b", "r", ["0,pingpong,9,1,2.0e-06,,0"])
    report = ingest([tmp_path / "a", tmp_path / "b"], tmp_path / "ds", transport="ib")
    assert report.ok and report.runs_added == 2
    runs = ds.runs(tmp_path / "ds").sort("campaign")
    assert runs["complete"].to_list() == [False, None]
    assert runs["transport"].to_list() == ["ib", "ib"]  # --transport wins over the meta env
    assert any("no r.meta.json" in w for w in report.warnings)


@pytest.mark.parametrize(("line", "expected"), [
    ("1,pingpong,-8,1,2.0e-06,,0", "size"),
    ("1,pingpong,8,1,abc,,0", "time"),
    ("1,pingpong,8,1,-2.0e-06,,0", "time"),
    ("1,bcast,8,1,2.0e-06,,0", "op"),
    ("1,pingpong,8,1,2.0e-06,,0,7", "columns"),
    ("1,pingpong,8,1,2.0e-06", "columns"),
    ("1,pingpong,8,1,2.0e-06,,2", "warmup"),
    ("1,stream,8,0,2.0e-06,,0", "count"),
    ("1,isend,8,1,2.0e-06,nan,0", "call"),
])
def test_bad_line_is_located_and_other_files_still_ingest(tmp_path, line, expected):
    bad = write_run(tmp_path / "bad", "r", ["0,pingpong,8,1,2.0e-06,,0", line,
                                            "2,pingpong,8,1,2.0e-06,,0"])
    write_run(tmp_path / "good", "r", ["0,pingpong,8,1,2.0e-06,,0"])
    report = ingest([tmp_path / "bad", tmp_path / "good"], tmp_path / "ds")
    assert report.files_ok == 1 and len(report.files_failed) == 1
    path, message = report.files_failed[0]
    assert path == bad
    assert f"{bad}:3:" in message and expected in message
    assert ds.scan(tmp_path / "ds").collect().height == 1
    leftovers = [p for p in (tmp_path / "ds").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_wrong_header_is_rejected(tmp_path):
    path = tmp_path / "x.samples.csv"
    path.write_text("seq,op,size,time\n0,pingpong,8,1e-6\n")
    report = ingest([path], tmp_path / "ds")
    assert report.files_failed and "unknown format" in report.files_failed[0][1]
    report = ingest([path], tmp_path / "ds", tool="probe")
    assert "expected the probe header" in report.files_failed[0][1]


@pytest.mark.mpi
def test_real_probe_run(tmp_path, probe_bin):
    prefix = tmp_path / "run" / "pp"
    prefix.parent.mkdir()
    cmd = ["mpirun", "--oversubscribe", "-np", "2", "--mca", "btl", "self,vader", str(probe_bin),
           "--op", "pingpong,isend,stream", "--sizes", "list:0,1024,65536", "--samples", "5",
           "--warmup", "2", "--output", str(prefix)]
    subprocess.run(cmd, check=True, env=mpi_env(), timeout=120, capture_output=True)
    report = ingest([prefix.parent], tmp_path / "ds", campaign="real")
    assert report.ok, report.files_failed
    assert [p.name for p, _ in report.files_skipped] == ["pp.meta.json"]
    rows = ds.scan(tmp_path / "ds").collect()
    meta = json.loads(prefix.with_suffix(".meta.json").read_text())
    assert ds.runs(tmp_path / "ds")["n_samples"][0] == rows.height
    main_rows = rows.filter(~pl.col("op").cast(pl.String).str.ends_with("_call"))
    assert main_rows.height == meta["samples_written"]
    assert set(rows["op"].cast(pl.String)) == {"pingpong", "isend", "isend_call", "stream"}
    assert rows["warmup"].sum() >= 2
    assert set(rows["size"].unique()) <= {0, 1024, 65536}
    assert (rows["time"] > 0).all()
    assert ds.runs(tmp_path / "ds")["transport"][0] == "shm"


def test_op_missing_from_meta_ops_is_located(tmp_path):
    samples = write_run(tmp_path / "in", "r", ["0,pingpong,8,1,2.0e-06,,0",
                                               "1,isend,8,1,2.0e-06,1.0e-07,0"],
                        dict(META, ops=["pingpong"]))
    report = ingest([tmp_path / "in"], tmp_path / "ds")
    assert len(report.files_failed) == 1
    assert f"{samples}:3:" in report.files_failed[0][1]
    assert "not among the ops listed" in report.files_failed[0][1]


def test_large_run_is_split_into_several_parts(tmp_path, monkeypatch):
    from kit.tools import probe

    block = 1 << 15
    monkeypatch.setattr(probe, "BLOCK_BYTES", block)  # several slices, lines cut at their ends
    lines = [f"{i},pingpong,{i % 977},1,{(i + 1) * 1e-7:.9e},,0" for i in range(5000)]
    write_run(tmp_path / "in", "r", [*lines, "5000,pingpong,3"], META, newline_at_end=False)
    body = len("\n".join(lines)) + 1  # the whole lines after the header
    report = ingest([tmp_path / "in"], tmp_path / "ds")
    assert report.ok and report.rows_added == 5000
    parts = sorted(p.name for p in (tmp_path / "ds").rglob("part-*.parquet"))
    # one part per slice of at most `block` bytes of whole lines
    assert body // block < len(parts) <= body // block + 2
    assert parts[0].endswith("-0000.parquet")
    rows = ds.scan(tmp_path / "ds").collect().sort("seq")
    assert rows["seq"].to_list() == list(range(5000))
    assert rows["time"][4999] == pytest.approx(5000e-7 / 2)
    assert ds.runs(tmp_path / "ds")["complete"].to_list() == [False]
    assert ingest([tmp_path / "in"], tmp_path / "ds").rows_added == 0


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_line_longer_than_a_block_is_refused_and_nothing_is_written(tmp_path, monkeypatch,
                                                                        where):
    from kit.tools import probe

    monkeypatch.setattr(probe, "BLOCK_BYTES", 4096)
    lines = [f"{i},pingpong,8,1,1.000000000e-06,,0" for i in range(300)]
    long = "9" * 5000
    lines.insert(150 if where == "middle" else 300, long)
    write_run(tmp_path / "in", "r", lines, META, newline_at_end=where == "middle")
    report = ingest([tmp_path / "in"], tmp_path / "ds")
    assert len(report.files_failed) == 1
    assert "a line longer than" in report.files_failed[0][1]
    assert not list((tmp_path / "ds").rglob("part-*.parquet"))


def test_header_only_and_header_without_newline_are_refused_as_empty(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.samples.csv").write_text(HEADER)
    (folder / "b.samples.csv").write_text(HEADER.rstrip("\n"))
    report = ingest([folder], tmp_path / "ds")
    assert len(report.files_failed) == 2 and report.rows_added == 0
    assert all("no samples" in msg for _, msg in report.files_failed)


HEADER_EXT = "seq,op,size,count,time,call,warmup,pair,round\n"


def test_contention_run_keeps_pair_and_round_and_pair_count(tmp_path):
    """--pairs runs: pair kept, seq taken from round, pairs from the meta; old runs 1/0."""
    meta = dict(META, ops=["stream"], pairs=2, pairing=[[0, 2], [1, 3]], contention=True,
                hosts=["n1", "n1", "n2", "n2"], samples_written=4)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "k2.samples.csv").write_text(HEADER_EXT + "".join([
        "0,stream,1024,4,4.0e-06,,0,0,0\n",
        "1,stream,2048,4,8.0e-06,,0,0,1\n",
        "2,stream,1024,4,5.0e-06,,0,1,0\n",
        "3,stream,2048,4,9.0e-06,,0,1,1\n",
    ]))
    (folder / "k2.meta.json").write_text(json.dumps(meta))
    write_run(tmp_path / "old", "r", ["0,pingpong,8,1,2.0e-06,,0"], META)
    report = ingest([folder, tmp_path / "old"], tmp_path / "ds", campaign="c1")
    assert report.ok and report.rows_added == 5, report
    rows = ds.scan(tmp_path / "ds").collect()
    stream = rows.filter(pl.col("op") == "stream").sort("pair", "seq")
    assert stream["pair"].to_list() == [0, 0, 1, 1]
    assert stream["seq"].to_list() == [0, 1, 0, 1]
    assert set(stream["pairs"].to_list()) == {2}
    assert stream["time"].to_list() == pytest.approx([1e-6, 2e-6, 1.25e-6, 2.25e-6])
    old = rows.filter(pl.col("op") == "pingpong")
    assert (old["pairs"].item(), old["pair"].item()) == (1, 0)


def test_contention_run_with_a_bad_pair_names_the_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "k.samples.csv").write_text(HEADER_EXT + "0,stream,8,4,4.0e-06,,0,0,0\n"
                                          "1,stream,8,4,4.0e-06,,0,x,1\n")
    (folder / "k.meta.json").write_text(json.dumps(dict(META, ops=["stream"], pairs=1)))
    report = ingest([folder], tmp_path / "ds", campaign="c1")
    assert report.files_failed and "k.samples.csv:3:" in report.files_failed[0][1]
    assert "pair" in report.files_failed[0][1]


def test_parts_written_before_the_pair_columns_read_as_one_pair(tmp_path):
    """A dataset from an older kit: its part files lack pairs/pair; scan fills 1 and 0."""
    write_run(tmp_path / "in", "r", ["0,pingpong,8,1,2.0e-06,,0"], META)
    ingest([tmp_path / "in"], tmp_path / "ds", campaign="c1")
    part = next((tmp_path / "ds").rglob("part-*.parquet"))
    pl.read_parquet(part).drop("pairs", "pair", strict=False).write_parquet(part)
    rows = ds.scan(tmp_path / "ds").collect()
    assert (rows["pairs"].to_list(), rows["pair"].to_list()) == ([1], [0])


def test_run_id_is_the_files_sha256_taken_while_they_are_parsed(tmp_path, monkeypatch):
    """The probe's parser hashes the CSV slice by slice as Polars parses the slice before:
    the run id must still be that of the whole file (header, every slice, a torn tail)."""
    import hashlib

    from kit.tools import probe

    monkeypatch.setattr(probe, "BLOCK_BYTES", 1 << 12)
    lines = [f"{i},pingpong,{i % 97},1,{(i + 1) * 1e-7:.9e},,0" for i in range(2000)]
    write_run(tmp_path / "in", "r", [*lines, "2000,ping"], META, newline_at_end=False)
    csv, meta = tmp_path / "in" / "r.samples.csv", tmp_path / "in" / "r.meta.json"
    digests = "".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in (csv, meta))
    report = ingest([tmp_path / "in"], tmp_path / "ds")
    assert report.ok and report.rows_added == 2000
    assert report.run_ids == [hashlib.sha256(digests.encode()).hexdigest()[:20]]
    sources = json.loads(ds.runs(tmp_path / "ds")["sources"][0])
    assert sources[0]["sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest()


def test_a_copy_under_another_name_is_parsed_then_skipped_leaving_nothing(tmp_path):
    write_run(tmp_path / "in", "r", ["0,pingpong,8,1,2.0e-06,,0", "1,pingpong,9,1,3.0e-06,,0"],
              META)
    ingest([tmp_path / "in"], tmp_path / "ds", campaign="c")
    before = sorted(p.relative_to(tmp_path / "ds") for p in (tmp_path / "ds").rglob("*"))
    again = ingest([tmp_path / "in"], tmp_path / "ds", campaign="c")  # same paths: hashed first
    (tmp_path / "copy").mkdir()
    for p in (tmp_path / "in").iterdir():
        (tmp_path / "copy" / p.name.replace("r.", "s.")).write_bytes(p.read_bytes())
    copy = ingest([tmp_path / "copy"], tmp_path / "ds", campaign="c")
    for report in (again, copy):
        assert report.runs_added == 0 and report.rows_added == 0
        assert [r for _, r in report.files_skipped if "already ingested" in r]
    after = sorted(p.relative_to(tmp_path / "ds") for p in (tmp_path / "ds").rglob("*"))
    assert after == before  # no temp or pending part left behind


def test_parts_hold_per_row_columns_and_older_parts_with_run_columns_read_alike(tmp_path,
                                                                              monkeypatch):
    """run_id and transport come from the runs table (by the part's name), with one scan per
    run or, for many runs, joined on each row's file; parts that still store them (written
    before) read the same."""
    for k, transport in enumerate(["tcp", "vader", "tcp"]):
        write_run(tmp_path / f"in{k}", "r", [f"0,pingpong,{8 + k},1,2.0e-06,,0",
                                             f"1,pingpong,{9 + k},1,3.0e-06,,0"], META)
        ingest([tmp_path / f"in{k}"], tmp_path / "ds", campaign="c", transport=transport)
    parts = sorted((tmp_path / "ds").rglob("part-*.parquet"))
    assert {c for p in parts for c in pl.read_parquet_schema(p)} == {
        "op", "size", "time", "seq", "stat", "n", "warmup"}
    runs = ds.runs(tmp_path / "ds")
    want = sorted(zip(runs["run_id"].to_list(), runs["transport"].to_list(), strict=True))
    cols = ["run_id", "transport", "placement", "host_pair", "size", "time"]

    def read() -> pl.DataFrame:
        return ds.scan(tmp_path / "ds").select(cols).collect().sort("size", "time")

    few = read()
    assert sorted(set(few.select("run_id", pl.col("transport").cast(pl.String)).rows())) == want
    monkeypatch.setattr(ds, "_MAX_RUN_GROUPS", 1)
    assert read().equals(few)
    # the layout written before: run_id and transport in every row
    for p in parts:
        run_id = ds.run_of_part(p.name)
        transport = runs.filter(pl.col("run_id") == run_id)["transport"].item()
        pl.read_parquet(p).with_columns(run_id=pl.lit(run_id).cast(pl.Categorical),
                                        transport=pl.lit(transport).cast(pl.Categorical)
                                        ).write_parquet(p)
    forget_checksums(tmp_path / "ds")  # as that kit wrote them: no checksums
    assert read().equals(few)
    monkeypatch.setattr(ds, "_MAX_RUN_GROUPS", 32)
    assert read().equals(few)
