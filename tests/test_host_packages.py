"""`make test` sets up what it can: one list of Debian packages, installed through the kit's
playbook as root, named in one apt-get line otherwise; CI installs nothing of its own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests import host_packages

REPO = Path(__file__).resolve().parent.parent


def test_one_list_feeds_the_playbook_and_the_apt_line() -> None:
    names = host_packages.packages()
    assert len(names) == len(set(names))
    # The tests that skip without a package name these (their skip messages say so).
    assert {"chromium", "libsimgrid-dev", "mariadb-server", "slurmdbd", "podman", "runc",
            "debootstrap", "tmux", "bison", "flex", "libtool", "openmpi-bin",
            "slurm-wlm"} <= set(names)
    play = yaml.safe_load((REPO / "playbooks" / "test-host.yml").read_text())
    tasks = play[0]["tasks"]
    assert play[0]["vars"]["local_slurm_accounting"] is True  # MariaDB + slurmdbd too
    assert {t["ansible.builtin.import_role"]["name"] for t in tasks} == {"local_slurm",
                                                                       "test_host"}


def test_missing_names_only_what_dpkg_lacks() -> None:
    if shutil.which("dpkg-query") is None:
        pytest.skip("no dpkg-query: not a Debian system")
    assert host_packages.missing(["dpkg", "pt2pt-no-such-package"]) == ["pt2pt-no-such-package"]
    assert host_packages.apt_line(["a", "b"]) == \
        "sudo apt-get install --no-install-recommends a b"


def test_ci_installs_through_make_not_a_list_of_its_own() -> None:
    """.ci/run bootstraps make, then `make test-deps` (the playbook) installs the rest."""
    script = (REPO / ".ci" / "run").read_text()
    installed = [word for line in re.findall(r"apt-get install ([^\n]*)", script)
                 for word in line.split() if not word.startswith(("-", ">"))]
    assert installed == ["make"], installed
    assert "make test-deps" in script and "make test " in script
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^test: test-deps ", make, re.M), "make test sets up first"
    assert "playbooks/test-host.yml" in make
