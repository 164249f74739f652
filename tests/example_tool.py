"""A complete tool in one module: what "adding a tool" means (docs/architecture.md).

``pingtxt`` is a made-up ping-pong benchmark that prints ``size rtt_us`` lines under a
``# pingtxt VERSION`` title (its fixture: tests/data/tools/pingtxt.out). Everything the kit
needs from it is here: the options of its campaign entry, where its binary is, its command
line, its job template fragment, how to recognise its output and how to read it.
tests/test_tools_registry.py registers it at run time (``kit.tools.register``) and plans,
runs, detects and ingests it without any other file of the kit knowing about it; dropped
into ``kit/tools/`` (or exported under the entry-point group ``pt2pt.tools``) it would be
found without even that call.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.tools import binaries
from kit.tools.base import Executable, JobParts, Tool
from kit.tools.parsing import US, ParsedRun, Rows, fail, parse_size, parse_time, read_text

if TYPE_CHECKING:
    from kit.core.checks import Checker
    from kit.core.yamlmarks import PathKey
    from kit.tools.base import ToolSpec

TITLE = "# pingtxt "


class PingTxt(Tool):
    name = "pingtxt"
    description = "pingtxt: round-trip times per message (made-up example tool)"
    order = 200
    option_keys = ("sizes", "iterations")
    fragment = """\
# Tool: pingtxt, {{ tool.iterations }} iterations per size.
PT2PT_CMD=({{ command|words }})
"""

    # campaign: `- tool: pingtxt` with `sizes: [1, 64]` and `iterations: N`
    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        sizes = entry.get("sizes", [1, 1024])
        if not isinstance(sizes, list) or not sizes:
            raise ck.fail((*path, "sizes"), "expected a list of sizes in bytes",
                          "write e.g. sizes: [1, 64, 1024]")
        return {"sizes": [ck.integer(s, (*path, "sizes", i), 0, 1 << 30)
                          for i, s in enumerate(sizes)],
                "iterations": ck.integer(entry.get("iterations", 10), (*path, "iterations"),
                                         1, 1_000_000)}

    def find(self, what: str, view: Path) -> Path | None:
        return binaries.find_in(["bin/pingtxt", "pingtxt"], view) or binaries.which("pingtxt")

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        return [Executable(None, "pingtxt", "pingtxt", "put pingtxt on PATH or in "
                           "PT2PT_TOOLS_PATH", self.find("pingtxt", view))]

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        o = spec.options
        return JobParts(template=self.template_name(),
                        command=[str(binary), "--sizes", ",".join(map(str, o["sizes"])),
                                 "--iterations", str(o["iterations"])],
                        outputs=["pingtxt.out"], stdout_name="pingtxt.out")

    # ingest
    def sniff(self, path: Path, lines: list[str]) -> bool:
        return bool(lines) and lines[0].startswith(TITLE)

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        lines = read_text(path)
        rows = Rows()
        for lineno, line in enumerate(lines, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 2:
                raise fail(path, lineno, f"expected 'size rtt_us', found {line.strip()!r}")
            size = parse_size(path, lineno, fields[0])
            rtt = parse_time(path, lineno, fields[1], "the round-trip time", US)
            rows.add("pingpong", size, rtt / 2, len(rows))
        version = lines[0][len(TITLE):].split(":")[0].strip() if lines else None
        return ParsedRun(tool=self.name, sources=[path], rows=rows.frame(),
                         tool_version=version)


TOOL = PingTxt()
