"""Ingest with bounded memory, and nothing left out silently (issue 53, lines 8, 9 and 10).

Line 8: a single-line CSV made ``--tool csv`` take 24 GB and ``--tool calibration`` 8 GB,
CR-only line ends made Polars abort: the CSV is now streamed in blocks with a line-length
limit (kit.tools.parsing.line_blocks), text outputs are read whole only up to a size cap.
Line 9: symbolic links to folders are followed (each folder once), unreadable folders and
FIFOs are reported, a dataset inside the ingested folder is skipped, a samples file holding
more lines than its meta says is refused, a UTF-8 byte order mark is accepted by every format.
Line 10: SIGTERM in an ingest's first moments is one line and exit 143; a killed ingest's
temp files go at the next open (tests/test_dataset_damage.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.tools import parsing as common

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}
BOM = b"\xef\xbb\xbf"


def _pt2pt(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def _peak_rss_mib(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``pt2pt ARGS`` in a child and return its result and peak resident memory."""
    code = ("import resource, sys; from kit.cli import main; rc = main(sys.argv[1:]); "
            "sys.stderr.write('PEAK %d\\n' % resource.getrusage(resource.RUSAGE_SELF)"
            ".ru_maxrss); sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    peak = next(int(line.split()[1]) for line in res.stderr.splitlines()
                if line.startswith("PEAK "))
    return res, peak / 1024


@pytest.mark.parametrize("tool", ["csv", "calibration"])
def test_a_huge_single_line_is_refused_with_bounded_memory(tool: str, tmp_path: Path) -> None:
    """A 64 MiB line (the issue's was 1 GB): one paragraph naming line 2, and the process
    never holds more than a block of it."""
    path = tmp_path / ("big.csv" if tool == "csv" else "big_PingPong.csv")
    with open(path, "wb") as fh:
        fh.write(b"size,duration\n" if tool == "csv" else b"MPI_Send,8,0.1,0.2\n")
        chunk = b"9" * (1 << 20)
        for _ in range(64):
            fh.write(chunk)
    baseline = _peak_rss_mib("ingest", str(tmp_path / "none.csv"), "--tool", tool,
                             "--dataset", str(tmp_path / "ds"))[1]
    res, peak = _peak_rss_mib("ingest", str(path), "--tool", tool, "--dataset",
                              str(tmp_path / "ds"))
    path.unlink()
    assert res.returncode == 1 and "Traceback" not in res.stderr
    text = " ".join(res.stderr.split())
    assert "line longer than 1 MiB" in text and f"{path}:2" in text, text
    assert peak - baseline < 100, f"peak {peak:.0f} MiB, {baseline:.0f} MiB without the file"


@pytest.mark.parametrize("ending", [b"\r", b"\r\n", b"\n"])
def test_line_endings_and_a_bom_read_alike(ending: bytes, tmp_path: Path) -> None:
    lines = [b"size,duration"] + [b"%d,%.6e" % (8 * k, 1e-6 * (k + 1)) for k in range(500)]
    path = tmp_path / "in" / "pp.csv"
    path.parent.mkdir()
    path.write_bytes(BOM + ending.join(lines) + ending)
    report = ingest([path], tmp_path / "ds", campaign="c")
    assert report.ok and report.rows_added == 500
    rows = ds.scan(tmp_path / "ds").collect().sort("seq")
    assert rows["size"].to_list() == [8 * k for k in range(500)]


def test_every_format_accepts_a_byte_order_mark(tmp_path: Path, fixtures_dir: Path,
                                                refdata_dir: Path) -> None:
    sources = [fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt",
               fixtures_dir / "skampi" / "skampi_pingpong_tcp.sko",
               fixtures_dir / "logp_mpi" / "logp_test.out.Send.Recv.tcp",
               fixtures_dir / "reprompi" / "reprompi_sendrecv_raw_nrep100_tcp.txt",
               fixtures_dir / "netgauge" / "netgauge_loggp_tcp_ng.out",
               refdata_dir / "platform-calibration" / "graphene_eth_example" /
               "graphene_eth_Recv.csv",
               refdata_dir / "pycewise" / "pingpong_loopback.csv"]
    folder = tmp_path / "bom"
    folder.mkdir()
    for src in sources:
        (folder / src.name).write_bytes(BOM + src.read_bytes())
    (folder / "p.samples.csv").write_bytes(
        BOM + b"seq,op,size,count,time,call,warmup\n0,pingpong,8,1,2.0e-06,,0\n")
    report = ingest([folder], tmp_path / "ds")
    assert report.ok, report.files_failed
    assert report.files_ok == len(sources) + 1


