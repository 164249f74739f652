"""A non-editable install of the kit plans a campaign: its job templates, transport table,
example campaigns and playbooks ship in the wheel (kit/_data links, kit.core.paths).

The wheel is built from this checkout without build isolation (the running environment's
setuptools, pinned in the dev extra) and installed with ``--no-deps`` into a fresh venv
whose only access to the dependencies is a ``.pth`` line naming this environment's
site-packages, placed after the venv's own: nothing is downloaded, and ``kit`` can only
come from the wheel (the source tree is not on the path; the command runs elsewhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _setuptools_ok() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _setuptools_ok():
        pytest.skip("building the wheel needs setuptools>=77 in this environment "
                    "(pip install -e '.[dev]' installs the pinned one)")
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", "-w", str(out),
                           str(REPO)], capture_output=True, text=True, timeout=600, cwd=out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (found,) = out.glob("pt2pt_kit-*.whl")
    return found


def test_wheel_carries_jobs_and_playbooks(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in ("jobs/transports.yaml", "jobs/templates/base.sbatch.j2",
                "jobs/campaigns/local-demo.yaml", "playbooks/site.yml",
                "playbooks/local-cluster.yml", "playbooks/strategy_plugins/pt2pt_linear.py"):
        assert f"kit/_data/{rel}" in names, rel
    # The C kernels (mixtures, the linear curve's fit, the probe's CSV), compiled for this
    # interpreter (setup.py).
    assert any(n.startswith("kit/model/_mixture_kernels.") and n.endswith(".so") for n in names)
    assert any(n.startswith("kit/model/_curve_kernels.") and n.endswith(".so") for n in names)
    assert any(n.startswith("kit/tools/_probe_rows.") and n.endswith(".so") for n in names)
    # The same files as the checkout's top-level folders, byte for byte.
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("kit/_data/jobs/transports.yaml") == (REPO / "jobs/transports.yaml"
                                                             ).read_bytes()


def test_installed_wheel_plans_the_example_campaign(wheel: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PT2PT_PROBE")}
    venv = tmp_path / "venv"
    # The venv's own pip (ensurepip's bundled wheel, offline): `pip --python` would see this
    # environment's installed pt2pt-kit and refuse to install the wheel.
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600, env=env)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=600,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Then the dependencies from this environment, after the venv's own packages (a .pth
    # path line appends; this environment's own .pth files, e.g. an editable kit, are not
    # run). Written after the install: pip would otherwise see this environment's kit.
    Path(site, "zz-pt2pt-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([str(python), "-c", "import kit, kit.core.paths as p; "
                            "print(kit.__file__); print(p.JOBS_DIR); print(p.PLAYBOOKS_DIR)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    kit_file, jobs, playbooks = where.stdout.split()
    assert kit_file.startswith(site) and jobs.startswith(site) and playbooks.startswith(site)
    assert (Path(playbooks) / "site.yml").is_file()
    probe = tmp_path / "pt2pt-probe"  # plan needs a probe binary to name, not to run
    probe.write_text("#!/bin/sh\nexit 0\n")
    probe.chmod(0o755)
    campaign = Path(jobs) / "campaigns" / "local-demo.yaml"
    proc = subprocess.run([str(venv / "bin" / "pt2pt"), "plan", str(campaign), "-o",
                           str(tmp_path / "planned")], capture_output=True, text=True,
                          env={**env, "PT2PT_PROBE": str(probe)}, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "planned" in proc.stdout
    scripts = list((tmp_path / "planned").rglob("*.sbatch"))
    assert scripts, "no job script rendered from the packaged templates"
