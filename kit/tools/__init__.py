"""The external tools the kit plans and ingests: one module per tool, one table of them.

Each module under ``kit/tools/`` that defines ``TOOL`` (a :class:`kit.tools.base.Tool`) is a
tool: its campaign options, binary lookup, command line, job template, output detection and
parser are all in that module (see kit/tools/base.py and docs/architecture.md, "Adding a
tool"). :data:`REGISTRY` is the one table: the modules found here, then tools of other
packages registered under the entry-point group ``pt2pt.tools``, then :func:`register` at
run time (tests). Plan, the campaign schema, the job renderer, detection and ingest read it;
none of them names a tool.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from importlib.metadata import entry_points

from kit.tools.base import Executable, JobParts, Sniff, Tool

__all__ = ["REGISTRY", "Executable", "JobParts", "Tool", "get", "names", "plannable",
           "register", "sniffers", "template_source", "unregister"]

#: modules of this package that are not tools (what every tool shares)
_NOT_TOOLS = {"base", "binaries", "jobrecord", "parsing", "records"}

#: name -> tool, in listing order (Tool.order, then name).
REGISTRY: dict[str, Tool] = {}


def _sort() -> None:
    ordered = sorted(REGISTRY.values(), key=lambda t: (t.order, t.name))
    REGISTRY.clear()
    REGISTRY.update((t.name, t) for t in ordered)


def register(tool: Tool) -> Tool:
    """Add ``tool`` to the table (replacing one of the same name); returns it."""
    if not tool.name:
        raise ValueError(f"{type(tool).__name__} has no name")
    REGISTRY[tool.name] = tool
    _sort()
    return tool


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_TOOLS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        tool = getattr(module, "TOOL", None)
        if isinstance(tool, Tool):
            REGISTRY[tool.name] = tool
    for entry in entry_points(group="pt2pt.tools"):
        try:
            tool = entry.load()
        except Exception as exc:  # another package's bug must not stop the kit
            warnings.warn(f"pt2pt.tools entry point {entry.name!r} ({entry.value}) failed to "
                          f"load and is ignored: {exc}", stacklevel=2)
            continue
        if isinstance(tool, type) and issubclass(tool, Tool):
            tool = tool()
        if isinstance(tool, Tool):
            REGISTRY[tool.name] = tool
    _sort()


def get(name: str) -> Tool:
    """The tool called ``name`` (KeyError if there is none; callers check with names())."""
    return REGISTRY[name]


def names() -> tuple[str, ...]:
    """Every tool, in listing order: ``--tool`` choices, the dataset's tool names."""
    return tuple(REGISTRY)


def plannable() -> tuple[str, ...]:
    """Tools a campaign can run (they have an options schema and a job template)."""
    return tuple(n for n, t in REGISTRY.items() if t.plannable)


def sniffers() -> list[tuple[int, str, Sniff]]:
    """Every tool's sniffers as (order, tool name, test), in the order detection runs them."""
    found = [(order, tool.name, test) for tool in REGISTRY.values()
             for order, test in tool.sniffers()]
    return sorted(found, key=lambda item: (item[0], item[1]))


def template_source(name: str) -> str | None:
    """Job template text for a tool that gives a fragment instead of a template file."""
    for tool in REGISTRY.values():
        if tool.template_name() == name:
            return tool.template_source()
    return None


_discover()
