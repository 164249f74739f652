"""Which tool wrote a file, decided from its content (the name is only a tie-breaker).

:func:`detect` returns the parser name, raises :class:`Companion` for files that are read
together with another one (a probe ``.meta.json``, SkaMPI ``_procNNNN.log``), and raises
:class:`~kit.errors.IngestError` for everything else, with a message saying what the file
looks like: help texts and error captures are recognised and named as such, so the user
does not have to guess why "osu_latency_help.txt" did not ingest.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.errors import IngestError
from kit.ingest import calibration, logp, netgauge, osu, plaincsv, probe, reprompi, skampi
from kit.ingest.common import fail

#: Parsers selectable with ``--tool`` (the dataset's tool column takes the same names).
FORMATS = ("probe", "osu", "skampi", "logp", "reprompi", "calibration", "csv", "netgauge")

_HEAD_BYTES = 16384
_HELP = re.compile(r"^\s*(usage|USAGE|Usage)\s*:", re.MULTILINE)
_ERRORS = ("MPI_ABORT was invoked", "mpirun detected that one or more processes",
           "mpirun noticed that process", "ERROR:", "Segmentation fault", "Abort(",
           "There are not enough slots available")


class Companion(Exception):
    """The file is read together with ``primary`` and contributes nothing on its own."""

    def __init__(self, primary: Path, reason: str) -> None:
        self.primary = primary
        self.reason = reason
        super().__init__(reason)


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
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if len(data) == _HEAD_BYTES and lines:
        lines = lines[:-1] or lines  # the last line may be cut by the sniff window
    return lines


def detect(path: Path) -> str:
    """The parser for ``path`` (one of FORMATS), or Companion / IngestError."""
    lines = head_lines(path)
    first = lines[0] if lines else ""
    if probe.looks_like(first):
        return "probe"
    if plaincsv.looks_like(lines):
        return "csv"
    if calibration.looks_like(lines):
        return "calibration"
    _reject_help_or_error(path, lines)
    if osu.looks_like(lines):
        return "osu"
    if skampi.looks_like(lines):
        return "skampi"
    if skampi.looks_like_console(lines):
        raise fail(path, None, "this is SkaMPI's console output (process list only)",
                   "ingest the .sko result file of the same run")
    if skampi.looks_like_debug_log(lines):
        return _skampi_log(path)
    if logp.looks_like(lines):
        return "logp"
    if logp.looks_like_verbose_log(lines):
        raise fail(path, None, "this is logp_test's -verbose console log; it repeats the "
                   "parameter file", "ingest the parameter file logp_test.out.* instead")
    if netgauge.looks_like(lines):
        return "netgauge"
    if netgauge.looks_like_console_log(lines):
        raise fail(path, None, "this is netgauge's console log",
                   "ingest the ng.out result file it wrote instead")
    if reprompi.looks_like(lines):
        return "reprompi"
    if first.lstrip().startswith("{") and path.name.endswith(probe.META_SUFFIX):
        samples = probe.samples_path(path)
        if samples.is_file():
            raise Companion(samples, f"read with {samples.name}")
        raise fail(path, None, f"probe metadata without its samples file {samples.name}",
                   "ingest the PREFIX.samples.csv; its meta.json is read with it")
    raise fail(path, 1, "unknown format: not the output of a supported tool "
               f"({', '.join(FORMATS)})",
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


def _skampi_log(path: Path) -> str:
    match = re.match(r"(.*)_proc\d{4}\.log$", path.name)
    if match:
        sko = path.with_name(match.group(1) + ".sko")
        if sko.is_file():
            raise Companion(sko, f"SkaMPI debug log, read with {sko.name}")
    raise fail(path, None, "SkaMPI debug log without its .sko result file",
               "ingest the .sko of the same run; its _proc0000.log is read with it")


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
    if tool not in FORMATS:
        raise IngestError(f"unknown tool '{tool}'", where="option --tool",
                          hint=f"choose one of {', '.join(FORMATS)}")
    return tool
