"""The kit's Spack environment built for real, once per test session.

``spack_env`` (session) copies spack.yaml into a tree of its own (absolute ``develop:`` and
``repos:`` paths), declares this machine's build tools and Open MPI as externals, and
concretizes. ``spack_tools`` (session) installs OSU, SkaMPI and the probe into that tree;
its view is where the real-tool tests find the binaries, as ``pt2pt plan`` does
(``PT2PT_SPACK_VIEW``). One build per session, shared by every test that asks for it.

Where the tree is: ``$PT2PT_SPACK_TREE`` when set (kept: a later session reinstalls nothing
that did not change, ~1-2 min instead of ~5), else ``<pytest basetemp>/spack-tools0``::

    <tree>/env/spack.yaml, spack.lock      the environment copy
    <tree>/env/.spack-env/view             the view: bin/{pt2pt-probe,skampi},
                                           libexec/osu-micro-benchmarks/mpi/pt2pt/osu_*,
                                           share/skampi/ski/*.ski
    <tree>/opt                             the install tree (one prefix per package)
    <tree>/site                            the site scope passed with `spack -C`
    <tree>/install.log                     what `spack install` printed

Spack is found on ``PATH`` or under ``$SPACK_ROOT``; `.ci/run` lays an offline one out with
``../shared/spack/lab.sh`` (core, builtin recipes, a source mirror named by
``PT2PT_SPACK_MIRROR``). Without Spack the tests that need it skip, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("osu-micro-benchmarks", "skampi", "pt2pt-probe")
#: Build tools `spack external find` declares from this machine (so Spack builds none).
BUILD_TOOLS = ("gcc", "gmake", "bison", "flex", "autoconf", "automake", "libtool", "m4",
               "perl")
SPACK_TIMEOUT_S = 1800  # the first concretize detects compilers; slow on a loaded 2-core box
#: Where the tree goes when set (kept between sessions).
TREE_ENV = "PT2PT_SPACK_TREE"

# ompi_info component -> the openmpi recipe's fabrics=/schedulers= value it stands for.
FABRIC_COMPONENTS = {("pml", "ucx"): "ucx", ("mtl", "ofi"): "ofi", ("btl", "ofi"): "ofi",
                     ("btl", "openib"): "verbs", ("mtl", "psm"): "psm", ("mtl", "psm2"): "psm2",
                     ("btl", "vader"): None}
SCHEDULER_COMPONENTS = {("plm", "slurm"): "slurm", ("ras", "gridengine"): "sge",
                        ("plm", "tm"): "tm", ("plm", "lsf"): "lsf"}


F = TypeVar("F")


def runs_spack_built_tools(test: F) -> F:
    """Marks of a test that runs what ``spack_tools`` builds: serial, slow, MPI, and a
    timeout that leaves room for the session's build when it happens in this test."""
    for mark in (pytest.mark.spack, pytest.mark.slow, pytest.mark.mpi,
                 pytest.mark.timeout(2 * SPACK_TIMEOUT_S)):
        test = mark(test)
    return test


def openmpi_external_spec(ompi_info: str) -> str:
    """The external spec for an installed Open MPI, from what `ompi_info` says it was built with.

    Declared by hand: `spack external find openmpi` fails with the Spack core and recipes
    of ../shared/spack ("error detecting openmpi ... 'Spec' object has no attribute 'cc'").
    Fabrics and schedulers follow the MCA components present.
    """
    version = re.search(r"^\s*Open MPI:\s*(\S+)", ompi_info, re.M)
    if version is None:
        raise ValueError("ompi_info printed no 'Open MPI: <version>' line")
    found = set(re.findall(r"MCA (\w+):\s*(\w+)\s", ompi_info))
    fabrics = sorted({v for k, v in FABRIC_COMPONENTS.items() if k in found and v})
    schedulers = sorted({v for k, v in SCHEDULER_COMPONENTS.items() if k in found})
    spec = f"openmpi@{version.group(1)}"
    spec += f" fabrics={','.join(fabrics)}" if fabrics else " fabrics=none"
    spec += f" schedulers={','.join(schedulers)}" if schedulers else " schedulers=none"
    return spec


def find_spack() -> str | None:
    found = shutil.which("spack")
    if found:
        return found
    root = os.environ.get("SPACK_ROOT")
    if root and (Path(root) / "bin" / "spack").is_file():
        return str(Path(root) / "bin" / "spack")
    return None


