"""A damaged dataset is named, not read silently and not a traceback (issue 53, line 5).

Each part's size and SHA-256 are committed with its run (runs.parquet ``parts``) and checked
before any reader opens it (kit.data.integrity): two flipped bytes, a truncated part or a
deleted one is left out with one warning naming the file and its run, and the rest of the
dataset reads as before. Runs of older datasets (no checksums) still get the Parquet magic
check. A killed writer's temp files are removed by the next reader, unless an ingest is
running. A property test flips and cuts bytes at random places.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.core.errors import DataWarning, UserError
from kit.data import dataset as ds
from kit.data import integrity
from kit.data.ingest import ingest
from kit.fit import synth

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}


def _csv(path: Path, seed: int, n: int = 800) -> Path:
    truth = synth.Truth([synth.TrueRegime(1, "linear", {"a": 5e-6, "b": 1e-9},
                                          synth.TrueNoise("lognormal", 0.05))])
    size, time = synth.sample(truth, n, 1, 2**20, seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                               for s, t in zip(size, time, strict=True)))
    return path


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Two runs of two transports: tcp (the one damaged below) and shm."""
    out = tmp_path / "ds"
    ingest([_csv(tmp_path / "in" / "tcp.csv", 1)], out, campaign="c", transport="tcp")
    ingest([_csv(tmp_path / "in" / "shm.csv", 2)], out, campaign="c", transport="shm")
    return out


def _part(dataset: Path, transport: str) -> Path:
    runs = ds.runs(dataset)
    run_id = runs.filter(pl.col("transport") == transport)["run_id"][0]
    return next(p for p in (dataset / "samples").rglob("part-*.parquet") if run_id in p.name)


def _flip(path: Path, *offsets: int) -> None:
    data = bytearray(path.read_bytes())
    for off in offsets if data else ():
        data[off % len(data)] ^= 0xFF
    os.utime(path)  # a damaged file may keep its times; the checksum does not care
    path.write_bytes(bytes(data))


