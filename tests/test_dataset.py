"""The dataset contract: idempotent ingest, atomic commits, scan/runs/series_table, the CLIs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from kit.cli import main
from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.data.schema import RUNS_SCHEMA, SAMPLES_SCHEMA
from tests.builders import dataset_snapshot as _snapshot

REPO = Path(__file__).resolve().parent.parent


def test_reingest_adds_nothing(tmp_path, osu_dir):
    first = ingest([osu_dir], tmp_path / "ds")
    before = _snapshot(tmp_path / "ds")
    again = ingest([osu_dir, osu_dir / "osu_bw_tcp_7.4.txt"], tmp_path / "ds",
                   campaign="other")
    assert first.runs_added > 0 and again.runs_added == 0 and again.rows_added == 0
    assert all("already ingested" in reason or "not a measurement" in reason
               for _, reason in again.files_skipped)
    after = _snapshot(tmp_path / "ds")
    assert before[0].equals(after[0]) and before[1].equals(after[1])


def test_scan_schema_and_partition_pruning(tmp_path, osu_dir, fixtures_dir):
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], tmp_path / "ds", campaign="a")
    ingest([fixtures_dir / "skampi" / "skampi_pingpong_tcp.sko"], tmp_path / "ds", campaign="b")
    lf = ds.scan(tmp_path / "ds")
    assert lf.collect_schema() == pl.Schema(SAMPLES_SCHEMA)
    assert ds.runs(tmp_path / "ds").schema == pl.Schema(RUNS_SCHEMA)
    only_b = lf.filter(pl.col("campaign") == "b").collect()
    assert set(only_b["tool"].cast(pl.String)) == {"skampi"}
    plan = lf.filter(pl.col("campaign") == "b").explain()
    assert "campaign=a" not in plan  # the other partition is not even opened
    layout = sorted(p.relative_to(tmp_path / "ds").parts[:3]
                    for p in (tmp_path / "ds").rglob("part-*.parquet"))
    assert layout == [("samples", "campaign=a", "tool=osu"),
                      ("samples", "campaign=b", "tool=skampi")]


def test_empty_dataset_and_missing_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    assert ds.scan(tmp_path / "empty").collect().height == 0
    assert ds.series_table(tmp_path / "empty").height == 0
    with pytest.raises(ds.UserError, match="does not exist"):
        ds.scan(tmp_path / "nope")


def test_uncommitted_parts_are_invisible_and_cleaned(tmp_path, osu_dir):
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset, campaign="a")
    before = _snapshot(dataset)
    part = next(dataset.rglob("part-*.parquet"))
    # what a crash between renaming the parts and replacing runs.parquet leaves behind
    orphan = part.with_name("part-0123456789abcdef0123.parquet")
    shutil.copy(part, orphan)
    stray_tmp = part.with_name(part.name + ".999.tmp")
    stray_tmp.write_bytes(b"half a parquet file")
    after = _snapshot(dataset)
    assert before[0].equals(after[0])
    ingest([osu_dir / "osu_bw_tcp_7.4.txt"], dataset, campaign="a")
    assert not orphan.exists() and not stray_tmp.exists()


def _big_probe_csv(path: Path, rows: int) -> None:
    frame = pl.select(seq=pl.int_range(rows, dtype=pl.UInt32)).with_columns(
        op=pl.lit("pingpong"), size=(pl.col("seq") % 4096), count=pl.lit(1),
        time=pl.lit(2.5e-6), call=pl.lit(None, pl.Float64), warmup=pl.lit(0))
    frame.write_csv(path, float_scientific=True)


@pytest.mark.slow
def test_killed_ingest_leaves_previous_dataset(tmp_path, osu_dir):
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    before = _snapshot(dataset)
    big = tmp_path / "big" / "big.samples.csv"
    big.parent.mkdir()
    _big_probe_csv(big, 4_000_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kit", "ingest", str(osu_dir / "osu_bw_tcp_7.4.txt"),
         str(big), "--dataset", str(dataset)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        seen_tmp = False
        while time.monotonic() < deadline and proc.poll() is None:
            if any(p.name.endswith(".tmp") for p in (dataset / "samples").rglob("tool=probe/*")):
                # the big part is being written: kill hard in the middle of it
                seen_tmp = True
                break
            time.sleep(0.002)
        assert seen_tmp, "the ingest finished before it could be killed; use a bigger input"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    after = _snapshot(dataset)
    assert before[0].equals(after[0]) and before[1].equals(after[1])
    # the stored series summary still describes the committed data
    assert ds.series_table(dataset).equals(
        ds._compute_series(ds.committed_parts(dataset, ds.runs(dataset)), ds.runs(dataset)))
    # the next ingest cleans up and completes
    report = ingest([osu_dir / "osu_bw_tcp_7.4.txt"], dataset)
    assert report.ok and report.runs_added == 1
    assert not [p for p in dataset.rglob("*") if p.name.endswith(".tmp")]
    assert len(list(dataset.rglob("part-*.parquet"))) == 2
    assert ds.series_table(dataset).equals(
        ds._compute_series(ds.committed_parts(dataset, ds.runs(dataset)), ds.runs(dataset)))


def test_series_table_figures(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    lines = ["size,duration"]
    lines += [f"8,{t}" for t in (1e-6, 2e-6, 3e-6)]
    lines += [f"{1 << 20},{(1 << 20) / 1e9}", f"{1 << 20},{(1 << 20) / 2e9}"]
    (folder / "x.csv").write_text("\n".join(lines) + "\n")
    ingest([folder], tmp_path / "ds", transport="tcp", op="send")
    row = ds.series_table(tmp_path / "ds").row(0, named=True)
    assert (row["campaign"], row["tool"], row["transport"], row["op"], row["stat"]) == (
        "in", "csv", "tcp", "send", "raw")
    assert (row["n_samples"], row["size_min"], row["size_max"]) == (5, 8, 1 << 20)
    assert row["latency_s"] == pytest.approx(2e-6)
    assert row["bandwidth_Bps"] == pytest.approx(1.5e9)
    # too few samples for a 95 % interval of either median: none is given
    assert row["latency_s_lo"] is None and row["bandwidth_Bps_hi"] is None


def test_cli_ingest_reports_failures_and_keeps_going(tmp_path, osu_dir, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("# OSU MPI Latency Test v7.4\n# Size  Avg Latency(us)\n1  4.4\n2 x\n")
    rc = main(["ingest", str(bad), str(osu_dir / "osu_latency_tcp_7.4.txt"),
               "--dataset", str(tmp_path / "ds"), "--transport", "tcp"])
    err = capsys.readouterr()
    assert rc == 1
    assert f"{bad}:4:" in err.err and "latency in µs" in err.err
    assert "1 file(s) ingested" in err.out and "1 failed" in err.out
    assert "Traceback" not in err.err
    assert ds.scan(tmp_path / "ds").collect().height == 23
    rc = main(["datasets", str(tmp_path / "ds")])
    out = capsys.readouterr().out
    assert rc == 0 and "pingpong" in out and "tcp" in out and "23" in out
    rc = main(["datasets", str(tmp_path / "ds"), "--csv"])
    out = capsys.readouterr().out
    assert out.startswith(
        "campaign,tool,transport,placement,host_pair,pairs,program,op,stat,n_samples")


def test_cli_bad_options(tmp_path, osu_dir, capsys):
    rc = main(["ingest", str(osu_dir), "--dataset", str(tmp_path / "ds"), "--campaign", "a/b"])
    assert rc == 2 and "--campaign" in capsys.readouterr().err
    rc = main(["datasets", str(tmp_path / "missing")])
    assert rc == 2 and "does not exist" in capsys.readouterr().err
    (tmp_path / "not-a-dataset").mkdir()
    rc = main(["datasets", str(tmp_path / "not-a-dataset")])
    assert rc == 2 and "nothing has been ingested" in capsys.readouterr().err


def test_runs_table_records_the_format_and_a_newer_format_is_refused(tmp_path, osu_dir):
    """runs.parquet says which layout the part files have; a kit refuses a newer one with a
    paragraph naming the file (reading it would give null run ids and transports), and reads
    datasets from before the key existed as format 1."""
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], tmp_path / "ds")
    runs_file = tmp_path / "ds" / ds.RUNS_FILE
    assert pl.read_parquet_metadata(runs_file)[ds.FORMAT_KEY] == str(ds.DATASET_FORMAT)
    table = pl.read_parquet(runs_file)
    table.write_parquet(runs_file)  # no key: a dataset written before it
    assert ds.runs(tmp_path / "ds").height == 1
    for newer in (str(ds.DATASET_FORMAT + 1), "2b"):
        table.write_parquet(runs_file, metadata={ds.FORMAT_KEY: newer})
        with pytest.raises(ds.UserError, match="format") as err:
            ds.scan(tmp_path / "ds")
        assert err.value.where == str(runs_file)
    proc = subprocess.run([sys.executable, "-m", "kit", "datasets", str(tmp_path / "ds")],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "format" in proc.stderr and str(runs_file) in proc.stderr, proc.stderr
