"""The stored series summary (DATASET/series.json): served only when its stamp matches the
committed data, recomputed otherwise, never wrong and never a traceback."""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from kit.cli import main
from kit.data import dataset as ds
from kit.data import series_summary
from kit.data.ingest import ingest
from kit.data.schema import SERIES_KEYS


def _csv(folder: Path, name: str, seed: int, n: int = 400) -> Path:
    """A raw ``size,duration`` file; several of them in one folder form one growing series."""
    rng = np.random.default_rng(seed)
    size = np.floor(np.exp(rng.uniform(0.0, np.log(1 << 20), n))).astype(np.int64)
    duration = (2e-6 + size / 1e9) * rng.lognormal(0.0, 0.2, n)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    pl.DataFrame({"size": size, "duration": duration}).write_csv(path)
    return path


def _recomputed(dataset: Path) -> pl.DataFrame:
    """series_table the slow way, from the samples, bypassing any stored summary."""
    return ds._compute_series(ds.committed_parts(dataset, ds.runs(dataset)), ds.runs(dataset))


def _stored_stamp(dataset: Path) -> str | None:
    return json.loads((dataset / ds.SUMMARY_FILE).read_text()).get("stamp")


def _no_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(files: list[Path], run_table: pl.DataFrame) -> pl.DataFrame:
        raise AssertionError("series_table rescanned the samples instead of using the summary")
    monkeypatch.setattr(ds, "_compute_series", refuse)


@pytest.fixture
def dataset(tmp_path: Path, fixtures_dir: Path) -> Path:
    """Two raw CSV runs in one series plus OSU aggregate runs: several series."""
    out = tmp_path / "ds"
    ingest([_csv(tmp_path / "lab", "a.csv", 1)], out, transport="tcp")
    ingest([_csv(tmp_path / "lab", "b.csv", 2)], out, transport="tcp")
    ingest([fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt"], out, campaign="osu")
    return out


def test_cached_equals_recomputed_after_several_ingests(tmp_path, fixtures_dir, monkeypatch):
    out = tmp_path / "ds"
    inputs = [[_csv(tmp_path / "lab", "a.csv", 1)], [_csv(tmp_path / "lab", "b.csv", 2)],
              [fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt",
               fixtures_dir / "osu" / "osu_bw_vader_7.4.txt"],
              [_csv(tmp_path / "lab", "c.csv", 3), _csv(tmp_path / "other", "d.csv", 4)]]
    heights = []
    for paths in inputs:
        assert ingest(paths, out, transport="tcp").ok
        truth = _recomputed(out)
        with monkeypatch.context() as m:
            _no_compute(m)  # the ingest left a current summary: no scan on open
            cached = ds.series_table(out)
        assert cached.schema == pl.Schema(ds.SUMMARY_SCHEMA) == truth.schema
        assert_frame_equal(cached, truth, check_exact=True)
        heights.append(cached.height)
    assert heights == [1, 1, 3, 4]
    # the lab series holds three runs: its medians are over all of them
    lab = cached.filter(pl.col("campaign") == "lab").row(0, named=True)
    assert lab["n_samples"] == 1200


def _reference(dataset: Path) -> pl.DataFrame:
    """The one-pass definition (window functions over the series, kit.figures' expressions),
    kept here to check the two-pass computation in kit.data.dataset against it."""
    from kit.figures.bandwidth import bandwidth_exprs
    from kit.figures.bandwidth import bound_expr as large_bound
    from kit.figures.latency import bound_expr, latency_exprs

    lf = ds.scan(dataset).filter(ds.series_predicate(aggregates=True))
    keys = list(SERIES_KEYS)
    size_max = pl.col("size").max().over(keys)
    size_min = pl.col("size").min().over(keys)
    size, time = pl.col("size"), pl.col("time")
    table = (lf.with_columns(_small=bound_expr(size_min), _large=large_bound(size_max))
             .group_by(keys)
             .agg(pl.len().cast(pl.UInt64).alias("n_samples"), size.min().alias("size_min"),
                  size.max().alias("size_max"), *latency_exprs(size, time, pl.col("_small")),
                  *bandwidth_exprs(size, time, pl.col("_large")))
             .sort(keys).collect())
    return table.with_columns([pl.col(c).cast(pl.String) for c in keys])


def test_two_pass_equals_one_pass_definition(tmp_path, fixtures_dir):
    out = tmp_path / "ds"
    edge = tmp_path / "edge"
    edge.mkdir()
    # size 0, a zero time, a series with no size <= 64 B, one with a single size
    (edge / "z.csv").write_text("size,duration\n0,1e-6\n0,3e-6\n8,0\n4096,0\n4096,2e-6\n")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "b.csv").write_text("size,duration\n1000,1e-5\n3000,2e-5\n9000,4e-5\n")
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "o.csv").write_text("size,duration\n512,1e-6\n512,2e-6\n")
    ingest([fixtures_dir / "osu", fixtures_dir / "skampi", _csv(tmp_path / "lab", "a.csv", 1),
            edge, tmp_path / "big", tmp_path / "one"], out, transport="tcp")
    ingest([_csv(tmp_path / "lab", "b.csv", 2)], out, transport="tcp", op="send")
    reference = _reference(out)
    assert reference.height >= 10
    assert {"edge", "big", "one"} <= set(reference["campaign"])
    assert_frame_equal(_recomputed(out), reference, check_exact=True)
    assert_frame_equal(ds.series_table(out), reference, check_exact=True)