def _scan(dataset: Path) -> tuple[pl.DataFrame, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = ds.scan(dataset).collect()
    return frame, [str(w.message) for w in caught if issubclass(w.category, DataWarning)]


def test_parts_carry_their_checksums(dataset: Path) -> None:
    for parts, run_id in ds.runs(dataset).select("parts", "run_id").iter_rows():
        listed = integrity._manifest(parts)
        assert listed and all(run_id in name for name in listed)
        for name, (size, digest) in listed.items():
            path = next((dataset / "samples").rglob(name))
            assert path.stat().st_size == size and integrity.sha256(path) == digest


def test_two_flipped_bytes_are_named_and_the_rest_is_read(dataset: Path) -> None:
    clean, _ = _scan(dataset)
    part = _part(dataset, "tcp")
    _flip(part, part.stat().st_size // 2, part.stat().st_size // 2 + 9)
    frame, said = _scan(dataset)
    assert len(said) == 1 and part.name in said[0] and "checksum" in said[0]
    assert frame.equals(clean.filter(pl.col("transport") == "shm"))
    assert frame["time"].is_between(1e-9, 1.0).all()


@pytest.mark.parametrize("how", ["truncated", "deleted"])
def test_truncated_or_deleted_part_is_named(dataset: Path, how: str) -> None:
    part = _part(dataset, "tcp")
    if how == "truncated":
        os.truncate(part, part.stat().st_size // 3)
    else:
        part.unlink()
    frame, said = _scan(dataset)
    assert len(said) == 1 and part.name in said[0]
    assert ("missing" if how == "deleted" else "truncated") in said[0]
    assert set(frame["transport"].unique()) == {"shm"}


def test_older_runs_without_checksums_get_the_magic_check(dataset: Path) -> None:
    runs_file = dataset / ds.RUNS_FILE
    meta = pl.read_parquet_metadata(runs_file)
    pl.read_parquet(runs_file).drop("parts").write_parquet(runs_file, metadata=meta)
    part = _part(dataset, "tcp")
    os.truncate(part, part.stat().st_size - 100)
    frame, said = _scan(dataset)
    assert len(said) == 1 and "not a whole Parquet file" in said[0]
    assert set(frame["transport"].unique()) == {"shm"}


@pytest.mark.parametrize("command", [
    ["datasets", "{ds}"],
    ["fit", "{ds}", "--series", "transport=shm", "--no-intervals", "--no-validate", "-o",
     "{tmp}/m.json"],
    ["compare", "{ds}", "--by", "transport"],
    ["report", "{ds}", "--no-validate", "-o", "{tmp}/report"],
])
def test_readers_warn_instead_of_a_traceback(dataset: Path, tmp_path: Path,
                                             command: list[str]) -> None:
    part = _part(dataset, "tcp")
    os.truncate(part, 4000)
    argv = [a.format(ds=dataset, tmp=tmp_path) for a in command]
    res = subprocess.run([sys.executable, "-m", "kit", *argv], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert "Traceback" not in res.stderr, res.stderr
    text = " ".join(res.stderr.split())
    assert "pt2pt: warning:" in text and part.name in text
    assert res.returncode in (0, 1, 2)
    if command[0] in ("datasets", "fit"):
        assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("how", ["flip", "cut"])
def test_the_tui_names_a_damaged_part_in_a_notification(dataset: Path, how: str) -> None:
    """The explorer owns the terminal (Textual drops stderr): the warning the CLI prints must
    reach the user as a notification, and the intact series still opens."""
    from tests.test_tui_pilot import SIZE, settle, sync
    from tui.app import ExplorerApp

    part = _part(dataset, "tcp")
    if how == "flip":
        _flip(part, 1000, 1007)
    else:
        os.truncate(part, 4000)
    before = warnings.showwarning

    @sync
    async def explore() -> None:
        app = ExplorerApp(dataset)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            said = [n for n in app._notifications if n.severity == "warning"]
            assert said and part.name in said[0].message, [n.message for n in said]
            assert [r.key.get("transport") for r in app.session.rows] == ["shm"]

    explore()
    assert warnings.showwarning is before  # the route is put back when the app ends


@pytest.mark.parametrize("name", [ds.RUNS_FILE, "series.json"])
def test_a_fifo_in_the_dataset_is_refused_or_replaced_without_blocking(dataset: Path,
                                                                       name: str) -> None:
    """A FIFO put in place of the runs table blocked `pt2pt datasets` for ever (so did one in
    place of the summary, which is only a cache: it is recomputed and written over)."""
    (dataset / name).unlink(missing_ok=True)
    os.mkfifo(dataset / name)
    res = subprocess.run([sys.executable, "-m", "kit", "datasets", str(dataset)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    if name == ds.RUNS_FILE:
        assert res.returncode == 2 and "named pipe" in res.stderr and name in res.stderr
    else:
        assert res.returncode == 0 and "shm" in res.stdout and "tcp" in res.stdout
        assert (dataset / name).is_file()


def test_a_file_given_as_the_dataset_is_not_called_missing(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    for path in (Path("/dev/null"), tmp_path / "notes.txt"):
        with pytest.raises(UserError, match="is not a folder"):
            ds.scan(path)


def test_a_killed_writers_leftovers_go_at_the_next_open(dataset: Path) -> None:
    folder = _part(dataset, "tcp").parent
    leftovers = [folder / "pending-0.parquet.0.999.tmp", folder / "part-feedfacefeedface00.parquet",
                 dataset / (ds.RUNS_FILE + ds.TMP_SUFFIX)]
    for path in leftovers:
        path.write_bytes(b"half")
    lock = os.open(dataset / ds.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:  # an ingest holds the lock: its temp files are live, nothing is touched
        fcntl.flock(lock, fcntl.LOCK_EX)
        _scan(dataset)
        assert all(p.exists() for p in leftovers)
    finally:
        os.close(lock)
    frame, said = _scan(dataset)
    assert not any(p.exists() for p in leftovers) and not said
    assert frame.height == 1600


@settings(max_examples=40, **SETTINGS)
@given(st.lists(st.tuples(st.sampled_from(["flip", "cut"]), st.floats(0, 1)), min_size=1,
                max_size=3), st.sampled_from(["tcp", "shm"]))
def test_any_damage_is_left_out_whole_or_not_at_all(tmp_path_factory: pytest.TempPathFactory,
                                                    damage: list[tuple[str, float]],
                                                    transport: str) -> None:
    """Whatever is flipped or cut in one part: reading never fails, the other run is read
    exactly, and the damaged run is either read exactly (damage undone by a second flip) or
    left out with a warning naming its part."""
    root = tmp_path_factory.mktemp("fuzz")
    out = root / "ds"
    ingest([_csv(root / "in" / "tcp.csv", 1, 200)], out, campaign="c", transport="tcp")
    ingest([_csv(root / "in" / "shm.csv", 2, 200)], out, campaign="c", transport="shm")
    clean, _ = _scan(out)
    part = _part(out, transport)
    for kind, where in damage:
        size = part.stat().st_size
        if kind == "flip":
            _flip(part, int(where * (size - 1)))
        else:
            os.truncate(part, int(where * size))
    frame, said = _scan(out)
    other = "shm" if transport == "tcp" else "tcp"
    assert frame.filter(pl.col("transport") == other).equals(
        clean.filter(pl.col("transport") == other))
    mine = frame.filter(pl.col("transport") == transport)
    if said:
        assert mine.height == 0 and part.name in said[0]
    else:
        assert mine.equals(clean.filter(pl.col("transport") == transport))
    assert np.isfinite(frame["time"].to_numpy()).all()
