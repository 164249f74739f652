"""The Spack environment with a real Spack: audit the recipes, concretize, install, run.

Runs only where a `spack` executable is on PATH (or under $SPACK_ROOT/bin). The root
spack.yaml stays portable: the tests copy it to a temporary environment (absolute
`develop:`/`repos:` paths) and add a site scope (`spack -C`) that declares this machine's
Open MPI as an external by hand, as docs/spack.md tells sites to do, and installs into a
temporary tree.

Offline machines need a source mirror for what Spack must fetch to build the probe (its
`compiler-wrapper` tarball): set PT2PT_SPACK_MIRROR to its path or file:// URL. Set
PT2PT_SPACK_NO_CHECKSUM=1 when that mirror holds archives rebuilt from the upstream tags
(not byte-identical to the release tarballs). docs/spack.md shows how to make one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import mpi_env

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"osu-micro-benchmarks", "skampi", "pt2pt-probe"}
SPACK_TIMEOUT_S = 1800  # first concretize detects compilers; slow on a loaded 2-core box

# ompi_info component -> the openmpi recipe's fabrics=/schedulers= value it stands for.
FABRIC_COMPONENTS = {("pml", "ucx"): "ucx", ("mtl", "ofi"): "ofi", ("btl", "ofi"): "ofi",
                     ("btl", "openib"): "verbs", ("mtl", "psm"): "psm", ("mtl", "psm2"): "psm2",
                     ("btl", "vader"): None}
SCHEDULER_COMPONENTS = {("plm", "slurm"): "slurm", ("ras", "gridengine"): "sge",
                        ("plm", "tm"): "tm", ("plm", "lsf"): "lsf"}


def openmpi_external_spec(ompi_info: str) -> str:
    """The external spec for an installed Open MPI, from what `ompi_info` says it was built with.

    Declared by hand rather than with `spack external find openmpi`, which is known to
    break; fabrics and schedulers follow the MCA components present.
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


def test_openmpi_external_spec_follows_components() -> None:
    text = ("                 Open MPI: 4.1.4\n"
            "                 MCA btl: ofi (MCA v2.1.0, API v3.1.0, Component v4.1.4)\n"
            "                 MCA plm: slurm (MCA v2.1.0, API v2.0.0, Component v4.1.4)\n"
            "                 MCA pml: ucx (MCA v2.1.0, API v2.0.0, Component v4.1.4)\n")
    assert openmpi_external_spec(text) == "openmpi@4.1.4 fabrics=ofi,ucx schedulers=slurm"
    assert openmpi_external_spec(" Open MPI: 5.0.3\n").endswith("fabrics=none schedulers=none")
    with pytest.raises(ValueError, match="Open MPI"):
        openmpi_external_spec("MCA pml: ucx (x)\n")


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


KIT_REPO = REPO / "kit" / "spack" / "spack_repo" / "pt2pt"
# The first lines of every builtin recipe (spack-packages); the kit's recipes carry them too.
BUILTIN_HEADER = ("# Copyright Spack Project Developers. See COPYRIGHT file for details.\n"
                  "#\n"
                  "# SPDX-License-Identifier: (Apache-2.0 OR MIT)\n")


def kit_recipes() -> dict[str, Path]:
    """Spack package name -> package.py for every recipe in the kit's repository."""
    return {d.name.replace("_", "-"): d / "package.py"
            for d in sorted((KIT_REPO / "packages").iterdir()) if (d / "package.py").is_file()}