def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SPACK_TIMEOUT_S, **kwargs)
    tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{tail}"
    return proc


def mirror_dir() -> Path | None:
    """The source mirror of ``PT2PT_SPACK_MIRROR`` (a path or a file:// URL), if local."""
    mirror = os.environ.get("PT2PT_SPACK_MIRROR", "")
    if mirror.startswith("file://"):
        mirror = mirror.removeprefix("file://")
    elif "://" in mirror:
        return None
    return Path(mirror) if mirror and Path(mirror).is_dir() else None


@dataclass
class SpackEnv:
    """A copy of the kit's environment plus a site scope, driven through the spack CLI."""

    spack: str
    tree: Path
    timings: dict[str, float] = field(default_factory=dict)
    no_checksum: list[str] = field(default_factory=list)  # specs installed without checksum

    @property
    def dir(self) -> Path:
        return self.tree / "env"

    @property
    def site(self) -> Path:
        return self.tree / "site"

    @property
    def view(self) -> Path:
        return self.dir / ".spack-env" / "view"

    def environ(self) -> dict[str, str]:
        """No ~/.spack, no /etc/spack: the tree's own user scope and caches."""
        return {**os.environ, "SPACK_USER_CONFIG_PATH": str(self.tree / "user-config"),
                "SPACK_USER_CACHE_PATH": str(self.tree / "user-cache"),
                "SPACK_DISABLE_LOCAL_CONFIG": "1"}

    def __call__(self, *args: str, nice: bool = False) -> subprocess.CompletedProcess[str]:
        prefix = ["nice", "-n", "10"] if nice else []
        return run([*prefix, self.spack, "-C", str(self.site), "-e", str(self.dir), *args],
                   env=self.environ())

    def lock(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.dir / "spack.lock").read_text())
        return data

    def node(self, name: str) -> dict[str, Any]:
        (found,) = [n for n in self.lock()["concrete_specs"].values() if n["name"] == name]
        return found


def _write_env(env: SpackEnv, external_mpi: str) -> None:
    """The environment copy and the site scope (install tree, MPI, mirrors) under the tree."""
    env.dir.mkdir(parents=True, exist_ok=True)
    env.site.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load((REPO / "spack.yaml").read_text())
    body = data["spack"]
    for name in body["develop"]:
        body["develop"][name]["path"] = str(REPO / body["develop"][name]["path"])
    body["repos"] = {name: str(REPO / path) for name, path in body["repos"].items()}
    text = yaml.safe_dump(data, sort_keys=False)
    if not (env.dir / "spack.yaml").is_file() or (env.dir / "spack.yaml").read_text() != text:
        (env.dir / "spack.yaml").write_text(text)
    site: dict[str, Any] = {
        "packages": {"packages": {"openmpi": {
            "buildable": False, "externals": [{"spec": external_mpi, "prefix": "/usr"}]}}},
        # develop_stage_link absolute: no build-<arch>-<hash> link left in kit/probe.
        "config": {"config": {"install_tree": {"root": str(env.tree / "opt")},
                              "build_stage": [str(env.tree / "stage")],
                              "source_cache": str(env.tree / "source-cache"),
                              "misc_cache": str(env.tree / "misc-cache"),
                              "develop_stage_link": str(env.tree / "probe-stage")}},
        "mirrors": {"mirrors": {}},
    }
    mirror = os.environ.get("PT2PT_SPACK_MIRROR")
    if mirror:
        url = mirror if "://" in mirror else Path(mirror).resolve().as_uri()
        site["mirrors"]["mirrors"]["pt2pt-test"] = {"url": url, "binary": False}
    for name, content in site.items():
        (env.site / f"{name}.yaml").write_text(yaml.safe_dump(content, sort_keys=False))


def _recipe_sha256(env: SpackEnv, name: str, version: str) -> str | None:
    recipe = Path(env("location", "-p", name).stdout.strip()) / "package.py"
    found = re.search(rf'version\(\s*"{re.escape(version)}",\s*sha256="([0-9a-f]{{64}})"',
                      recipe.read_text())
    return found.group(1) if found else None


