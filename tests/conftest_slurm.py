"""Fixtures for tests that need a real Slurm cluster on this machine.

``slurm_cluster`` (session, 1 node) reuses the cluster `.ci/run` started (``PT2PT_SLURM_STATE``)
or a running default one (`make cluster-up`), else starts its own in a state dir of its own and
tears it down at the end. ``slurm_cluster_factory(nodes, shape)`` gives multi-node clusters
(each in its own state dir, so ports/addresses never clash with the 1-node one).
``sbatch_wait`` submits a script and waits for the job to leave the queue.
Tests are skipped (with the reason) when not root, since the daemons and namespaces need it;
a non-root run uses a running cluster only when PT2PT_SLURM_STATE names it (never implicitly
the default one, whose queue belongs to whoever started it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kit.measure import localcluster
from kit.measure.campaign.slurm import wait_gone
from kit.measure.localcluster import Cluster

#: Prefix of the state dirs the fixtures own; PT2PT_TEST_STATE_PREFIX moves them, so that two
#: checkouts' Slurm tests at the same time do not share (and reconfigure, and down) clusters.
STATE_PREFIX = os.environ.get("PT2PT_TEST_STATE_PREFIX", "/tmp/pt2pt-pytest")
#: State dirs the fixtures own (layout slots checked distinct in tests/test_localcluster.py).
PYTEST_STATE_DIRS = {n: Path(f"{STATE_PREFIX}-{n}n") for n in (1, 2, 3, 4, 5)}


def _skip_unless_can_start() -> None:
    if os.geteuid() != 0:
        pytest.skip("starting a local Slurm cluster needs root (daemons, network namespaces); "
                    "or set PT2PT_SLURM_STATE to a running cluster's state dir")
    missing = [b for b in ("slurmctld", "slurmd", "munged")
               if not Path("/usr/sbin", b).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run make system-deps")
    if shutil.which("ansible-playbook") is None and not (
            Path(sys.executable).parent / "ansible-playbook").exists():
        pytest.skip("ansible-playbook not installed: pip install -e '.[deploy]'")


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    """A running single-node cluster; ``cluster.env`` has SLURM_CONF."""
    state = os.environ.get("PT2PT_SLURM_STATE")
    if state:
        if not localcluster.is_up(state):
            pytest.fail(f"PT2PT_SLURM_STATE={state} but no cluster runs there "
                        "(cluster.json missing or a daemon died; see its log/ directory)")
        yield localcluster.load(state)
        return
    if localcluster.is_up(localcluster.DEFAULT_STATE_DIR):
        if os.geteuid() != 0:
            # Someone's `make cluster-up` (root's daemons, a queue others use): a non-root
            # run must not drop jobs into it unasked; the issue asks for a stated skip.
            pytest.skip(f"not root: the Slurm tests start their own cluster, which needs root; "
                        f"a cluster already runs in {localcluster.DEFAULT_STATE_DIR}: set "
                        f"PT2PT_SLURM_STATE={localcluster.DEFAULT_STATE_DIR} to run them on it")
        yield localcluster.load(localcluster.DEFAULT_STATE_DIR)
        return
    _skip_unless_can_start()
    cluster = localcluster.up(nodes=1, state_dir=PYTEST_STATE_DIRS[1])
    try:
        yield cluster
    finally:
        localcluster.down(cluster.state_dir)


@pytest.fixture(scope="session")
def slurm_cluster_factory() -> Iterator[Callable[..., Cluster]]:
    """``make(nodes=2, shape=None, accounting=False, switches=0, cpus=0, links=(),
    node_shapes=())``: a multi-node cluster, one per node count, downed at the end.

    Every test asks for the cluster it needs, as it needs it (so a test never restores what
    it changed for the next one). Asking again with another ``shape`` reshapes the same
    cluster's links in place; another ``cpus`` restarts its daemons with the new node
    description. Asking again for what is already up (daemons alive) runs no playbook: each
    run takes ~9 s even when it changes nothing.
    """
    started: list[Path] = []
    applied: dict[Path, tuple[object, ...]] = {}

    def make(nodes: int = 2, shape: tuple[str, str] | None = None,
             accounting: bool = False, switches: int = 0, cpus: int = 0,
             links: tuple[localcluster.LinkShape, ...] = (),
             node_shapes: tuple[localcluster.NodeShape, ...] = ()) -> Cluster:
        _skip_unless_can_start()
        if accounting and not all(Path("/usr/sbin", b).exists()
                                  for b in ("slurmdbd", "mariadbd")):
            pytest.skip("slurmdbd/mariadb-server not installed: the accounting cluster needs "
                        "them (apt-get install mariadb-server slurmdbd)")
        state = PYTEST_STATE_DIRS.get(nodes, Path(f"{STATE_PREFIX}-{nodes}n"))
        wanted = (shape, accounting, switches, cpus, links, node_shapes)
        if applied.get(state) == wanted and localcluster.is_up(state):
            return localcluster.load(state)
        applied.pop(state, None)  # a failed up leaves the cluster in no known configuration
        cluster = localcluster.up(nodes=nodes, state_dir=state, shape=shape,
                                  accounting=accounting, switches=switches, cpus=cpus,
                                  links=links, node_shapes=node_shapes)
        applied[state] = wanted
        if state not in started:
            started.append(state)
        return cluster

    try:
        yield make
    finally:
        # Each cluster has its own state dir, namespaces and ports: down them at once (one
        # playbook each, ~5 s of mostly waiting; 16 s one after another for three clusters).
        with ThreadPoolExecutor(max_workers=max(len(started), 1)) as pool:
            for done in [pool.submit(localcluster.down, state) for state in started]:
                done.result()


@pytest.fixture
def slurm_cluster_2n(slurm_cluster_factory: Callable[..., Cluster]) -> Cluster:
    """Two fake nodes (own network + UTS namespaces) joined by a bridge, unshaped (asked for
    each test: another test may have shaped the same cluster)."""
    return slurm_cluster_factory(2)


def sbatch_wait(cluster: Cluster, script: str, workdir: Path,
                timeout: float = 300.0) -> tuple[str, str]:
    """Submit ``script`` (a #!/bin/bash batch script) and wait; returns (JobState, output).

    The output file is ``workdir/job-<id>.out``; the job record stays queryable for MinJobAge.
    """
    path = workdir / "job.sbatch"
    path.write_text(script)
    env = cluster.environ()
    sub = subprocess.run(["sbatch", "--parsable", "-o", str(workdir / "job-%j.out"), str(path)],
                         capture_output=True, text=True, env=env, check=True, cwd=workdir)
    job = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, env=env)
        if q.returncode == 0 and not q.stdout.strip():
            break
        time.sleep(0.5)
    else:
        subprocess.run(["scancel", job], env=env, check=False)
        raise AssertionError(f"job {job} still queued/running after {timeout:.0f} s")
    show = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True,
                          env=env, check=True).stdout
    state = re.search(r"JobState=(\S+)", show)
    out = workdir / f"job-{job}.out"
    return (state.group(1) if state else "UNKNOWN"), (out.read_text() if out.exists() else "")


def pt2pt(cluster: Cluster, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m kit ARGS`` with the cluster's Slurm client environment."""
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True,
                          text=True, timeout=600, env=cluster.environ())


