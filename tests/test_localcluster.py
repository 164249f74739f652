"""The local Slurm cluster: playbooks run for real (root), plus the wrapper's pure parts.

Every cluster here lives in its own state dir (/tmp/pt2pt-lctest-*), so the tests never touch a
cluster someone else (CI, a developer, the session fixture) is using.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.core.errors import UserError
from kit.core.paths import PLAYBOOKS_DIR
from kit.measure import localcluster
from kit.measure.localcluster import DEFAULT_STATE_DIR, layout_for
from tests.conftest_slurm import PYTEST_STATE_DIRS, sbatch_wait

ONE_NODE = Path("/tmp/pt2pt-lctest-1n")
TWO_NODES = Path("/tmp/pt2pt-lctest-2n")

needs_cluster = [
    pytest.mark.root, pytest.mark.slurm, pytest.mark.ansible, pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="daemons and network namespaces need root"),
    pytest.mark.skipif(not Path("/usr/sbin/slurmctld").exists(),
                       reason="slurm-wlm not installed: run make system-deps"),
]

HELLO_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, len; char host[MPI_MAX_PROCESSOR_NAME]; char buf[8] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    if (rank == 0) { MPI_Send(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                     MPI_Recv(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    else           { MPI_Recv(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                     MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD); }
    printf("hello rank %d of %d on %s\n", rank, size, host);
    MPI_Finalize(); return 0;
}
"""


def _playbook(name: str, state: Path, **extra: object) -> str:
    """Run a playbook as `.ci/run`/`make` do; return its output (assert success)."""
    ev = {"ansible_python_interpreter": sys.executable, "local_slurm_state_dir": str(state),
          **layout_for(state).playbook_vars(), **extra}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c",
         "local", "--skip-tags", "packages", "-e", json.dumps(ev), str(PLAYBOOKS_DIR / name)],
        capture_output=True, text=True, env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.stdout


def _changed(output: str) -> int:
    m = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", output)
    assert m, output[-2000:]
    return int(m.group(1))


def _daemon_pids(state: Path) -> list[int]:
    pids = []
    for f in [*state.glob("*.pid"), *state.glob("munge/*.pid")]:
        pids.append(int(f.read_text().split()[0]))
    return pids


def _live(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _assert_nothing_left(state: Path, pids: list[int], desc: dict) -> None:
    assert pids, "the cluster had no daemons to check"
    assert not [p for p in pids if _live(p)], "a daemon survived the down playbook"
    assert not state.exists()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for ns in desc["netns"]:
        assert ns not in netns
    assert f"{desc['ifprefix']}-" not in links


# --- pure parts -----------------------------------------------------------------------------

def test_layouts_of_known_state_dirs_do_not_clash() -> None:
    dirs = [DEFAULT_STATE_DIR, localcluster.default_state_dir(2), ONE_NODE, TWO_NODES,
            Path("/tmp/pt2pt-lctest-acct"), *PYTEST_STATE_DIRS.values()]
    layouts = [layout_for(d) for d in dirs]
    for attr in ("ctld_port", "subnet", "ifprefix", "node_prefix", "cluster_name"):
        values = [getattr(lay, attr) for lay in layouts]
        assert len(set(values)) == len(values), attr
    ports = [p for lay in layouts
             for p in (lay.ctld_port, lay.slurmd_port, lay.dbd_port, lay.db_port)]
    assert len(set(ports)) == len(ports)
    assert all(len(lay.ifprefix) + len("-v64") <= 15 for lay in layouts)  # IFNAMSIZ


def test_failing_task_names_task_and_message() -> None:
    output = (
        "TASK [local_slurm : Check the cluster variables] ******\n"
        "ok: [localhost]\n\n"
        "TASK [local_slurm : Start slurmctld] ******************\n"
        'fatal: [localhost]: FAILED! => {"changed": false, "msg": "slurmctld did not stay up"}\n'
    )
    assert localcluster.failing_task(output) == (
        "local_slurm : Start slurmctld", "slurmctld did not stay up")


def test_up_and_down_refuse_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match="needs root"):
        localcluster.up(nodes=1, state_dir="/tmp/pt2pt-never")
    with pytest.raises(UserError, match="needs root"):
        localcluster.down("/tmp/pt2pt-never")


