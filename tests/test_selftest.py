"""``pt2pt selftest``: the shaped two-node ground truth (tbf 1gbit -> 0.956 x 125 MB/s)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kit.core.errors import UserError
from kit.measure import localcluster
from kit.outputs import selftest


def test_fit_bandwidth_recovers_a_known_slope() -> None:
    rng = np.random.default_rng(3)
    size = rng.uniform(4 << 20, 16 << 20, 60)
    bw = 119.5e6
    one_way = (25e-6 + size / bw) * rng.lognormal(0.0, 0.01, size.size)
    measured, method = selftest.fit_bandwidth(size, one_way)
    assert abs(measured / bw - 1) < 0.02, (measured, method)


def test_refuses_to_run_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError) as info:
        selftest.run_selftest()
    assert "needs root" in info.value.paragraph()


@pytest.mark.root
@pytest.mark.slurm
@pytest.mark.mpi
@pytest.mark.slow
def test_selftest_measures_the_shaped_link(tmp_path: Path, probe_bin: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("pt2pt selftest needs root (Slurm daemons, namespaces, tc)")
    if not all(Path("/usr/sbin", b).exists() for b in ("slurmctld", "slurmd", "munged")) \
            or shutil.which("tc") is None:
        pytest.skip("Slurm daemons or iproute2 missing: run make system-deps")
    state = selftest.DEFAULT_STATE_DIR
    env = dict(os.environ, PT2PT_PROBE=str(probe_bin), PT2PT_SITE_CONFIG=str(tmp_path / "none"))
    proc = subprocess.run([sys.executable, "-m", "kit", "selftest", "--work-dir",
                           str(tmp_path / "work"), "--samples", "12"],
                          capture_output=True, text=True, timeout=900, env=env)
    # The cluster is torn down whatever the result.
    assert not localcluster.is_up(state)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"measured ([\d.]+) MB/s, expected ([\d.]+) MB/s", proc.stdout)
    assert m, proc.stdout
    measured, expected = float(m[1]), float(m[2])
    assert expected == pytest.approx(119.5, abs=0.2)
    assert abs(measured / expected - 1) <= 0.05
    assert "PASS" in proc.stdout
    # The samples really crossed between the two nodes.
    meta = next((tmp_path / "work" / "campaign" / "jobs").glob("*/probe.meta.json")).read_text()
    hosts = re.search(r'"hosts"\s*:\s*\[\s*"([^"]+)"\s*,\s*"([^"]+)"', meta)
    assert hosts and hosts[1] != hosts[2]
