"""The sustained rate and burst of a token-bucket link (kit.outputs.export.shaper), on
synthetic truth: a ping-pong that sees the burst and a stream that sees the sustained rate;
the platform carries both and SimGrid 3.32 replays the bucket (issue 57)."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from kit.cli import main
from kit.model import RegimeModel
from kit.outputs.export.platform import ClusterPlatform, cluster_platform
from kit.outputs.export.shaper import Shaper, shaper_from_models

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None, reason="SimGrid is not installed (apt-get install "
    "libsimgrid-dev g++); CI installs it")

# The truth: a 50 MB/s line (the veth and TCP) behind a token bucket of 25 MB/s, burst 64 kB
# (the shaped local cluster's tbf), 10 us of latency; the stream sends windows of 16 messages.
RATE, BURST, LINE, LAT, WINDOW = 25e6, 64000.0, 50e6, 10e-6, 16


def one_way(size: np.ndarray, burst: float = BURST) -> np.ndarray:
    """A message on an idle link through a tbf: at line speed while the bucket has tokens
    (they drain at LINE - RATE: burst * LINE / (LINE - RATE) bytes), at the rate after."""
    s = np.asarray(size, dtype=float)
    fast = burst * LINE / (LINE - RATE)
    return LAT + np.minimum(s, fast) / LINE + np.maximum(0.0, s - fast) / RATE


def gap(size: np.ndarray, burst: float = BURST) -> np.ndarray:
    """The stream's per-message gap: one window of WINDOW messages, over WINDOW."""
    return one_way(WINDOW * np.asarray(size, dtype=float), burst) / WINDOW


def _fit(truth: np.ndarray, top: int, seed: int) -> RegimeModel:
    rng = np.random.default_rng(seed)
    sizes = np.repeat(2.0 ** np.arange(0, top + 1), 40)  # the calibration's power-of-2 grid
    return RegimeModel().fit(sizes, truth(sizes) * rng.lognormal(0.0, 0.02, sizes.size))


@cache
def _models(burst: float = BURST) -> tuple[RegimeModel, RegimeModel]:
    return (_fit(lambda s: one_way(s, burst), 22, 1), _fit(lambda s: gap(s, burst), 20, 2))


def test_rate_and_burst_are_recovered_from_a_ping_pong_and_a_stream() -> None:
    pingpong, stream = _models()
    shaper = shaper_from_models(pingpong, stream)
    assert shaper.rate == pytest.approx(RATE, rel=0.03)
    assert shaper.burst == pytest.approx(BURST, rel=0.15)
    assert shaper.line == pytest.approx(LINE, rel=0.10)
    # the ping-pong's own bandwidth is not the sustained rate: a lone 64 KiB message is
    # nearly twice as fast as the sustained rate would carry it
    assert float(pingpong.predict(np.array([65536.0]))[0]) < 0.6 * 65536 / RATE
    assert shaper_from_models(pingpong, stream, burst=1000.0).burst == 1000.0


def test_a_link_without_a_bucket_has_no_burst() -> None:
    pingpong, stream = _models(0.0)
    shaper = shaper_from_models(pingpong, stream)
    assert shaper.rate == pytest.approx(RATE, rel=0.03)
    assert shaper.burst < 0.1 * BURST  # a few bytes ahead at most: harmless