def test_up_rejects_bad_arguments_before_running_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(UserError, match="nodes >= 2"):
        localcluster.up(nodes=1, state_dir="/tmp/pt2pt-never", shape=("1gbit", "256kb"))
    with pytest.raises(UserError, match="node count"):
        localcluster.up(nodes=0, state_dir="/tmp/pt2pt-never")
    with pytest.raises(UserError, match="rate, burst"):
        localcluster.up(nodes=2, state_dir="/tmp/pt2pt-never", shape=("1gbit",))  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not a link between two of the 3 nodes"):
        localcluster.up(nodes=3, state_dir="/tmp/pt2pt-never",
                        links=(localcluster.LinkShape(1, 4, "10mbit"),))
    with pytest.raises(UserError, match="not a link"):
        localcluster.up(nodes=3, state_dir="/tmp/pt2pt-never",
                        links=(localcluster.LinkShape(2, 2, "10mbit"),))
    with pytest.raises(UserError, match="not a node of the 3"):
        localcluster.up(nodes=3, state_dir="/tmp/pt2pt-never",
                        node_shapes=(localcluster.NodeShape(1, "fast"),))
    assert not Path("/tmp/pt2pt-never").exists()


def test_liveness_without_access_to_proc_exe_uses_argv0(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A non-root client cannot readlink root's /proc/PID/exe; argv[0] then names the binary."""
    exe = os.path.realpath(sys.executable)
    proc = subprocess.Popen([exe, "-c", "import time; time.sleep(60)", "pt2pt-marker"])
    try:
        pidfile = tmp_path / "d.pid"
        pidfile.write_text(f"{proc.pid}\n")
        # The child's own argv in /proc (not yet the parent's, on a loaded machine) before
        # judging liveness by it.
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        deadline = time.monotonic() + 30
        while b"pt2pt-marker" not in cmdline.read_bytes() and time.monotonic() < deadline:
            assert proc.poll() is None, f"the sleeping child exited with {proc.returncode}"
            time.sleep(0.05)
        seen = (cmdline.read_bytes(), Path(f"/proc/{proc.pid}/stat").read_text())

        def denied(path: str) -> str:
            raise PermissionError(13, "Permission denied", path)

        monkeypatch.setattr(localcluster.os, "readlink", denied)
        assert localcluster._alive(str(pidfile), exe, "pt2pt-marker"), (exe, seen)
        assert not localcluster._alive(str(pidfile), "/usr/sbin/slurmd", "pt2pt-marker")
        assert not localcluster._alive(str(pidfile), exe, "another-conf")
    finally:
        proc.kill()
        proc.wait()


def test_load_of_missing_cluster_names_the_dir(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=str(tmp_path)):
        localcluster.load(tmp_path)
    assert localcluster.is_up(tmp_path) is False


# --- real clusters --------------------------------------------------------------------------

def _cluster_test(func):  # type: ignore[no-untyped-def]
    for mark in reversed(needs_cluster):
        func = mark(func)
    return pytest.mark.timeout(900)(func)


@_cluster_test
def test_single_node_playbook_is_idempotent_runs_jobs_and_tears_down(tmp_path: Path) -> None:
    if (ONE_NODE / "cluster.json").exists():  # left over from an interrupted run
        _playbook("local-cluster-down.yml", ONE_NODE)
    first = _playbook("local-cluster.yml", ONE_NODE)
    assert _changed(first) > 0
    second = _playbook("local-cluster.yml", ONE_NODE)
    assert _changed(second) == 0, second[-3000:]
    cluster = localcluster.load(ONE_NODE)
    assert localcluster.is_up(ONE_NODE)
    assert cluster.env["SLURM_CONF"] == str(ONE_NODE / "slurm.conf")
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True,
                           text=True, env=cluster.environ(), check=True).stdout.split()
    assert sinfo == [cluster.nodes[0], "idle"]
    state, out = sbatch_wait(cluster, "#!/bin/bash\n#SBATCH -n 2\n#SBATCH -t 5\n"
                             "srun bash -c 'echo task $SLURM_PROCID on $(hostname)'\n", tmp_path)
    assert state == "COMPLETED", out
    assert sorted(line.split()[1] for line in out.splitlines()) == ["0", "1"]
    # A job still running at down is cancelled through the live controller.
    env = cluster.environ()
    job = subprocess.run(["sbatch", "--parsable", "-n", "1", "-t", "5", "-o", "/dev/null",
                          "--wrap", "sleep 300"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.strip()
    deadline = time.monotonic() + 60
    while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True,
                         text=True).stdout.strip() != "RUNNING":
        assert time.monotonic() < deadline, f"job {job} did not start"
        time.sleep(0.3)
    desc = json.loads((ONE_NODE / "cluster.json").read_text())
    pids = _daemon_pids(ONE_NODE)
    down = _playbook("local-cluster-down.yml", ONE_NODE)
    assert re.search(r"TASK \[local_slurm : Cancel the cluster's jobs[^\n]*\n(changed|CHANGED)",
                     down), down[-3000:]
    _assert_nothing_left(ONE_NODE, pids, desc)
    # Down is safe to repeat when nothing is up.
    assert _changed(_playbook("local-cluster-down.yml", ONE_NODE)) == 0


@_cluster_test
@pytest.mark.mpi
def test_two_shaped_nodes_run_srun_pmix_and_mpirun_then_vanish(tmp_path: Path) -> None:
    if shutil.which("mpicc") is None:
        pytest.skip("mpicc not found: install libopenmpi-dev")
    hello = tmp_path / "hello"
    (tmp_path / "hello.c").write_text(HELLO_C)
    subprocess.run(["mpicc", "-o", str(hello), str(tmp_path / "hello.c")], check=True)
    if (TWO_NODES / "cluster.json").exists():
        localcluster.down(TWO_NODES)
    cluster = localcluster.up(nodes=2, state_dir=TWO_NODES, shape=("1gbit", "256kb"))
    desc = json.loads((TWO_NODES / "cluster.json").read_text())
    pids = _daemon_pids(TWO_NODES)
    try:
        assert len(cluster.nodes) == 2 and localcluster.is_up(TWO_NODES)
        for ns in desc["netns"]:
            qdisc = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", "eth0"],
                                   capture_output=True, text=True, check=True).stdout
            assert "tbf" in qdisc and "1Gbit" in qdisc
        # ob1/tcp: the ranks must really talk over the veths between the namespaces.
        script = f"""#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH -t 5
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "launcher srun"
srun --mpi=pmix {hello} || echo "srun failed rc=$?"
echo "launcher mpirun"
mpirun {hello} || echo "mpirun failed rc=$?"
"""
        state, out = sbatch_wait(cluster, script, tmp_path)
        assert state == "COMPLETED", out
        assert "failed" not in out, out
        for part in out.split("launcher ")[1:]:
            hosts = sorted(re.findall(r"hello rank \d of 2 on (\S+)", part))
            assert hosts == sorted(cluster.nodes), out
    finally:
        localcluster.down(TWO_NODES)
    _assert_nothing_left(TWO_NODES, pids, desc)


