"""Static checks of the root spack.yaml: CI has no Spack, so read it as Spack would read it.

These catch the mistakes that otherwise only show on a cluster: a spec dropped from the
environment, a `develop:` path that moved, the kit's repository not registered, the MPI
switch selecting zero or two MPIs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"osu-micro-benchmarks", "skampi", "pt2pt-probe"}
UCX_IB_VARIANTS = {"+verbs", "+rc", "+ud", "+dc", "+mlx5_dv", "+rdmacm"}


@pytest.fixture(scope="module")
def env() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "spack.yaml").read_text())
    assert isinstance(data, dict) and set(data) == {"spack"}, "one top-level `spack:` map"
    return data["spack"]


def active_definitions(env: dict[str, Any], environ: dict[str, str]) -> dict[str, list[str]]:
    """Evaluate `definitions` like Spack: entries whose `when` holds, same names concatenated.

    Spack evaluates `when` as a Python expression with `env` bound to os.environ; the
    expressions here only use `env.get`, so a plain dict stands in for it.
    """
    merged: dict[str, list[str]] = {}
    for entry in env["definitions"]:
        when = entry.get("when")
        if when is not None and not eval(when, {"__builtins__": {}}, {"env": environ}):
            continue
        for name, values in entry.items():
            if name != "when":
                merged.setdefault(name, []).extend(values)
    return merged


def expand_specs(env: dict[str, Any], environ: dict[str, str]) -> list[str]:
    """The environment's root specs as strings (one level of `matrix`, `$name`, `$^name`)."""
    defs = active_definitions(env, environ)

    def row(items: list[str]) -> list[str]:
        out: list[str] = []
        for item in items:
            if item.startswith("$^"):
                out += [f"^{v}" for v in defs[item[2:]]]
            elif item.startswith("$"):
                out += defs[item[1:]]
            else:
                out.append(item)
        return out

    specs: list[str] = []
    for spec in env["specs"]:
        if isinstance(spec, dict) and "matrix" in spec:
            rows = [row(r) for r in spec["matrix"]]
            combos = [""]
            for r in rows:
                combos = [f"{c} {v}".strip() for c in combos for v in r]
            specs += combos
        else:
            specs += row([spec])
    return specs


def test_default_specs_are_the_three_tools_on_openmpi_ucx_slurm(env: dict[str, Any]) -> None:
    specs = expand_specs(env, {})
    assert {s.split()[0] for s in specs} == TOOLS
    for spec in specs:
        dep = spec.split("^", 1)[1]
        assert dep.split()[0] == "openmpi"
        assert {"fabrics=ucx", "schedulers=slurm"} <= set(dep.split()), spec


def test_mpich_ofi_alternative_replaces_openmpi(env: dict[str, Any]) -> None:
    specs = expand_specs(env, {"PT2PT_MPI": "mpich"})
    assert {s.split()[0] for s in specs} == TOOLS
    assert all(s.split("^", 1)[1].split() == ["mpich", "netmod=ofi"] for s in specs), specs


def test_mpi_switch_selects_exactly_one_mpi(env: dict[str, Any]) -> None:
    for choice in ({}, {"PT2PT_MPI": "openmpi"}, {"PT2PT_MPI": "mpich"}):
        assert len(active_definitions(env, choice)["mpi"]) == 1, choice
    assert "mpi" not in active_definitions(env, {"PT2PT_MPI": "intel"})


def test_ucx_requires_the_infiniband_variants(env: dict[str, Any]) -> None:
    require = env["packages"]["ucx"]["require"]
    assert set(str(require).split()) >= UCX_IB_VARIANTS


def test_probe_develops_from_the_work_tree_with_its_makefile(env: dict[str, Any]) -> None:
    develop = env["develop"]["pt2pt-probe"]
    path = REPO / develop["path"]
    assert path == REPO / "kit" / "probe"
    assert (path / "Makefile").is_file(), "the recipe runs the probe's own Makefile"
    assert "MPICC" in (path / "Makefile").read_text(), "the recipe passes MPICC=spec['mpi'].mpicc"
    assert develop["spec"].startswith("pt2pt-probe@")


def test_kit_repository_is_registered_in_v2_layout(env: dict[str, Any]) -> None:
    root = REPO / env["repos"]["pt2pt"]
    assert root.parent.name == "spack_repo" and root.name == "pt2pt"
    repo = yaml.safe_load((root / "repo.yaml").read_text())["repo"]
    assert repo == {"namespace": "pt2pt", "api": "v2.2"}
    assert {p.name for p in (root / "packages").iterdir()} >= {"skampi", "pt2pt_probe"}


def test_unified_concretization_and_default_view(env: dict[str, Any]) -> None:
    assert env["concretizer"]["unify"] is True
    # `view: true` puts the view at .spack-env/view, where the job templates look.
    assert env["view"] is True


def test_osu_is_pinned_to_the_version_the_kit_reads(env: dict[str, Any]) -> None:
    """7.4: what the OSU ingest is checked against and the offline mirror holds; unpinned,
    Spack picks its newest recipe version (docs/spack.md)."""
    assert env["packages"]["osu-micro-benchmarks"]["require"] == "@7.4"
    fixtures = REPO.parent / "shared" / "fixtures" / "osu"
    if fixtures.is_dir():
        assert any(p.name.endswith("_7.4.txt") for p in fixtures.iterdir())


def test_no_compiler_or_mpi_installation_is_hard_coded(env: dict[str, Any]) -> None:
    """Compilers and the system MPI are the site's (spack compiler/external find): a path or
    version of one machine in spack.yaml breaks every other machine."""
    packages = env.get("packages", {})
    assert not any("externals" in spec for spec in packages.values()), packages
    assert not {"gcc", "llvm", "openmpi", "mpich"} & set(packages), packages
