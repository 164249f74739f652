"""Which tool wrote a file, decided from its content (the name is only a tie-breaker).

:func:`detect` returns the parser name, raises :class:`Companion` for files that are read
together with another one (a probe ``.meta.json``, SkaMPI ``_procNNNN.log``), and raises
:class:`~kit.core.errors.IngestError` for everything else, with a message saying what the file
looks like: help texts and error captures are recognised and named as such, so the user
does not have to guess why "osu_latency_help.txt" did not ingest.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit import tools
from kit.core.errors import IngestError
from kit.tools.base import HELP_CHECK_ORDER
from kit.tools.parsing import Companion, fail

__all__ = ["FORMATS", "Companion", "check_forced", "detect", "formats", "head_lines",
           "is_auxiliary"]


def formats() -> tuple[str, ...]:
    """Parsers selectable with ``--tool`` (the dataset's tool column takes the same names):
    every tool of the registry (kit.tools) whose outputs are samples (not one that names
    another command to gather them, ``collected_by``)."""
    return tuple(n for n in tools.names() if tools.get(n).collected_by is None)


#: The tools known at import; :func:`formats` also sees tools registered later.
FORMATS = formats()

_HEAD_BYTES = 16384
_HELP = re.compile(r"^\s*(usage|USAGE|Usage)\s*:", re.MULTILINE)
_ERRORS = ("MPI_ABORT was invoked", "mpirun detected that one or more processes",
           "mpirun noticed that process", "ERROR:", "Segmentation fault", "Abort(",
           "There are not enough slots available")


def head_lines(path: Path) -> list[str]:
    """The first lines of the file, as text, for sniffing (never the whole file)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(_HEAD_BYTES)
    except OSError as exc:
        raise fail(path, None, f"cannot read the file ({exc.strerror})") from None
    if not data.strip():
        raise fail(path, None, "the file is empty",
                   "the tool wrote nothing; check its stderr or re-run it")
    if b"\x00" in data:
        raise fail(path, None, "this is a binary file, not a tool's text output")
    # an editor's byte order mark is not part of the first line (it hid 6 of 7 formats)
    text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace")
    lines = text.splitlines()
    if len(data) == _HEAD_BYTES and lines:
        lines = lines[:-1] or lines  # the last line may be cut by the sniff window
    return lines


def detect(path: Path) -> str:
    """The parser for ``path`` (one of formats()), or Companion / IngestError.

    Each tool's sniffers run in their order (kit.tools.sniffers); the check for help texts
    and error captures runs at HELP_CHECK_ORDER, after the formats that cannot be mistaken
    for one (probe, CSV, calibration)."""
    lines = head_lines(path)
    checked = False
    for order, name, test in tools.sniffers():
        if not checked and order >= HELP_CHECK_ORDER:
            _reject_help_or_error(path, lines)
            checked = True
        if test(path, lines):
            return name
    if not checked:
        _reject_help_or_error(path, lines)
    raise fail(path, 1, "unknown format: not the output of a supported tool "
               f"({', '.join(formats())})",
               "check the file, or force the format with --tool (see docs/ingest-formats.md)")


def _reject_help_or_error(path: Path, lines: list[str]) -> None:
    head = "\n".join(lines[:12])
    if _HELP.search(head):
        raise fail(path, None, "this is a tool's help text (usage message), not a measurement",
                   "ingest the outputs of measurement runs only")
    for marker in _ERRORS:
        for lineno, line in enumerate(lines[:40], 1):
            if marker in line and not line.startswith("#"):
                raise fail(path, lineno, f"this is an error capture ({line.strip()[:80]!r}), "
                           "not a measurement", "fix the failed run and ingest its new output")


def is_auxiliary(path: Path) -> bool:
    """Files that sit in tool output folders but hold no measurement (skipped in folders)."""
    name = path.name.lower()
    return (
        name.startswith(("_", ".", "readme"))
        or name.endswith((".md", ".ski", ".xml", ".yaml", ".yml", ".sh", ".json.tmp"))
        or "breakpoints" in name
        or name in {"zoo_sizes", "machinefile", "slurm_info.txt"}
        or (path.is_file() and path.stat().st_size == 0)
    )


def check_forced(tool: str) -> str:
    if tool not in formats():
        raise IngestError(f"unknown tool '{tool}'", where="option --tool",
                          hint=f"choose one of {', '.join(formats())}")
    return tool