@pytest.mark.slurm
@pytest.mark.root
@pytest.mark.timeout(900)
def test_slurm_cluster_fixture_runs_a_two_task_job(slurm_cluster: localcluster.Cluster,
                                                    tmp_path: Path) -> None:
    """The session fixture other tests use (reused from .ci/run when PT2PT_SLURM_STATE is set)."""
    assert localcluster.is_up(slurm_cluster.state_dir)
    assert Path(slurm_cluster.env["SLURM_CONF"]).is_file()
    state, out = sbatch_wait(slurm_cluster, "#!/bin/bash\n#SBATCH -n 2\n#SBATCH -t 5\n"
                             "srun bash -c 'echo task $SLURM_PROCID'\n", tmp_path)
    assert state == "COMPLETED", out
    assert sorted(out.split()) == ["0", "1", "task", "task"]


@_cluster_test
def test_up_failure_names_the_task_and_the_daemons_reason(tmp_path: Path) -> None:
    """A port someone else holds: slurmctld dies; the error says which task and why."""
    state = Path("/tmp/pt2pt-lctest-busy")
    with socket.socket() as busy, socket.socket() as spare:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        spare.bind(("0.0.0.0", 0))
        ports = busy.getsockname()[1], spare.getsockname()[1]
        spare.close()
        layout = localcluster.Layout("ptbusy", *ports, "10.213.251.0/24", "ptbusy", "ptbn")
        try:
            with pytest.raises(UserError) as err:
                localcluster.up(nodes=1, state_dir=state, layout=layout)
        finally:
            localcluster.down(state)
    text = err.value.paragraph()
    assert "Start slurmctld" in text and "Address already in use" in text
    assert not state.exists()
    state.with_name(state.name + ".ansible-up.log").unlink()