def _complete_mirror(env: SpackEnv, name: str) -> bool:
    """Link ``name``'s archive where Spack looks for it; True if its bytes are not the
    release's (then it is installed with --no-checksum, alone).

    Spack fetches a mirror's ``_source-cache/archive/<sha256[:2]>/<sha256>.tar.gz`` only (the
    recipe's checksum); `spack mirror create` also links ``<name>/<name>-<version>.tar.gz``
    to it for people. ../shared/spack/mirror holds OSU 7.4 under the second name only,
    rebuilt from public sources (not the release's bytes, its README says): linked under
    the recipe's checksum in the tree's own overlay mirror, it is fetched, and only its
    checksum goes unchecked.
    """
    mirror = mirror_dir()
    version = env.node(name)["version"]
    if mirror is None:
        return False
    readable = mirror / name / f"{name}-{version}.tar.gz"
    sha = _recipe_sha256(env, name, version)
    if sha is None or not readable.is_file():
        return False
    stored = Path("_source-cache", "archive", sha[:2], f"{sha}.tar.gz")
    if not (mirror / stored).is_file():
        link = env.tree / "mirror-overlay" / stored
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(readable.resolve())
        mirrors = yaml.safe_load((env.site / "mirrors.yaml").read_text())
        mirrors["mirrors"]["pt2pt-overlay"] = {"url": (env.tree / "mirror-overlay").as_uri(),
                                               "binary": False}
        (env.site / "mirrors.yaml").write_text(yaml.safe_dump(mirrors, sort_keys=False))
    return hashlib.sha256(readable.read_bytes()).hexdigest() != sha


@pytest.fixture(scope="session")
def spack_env(tmp_path_factory: pytest.TempPathFactory) -> SpackEnv:
    """The kit's environment, concretized against this machine's Open MPI and build tools."""
    spack = find_spack()
    if spack is None:
        pytest.skip("no spack executable on PATH and no $SPACK_ROOT/bin/spack (CI lays one "
                    "out: bash ../shared/spack/lab.sh DEST && source DEST/env.sh)")
    if shutil.which("ompi_info") is None:
        pytest.skip("no system Open MPI (ompi_info) to declare as the external MPI: "
                    "install openmpi-bin libopenmpi-dev (make system-deps)")
    external = openmpi_external_spec(run(["ompi_info"]).stdout)
    if not {"ucx", "slurm"} <= set(re.split(r"[ =,]", external)):
        pytest.skip(f"system Open MPI ({external}) lacks UCX or Slurm, which spack.yaml asks for")
    tree = Path(os.environ[TREE_ENV]) if os.environ.get(TREE_ENV) else \
        tmp_path_factory.mktemp("spack-tools")
    env = SpackEnv(spack, tree.absolute())
    _write_env(env, external)
    start = time.monotonic()
    # The site's build tools, as docs/spack.md tells a site to declare them.
    env("external", "find", *BUILD_TOOLS)
    env("concretize", "-f")
    env.timings["concretize_s"] = time.monotonic() - start
    return env


@dataclass(frozen=True)
class SpackTools:
    """What ``spack install`` of the environment put in its view."""

    env: SpackEnv
    view: Path

    def osu(self, benchmark: str) -> Path:
        return self.view / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / benchmark

    @property
    def skampi(self) -> Path:
        return self.view / "bin" / "skampi"

    @property
    def probe(self) -> Path:
        return self.view / "bin" / "pt2pt-probe"


@pytest.fixture(scope="session")
def spack_tools(spack_env: SpackEnv) -> SpackTools:
    """OSU, SkaMPI and the probe installed with Spack (nice'd: it shares the machine).

    Everything is installed with checksums, except an archive the mirror holds rebuilt
    (OSU 7.4 here): that one alone, after its dependencies, with --no-checksum.
    """
    start = time.monotonic()
    log = spack_env.tree / "install.log"
    unchecked = [name for name in TOOLS if name != "pt2pt-probe"
                 and _complete_mirror(spack_env, name)]
    checked = [name for name in TOOLS if name not in unchecked]
    out = spack_env("install", *checked, nice=True).stdout
    for name in unchecked:
        out += spack_env("install", "--no-checksum", name, nice=True).stdout
    spack_env.no_checksum.extend(unchecked)
    log.write_text(out)
    spack_env.timings["install_s"] = time.monotonic() - start
    tools = SpackTools(spack_env, spack_env.view)
    for path in (tools.probe, tools.skampi, tools.osu("osu_latency")):
        assert path.is_file() and os.access(path, os.X_OK), f"{path} missing after install"
    return tools