def run_campaign(cluster: Cluster, out: Path, text: str,
                 timeout: float = 600) -> tuple[dict[str, Any], Path]:
    """Plan, submit, wait for (at most ``timeout`` s) and collect the campaign ``text`` in
    ``out``, every job completed; returns (manifest, dataset)."""
    out.mkdir(parents=True)
    (out / "c.yaml").write_text(text)
    camp, dataset = out / "campaign", out / "dataset"
    planned = pt2pt(cluster, "plan", out / "c.yaml", "-o", camp)
    assert planned.returncode == 0, planned.stderr
    sub = pt2pt(cluster, "submit", camp)
    assert sub.returncode == 0, sub.stderr
    ids = list(json.loads((camp / "submitted.json").read_text())["jobs"].values())
    wait_gone(ids, cluster.environ(), timeout)
    manifest = json.loads((camp / "manifest.json").read_text())
    for job in manifest["jobs"]:
        record = json.loads((camp / job["dir"] / "job.json").read_text())
        assert record["state"] == "completed", record
    collected = pt2pt(cluster, "collect", camp, "--dataset", dataset)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    return manifest, dataset


@pytest.fixture
def campaign_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, probe_bin: Path) -> None:
    """No site defaults from this machine, and the probe built in this checkout."""
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    monkeypatch.setenv("PT2PT_PROBE", str(probe_bin))


@pytest.fixture
def tcp_campaign_env(campaign_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """campaign_env, and tcp as the caller's transport selection: a job must set its own,
    whatever the caller's environment leaks into it."""
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    monkeypatch.setenv("UCX_TLS", "tcp")


def pt2pt_here(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m kit ARGS`` in this process's environment (no Slurm client settings)."""
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True,
                          text=True, timeout=600)
