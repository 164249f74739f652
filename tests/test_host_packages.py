"""`make test` sets up what it can: one list of Debian packages, installed through the kit's
playbook as root (make test-deps), named in one apt-get line for another user; CI installs
nothing of its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ROLES = REPO / "playbooks" / "roles"


def _yaml_list() -> list[str]:
    cluster = yaml.safe_load((ROLES / "local_slurm" / "defaults" / "main.yml").read_text())
    tests = yaml.safe_load((ROLES / "test_host" / "defaults" / "main.yml").read_text())
    return [*cluster["local_slurm_packages"], *cluster["local_slurm_accounting_packages"],
            *tests["test_host_packages"]]


def _make(*args: str, user: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(user or []), "make", "-s", "-C", str(REPO), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")})


def test_the_makefile_reads_the_playbooks_list() -> None:
    """Not root, make has no Python yet: it reads the roles' lists with awk. Same list."""
    proc = _make("host-packages")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == _yaml_list()
    # The tests that skip without a package name these in their skip messages.
    assert {"chromium", "libsimgrid-dev", "mariadb-server", "slurmdbd", "podman", "runc",
            "debootstrap", "tmux", "bison", "flex", "libtool", "openmpi-bin",
            "slurm-wlm"} <= set(_yaml_list())
    play = yaml.safe_load((REPO / "playbooks" / "test-host.yml").read_text())
    assert play[0]["vars"]["local_slurm_accounting"] is True  # MariaDB + slurmdbd too
    assert {t["ansible.builtin.import_role"]["name"] for t in play[0]["tasks"]} == {
        "local_slurm", "test_host"}


@pytest.mark.root
def test_another_user_gets_one_apt_line_and_goes_on_unless_the_demo_cannot_run() -> None:
    """As 'nobody', with two packages no machine has among those asked for."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("dpkg-query") is None:
        pytest.skip("needs root (to become 'nobody'), setpriv and dpkg")
    nobody = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
    if _make("host-packages", user=nobody).returncode != 0:
        pytest.skip(f"'nobody' cannot read {REPO}")
    asked = "HOST_PACKAGES=make pt2pt-no-such-a gcc pt2pt-no-such-b"
    went_on = _make("test-deps", asked, user=nobody)
    assert went_on.returncode == 0, went_on.stderr
    lines = [ln.strip() for ln in went_on.stderr.splitlines()]
    assert "sudo apt-get install --no-install-recommends pt2pt-no-such-a pt2pt-no-such-b" in lines
    assert [ln for ln in lines if "apt-get" in ln] == [lines[1]], "one apt-get line"
    stopped = _make("test-deps", asked, "DEMO_PACKAGES=gcc pt2pt-no-such-b", user=nobody)
    assert stopped.returncode != 0 and "needed for anything to run" in stopped.stderr


def test_ci_installs_through_make_not_a_list_of_its_own() -> None:
    """.ci/run bootstraps make, then `make test-deps` (the playbook) installs the rest."""
    script = (REPO / ".ci" / "run").read_text()
    installed = [word for line in re.findall(r"apt-get install ([^\n]*)", script)
                 for word in line.split() if not word.startswith(("-", ">"))]
    assert installed == ["make"], installed
    assert "make test-deps" in script and "make test " in script
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test: test-deps ", makefile, re.M), "make test sets up first"
    assert "playbooks/test-host.yml" in makefile
