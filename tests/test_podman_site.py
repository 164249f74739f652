"""site.yml for real on two podman containers (login, compute), offline, run twice.

Opt-in: runs only when PT2PT_SPACK_ROOT names a Spack source tree (plus PT2PT_SPACK_PACKAGES
and PT2PT_SPACK_MIRROR, see playbooks/tests/podman-site.sh); otherwise it skips at once, so
`make test` without Spack (CI) is not slowed down. Takes about 5 minutes when it runs (8 with
PT2PT_OSU_SRC, which adds OSU Micro-Benchmarks to the mirror, the install and the checks).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kit.core.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "playbooks" / "tests" / "podman-site.sh"


@pytest.mark.container
@pytest.mark.ansible
@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_site_converges_on_two_podman_containers() -> None:
    missing = [v for v in ("PT2PT_SPACK_ROOT", "PT2PT_SPACK_PACKAGES", "PT2PT_SPACK_MIRROR")
               if not os.environ.get(v)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not set: no Spack copy / source mirror to deploy "
                    "(playbooks/tests/podman-site.sh)")
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman and root")
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, check=False,
                          cwd=REPO_ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "PASS: run 1" in out and "(changed=0)" in out, out[-6000:]
