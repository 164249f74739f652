"""The package tree reads like the pipeline: no import goes up a stage, no two modules import
each other (issue 59).

Every module of `kit/` and `tui/` is read with `ast` (nothing is imported or run): module-level
and function-level imports alike, and `importlib.import_module("...")` with a literal name.
Each module belongs to one layer (LAYERS, lowest first, the order docs/architecture.md gives); a
module may import from its own layer or a lower one. A lazy import inside a function counts:
it hides the dependency from the import-time order, not from the design.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Lowest first. A module belongs to the layer of its longest matching prefix; the root package
# `kit` (its __init__ imports nothing of the kit) matches itself only, so a module left loose
# at the top of kit/ belongs to no layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("kit", "kit.core")),
    ("figures", ("kit.figures",)),
    ("tools", ("kit.tools", "kit.probe")),
    ("measure", ("kit.measure",)),
    ("data", ("kit.data",)),
    ("model", ("kit.model",)),
    ("fit", ("kit.fit",)),
    ("analyses", ("kit.analyses",)),
    ("outputs", ("kit.outputs",)),
    ("commands", ("kit.commands", "kit.cli", "kit.__main__")),
    ("tui", ("tui",)),
)
PACKAGES = ("kit", "tui")
# Spack recipes are Spack's DSL (`from spack.package import *`), not part of the kit's graph.
SKIP = ("kit.spack", "kit._data")


@dataclass(frozen=True)
class Import:
    source: str       # importing module
    target: str       # imported module (the longest name that is a module of the tree)
    path: Path
    line: int

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    """Every Python module of the checked packages under `root`, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = _module_name(root, path)
            if not name.startswith(SKIP):
                found[name] = path
        # C extensions (setup.py) are modules too: `from kit.model import _curve_kernels`
        # imports the extension, not the package's __init__.
        for path in sorted((root / package).rglob("*.c")):
            if "PyInit_" in path.read_text(encoding="utf-8", errors="replace"):
                found[_module_name(root, path)] = path
    return found


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None   # (prefix length, layer index)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "kit" and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` denotes: itself, or the longest prefix that is a module of the tree
    (`kit.tools.REGISTRY` is `kit.tools`)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _base(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = source.split(".")
    if not is_package:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def imports(root: Path, known: dict[str, Path]) -> Iterator[Import]:
    """Every import of a module of the tree by a module of the tree, wherever it stands."""
    for source, path in known.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(source, is_package, node)
                # `from kit.fit import fitting` imports the module kit.fit.fitting.
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                         for a in node.names]
            elif (isinstance(node, ast.Call) and _is_import_module(node.func) and node.args
                  and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                names = [node.args[0].value]
            targets = {_resolve(name, known) for name in names} - {None, source}
            for target in sorted(t for t in targets if t is not None):
                yield Import(source, target, path, node.lineno)


def _is_import_module(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id == "import_module"


def upward(root: Path) -> list[str]:
    """One line per import from a lower layer to a higher one (or of an unmapped module)."""
    known = modules(root)
    problems: list[str] = []
    for name in known:
        if layer_of(name) is None:
            problems.append(f"{known[name].relative_to(root)}: module {name} belongs to no "
                            f"layer (put it in a stage package)")
    for imp in imports(root, known):
        src, dst = layer_of(imp.source), layer_of(imp.target)
        if src is None or dst is None or dst <= src:
            continue
        problems.append(f"{imp.where(root)}: {imp.source} ({LAYERS[src][0]}) imports "
                        f"{imp.target} ({LAYERS[dst][0]}), a higher layer")
    return problems


def cycles(root: Path) -> list[str]:
    """One line per import circle between modules, naming each import of the circle."""
    known = modules(root)
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports(root, known):
        edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    # Tarjan's strongly connected components; each component of more than one module is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(known):
        if v not in index:
            visit(v)
    problems = []
    for component in components:
        members = set(component)
        links = [imp for src in component for dst, imp in sorted(edges.get(src, {}).items())
                 if dst in members]
        problems.append("import circle between " + ", ".join(component) + ": "
                        + "; ".join(f"{i.where(root)} {i.source} -> {i.target}" for i in links))
    return problems


def test_no_import_goes_up_a_layer() -> None:
    problems = upward(REPO)
    assert not problems, "\n".join(problems)


def test_no_import_circle() -> None:
    problems = cycles(REPO)
    assert not problems, "\n".join(problems)


def test_every_layer_is_a_package() -> None:
    """The layer table names real packages: a renamed stage would silently check nothing."""
    known = modules(REPO)
    for _, prefixes in LAYERS:
        for prefix in prefixes:
            assert prefix in known, f"layer prefix {prefix} is no module of the tree"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def fake_tree(tmp_path: Path) -> Path:
    return _tree(tmp_path, {
        "kit/__init__.py": "",
        "kit/core/__init__.py": "",
        "kit/core/errors.py": "",
        "kit/data/__init__.py": "",
        "kit/data/schema.py": "from kit.core import errors\n",
        "kit/fit/__init__.py": "",
        "kit/fit/fitting.py": "from ..data.schema import x\n",
        "kit/outputs/__init__.py": "",
        "kit/outputs/report.py": "",
        "tui/__init__.py": "",
        "tui/app.py": "import kit.fit.fitting\n",
    })


def test_checker_passes_a_clean_tree(fake_tree: Path) -> None:
    assert upward(fake_tree) == []
    assert cycles(fake_tree) == []


# (file written into the clean tree, its text, what upward() says)
_VIOLATIONS = {
    "a lazy import up a layer": (
        "kit/data/schema.py",
        "from kit.core import errors\n\ndef f():\n    from kit.fit.fitting import g\n",
        "kit/data/schema.py:4: kit.data.schema (data) imports kit.fit.fitting (fit), "
        "a higher layer"),
    "a literal import_module": (
        "kit/core/errors.py", "import importlib\n\nimportlib.import_module('kit.outputs.report')\n",
        "kit/core/errors.py:3: kit.core.errors (core) imports kit.outputs.report (outputs), "
        "a higher layer"),
    "kit importing tui": (
        "kit/outputs/report.py", "from tui import app\n",
        "kit/outputs/report.py:1: kit.outputs.report (outputs) imports tui.app (tui), "
        "a higher layer"),
    "a module outside the layers": (
        "kit/loose.py", "",
        "kit/loose.py: module kit.loose belongs to no layer (put it in a stage package)"),
}


@pytest.mark.parametrize("case", list(_VIOLATIONS))
def test_checker_names_the_violation(fake_tree: Path, case: str) -> None:
    path, text, said = _VIOLATIONS[case]
    (fake_tree / path).write_text(text)
    assert upward(fake_tree) == [said]


def test_checker_names_a_circle_within_a_layer(fake_tree: Path) -> None:
    (fake_tree / "kit/outputs/build.py").write_text("from kit.outputs.report import x\n")
    (fake_tree / "kit/outputs/report.py").write_text(
        "def f():\n    from . import build\n")
    assert cycles(fake_tree) == [
        "import circle between kit.outputs.build, kit.outputs.report: "
        "kit/outputs/build.py:1 kit.outputs.build -> kit.outputs.report; "
        "kit/outputs/report.py:2 kit.outputs.report -> kit.outputs.build"]