def test_summary_refreshed_by_ingest(dataset, tmp_path):
    assert _stored_stamp(dataset) == ds._committed(dataset).stamp
    before = (dataset / ds.SUMMARY_FILE).read_bytes()
    report = ingest([_csv(tmp_path / "lab", "e.csv", 5)], dataset, transport="tcp")
    assert report.ok and report.runs_added == 1 and not report.warnings
    assert (dataset / ds.SUMMARY_FILE).read_bytes() != before
    assert _stored_stamp(dataset) == ds._committed(dataset).stamp
    # an ingest that adds nothing leaves a current summary as it is
    mtime = (dataset / ds.SUMMARY_FILE).stat().st_mtime_ns
    assert ingest([tmp_path / "lab" / "e.csv"], dataset, transport="tcp").runs_added == 0
    assert (dataset / ds.SUMMARY_FILE).stat().st_mtime_ns == mtime


def test_large_dataset_left_to_first_reader(dataset, tmp_path, monkeypatch):
    """Above SUMMARY_REFRESH_MAX_ROWS ingest skips the rescan (memory); the first open
    computes the table, right, and stores it for the opens after it."""
    before = (dataset / ds.SUMMARY_FILE).read_bytes()
    monkeypatch.setattr(ds, "SUMMARY_REFRESH_MAX_ROWS", ds._committed(dataset).rows)
    report = ingest([_csv(tmp_path / "lab", "big.csv", 9)], dataset, transport="tcp")
    assert report.ok and report.runs_added == 1 and not report.warnings
    assert (dataset / ds.SUMMARY_FILE).read_bytes() == before  # not refreshed: now stale
    assert _stored_stamp(dataset) != ds._committed(dataset).stamp
    table = ds.series_table(dataset)
    assert_frame_equal(table, _recomputed(dataset), check_exact=True)
    assert _stored_stamp(dataset) == ds._committed(dataset).stamp
    with monkeypatch.context() as m:
        _no_compute(m)
        assert_frame_equal(ds.series_table(dataset), table, check_exact=True)


def test_stale_stamp_recomputes(dataset, tmp_path, monkeypatch):
    old = (dataset / ds.SUMMARY_FILE).read_bytes()
    # an ingest killed between its commit and the summary write leaves the old summary
    def killed(path: Path, **kw: object) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(ds, "refresh_summary", killed)
    with pytest.raises(KeyboardInterrupt):
        ingest([_csv(tmp_path / "lab", "f.csv", 6)], dataset, transport="tcp")
    monkeypatch.undo()
    assert (dataset / ds.SUMMARY_FILE).read_bytes() == old
    assert ds.runs(dataset).height == 4  # the run was committed
    table = ds.series_table(dataset)
    assert_frame_equal(table, _recomputed(dataset), check_exact=True)
    assert table.filter(pl.col("campaign") == "lab")["n_samples"].item() == 1200
    # ... and the reader stored the fresh one for next time
    assert _stored_stamp(dataset) == ds._committed(dataset).stamp
    with monkeypatch.context() as m:
        _no_compute(m)
        assert_frame_equal(ds.series_table(dataset), table, check_exact=True)


