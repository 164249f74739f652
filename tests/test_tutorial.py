"""docs/tutorial.md, executed: every command of its bash blocks, in order, as a new user runs them.

Run in a work folder that holds the checkout's files (symlinks; ``playbooks`` a copy, since the
tutorial copies an inventory into it) with the checkout's venv on PATH, against the local Slurm
cluster. What cannot run here as written, and what stands in for it, is stated where it happens:

* ``git clone ... && cd pt2pt-kit``: the work folder is the clone;
* ``ansible-playbook ... playbooks/site.yml`` deploys to the inventory's hosts, which this
  machine does not have: it runs with ``--syntax-check`` (tests/test_ansible.py runs site.yml
  against localhost in check mode);
* after ``pt2pt submit`` the test waits for the queue to empty (the tutorial's "queue time");
* ``pt2pt tui ...`` needs a terminal: the same arguments start the explorer under Textual's
  pilot, which checks that the models load onto their series and quits;
* the user's edit of ``my-cluster.yaml`` (fewer samples: this is a test) and their
  ``my-app.c`` (a small MPI program) are written by the test.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kit.measure.campaign.slurm import wait_gone
from kit.measure.localcluster import Cluster
from tests.conftest import REPO, mpi_env

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow]

TUTORIAL = REPO / "docs" / "tutorial.md"

MY_APP = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  static char buf[1 << 16];
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < 10; i++) {
    if (rank == 0) {
      MPI_Send(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("my-app: 10 round trips of 64 KiB in %g s\n", MPI_Wtime());
  MPI_Finalize();
  return 0;
}
"""


def commands() -> list[str]:
    """The tutorial's command lines, in order (comments after `` #`` dropped)."""
    text = TUTORIAL.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line:
                lines.append(line)
    return lines


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "pt2pt-kit"
    work.mkdir()
    for item in REPO.iterdir():
        if item.name in (".git", "playbooks", "demo-out"):
            continue
        (work / item.name).symlink_to(item)
    shutil.copytree(REPO / "playbooks", work / "playbooks", symlinks=True)
    return work


def _run(cmd: str, work: Path, env: dict[str, str], timeout: float = 1800
         ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"tutorial command failed: {cmd}\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def _edit_campaign(path: Path) -> None:
    """What a user does to the copy: here, few samples (the test measures, not the user)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["repetitions"] = 1
    for tool in doc["tools"]:
        if tool["tool"] == "probe":
            tool.update(samples=300, max_seconds=30)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _wait_for_queue(work: Path, cluster: Cluster) -> None:
    import json

    ids = list(json.loads((work / "runs" / "c1" / "submitted.json").read_text())["jobs"]
               .values())
    wait_gone(ids, cluster.environ(), 1200)


def _tui(cmd: str, work: Path) -> None:
    """``pt2pt tui DATASET --models DIR`` under Textual's pilot: the models match series."""
    from tui.app import ExplorerApp

    words = shlex.split(cmd)[2:]
    dataset = work / words[0]
    models = [work / words[i + 1] for i, w in enumerate(words) if w == "--models"]

    async def drive() -> tuple[int, int]:
        app = ExplorerApp(dataset, models=models)
        async with app.run_test(size=(140, 40)) as pilot:
            for _ in range(600):
                await pilot.pause(0.1)
                if app.session.rows and app.session.file_models:
                    break
            fitted = len(app.session.file_models)
            rows = len(app.session.rows)
            await pilot.press("q")
        return rows, fitted

    rows, fitted = asyncio.run(drive())
    assert rows > 0 and fitted == rows, (rows, fitted)


@pytest.mark.timeout(3600)  # a demo, a Slurm campaign, fits, a report: ~15 min at load 18
def test_every_tutorial_command_runs_in_order(tmp_path: Path, slurm_cluster: Cluster,
                                              probe_bin: Path) -> None:
    work = _workdir(tmp_path)
    env = mpi_env(slurm_cluster.environ())
    env["PATH"] = f"{REPO / '.venv' / 'bin'}:{env['PATH']}"
    env["PT2PT_SITE_CONFIG"] = str(tmp_path / "no-site.yaml")
    env["PT2PT_PROBE"] = str(probe_bin)
    (work / "my-app.c").write_text(MY_APP)
    lines = commands()
    assert lines[0].startswith("git clone") and "make demo DEMO_ARGS=--quick" in lines
    ran = []
    for cmd in lines[1:]:
        if cmd.startswith("ansible-playbook"):
            _run(f"{cmd} --syntax-check", work, env)
        elif cmd.startswith("pt2pt tui"):
            _tui(cmd, work)
        else:
            proc = _run(cmd, work, env)
            if cmd.startswith("make demo"):
                out = proc.stdout + proc.stderr
                assert "one model per series" in out and "runs" in out
                # no third-party deprecation box in what a new user reads first
                for word in ("DEPRECATION", "Deprecation", "!!\n"):
                    assert word not in out, out[-3000:]
            if cmd.startswith("cp jobs/campaigns/local-demo.yaml"):
                _edit_campaign(work / "my-cluster.yaml")
            if cmd.startswith("pt2pt submit") and "--dry-run" not in cmd:
                _wait_for_queue(work, slurm_cluster)
            if cmd.startswith("smpirun"):
                assert "my-app: 10 round trips" in proc.stdout
        ran.append(cmd)
    assert (work / "models").is_dir() and any((work / "models").glob("*.json"))
    assert (work / "report" / "index.html").is_file()
    assert (work / "simgrid" / "platform.xml").is_file()
    assert len(ran) == len(lines) - 1
    assert os.path.isfile(work / "runs" / "c1" / "manifest.json")
