"""The playbooks as Ansible sees them: lint, syntax, site.yml in check mode, bad inventories,
the site defaults file the campaign engine reads, and the zombie-aware liveness test the
local-cluster daemon module relies on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from kit.core.paths import PLAYBOOKS_DIR, REPO_ROOT
from kit.measure import localcluster

BIN = Path(sys.executable).parent
PLAYBOOKS = ["site.yml", "local-cluster.yml", "local-cluster-down.yml"]

pytestmark = pytest.mark.skipif(not (BIN / "ansible-playbook").exists(),
                                reason="ansible-core not installed: pip install -e '.[deploy]'")


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # TMPDIR: site.yml packs the checkout into $TMPDIR on the controller; keep it in tmp_path.
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", TMPDIR=str(tmp_path),
               ANSIBLE_LOCALHOST_WARNING="False")
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          check=False)


def _inventory(tmp_path: Path, groups: tuple[str, ...] = ("login", "compute"),
               drop: tuple[str, ...] = ()) -> Path:
    """A localhost inventory for site.yml that writes only under tmp_path."""
    variables = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "pt2pt_site_partition": "debug",
        "pt2pt_site_account": "",
        "spack_prefix": str(tmp_path / "spack"),
        "pt2pt_env_prefix": str(tmp_path / "kit"),
        "pt2pt_site_file": str(tmp_path / "etc" / "site.yaml"),
        "pt2pt_kit_link": "",
    }
    for name in drop:
        del variables[name]
    inv = {"all": {"vars": variables,
                   "children": {g: {"hosts": {"localhost": {}}} for g in groups}}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def _recap(output: str) -> dict[str, int]:
    m = re.search(r"localhost\s+: (ok=.*)", output)
    assert m, output[-2000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


@pytest.mark.ansible
@pytest.mark.slow
def test_ansible_lint_is_clean(tmp_path: Path) -> None:
    if not (BIN / "ansible-lint").exists():
        pytest.skip("ansible-lint not installed: pip install -e '.[deploy]'")
    proc = _run([str(BIN / "ansible-lint"), "--offline", "playbooks"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


@pytest.mark.ansible
@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_playbook_syntax(playbook: str, tmp_path: Path) -> None:
    inventory = PLAYBOOKS_DIR / "inventory" / "example.yml" if playbook == "site.yml" \
        else "localhost,"
    proc = _run([str(BIN / "ansible-playbook"), "--syntax-check", "-i", str(inventory),
                 str(PLAYBOOKS_DIR / playbook)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.ansible
@pytest.mark.slow
def test_site_check_mode_skips_and_reports_downloads(tmp_path: Path) -> None:
    # pt2pt_env names and packs the kit with git; an unpacked tarball of the kit (no .git) has
    # nothing to pack, so the play fails there by design (pt2pt_env_archive is the way out).
    if subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip(f"{REPO_ROOT} is not a git checkout: site.yml packs the kit with git archive "
                    "(deploy from a tarball with -e pt2pt_env_archive=pt2pt-kit-VERSION.tar.gz)")
    proc = _run([str(BIN / "ansible-playbook"), "--check", "-i", str(_inventory(tmp_path)),
                 str(PLAYBOOKS_DIR / "site.yml")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    recap = _recap(proc.stdout)
    assert recap["failed"] == 0 and recap["unreachable"] == 0
    assert "would download" in proc.stdout and "would pip install" in proc.stdout
    assert re.search(r"TASK \[spack : Download Spack [^\]]*\] \**\nskipping", proc.stdout)
    # Check mode changed nothing on the target.
    assert not (tmp_path / "spack").exists() and not (tmp_path / "etc").exists()


@pytest.mark.ansible
@pytest.mark.parametrize("missing", ["pt2pt_site_partition", "pt2pt_site_account"])
def test_site_missing_required_variable_fails_first(missing: str, tmp_path: Path) -> None:
    proc = _run([str(BIN / "ansible-playbook"), "--check", "-i",
                 str(_inventory(tmp_path, drop=(missing,))), str(PLAYBOOKS_DIR / "site.yml")],
                tmp_path)
    assert proc.returncode != 0
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal:")]
    assert fatal and missing in fatal[0], proc.stdout[-3000:]
    assert "PLAY [Deploy" not in proc.stdout  # stopped before any host was touched


@pytest.mark.ansible
@pytest.mark.slow
def test_site_defaults_file_is_idempotent_and_readable_by_the_campaign_engine(
        tmp_path: Path) -> None:
    # Only a compute group: the play that downloads Spack has no hosts; this run is real.
    inventory = _inventory(tmp_path, groups=("compute",))
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOKS_DIR / "site.yml")]
    first = _run(cmd, tmp_path)
    assert first.returncode == 0, first.stdout[-3000:]
    assert _recap(first.stdout)["changed"] > 0
    second = _run(cmd, tmp_path)
    assert second.returncode == 0 and _recap(second.stdout)["changed"] == 0, second.stdout
    from kit.measure.campaign.site import load_site

    site = load_site(tmp_path / "etc" / "site.yaml")
    assert (site.partition, site.account, site.qos) == ("debug", None, None)
    assert site.launcher == "srun --mpi=pmix"
    assert site.spack_view == str(tmp_path / "kit" / "current" / ".spack-env" / "view")


def _daemon_module() -> ModuleType:
    path = PLAYBOOKS_DIR / "roles" / "local_slurm" / "library" / "pt2pt_daemon.py"
    spec = importlib.util.spec_from_file_location("pt2pt_daemon", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.ansible
def test_liveness_ignores_zombies_and_foreign_processes(tmp_path: Path) -> None:
    """A zombie (here: our own unreaped child) passes `kill -0` but must count as stopped."""
    daemon = _daemon_module()
    exe = os.path.realpath(sys.executable)
    proc = subprocess.Popen([exe, "-c", "import time; time.sleep(300)", str(tmp_path / "marker")])
    pidfile = tmp_path / "sleep.pid"
    pidfile.write_text(f"{proc.pid}\n")
    marker = str(tmp_path / "marker")
    try:
        assert daemon.is_ours(proc.pid, exe, marker)
        assert localcluster._alive(str(pidfile), exe, marker)
        # Same pid, but not ours: another argument or another binary.
        assert not daemon.is_ours(proc.pid, exe, "/elsewhere")
        assert not daemon.is_ours(proc.pid, "/usr/sbin/slurmd", marker)
        os.kill(proc.pid, signal.SIGKILL)
        for _ in range(200):  # until the kernel has made it a zombie
            if Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            subprocess.run(["true"], check=True)
        os.kill(proc.pid, 0)  # still "exists" for kill -0
        assert not daemon.is_ours(proc.pid, exe, marker)
        assert not localcluster._alive(str(pidfile), exe, marker)
    finally:
        proc.kill()
        proc.wait()
    assert not daemon.is_ours(None, exe, marker)


@pytest.mark.ansible
def test_local_cluster_rejects_bad_variables_before_doing_anything(tmp_path: Path) -> None:
    state = tmp_path / "never"
    proc = _run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                 "-e", json.dumps({"ansible_python_interpreter": sys.executable,
                                   "local_slurm_state_dir": str(state),
                                   "local_slurm_nodes": 0}),
                 str(PLAYBOOKS_DIR / "local-cluster.yml")], tmp_path)
    assert proc.returncode != 0
    assert "nodes=0" in proc.stdout and "Fix the one that does not match" in proc.stdout
    assert not state.exists()


@pytest.mark.ansible
def test_files_module_writes_only_what_differs_and_fixes_modes(tmp_path: Path) -> None:
    """pt2pt_files (the local cluster's configuration in one module run): a first run writes,
    a second changes nothing, a changed mode or content is put back, a bad mode is refused."""
    library = PLAYBOOKS_DIR / "roles" / "local_slurm" / "library"
    a, b = tmp_path / "a.conf", tmp_path / "b.sh"

    def run(files: list[dict[str, str]]) -> tuple[int, dict[str, object]]:
        args = json.dumps({"files": files})
        proc = _run([str(BIN / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
                     "-M", str(library), "-m", "pt2pt_files", "-a", args, "-o",
                     "-e", f"ansible_python_interpreter={sys.executable}"], tmp_path)
        found = re.search(r"=> (\{.*\})", proc.stdout)
        assert found, proc.stdout + proc.stderr
        return proc.returncode, json.loads(found.group(1))

    files = [{"path": str(a), "content": "X=1\n", "mode": "0644"},
             {"path": str(b), "content": "#!/bin/sh\n", "mode": "0755"}]
    rc, out = run(files)
    assert rc == 0 and out["changed"] and out["written"] == [str(a), str(b)]
    assert a.read_text() == "X=1\n" and oct(b.stat().st_mode & 0o777) == "0o755"
    rc, out = run(files)
    assert rc == 0 and not out["changed"]
    b.chmod(0o700)
    a.write_text("X=2\n")
    rc, out = run(files)
    assert out["written"] == [str(a), str(b)] and a.read_text() == "X=1\n"
    assert oct(b.stat().st_mode & 0o777) == "0o755"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".pt2pt-")]
    rc, out = run([{"path": str(a), "content": "X=3\n", "mode": "rw-r--r--"}])
    assert rc != 0 and "not octal" in str(out["msg"]) and a.read_text() == "X=1\n"


@pytest.mark.ansible
def test_local_cluster_plays_run_tasks_in_one_python_through_mitogen(tmp_path: Path) -> None:
    """The local cluster's plays name ``pt2pt_linear``; with Mitogen (a pinned ``deploy``
    extra) two tasks run in one Python on the host, with PT2PT_ANSIBLE_MITOGEN=0 each task
    starts its own (Ansible's linear strategy). What a task starts keeps every CPU (Mitogen
    pins its own processes and their children: daemons on one core of two). The packages
    play stays in ``linear``."""
    pytest.importorskip("ansible_mitogen",
                        reason="mitogen not installed: pip install -e '.[deploy]'")
    plays = {name: yaml.safe_load((PLAYBOOKS_DIR / name).read_text())
             for name in ("local-cluster.yml", "local-cluster-down.yml")}
    for name, doc in plays.items():
        for play in doc:
            packages = any(t.get("ansible.builtin.import_role", {}).get("tasks_from") == "packages"
                           for t in play.get("tasks", []))
            assert play.get("strategy") == (None if packages else "pt2pt_linear"), (name, play)
    playbook = tmp_path / "ppid.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False, "strategy": "pt2pt_linear",
        "tasks": [{"ansible.builtin.command": "sh -c 'echo $PPID $(nproc)'", "register": "a"},
                  {"ansible.builtin.command": "sh -c 'echo $PPID'", "register": "b"},
                  {"ansible.builtin.debug": {"msg": "PPIDS {{ a.stdout }} {{ b.stdout }}"}}]}]))
    cpus = str(len(os.sched_getaffinity(0)))
    parents = {}
    for mitogen in ("1", "0"):
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="False",
                   ANSIBLE_STRATEGY_PLUGINS=str(PLAYBOOKS_DIR / "strategy_plugins"),
                   PT2PT_ANSIBLE_MITOGEN=mitogen)
        proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               "-e", f"ansible_python_interpreter={sys.executable}",
                               str(playbook)], capture_output=True, text=True, env=env,
                              cwd=tmp_path, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        found = re.search(r"PPIDS (\d+) (\d+) (\d+)", proc.stdout)
        assert found, proc.stdout[-3000:]
        parent_a, nproc, parent_b = found.groups()
        assert nproc == cpus, f"a task's command sees {nproc} CPUs of {cpus}"
        parents[mitogen] = (parent_a, parent_b)
    assert parents["1"][0] == parents["1"][1], parents
    assert parents["0"][0] != parents["0"][1], parents