def test_other_summary_version_recomputes(dataset, monkeypatch):
    truth = _recomputed(dataset)
    monkeypatch.setattr(series_summary, "SUMMARY_VERSION", series_summary.SUMMARY_VERSION + 1)
    calls = []
    compute = ds._compute_series
    monkeypatch.setattr(ds, "_compute_series",
                        lambda files, run_table: calls.append(1) or compute(files, run_table))
    assert_frame_equal(ds.series_table(dataset), truth, check_exact=True)
    assert calls == [1]


def test_tampered_values_with_current_stamp_recompute(dataset):
    truth = _recomputed(dataset)
    path = dataset / ds.SUMMARY_FILE
    doc = json.loads(path.read_text())
    n_col = doc["columns"].index("n_samples")
    doc["rows"][0][n_col] += 1
    path.write_text(json.dumps(doc))  # right stamp, old digest, other numbers
    assert series_summary.read_current(dataset) is None
    assert_frame_equal(ds.series_table(dataset), truth, check_exact=True)


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flipped(data: bytes) -> bytes:
    middle = len(data) // 3
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]


def _other_schema(data: bytes) -> bytes:
    doc = json.loads(data)
    n_col = doc["columns"].index("n_samples")
    doc["rows"] = [[*r[:n_col], float(r[n_col]), *r[n_col + 1:]] for r in doc["rows"]]
    return json.dumps(doc).encode()


def _outside_samples(data: bytes) -> bytes:
    doc = json.loads(data)
    doc["parts"] = {"samples/../..": ["x"], **doc["parts"]}
    return json.dumps(doc).encode()


@pytest.mark.parametrize("damage", [
    lambda data: b"", lambda data: b"not json at all\n" * 10, _truncated, _flipped,
    lambda data: data[:4] + b"\0" * (len(data) - 8) + data[-4:], _other_schema,
    _outside_samples, lambda data: b"[" * 100_000,
], ids=["empty", "garbage", "truncated", "flipped-byte", "zeroed", "other-schema",
        "folder-outside-samples", "deep-nesting"])
