"""Static checks of the kit's Spack recipes (kit/spack/spack_repo/pt2pt/packages/*/package.py).

CI has no Spack, so the recipes are read with `ast` rather than imported: they must be
valid Python, use the Spack 1.x explicit build-system imports, and declare the versions,
variants and dependencies the environment relies on.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = REPO / "kit" / "spack" / "spack_repo" / "pt2pt" / "packages"
DIRECTIVES = {"version", "variant", "depends_on"}


@dataclass
class Recipe:
    """What a package.py declares: its class, base classes, imports and directive calls."""

    class_name: str
    bases: list[str]
    imports: set[str]
    directives: dict[str, list[tuple[list[Any], dict[str, Any]]]] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)

    def names(self, directive: str) -> set[str]:
        return {args[0] for args, _ in self.directives.get(directive, [])}

    def kwargs(self, directive: str, name: str) -> dict[str, Any]:
        return next(kw for args, kw in self.directives[directive] if args[0] == name)


def literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def read_recipe(name: str) -> Recipe:
    path = PACKAGES / name / "package.py"
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    imports = {f"{node.module}:{alias.name}" for node in tree.body
               if isinstance(node, ast.ImportFrom) for alias in node.names}
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    recipe = Recipe(cls.name, [ast.unparse(b) for b in cls.bases], imports)
    # Directives sit in the class body, possibly inside `with when(...)` blocks.
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef):
            recipe.methods[node.name] = ast.get_source_segment(source, node) or ""
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in DIRECTIVES):
            args = [literal(a) for a in node.args]
            kwargs = {k.arg: literal(k.value) for k in node.keywords if k.arg}
            recipe.directives.setdefault(node.func.id, []).append((args, kwargs))
    return recipe


def spack_class_name(package: str) -> str:
    """Spack's mapping from a package name (pt2pt-probe) to its class name (Pt2ptProbe)."""
    return "".join(part.capitalize() for part in re.split(r"[-_]", package))


@pytest.mark.parametrize(("directory", "package"), [("skampi", "skampi"),
                                                    ("pt2pt_probe", "pt2pt-probe")])
def test_directory_and_class_follow_spack_naming(directory: str, package: str) -> None:
    assert directory == package.replace("-", "_")
    assert read_recipe(directory).class_name == spack_class_name(package)


def test_skampi_is_autotools_pinned_to_a_commit() -> None:
    recipe = read_recipe("skampi")
    assert recipe.bases == ["AutotoolsPackage"]
    assert "spack_repo.builtin.build_systems.autotools:AutotoolsPackage" in recipe.imports
    assert "spack.package:*" in recipe.imports
    assert "6.0" in recipe.names("version")
    assert re.fullmatch(r"[0-9a-f]{40}", recipe.kwargs("version", "6.0")["commit"])


def test_skampi_needs_bison_flex_mpi_and_c() -> None:
    recipe = read_recipe("skampi")
    deps = recipe.names("depends_on")
    assert {"bison", "flex", "mpi", "c"} <= deps
    for tool in ("bison", "flex", "c"):
        assert recipe.kwargs("depends_on", tool).get("type") == "build", tool
    assert recipe.kwargs("depends_on", "mpi").get("type") is None, "mpi is a link dependency"
    assert recipe.kwargs("depends_on", "papi")["when"] == "+papi"
    assert "papi" in recipe.names("variant")
    assert "spec['mpi'].mpicc" in recipe.methods["configure_args"]


def test_probe_builds_with_its_makefile_against_spack_mpi() -> None:
    recipe = read_recipe("pt2pt_probe")
    assert recipe.bases == ["MakefilePackage"]
    assert "spack_repo.builtin.build_systems.makefile:MakefilePackage" in recipe.imports
    assert "main" in recipe.names("version")
    assert {"mpi", "c"} <= recipe.names("depends_on")
    assert "MPICC={self.spec['mpi'].mpicc}" in recipe.methods["build_targets"]
    assert '"pt2pt-probe"), prefix.bin)' in recipe.methods["install"]
    assert "Makefile" in recipe.methods["edit"], "the probe's own Makefile is the build"
