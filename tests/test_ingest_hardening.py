"""Ingest when the world misbehaves: disk full, read-only dataset, permission denied, signals.

Each case runs the real ``pt2pt ingest`` in a subprocess and checks what a user would see
(exit code, one paragraph, no traceback) and what is left on disk (the previous dataset
unchanged and readable, no ``*.tmp``, a run either fully committed or absent). Disk full and
read-only use a real tmpfs mounted for the test (root only); signals are real SIGTERM/SIGINT,
including one held inside the commit window through the ``PT2PT_TEST_COMMIT_PAUSE`` hook.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.data.ingest.orchestrate import (
    DatasetWriteError,
    Interrupted,
    stop_on_signals,
    storage_error,
)
from kit.tools import probe
from tests.builders import dataset_snapshot as _snapshot
from tests.conftest import small_tmpfs

REPO = Path(__file__).resolve().parent.parent


def _random_probe_csv(path: Path, rows: int, seed: int = 0) -> Path:
    """A probe samples file whose times do not compress (so its part is big)."""
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame({
        "seq": np.arange(rows, dtype=np.uint32), "op": "pingpong",
        "size": rng.integers(0, 1 << 20, rows), "count": 1,
        "time": rng.lognormal(-11, 0.3, rows), "call": None, "warmup": 0})
    frame.with_columns(pl.col("call").cast(pl.Float64)).write_csv(path, float_scientific=True)
    return path


def _pt2pt(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kit", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _no_tmp(dataset: Path) -> None:
    assert not [p for p in dataset.rglob("*") if p.name.endswith(".tmp")]


def _all_or_nothing(dataset: Path) -> None:
    """Every committed run has exactly its n_samples rows; no part without a run."""
    runs = ds.runs(dataset)
    counts = ds.scan(dataset).group_by("run_id").len().collect()
    have = dict(zip(counts["run_id"].to_list(), counts["len"].to_list(), strict=True))
    for run_id, n in zip(runs["run_id"].to_list(), runs["n_samples"].to_list(), strict=True):
        assert have.get(run_id) == n, (run_id, n, have.get(run_id))
    parts = {ds.run_of_part(p.name) for p in (dataset / "samples").rglob("part-*.parquet")}
    assert parts <= set(runs["run_id"].to_list())


# ------------------------------------------------------------------ storage errors

@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 20 MiB tmpfs, unmounted afterwards."""
    with small_tmpfs(tmp_path, "20m") as mnt:
        yield mnt


def _fill(fs: Path, leave: int) -> None:
    """Write a ballast file until about ``leave`` bytes are free."""
    st = os.statvfs(fs)
    free = st.f_bavail * st.f_frsize
    with open(fs / "ballast", "wb") as fh:
        fh.write(b"\0" * max(free - leave, 0))


def test_disk_full_is_one_paragraph_and_the_dataset_is_unchanged(small_fs: Path,
                                                                 tmp_path: Path,
                                                                 osu_dir: Path) -> None:
    dataset = small_fs / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    before = _snapshot(dataset)
    big = _random_probe_csv(tmp_path / "big.samples.csv", 200_000)
    _fill(small_fs, 256 << 10)
    proc = _pt2pt("ingest", str(osu_dir / "osu_bw_tcp_7.4.txt"), str(big),
                  "--dataset", str(dataset))
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "no space left on the device (ENOSPC)" in err and "nothing of this ingest" in err
    assert len([line for line in err.splitlines() if line.startswith("pt2pt: error")]) == 1
    _no_tmp(dataset)
    after = _snapshot(dataset)
    assert before[0].equals(after[0]) and before[1].equals(after[1])
    (small_fs / "ballast").unlink()  # space again: the same command now works
    proc = _pt2pt("ingest", str(osu_dir / "osu_bw_tcp_7.4.txt"), str(big),
                  "--dataset", str(dataset))
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    _all_or_nothing(dataset)
    assert ds.runs(dataset).height == 3


def test_read_only_dataset_is_one_paragraph(small_fs: Path, osu_dir: Path) -> None:
    dataset = small_fs / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    before = _snapshot(dataset)
    res = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot remount read-only: {res.stderr.strip()}")
    proc = _pt2pt("ingest", str(osu_dir / "osu_bw_tcp_7.4.txt"), "--dataset", str(dataset))
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "read-only (EROFS)" in err, err
    after = _snapshot(dataset)
    assert before[0].equals(after[0]) and before[1].equals(after[1])