def test_cli_exports_the_sustained_rate(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from kit.model.io import save_model

    pingpong, stream = _models()
    pp = save_model(pingpong, tmp_path / "pp.json", provenance={"series": {"op": "pingpong"}})
    st = save_model(stream, tmp_path / "st.json", provenance={"series": {"op": "stream"}})
    out = tmp_path / "plat"
    assert main(["export", str(pp), "--simgrid", "--hosts", "2", "--stream", str(st),
                 "-o", str(out)]) == 0
    assert "token bucket" in capsys.readouterr().out
    doc = json.loads((out / "platform.json").read_text())
    assert doc["shaper"]["rate_Bps"] == pytest.approx(RATE, rel=0.03)
    assert doc["shaper"]["burst_bytes"] == pytest.approx(BURST, rel=0.15)
    assert doc["shaper"]["line_Bps"] == pytest.approx(LINE, rel=0.10)
    # the ping-pong's factors are what they were without the bucket
    assert main(["export", str(pp), "--simgrid", "--hosts", "2", "-o", str(tmp_path / "b")]) == 0
    table = (out / "network.tsv").read_text().splitlines()
    assert [r for r in table if not r.startswith("shaper ")] == (
        tmp_path / "b" / "network.tsv").read_text().splitlines()
    assert sum(r.startswith("shaper ") for r in table) == 1
    assert json.loads((tmp_path / "b" / "platform.json").read_text())["shaper"] is None
    capsys.readouterr()
    # refusals: --burst alone, a model of another op, an unreadable burst
    assert main(["export", str(pp), "--simgrid", "--hosts", "2", "--burst", "64K"]) == 2
    assert "--burst: needs --stream" in " ".join(capsys.readouterr().err.split())
    assert main(["export", str(pp), "--simgrid", "--hosts", "2", "--stream", str(pp)]) == 2
    assert "op=pingpong, not of the probe's stream op" in " ".join(
        capsys.readouterr().err.split())
    assert main(["export", str(pp), "--simgrid", "--hosts", "2", "--stream", str(st),
                 "--burst", "lots"]) == 2
    assert "--burst" in capsys.readouterr().err
    assert main(["export", str(pp), "--simgrid", "--stream", str(st)]) == 2
    assert "needs --hosts" in capsys.readouterr().err


STREAM_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* stream SIZE WINDOW REPS: REPS windows of WINDOW back-to-back messages 0 -> 1, each closed
 * by a zero-byte ack (the probe's stream op); prints the per-message gap of each window. */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size = atoi(argv[1]), w = atoi(argv[2]), reps = atoi(argv[3]);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *buf = calloc((size_t)size, 1);
  MPI_Request *req = malloc(sizeof *req * (size_t)w);
  for (int r = 0; r < reps; r++) {
    double t0 = MPI_Wtime();
    for (int k = 0; k < w; k++) {
      if (rank == 0) MPI_Isend(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[k]);
      else MPI_Irecv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[k]);
    }
    MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
    if (rank == 0) {
      MPI_Recv(NULL, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("%.9g\n", (MPI_Wtime() - t0) / w);
    } else {
      MPI_Send(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
  }
  free(req); free(buf);
  MPI_Finalize();
  return 0;
}
"""


def _stream(platform: ClusterPlatform, folder: Path, size: int, window: int) -> list[float]:
    """Per-message gaps of 3 windows of the stream program on ``platform`` (no noise)."""
    from kit.outputs.simulate import RUN_CFG, build

    _, plugin = build(noise=True)
    assert plugin is not None
    source = folder.parent / "stream.c"
    binary = folder.parent / "stream"
    if not binary.exists():
        source.write_text(STREAM_C)
        subprocess.run(["smpicc", "-O2", "-o", str(binary), str(source)], check=True,
                       capture_output=True, cwd=folder.parent)
    platform.write(folder)
    (folder / "hf").write_text("node-0\nnode-1\n")
    proc = subprocess.run(["smpirun", *platform.smpirun_args(folder, plugin, noise=False),
                           "-hostfile", str(folder / "hf"), "-np", "2", *RUN_CFG,
                           str(binary), str(size), str(window), "3"],
                          capture_output=True, text=True, timeout=300, cwd=folder, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [float(v) for v in proc.stdout.split()]


@needs_simgrid
def test_simgrid_streams_at_the_sustained_rate_and_lone_messages_keep_their_factors(
        tmp_path: Path) -> None:
    """With the bucket, a window of 16 x 64 KiB moves at the sustained rate (the truth's gap,
    every window: the bucket refills only by what the ack's round trip lets in); without it,
    at the ping-pong's burst speed. A window of one message (a lone message on an idle link)
    is the same with and without the bucket."""
    from tests.test_platform import _pingpong

    pingpong, stream = _models()
    shaper = shaper_from_models(pingpong, stream)
    plain = cluster_platform(pingpong, hosts=2)
    shaped = cluster_platform(pingpong, hosts=2, shaper=shaper)
    assert "token bucket" in " ".join(shaped.notes)
    size = 65536
    truth = float(gap(np.array([size]))[0])
    with_bucket = _stream(shaped, tmp_path / "shaped", size, WINDOW)
    without = _stream(plain, tmp_path / "plain", size, WINDOW)
    assert with_bucket[0] == pytest.approx(truth, rel=0.10)
    # later windows start with the bucket nearly empty: the sustained rate, nothing more
    for g in with_bucket[1:]:
        assert g == pytest.approx(size / RATE, rel=0.10)
    assert max(without) < 0.6 * truth
    for s in (size, 1048576):  # one ping-pong per run: each message finds its link idle
        lone = _pingpong(shaped, tmp_path / "shaped", "node-0\nnode-1\n", [s])[s]
        alone = _pingpong(plain, tmp_path / "plain", "node-0\nnode-1\n", [s])[s]
        assert lone == pytest.approx(alone, rel=0.02), s
        assert lone == pytest.approx(float(pingpong.predict(np.array([s]))[0]), rel=0.02), s


def test_the_table_line_is_what_the_plugin_reads() -> None:
    assert Shaper(25e6, 64000.0).table_line() == "shaper 25000000 64000"
    assert Shaper(25e6, 64000.0, 5e7).table_line() == "shaper 25000000 64000 50000000"
