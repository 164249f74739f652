"""The Spack environment with a real Spack: audit the recipes, concretize, install, run.

Runs where a `spack` executable is on PATH (or under $SPACK_ROOT/bin); `.ci/run` lays out an
offline one from ../shared/spack. The environment is copied, concretized and installed once
per session into a tree of its own (tests/conftest_spack.py says where): the root spack.yaml
stays portable, the site scope declares this machine's Open MPI by hand and its build tools
with `spack external find`, as docs/spack.md tells sites to do. Offline, the source mirror
named by PT2PT_SPACK_MIRROR provides what Spack must fetch (compiler-wrapper, OSU, SkaMPI).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import mpi_env
from tests.conftest_spack import (
    SPACK_TIMEOUT_S,
    TOOLS,
    SpackEnv,
    SpackTools,
    find_spack,
    openmpi_external_spec,
    run,
    runs_spack_built_tools,
)

REPO = Path(__file__).resolve().parent.parent


def test_openmpi_external_spec_follows_components() -> None:
    text = ("                 Open MPI: 4.1.4\n"
            "                 MCA btl: ofi (MCA v2.1.0, API v3.1.0, Component v4.1.4)\n"
            "                 MCA plm: slurm (MCA v2.1.0, API v2.0.0, Component v4.1.4)\n"
            "                 MCA pml: ucx (MCA v2.1.0, API v2.0.0, Component v4.1.4)\n")
    assert openmpi_external_spec(text) == "openmpi@4.1.4 fabrics=ofi,ucx schedulers=slurm"
    assert openmpi_external_spec(" Open MPI: 5.0.3\n").endswith("fabrics=none schedulers=none")
    with pytest.raises(ValueError, match="Open MPI"):
        openmpi_external_spec("MCA pml: ucx (x)\n")


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


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.timeout(2 * SPACK_TIMEOUT_S)
def test_concretize_with_system_openmpi_external(spack_env: SpackEnv) -> None:
    lock = spack_env.lock()
    nodes = lock["concrete_specs"]
    roots = {nodes[r["hash"]]["name"] for r in lock["roots"]}
    assert roots == set(TOOLS)
    openmpi = spack_env.node("openmpi")
    assert openmpi["external"]["path"] == "/usr"
    assert not any(n["name"] in {"mpich", "ucx"} for n in nodes.values()), "one MPI, the system's"
    assert spack_env.node("pt2pt-probe")["parameters"]["dev_path"] == str(REPO / "kit" / "probe")
    # The version the kit's OSU ingest reads (and the offline mirror holds), not the newest.
    assert spack_env.node("osu-micro-benchmarks")["version"] == "7.4"
    # The compiler is the site's, found by Spack (spack.yaml names none).
    assert spack_env.node("gcc").get("external"), "the system compiler, not one Spack built"


@runs_spack_built_tools
def test_installed_tools_are_in_the_view_and_the_probe_runs(
        spack_tools: SpackTools, tmp_path: Path) -> None:
    """Every root installed in the tree, linked into the view the job templates use; the
    probe built from kit/probe by Spack runs a 2-rank ping-pong from there. (OSU and SkaMPI
    run in tests/test_real_tools.py.)"""
    env = spack_tools.env
    for name in TOOLS:
        prefix = Path(env("location", "-i", name).stdout.strip())
        assert prefix.is_relative_to(env.tree / "opt"), (name, prefix)
    assert spack_tools.probe.resolve().is_relative_to(env.tree / "opt")
    for bench in ("osu_latency", "osu_bw", "osu_bibw"):
        assert os.access(spack_tools.osu(bench), os.X_OK), bench
    assert (spack_tools.view / "share" / "skampi" / "ski").is_dir()
    # Only an archive the mirror holds rebuilt skipped its checksum; never the probe's.
    assert set(env.no_checksum) <= {"osu-micro-benchmarks"}
    print(f"spack: concretize {env.timings['concretize_s']:.0f} s, "
          f"install {env.timings.get('install_s', 0):.0f} s, tree {env.tree}")

    out = tmp_path / "pp"
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", str(spack_tools.probe), "--op", "pingpong",
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
