"""A send's bytes do not outlive its sample: the next sample starts on an empty link.

``send``/``isend`` are timed to *local* completion, so their bytes can still be queued in
the socket or the shaped link when the plan's next entry starts. On the shaped local
cluster this made 28 % of the small ping-pongs that followed a send stall behind it
(docs/simgrid.md, kit/fit/carryover.py). The probe now has the receiver confirm delivery
after the timed region; this test runs a shuffled ping-pong + send plan over a 200 Mbit/s
link (1 MiB sends: 42 ms to drain) and asks the fit's own carry-over test whether the
ping-pongs that followed a send are slower than the others. Before the fix they were
(p90 of time / the size's median hundreds of times the others'); now they are not.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kit.fit.carryover import assess
from tests.conftest import mpi_env

pytestmark = [pytest.mark.mpi, pytest.mark.root, pytest.mark.slow]


def test_pingpongs_after_a_send_do_not_wait_for_its_bytes(
        probe_bin: Path, shaped_namespace: str, tmp_path: Path) -> None:
    import subprocess

    prefix = tmp_path / "mixed"
    cmd = ["ip", "netns", "exec", shaped_namespace, "mpirun", "-np", "2", "--oversubscribe",
           "--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", "self,tcp",
           "--mca", "btl_tcp_if_include", "lo", "--mca", "orte_tmpdir_base", str(tmp_path),
           str(probe_bin), "--op", "pingpong,send", "--sizes", "list:8,1048576",
           "--samples", "80", "--warmup", "2", "--seed", "3", "--output", str(prefix)]
    proc = subprocess.run(cmd, env=mpi_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(f"{prefix}.samples.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f)]
    op_at = {int(r["seq"]): r["op"] for r in rows}
    pingpongs = [r for r in rows if r["op"] == "pingpong" and r["warmup"] == "0"]
    prev = [op_at.get(int(r["seq"]) - 1) for r in pingpongs]
    assert prev.count("send") >= 30 and prev.count("pingpong") >= 30, prev
    found = assess("pingpong", [float(r["size"]) for r in pingpongs],
                   [float(r["time"]) for r in pingpongs], prev)
    print(found)
    assert found.n_after_async == prev.count("send")
    assert found.p_value is not None and not found.found, found
