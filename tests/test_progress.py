"""Progress bars appear on a terminal's stderr only, never in a pipe, never with --quiet."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_tui_pilot import synthetic_csv


def _run_on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal (as a person would see it); stdout piped."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"}
    env.pop("PT2PT_QUIET", None)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                            env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=300)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def raw_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("raw")
    for i in range(3):
        synthetic_csv(folder / f"pingpong-tcp-{i}.csv", 1.0, 3000, i)
    return folder


def test_ingest_draws_a_bar_on_a_terminal_only(raw_files: Path, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "kit"]
    rc, tty = _run_on_a_terminal([*base, "ingest", str(raw_files), "--dataset",
                                  str(tmp_path / "a")])
    assert rc == 0, tty
    assert "ingest" in tty and "%" in tty and "pingpong-tcp-" in tty  # the bar and its file

    rc, quiet = _run_on_a_terminal([*base, "--quiet", "ingest", str(raw_files), "--dataset",
                                    str(tmp_path / "b")])
    assert rc == 0 and "%" not in quiet and "\r" not in quiet, quiet

    piped = subprocess.run([*base, "ingest", str(raw_files), "--dataset", str(tmp_path / "c")],
                           capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "%" not in piped.stderr and "\r" not in piped.stderr
    assert "3 file(s)" in piped.stdout or "rows" in piped.stdout  # the summary still prints


def test_fit_shows_it_is_working_on_a_terminal(raw_files: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    subprocess.run([sys.executable, "-m", "kit", "ingest", str(raw_files / "pingpong-tcp-0.csv"),
                    "--dataset", str(dataset)], check=True, capture_output=True, timeout=300)
    rc, tty = _run_on_a_terminal([sys.executable, "-m", "kit", "fit", str(dataset), "-o",
                                  str(tmp_path / "m.json")])
    assert rc == 0, tty
    assert "fit" in tty and "regimes, families and noise" in tty
    assert (tmp_path / "m.json").is_file()


def test_track_yields_every_item_with_or_without_a_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.core import progress

    assert list(progress.track(iter("abc"), "x", 3)) == ["a", "b", "c"]  # no terminal: no bar
    monkeypatch.setenv(progress.QUIET_ENV, "1")
    assert progress.quiet() and not progress.bars_enabled()
    monkeypatch.setenv(progress.QUIET_ENV, "0")
    progress.set_quiet(True)
    try:
        assert progress.quiet()
    finally:
        progress.set_quiet(False)
    assert not progress.quiet()