def test_folders_are_walked_without_leaving_anything_out_silently(
        tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt", root)
    shutil.copy(fixtures_dir / "osu" / "osu_bw_tcp_7.4.txt", tmp_path / "elsewhere")
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    (root / "sub" / "loop").symlink_to(root)  # a cycle: walked once
    os.mkfifo(root / "pipe")
    (root / "denied").mkdir()
    shutil.copy(fixtures_dir / "osu" / "osu_bibw_tcp_7.4.txt", root / "denied")
    real_scandir = os.scandir

    def scandir(path: object) -> object:  # root reads any folder: deny it the user's way
        if Path(str(path)).name == "denied":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    report = ingest([root], root / "ds")  # the dataset inside the folder ingested
    assert report.files_ok == 2  # its own file and the linked folder's
    failed = dict(report.files_failed)
    assert "permission denied" in failed[root / "denied"].lower()
    skipped = dict(report.files_skipped)
    assert "named pipe" in skipped[root / "pipe"]
    again = ingest([root], root / "ds")  # the dataset's own files are never read as input
    assert "pt2pt dataset" in dict(again.files_skipped)[root / "ds"]
    assert not [p for p, _ in again.files_failed if "ds" in p.parts]


def test_a_samples_file_concatenated_with_itself_is_refused(tmp_path: Path) -> None:
    import json

    body = "".join(f"{k},pingpong,8,1,2.0e-06,,0\n" for k in range(50))
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "p.samples.csv").write_text("seq,op,size,count,time,call,warmup\n" + body + body)
    (folder / "p.meta.json").write_text(json.dumps({"samples_written": 50, "complete": True,
                                                    "hosts": ["a", "a"]}))
    report = ingest([folder], tmp_path / "ds")
    assert report.runs_added == 0
    assert "holds more than this run" in report.files_failed[0][1]


def test_a_fifo_given_as_input_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "out.txt"
    os.mkfifo(fifo)
    res = _pt2pt("ingest", str(fifo), "--dataset", str(tmp_path / "ds"), timeout=120)
    assert res.returncode == 1 and "named pipe" in res.stderr and "Traceback" not in res.stderr


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (/proc/PID/status SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("SigCgt:")), 16)
    return bool(mask >> (sig - 1) & 1)


def test_sigterm_in_the_first_moments_is_one_line(tmp_path: Path, fixtures_dir: Path) -> None:
    """The handler is the first thing pt2pt installs: SIGTERM as soon as it is there (before
    Polars is even imported) gives exit 143 and one line, not a silent -15."""
    proc = subprocess.Popen([sys.executable, "-m", "kit", "ingest",
                             str(fixtures_dir / "osu"), "--dataset", str(tmp_path / "ds")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _catches(proc.pid, signal.SIGTERM) and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err


@settings(max_examples=40, **SETTINGS)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.floats(1e-9, 1.0)), min_size=1,
                max_size=40),
       st.sampled_from([b"\n", b"\r\n", b"\r"]), st.booleans(),
       st.integers(1, 64))
def test_any_csv_reads_the_same_whatever_its_blocks(rows: list[tuple[int, float]],
                                                    ending: bytes, bom: bool, block: int) -> None:
    """The streamed reader gives the same rows for any block size (a block boundary inside
    a line, between \\r and \\n, inside the byte order mark)."""
    import tempfile

    text = ending.join([b"size,duration"] + [b"%d,%r" % (s, t) for s, t in rows]) + ending
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.csv"
        path.write_bytes((BOM if bom else b"") + text)
        saved = common.BLOCK_BYTES
        common.BLOCK_BYTES = block
        try:
            got = b"".join(b for _, b in common.line_blocks(path))
            first = [n for n, _ in common.line_blocks(path)][:1]
        finally:
            common.BLOCK_BYTES = saved
    want = b"".join(b"%d,%r\n" % (s, t) for s, t in rows)
    assert got == want and first == [2]


def test_the_tui_names_the_right_ingest_option(tmp_path: Path) -> None:
    """It suggested `pt2pt ingest FILES -o DIR`; ingest has no -o."""
    from kit.core.errors import UserError
    from tui.loading import _check_dataset_dir

    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError) as info:
        _check_dataset_dir(tmp_path / "empty")
    assert "--dataset DIR" in info.value.paragraph() and " -o " not in info.value.paragraph()