@pytest.fixture(scope="module")
def spack_with_kit_repo(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`spack -C <scope>` with the kit's repository registered beside the builtin one."""
    spack = find_spack()
    if spack is None:
        pytest.skip("no spack executable on PATH and no $SPACK_ROOT/bin/spack")
    scope = tmp_path_factory.mktemp("spack-audit")
    (scope / "repos.yaml").write_text(yaml.safe_dump({"repos": {"pt2pt": str(KIT_REPO)}}))
    return [spack, "-C", str(scope)]


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.timeout(2 * SPACK_TIMEOUT_S)
def test_kit_recipes_pass_spack_audit(spack_with_kit_repo: list[str]) -> None:
    """`spack audit packages` over the kit's recipes, as Spack's CI audits builtin ones.

    A version without a fetch strategy (pt2pt-probe@main before it had `git`) makes the
    audit exit 1 ("Could not guess a fetch strategy"); any reported issue does too.
    """
    recipes = kit_recipes()
    assert set(recipes) == {"pt2pt-probe", "skampi"}
    repos = run([*spack_with_kit_repo, "repo", "list"]).stdout
    assert str(KIT_REPO) in repos, repos
    for group in ("packages", "packages-https"):
        out = run([*spack_with_kit_repo, "audit", group, *recipes]).stdout
        verdicts = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        assert verdicts and set(verdicts.values()) == {"passed"}, out
    # The header is the builtin recipes' own, read from the builtin repository in use.
    builtin = run([*spack_with_kit_repo, "location", "-p", "osu-micro-benchmarks"]).stdout.strip()
    header = "".join((Path(builtin) / "package.py").read_text().splitlines(keepends=True)[:3])
    assert header == BUILTIN_HEADER, "the builtin header changed: update BUILTIN_HEADER and recipes"


def test_kit_recipes_carry_builtin_header_and_maintainers() -> None:
    """Static (no Spack): what the audit does not check but spack-packages' review does."""
    for name, path in kit_recipes().items():
        text = path.read_text()
        assert text.startswith(BUILTIN_HEADER), f"{name}: not the builtin recipes' header"
        assert re.search(r'^    maintainers\("[\w-]+"', text, re.M), f"{name}: no maintainers()"


class SpackEnv:
    """A copy of the kit's environment plus a site scope, driven through the spack CLI."""

    def __init__(self, spack: str, root: Path) -> None:
        self.spack, self.dir, self.site = spack, root / "env", root / "site"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run([self.spack, "-C", str(self.site), "-e", str(self.dir), *args])


@pytest.fixture(scope="module")
def spack_env(tmp_path_factory: pytest.TempPathFactory) -> SpackEnv:
    spack = find_spack()
    if spack is None:
        pytest.skip("no spack executable on PATH and no $SPACK_ROOT/bin/spack")
    if shutil.which("ompi_info") is None:
        pytest.skip("no system Open MPI (ompi_info) to declare as the external MPI")
    external = openmpi_external_spec(run(["ompi_info"]).stdout)
    if not {"ucx", "slurm"} <= set(re.split(r"[ =,]", external)):
        pytest.skip(f"system Open MPI ({external}) lacks UCX or Slurm, which spack.yaml asks for")
    env = SpackEnv(spack, tmp_path_factory.mktemp("spack"))
    env.dir.mkdir()
    env.site.mkdir()

    data = yaml.safe_load((REPO / "spack.yaml").read_text())
    body = data["spack"]
    for name in body["develop"]:
        body["develop"][name]["path"] = str(REPO / body["develop"][name]["path"])
    body["repos"] = {name: str(REPO / path) for name, path in body["repos"].items()}
    (env.dir / "spack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))

    make_version = re.search(r"GNU Make (\S+)", run(["make", "--version"]).stdout)
    packages: dict[str, Any] = {
        "openmpi": {"buildable": False, "externals": [{"spec": external, "prefix": "/usr"}]}}
    if make_version:
        packages["gmake"] = {"buildable": False, "externals": [
            {"spec": f"gmake@{make_version.group(1)}", "prefix": "/usr"}]}
    site = {
        "packages": {"packages": packages},
        # develop_stage_link absolute: no build-<arch>-<hash> link left in kit/probe.
        "config": {"config": {"install_tree": {"root": str(env.site.parent / "opt")},
                              "build_stage": [str(env.site.parent / "stage")],
                              "develop_stage_link": str(env.site.parent / "probe-stage")}},
    }
    mirror = os.environ.get("PT2PT_SPACK_MIRROR")
    if mirror:
        url = mirror if "://" in mirror else Path(mirror).resolve().as_uri()
        site["mirrors"] = {"mirrors": {"pt2pt-test": {"url": url, "binary": False}}}
    for name, content in site.items():
        (env.site / f"{name}.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
    return env


@pytest.fixture(scope="module")
def concretized(spack_env: SpackEnv) -> dict[str, Any]:
    spack_env("concretize", "-f")
    return json.loads((spack_env.dir / "spack.lock").read_text())


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.timeout(2 * SPACK_TIMEOUT_S)
def test_concretize_with_system_openmpi_external(concretized: dict[str, Any]) -> None:
    nodes = concretized["concrete_specs"]
    roots = {nodes[r["hash"]]["name"] for r in concretized["roots"]}
    assert roots == TOOLS
    (openmpi,) = [n for n in nodes.values() if n["name"] == "openmpi"]
    assert openmpi["external"]["path"] == "/usr"
    assert not any(n["name"] in {"mpich", "ucx"} for n in nodes.values()), "one MPI, the system's"
    (probe,) = [n for n in nodes.values() if n["name"] == "pt2pt-probe"]
    assert probe["parameters"]["dev_path"] == str(REPO / "kit" / "probe")


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.timeout(2 * SPACK_TIMEOUT_S)
def test_install_probe_from_develop_path_and_run_pingpong(
    spack_env: SpackEnv, concretized: dict[str, Any], tmp_path: Path
) -> None:
    if not os.environ.get("PT2PT_SPACK_MIRROR"):
        pytest.skip("PT2PT_SPACK_MIRROR is unset: offline Spack needs a source mirror holding "
                    "compiler-wrapper (docs/spack.md, 'Without internet')")
    checksum = ["--no-checksum"] if os.environ.get("PT2PT_SPACK_NO_CHECKSUM") == "1" else []
    spack_env("install", *checksum, "pt2pt-probe")

    prefix = Path(spack_env("location", "-i", "pt2pt-probe").stdout.strip())
    view_bin = spack_env.dir / ".spack-env" / "view" / "bin" / "pt2pt-probe"
    assert view_bin.resolve() == (prefix / "bin" / "pt2pt-probe").resolve()

    out = tmp_path / "pp"
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", str(view_bin), "--op", "pingpong",
         "--sizes", "list:0,1K,64K", "--samples", "20", "--warmup", "5", "--seed", "3",
         "--output", str(out)],
        capture_output=True, text=True, timeout=300, env=mpi_env())
    assert proc.returncode == 0, proc.stderr
    lines = Path(f"{out}.samples.csv").read_text().splitlines()
    assert lines[0] == "seq,op,size,count,time,call,warmup"
    rows = [line.split(",") for line in lines[1:]]
    assert sum(r[6] == "0" for r in rows) == 3 * 20, "20 repetitions of each listed size"
    assert sum(r[6] == "1" for r in rows) == 5
    assert {r[1] for r in rows} == {"pingpong"}
    assert {int(r[2]) for r in rows} <= {0, 1024, 65536}
    assert all(float(r[4]) > 0 for r in rows)
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["complete"] is True and len(meta["hosts"]) == 2
