"""The Debian packages the test suite needs, and which of them this machine lacks.

One list, read from the playbooks that install it as root (`make test-deps` runs
playbooks/test-host.yml): the local cluster's packages with accounting
(roles/local_slurm/defaults/main.yml) and the other tests' (roles/test_host/defaults/main.yml).

    python tests/host_packages.py            every package, one per line
    python tests/host_packages.py --missing  the apt-get line for those not installed (or nothing)

Needs PyYAML (the kit's venv has it); asks dpkg what is installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parent.parent / "playbooks" / "roles"


def packages() -> list[str]:
    cluster = yaml.safe_load((ROLES / "local_slurm" / "defaults" / "main.yml").read_text())
    tests = yaml.safe_load((ROLES / "test_host" / "defaults" / "main.yml").read_text())
    names = [*cluster["local_slurm_packages"], *cluster["local_slurm_accounting_packages"],
             *tests["test_host_packages"]]
    return list(dict.fromkeys(names))


def missing(names: list[str]) -> list[str]:
    """The names dpkg does not list as installed (all of them where dpkg is absent)."""
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\\n", *names],
                          capture_output=True, text=True, check=False)
    installed = {line.split()[0] for line in proc.stdout.splitlines()
                 if len(line.split()) > 1 and line.split()[1].startswith("ii")}
    return [n for n in names if n not in installed]


def apt_line(names: list[str]) -> str:
    return "sudo apt-get install --no-install-recommends " + " ".join(names)


def main(argv: list[str]) -> int:
    names = packages()
    if argv[1:] == ["--missing"]:
        lacking = missing(names)
        if lacking:
            print(apt_line(lacking))
        return 0
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