@pytest.mark.parametrize("exc", [
    PermissionError(errno.EACCES, "Permission denied"),
    OSError(errno.ENOSPC, "No space left on device"),
    pl.exceptions.ComputeError("failed to write parquet: No space left on device (os error 28)"),
    pl.exceptions.ComputeError("I/O error: Permission denied (os error 13)"),
])
def test_storage_errors_are_recognised_in_both_forms(exc: BaseException, tmp_path: Path) -> None:
    err = storage_error(exc, tmp_path)
    assert isinstance(err, DatasetWriteError) and err.exit_code == 1
    assert str(tmp_path) in err.paragraph() and "as it was before" in err.paragraph()
    assert storage_error(OSError(errno.ENOENT, "x"), tmp_path) is None
    assert storage_error(pl.exceptions.ComputeError("cast failed"), tmp_path) is None


def test_permission_denied_stops_the_ingest_in_process(tmp_path: Path, osu_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Root ignores file modes, so EACCES is raised where a user would meet it: writing the
    part. The ingest stops with one error (not one per file) and commits nothing."""
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    before = _snapshot(dataset)

    def denied(*_a: object, **_k: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", denied)
    with pytest.raises(DatasetWriteError, match="permission denied"):
        ingest([osu_dir / "osu_bw_tcp_7.4.txt", osu_dir / "osu_bibw_tcp_7.4.txt"], dataset)
    monkeypatch.undo()
    after = _snapshot(dataset)
    assert before[0].equals(after[0]) and before[1].equals(after[1])
    _no_tmp(dataset)


# ------------------------------------------------------------------ signals

def _wait_for(pred: object, proc: subprocess.Popen[str], limit: float = 120) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_while_writing_commits_nothing(sig: signal.Signals, tmp_path: Path,
                                              osu_dir: Path) -> None:
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    before = _snapshot(dataset)
    big = _random_probe_csv(tmp_path / "big.samples.csv", 1_500_000)
    proc = _pt2pt("ingest", str(osu_dir / "osu_bw_tcp_7.4.txt"), str(big),
                  "--dataset", str(dataset))
    try:
        seen = _wait_for(lambda: any(p.name.endswith(".tmp")
                                     for p in (dataset / "samples").rglob("tool=probe/*")), proc)
        assert seen, "the ingest finished before the signal; use a bigger input"
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert f"stopped by {sig.name}: nothing of this ingest was committed" in err
    _no_tmp(dataset)
    after = _snapshot(dataset)
    assert before[0].equals(after[0]) and before[1].equals(after[1])


class _RaisesWhenCollected:
    """Python reports an exception raised in ``__del__`` as "Exception ignored", the same
    path (sys.unraisablehook) as native code that swallows one raised in its callback."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __del__(self) -> None:
        raise self.exc


def test_a_lost_signal_prints_no_traceback_other_lost_errors_still_do(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in CI: SIGTERM landed while Polars converted a data type in a callback; the
    ingest stopped as interrupted with its message, but Python first printed "Exception
    ignored in: 'DataTypeClass'" and a traceback of the handler's exception. The report of
    such a lost exception goes through sys.unraisablehook (here a recorder standing for
    Python's default, which prints)."""
    reported: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    with stop_on_signals():
        _RaisesWhenCollected(Interrupted(signal.SIGTERM))
        assert reported == []  # raised again at the next safe point instead
        _RaisesWhenCollected(ValueError("a real bug"))
        assert [type(e) for e in reported] == [ValueError]
    _RaisesWhenCollected(Interrupted(signal.SIGTERM))  # outside an ingest: reported as usual
    assert [type(e) for e in reported] == [ValueError, Interrupted]


@pytest.mark.parametrize("then", ["fails", "carries-on"])
def test_a_signal_lost_in_native_code_still_stops_the_ingest(
        then: str, tmp_path: Path, osu_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in CI: SIGINT landed while Polars was calling back into Python; Polars printed
    "Exception ignored" for the handler's exception and failed with a TypeError of its own,
    and the user got a traceback and exit 1. Here the parser swallows the handler's exception
    the same way, then fails or carries on: either way the ingest stops as interrupted, with
    nothing committed and no temp file left."""
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    before = _snapshot(dataset)
    big = _random_probe_csv(tmp_path / "big.samples.csv", 2_000)
    real = probe._frames

    # The probe's slicer runs on the main thread (its slices are parsed on the writers',
    # where no signal handler runs): the signal lands while it is in a callback.
    def slices_swallowing_the_signal(*args: object, **kwargs: object) -> Iterator[object]:
        for item in real(*args, **kwargs):  # type: ignore[arg-type]
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler runs (and raises) here
            except Interrupted:
                pass  # what native code does with it: "Exception ignored"
            if then == "fails":
                raise TypeError("'<unprintable str object>' is not a Polars data type")
            yield item

    monkeypatch.setattr(probe, "_frames", slices_swallowing_the_signal)
    with pytest.raises(Interrupted) as stop, stop_on_signals():
        ingest([osu_dir / "osu_bw_tcp_7.4.txt", big], dataset)
    assert stop.value.signum == signal.SIGINT and not stop.value.committed
    after = _snapshot(dataset)
    assert before[0].equals(after[0]) and before[1].equals(after[1])
    _no_tmp(dataset)


@pytest.mark.slow
def test_sigterm_inside_the_commit_window_finishes_the_commit(tmp_path: Path,
                                                              osu_dir: Path) -> None:
    dataset = tmp_path / "ds"
    ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
    marker = tmp_path / "in-commit"
    proc = _pt2pt("ingest", str(osu_dir / "osu_bw_tcp_7.4.txt"),
                  str(osu_dir / "osu_bibw_tcp_7.4.txt"), "--dataset", str(dataset),
                  env={"PT2PT_TEST_COMMIT_PAUSE": f"{marker}:3"})
    try:
        assert _wait_for(marker.exists, proc), "never reached the commit window"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert "2 run(s)" in err and "were committed before stopping" in err
    assert ds.runs(dataset).height == 3
    _no_tmp(dataset)
    _all_or_nothing(dataset)


@pytest.mark.slow
def test_sigterm_at_several_moments_leaves_all_or_nothing(tmp_path: Path,
                                                          osu_dir: Path) -> None:
    """Whatever the moment (start-up, reading, writing, committing, after), the dataset is
    readable, has no temp files, and the run is fully there or absent."""
    big = _random_probe_csv(tmp_path / "big.samples.csv", 600_000, seed=3)
    for k, delay in enumerate([0.5, 2.0, 4.0, 6.0, 9.0]):
        dataset = tmp_path / f"ds{k}"
        ingest([osu_dir / "osu_latency_tcp_7.4.txt"], dataset)
        proc = _pt2pt("ingest", str(big), "--dataset", str(dataset))
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode in (0, 128 + signal.SIGTERM, -signal.SIGTERM), err
        assert "Traceback" not in err
        _no_tmp(dataset)
        _all_or_nothing(dataset)
        assert ds.runs(dataset).height in (1, 2)


def test_a_signal_while_the_writers_are_joined_leaves_no_temp_part(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window the CI rehearsal of c246d98 hit (SIGTERM 0.5 s into an ingest left a
    ``pending-0.parquet.0.PID.tmp``): every frame written, the interruption raised while the
    writer threads are joined, outside the write loop's own clean-up. Deterministic: the
    pool's exit raises as the signal handler would."""
    from kit.data.ingest import orchestrate
    from kit.data.ingest.orchestrate import parse_file, write_part

    class InterruptedAtJoin(ThreadPoolExecutor):
        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            super().shutdown(wait=wait, cancel_futures=cancel_futures)
            raise Interrupted(signal.SIGTERM)

    run = parse_file(_random_probe_csv(tmp_path / "run.samples.csv", 5_000))
    folder = tmp_path / "part"
    folder.mkdir()
    monkeypatch.setattr(orchestrate, "ThreadPoolExecutor", InterruptedAtJoin)
    named: list[Path] = []
    with pytest.raises(Interrupted):
        write_part(run, folder / "pending-0.parquet", named)
    assert named, "the caller was not told the temp file's name"
    assert list(folder.iterdir()) == []