ACCT = Path("/tmp/pt2pt-lctest-acct")

ACCT_CAMPAIGN = """\
name: acct
mpi: openmpi
transports: [shm, ib]
placement: intra-node
repetitions: 2
seed: 2
launcher: srun --mpi=pmix
slurm: {partition: debug, time: "00:05:00", throttle: 1}
tools:
  - tool: probe
    ops: [pingpong]
    sizes: list:8,1024
    samples: 20
    warmup: 1
"""


@_cluster_test
@pytest.mark.mpi
def test_accounting_cluster_is_idempotent_and_status_reads_sacct(
        tmp_path: Path, probe_bin: Path) -> None:
    """MariaDB + slurmdbd under the state dir, by default when installed (what `make
    cluster-up` does: no accounting variable); `sacct` lists the campaign's jobs and status
    of finished array tasks comes from it."""
    if not Path("/usr/sbin/slurmdbd").exists() or not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("slurmdbd/mariadb-server not installed: make test-deps (as root)")
    if (ACCT / "cluster.json").exists():
        _playbook("local-cluster-down.yml", ACCT)
    try:
        first = _playbook("local-cluster.yml", ACCT)  # local_slurm_accounting: auto
        desc = json.loads((ACCT / "cluster.json").read_text())
        pids = _daemon_pids(ACCT)
        assert _changed(first) > 0 and desc["accounting"] is True
        assert {"slurmdbd", "mariadbd"} <= {d["name"] for d in desc["daemons"]}
        # Asking for it explicitly is the same cluster: nothing to change.
        second = _playbook("local-cluster.yml", ACCT, local_slurm_accounting=True)
        assert _changed(second) == 0, second[-3000:]
        cluster = localcluster.load(ACCT)
        env = cluster.environ({**os.environ, "PT2PT_PROBE": str(probe_bin),
                               "PT2PT_SITE_CONFIG": str(tmp_path / "none.yaml")})
        (tmp_path / "c.yaml").write_text(ACCT_CAMPAIGN)
        out = tmp_path / "campaign"
        for args in (["plan", str(tmp_path / "c.yaml"), "-o", str(out)], ["submit", str(out)]):
            proc = subprocess.run([sys.executable, "-m", "kit", *args], env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
        ids = json.loads((out / "submitted.json").read_text())["jobs"]
        assert sorted(v.split("_")[1] for v in ids.values()) == ["0", "0", "1", "1"]
        from kit.measure.campaign import slurm as kslurm
        from kit.measure.campaign.status import job_statuses

        deadline = time.monotonic() + 300
        while True:  # every task ended and known to the accounting database
            acct = kslurm.sacct_states(list(ids.values()), env)
            if all(acct.get(sid, {}).get("state") in ("COMPLETED", "FAILED")
                   for sid in ids.values()):
                break
            assert time.monotonic() < deadline, acct
            time.sleep(1)
        # What a user types: sacct lists every job of the campaign.
        listed = subprocess.run(["sacct", "-n", "-P", "-X", "--format=JobID,JobName,State",
                                 "-j", ",".join(ids.values())], env=env, capture_output=True,
                                text=True, check=True).stdout.splitlines()
        assert {line.split("|")[0] for line in listed} == set(ids.values()), listed
        assert all(line.split("|")[1].startswith("acct.") for line in listed), listed
        rows = job_statuses(out, env=env)
        for row in rows:
            assert row.slurm_source == "sacct", row
            assert row.slurm_state == acct[row.slurm_id]["state"]
            assert row.result == ("skipped" if row.transport == "ib" else "completed")
            assert row.slurm_state == ("FAILED" if row.transport == "ib" else "COMPLETED")
    finally:
        _playbook("local-cluster-down.yml", ACCT)
    _assert_nothing_left(ACCT, pids, desc)
