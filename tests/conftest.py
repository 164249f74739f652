"""Shared fixtures: where ../shared is, MPI environment, and skips with stated reasons."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.core.paths import SPACK_VIEW_ENV


def _blas_kernels_fixed() -> None:
    """The same floating point on every x86-64 machine: pictures (TUI snapshots) and models
    compared to the byte must not depend on the CPU the suite runs on.

    OpenBLAS picks its kernels by CPU: on an AVX-512 machine its SkylakeX kernels sum in
    another order than the Haswell ones, and a fit comes out ~4e-9 apart, enough to move a
    dot of a braille plot. The Haswell kernels run on every CPU with AVX2. Read when numpy
    loads, so set here, before any test module imports it (and inherited by the CLI calls).
    """
    if "numpy" in sys.modules or "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return
    if " avx2" in flags and " fma" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


_blas_kernels_fixed()

REPO = Path(__file__).resolve().parent.parent
#: What the developer's machine may hold and a test must not see unless it builds it.
HOST_STATE_ENV = ("PT2PT_TOOLS_PATH", "PT2PT_PROBE")
SHARED = (REPO.parent / "shared").resolve()
FIXTURES = SHARED / "fixtures"
REFDATA = SHARED / "reference-data"


def pytest_configure(config: pytest.Config) -> None:
    """Every test starts from an empty Spack view and no site file, whatever the checkout
    and the machine hold (a filled ``.spack-env/view`` after ``spack -e . install``,
    ``/etc/pt2pt/site.yaml``, tools on ``PT2PT_TOOLS_PATH``): a test that needs a view, a site
    or tools makes its own (tests/conftest_spack.py builds the real one). Set in the
    environment, so the ``pt2pt`` commands tests start see the same.
    """
    empty = Path(tempfile.mkdtemp(prefix="pt2pt-no-view-"))
    config.add_cleanup(lambda: shutil.rmtree(empty, ignore_errors=True))
    os.environ[SPACK_VIEW_ENV] = str(empty)
    os.environ["PT2PT_SITE_CONFIG"] = str(empty / "no-site.yaml")
    for name in HOST_STATE_ENV:
        os.environ.pop(name, None)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is missing: CI places ../shared beside the checkout")
    return SHARED


@pytest.fixture(scope="session")
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures"


@pytest.fixture(scope="session")
def osu_dir(fixtures_dir: Path) -> Path:
    """The OSU 7.x outputs of the shared fixtures."""
    return fixtures_dir / "osu"


@pytest.fixture(scope="session")
def refdata_dir(shared_dir: Path) -> Path:
    return shared_dir / "reference-data"


def mpi_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for mpirun: no stray transport selection from the caller, root flags as root.

    The root flags are set only for root, so that a non-root run proves mpirun needs nothing
    special (they are dropped from the caller's environment otherwise).
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_MCA_", "UCX_", "PMIX_MCA_", "OMPI_ALLOW_RUN_AS_ROOT"))}
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if extra:
        env.update(extra)
    return env


@pytest.fixture(scope="session")
def probe_bin() -> Path:
    """Build the probe once per session with its own Makefile (real mpicc, no mocks)."""
    if shutil.which("mpicc") is None or shutil.which("mpirun") is None:
        pytest.skip("mpicc/mpirun not found: install openmpi-bin libopenmpi-dev")
    subprocess.run(["make", "-C", str(REPO / "kit" / "probe")], check=True,
                   capture_output=True, text=True)
    path = REPO / "kit" / "probe" / "pt2pt-probe"
    assert path.is_file()
    return path


def is_root() -> bool:
    return os.geteuid() == 0


@contextlib.contextmanager
def small_tmpfs(parent: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` (``20m``) mounted at ``parent/mnt``, unmounted afterwards;
    the test is skipped where it cannot be mounted (not root, no permission)."""
    if not is_root():
        pytest.skip("mounting a small tmpfs needs root")
    mnt = parent / "mnt"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# `make test` runs the suite in two phases (tests/run-suite): every test marked ``serial`` one
# at a time, the others spread over all cores by pytest-xdist. Serial are the tests that time
# or load the machine: MPI jobs (a busy-polling rank beside another worker's test would measure
# the other test), Slurm, daemons, namespaces, containers, builds, a browser, CPU hogs.
# (test_ansible in the parallel half was tried at ae94c11: its 21 s left the serial half,
# and the parallel half took 209 s instead of 166-180 s.)
SERIAL_MARKERS = frozenset({"mpi", "slurm", "root", "container", "ansible", "spack"})
SERIAL_FIXTURES = frozenset({"probe_bin", "slurm_cluster", "slurm_cluster_factory",
                             "slurm_cluster_2n", "campaign_env", "spack_env", "spack_tools"})
SERIAL_MODULES = frozenset({
    "test_ansible", "test_campaign_runlocal", "test_demo", "test_localcluster", "test_nonroot",
    "test_podman_site", "test_probe", "test_probe_contention_shaped", "test_report_browser",
    "test_runquality", "test_selftest", "test_simgrid", "test_slurm_campaign",
    "test_slurm_contention", "test_spack_env", "test_spack_real", "test_spack_recipes",
    "test_wheel",
})


def is_serial(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    name = module.__name__.rsplit(".", 1)[-1] if module is not None else ""
    return bool(SERIAL_MARKERS & {m.name for m in item.iter_markers()}
                or SERIAL_FIXTURES & set(getattr(item, "fixturenames", ()))
                or name in SERIAL_MODULES)


@pytest.hookimpl(tryfirst=True)  # before -m deselects on the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_serial(item):
            item.add_marker(pytest.mark.serial)


# Local Slurm cluster fixtures (slurm_cluster, slurm_cluster_factory, slurm_cluster_2n).
from tests.conftest_slurm import (  # noqa: E402, F401
    campaign_env,
    slurm_cluster,
    slurm_cluster_2n,
    slurm_cluster_factory,
    tcp_campaign_env,
)

# The kit's Spack environment, concretized and installed once per session.
from tests.conftest_spack import spack_env, spack_tools  # noqa: E402, F401


@pytest.fixture()
def shaped_namespace() -> Iterator[str]:
    """A network namespace of the test's own whose loopback is shaped to 200 Mbit/s
    (tbf, burst 256 kB): TCP between ranks run inside it crosses the shaped link and nothing
    outside the namespace is touched. Root only; deleted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a network namespace and shape its loopback")
    if not shutil.which("ip") or not shutil.which("tc"):
        pytest.skip("needs iproute2 (ip, tc)")
    name = f"pt2pt-k{os.getpid()}"
    try:
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a network namespace: {exc.stderr.decode().strip()}")
    try:
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "200mbit",
                     "burst", "256kb", "latency", "50ms"]):
            proc = subprocess.run(["ip", "netns", "exec", name, *cmd], capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                pytest.skip(f"cannot shape the namespace's loopback: {proc.stderr.strip()}")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