def test_corrupt_summary_recomputes(dataset, damage, capsys):
    truth = _recomputed(dataset)
    path = dataset / ds.SUMMARY_FILE
    path.write_bytes(damage(path.read_bytes()))
    assert series_summary.read_current(dataset) is None  # `pt2pt datasets` falls back too
    assert_frame_equal(ds.series_table(dataset), truth, check_exact=True)
    assert _stored_stamp(dataset) == ds._committed(dataset).stamp  # repaired
    path.write_bytes(damage(path.read_bytes()))
    assert main(["datasets", str(dataset), "--csv"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert pl.read_csv(io.StringIO(captured.out)).height == truth.height
    path.write_bytes(damage(path.read_bytes()))
    assert main(["datasets", str(dataset)]) == 0  # the listing, which reads without Polars
    assert f"{truth.height} series" in capsys.readouterr().out
    assert series_summary.read_current(dataset) is not None  # repaired again


def test_listing_reader_sees_every_change_of_the_committed_data(dataset, tmp_path):
    """The Polars-free reader takes the committed runs of each folder from the file itself:
    a new ingest, a dropped run in that record, or a changed part file makes it stale."""
    assert series_summary.read_current(dataset) is not None
    path = dataset / ds.SUMMARY_FILE
    old = path.read_bytes()
    ingest([_csv(tmp_path / "lab", "g.csv", 7)], dataset, transport="tcp")
    fresh = path.read_bytes()
    path.write_bytes(old)
    assert series_summary.read_current(dataset) is None  # runs.parquet changed
    doc = json.loads(fresh)
    folder = next(iter(doc["parts"]))
    doc["parts"][folder] = doc["parts"][folder][1:]  # "forget" a committed run
    path.write_text(json.dumps(doc))
    assert series_summary.read_current(dataset) is None
    path.write_bytes(fresh)
    assert series_summary.read_current(dataset) is not None
    part = next((dataset / folder).iterdir())
    part.write_bytes(part.read_bytes() + b"\0")  # tampered by hand
    assert series_summary.read_current(dataset) is None


def test_summary_path_is_a_folder(dataset):
    truth = _recomputed(dataset)
    (dataset / ds.SUMMARY_FILE).unlink()
    (dataset / ds.SUMMARY_FILE).mkdir()  # cannot be read nor replaced
    assert_frame_equal(ds.series_table(dataset), truth, check_exact=True)


def _read_only(monkeypatch: pytest.MonkeyPatch, dataset: Path) -> None:
    """Refuse every file creation inside ``dataset`` as a read-only mount would (EROFS).
    Root ignores chmod, so the refusal is simulated at the Parquet writer and os.open."""
    real_write = pl.DataFrame.write_parquet
    real_open = ds.os.open

    def write_parquet(self: pl.DataFrame, file: object, **kwargs: object) -> None:
        if isinstance(file, str | Path) and Path(file).resolve().is_relative_to(dataset):
            raise OSError(errno.EROFS, "Read-only file system", str(file))
        real_write(self, file, **kwargs)  # type: ignore[arg-type]

    def os_open(path: object, flags: int, *args: object) -> int:
        if flags & (ds.os.O_WRONLY | ds.os.O_RDWR | ds.os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
    monkeypatch.setattr(ds.os, "open", os_open)


def test_read_only_dataset_still_opens(dataset, monkeypatch):
    truth = _recomputed(dataset)
    (dataset / ds.SUMMARY_FILE).unlink()  # e.g. written by a kit without summaries
    listing = sorted(p.name for p in dataset.iterdir())
    _read_only(monkeypatch, dataset)
    for _ in range(2):  # recomputed each time, quietly
        assert_frame_equal(ds.series_table(dataset), truth, check_exact=True)
    assert sorted(p.name for p in dataset.iterdir()) == listing  # no summary, no temp file


def test_read_only_with_stale_summary(dataset, tmp_path, monkeypatch):
    old = (dataset / ds.SUMMARY_FILE).read_bytes()
    ingest([_csv(tmp_path / "lab", "g.csv", 7)], dataset, transport="tcp")
    (dataset / ds.SUMMARY_FILE).write_bytes(old)  # e.g. copied to the read-only share too early
    _read_only(monkeypatch, dataset)
    table = ds.series_table(dataset)
    monkeypatch.undo()
    assert_frame_equal(table, _recomputed(dataset), check_exact=True)
    assert (dataset / ds.SUMMARY_FILE).read_bytes() == old


def test_ingest_reports_an_unwritable_summary(tmp_path, monkeypatch):
    def refuse(dataset: Path, table: pl.DataFrame, state: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(dataset / ds.SUMMARY_FILE))
    monkeypatch.setattr(ds, "_write_summary", refuse)
    report = ingest([_csv(tmp_path / "lab", "a.csv", 1)], tmp_path / "ds", transport="tcp")
    assert report.ok and report.runs_added == 1
    assert any(ds.SUMMARY_FILE in w and "recomputed" in w for w in report.warnings)
    monkeypatch.undo()
    assert not (tmp_path / "ds" / ds.SUMMARY_FILE).exists()
    assert_frame_equal(ds.series_table(tmp_path / "ds"), _recomputed(tmp_path / "ds"),
                       check_exact=True)
    assert (tmp_path / "ds" / ds.SUMMARY_FILE).exists()  # the first open stored it


def test_reader_does_not_write_while_an_ingest_holds_the_lock(dataset):
    (dataset / ds.SUMMARY_FILE).unlink()
    with ds.locked(dataset):  # flock: another open file description conflicts, same process
        assert_frame_equal(ds.series_table(dataset), _recomputed(dataset), check_exact=True)
        assert not (dataset / ds.SUMMARY_FILE).exists()
    ds.series_table(dataset)
    assert (dataset / ds.SUMMARY_FILE).exists()


def test_leftover_summary_temp_is_cleaned(dataset, tmp_path):
    leftover = dataset / f"{ds.SUMMARY_FILE}.12345.deadbeef{ds.TMP_SUFFIX}"
    leftover.write_bytes(b"half a summary")
    assert_frame_equal(ds.series_table(dataset), _recomputed(dataset), check_exact=True)
    ingest([_csv(tmp_path / "lab", "h.csv", 8)], dataset, transport="tcp")
    assert not leftover.exists()


def test_missing_part_file_is_noticed(dataset):
    """Parts are immutable once committed; if one is removed by hand anyway, the stamp (which
    lists the committed parts) no longer matches and the numbers follow the files."""
    part = next((dataset / "samples" / "campaign=osu").rglob("part-*.parquet"))
    part.unlink()
    assert_frame_equal(ds.series_table(dataset), _recomputed(dataset), check_exact=True)
    assert "osu" not in ds.series_table(dataset)["campaign"].to_list()


def test_empty_dataset_writes_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    assert ds.series_table(tmp_path / "empty").schema == pl.Schema(ds.SUMMARY_SCHEMA)
    assert not list((tmp_path / "empty").iterdir())
