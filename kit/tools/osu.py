"""OSU micro-benchmarks 7.x: ``osu_latency``, ``osu_bw``, ``osu_bibw`` (with and without ``-z``).

OSU prints one aggregate per size, never single samples, so every row has a ``stat``:
``mean`` for the average column and ``pNN`` for each ``-z`` tail column.

* ``osu_latency`` reports the one-way latency in µs (half the averaged round trip), which is
  exactly the dataset's pingpong convention: op ``pingpong``, time = µs × 1e-6.
* ``osu_bw`` / ``osu_bibw`` report MB/s (10^6 bytes per second) over a window of messages.
  We store the time per message, ``size / (MB/s × 1e6)`` seconds, as op ``bw`` / ``bibw``, so
  bandwidth rows share the time axis of every other series (``size / time`` gives the
  bandwidth back exactly). With ``-z`` OSU sorts the per-iteration *bandwidths* ascending
  (7.4 ``omb_calculate_tail_lat``), so its "P99 Tail BW" is a fast iteration: converted to a
  time it is the 1st percentile of the time per message. The ``stat`` column always names a
  percentile of *time* (what every other tool's ``pNN`` means), so bandwidth tail column
  ``PNN`` is stored as stat ``p(100-NN)``: P50 stays ``p50``, P90 becomes ``p10``, P99 ``p1``.
  For ``bibw`` the time is per message *per direction pair*: the aggregate bandwidth counts
  both directions, so ``size/time`` is the aggregate bidirectional bandwidth.

Start, end, hosts, Slurm job id, the forced transport variables and completeness come from the
``job.json`` of the kit's job directory when the output sits in one (``kit.tools.jobrecord``).
Lines before the title (launcher warnings in a captured stdout) are ignored with a warning.
Size-0 rows cannot be converted from bandwidth and are skipped (OSU never prints them); so
are bandwidth cells printed as ``0.00`` (below OSU's two decimals, seen at 1 B on a busy
node), with a warning naming them.
7.2 puts ``# Size`` before ``# Datatype``, 7.4 after, and 7.4 says "Avg Latency(us)": we read
whichever header line starts with ``# Size`` and take the columns from it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.tools import binaries
from kit.tools.base import HELP_CHECK_ORDER, Executable, JobParts, Tool
from kit.tools.jobrecord import apply_job_record, job_command
from kit.tools.parsing import US, ParsedRun, Rows, fail, parse_size, parse_time, read_text

if TYPE_CHECKING:
    from kit.core.checks import Checker
    from kit.core.yamlmarks import PathKey
    from kit.tools.base import ToolSpec

#: OSU 7.x's largest message size when ``-m`` is not given (osu_latency, osu_bw, osu_bibw).
DEFAULT_MAX_SIZE = 1 << 22

_TITLE = re.compile(r"^# OSU MPI(?:-\S+)? (.+?) Test v(\d+\.\d+)")
_PCT = re.compile(r"P(\d{1,2}(?:\.\d+)?) Tail")

TITLES = {
    "Latency": "pingpong",
    "Bandwidth": "bw",
    "Bi-Directional Bandwidth": "bibw",
}


def looks_like(lines: list[str]) -> bool:
    return any(_TITLE.match(line) for line in lines[:5])


def _stat_name(percentile: str, bandwidth: bool) -> str:
    """``pNN`` for a time percentile; a bandwidth percentile NN is the time percentile 100-NN."""
    value = Decimal(percentile)
    if bandwidth:
        value = Decimal(100) - value
    text = format(value.normalize(), "f")
    return "p" + text.replace(".", "_")


def _columns(path: Path, lineno: int, header: str, *, bandwidth: bool) -> list[str]:
    """Stat names (percentiles of time) of the value columns of a ``# Size ...`` header."""
    body = header[1:].strip()
    stats = ["mean"]
    for match in _PCT.finditer(body):
        stats.append(_stat_name(match.group(1), bandwidth))
    if not re.search(r"(Latency|Bandwidth)", body):
        raise fail(path, lineno, "expected an OSU column header '# Size  Latency (us)' or "
                   "'# Size  Bandwidth (MB/s)'")
    return stats


def parse(path: Path) -> ParsedRun:
    lines = read_text(path)
    op = version = None
    stats: list[str] | None = None
    rows = Rows()
    seq = preamble = 0
    zeros: list[str] = []  # bandwidth cells printed as 0.00: no time per message to store
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            title = _TITLE.match(line)
            if title:
                kind, version = title.group(1), title.group(2)
                op = TITLES.get(kind)
                if op is None:
                    raise fail(path, lineno, f"OSU '{kind}' test is not supported",
                               "ingest osu_latency, osu_bw or osu_bibw outputs")
            elif line.startswith("# Size"):
                stats = _columns(path, lineno, line, bandwidth=op in ("bw", "bibw"))
            continue
        if op is None:
            preamble += 1  # launcher noise before the title (mpirun/Slurm warnings)
            continue
        if stats is None:
            raise fail(path, lineno, "expected the OSU '# Size ...' header before data",
                       "pass the complete output of osu_latency/osu_bw/osu_bibw")
        fields = line.split()
        if len(fields) != 1 + len(stats):
            raise fail(path, lineno, f"expected {1 + len(stats)} columns (size and "
                       f"{', '.join(stats)}), found {len(fields)}")
        size = parse_size(path, lineno, fields[0])
        for stat, token in zip(stats, fields[1:], strict=True):
            if op == "pingpong":
                time = parse_time(path, lineno, token, "a latency in µs", US)
            else:
                mbps = parse_time(path, lineno, token, "a bandwidth in MB/s")
                if size == 0:
                    continue
                if mbps == 0:  # "0.00": below the two decimals OSU prints (a busy node)
                    zeros.append(f"{size} B {stat}")
                    continue
                time = size / (mbps * 1e6)
                if time > 86_400:
                    raise fail(path, lineno, f"bandwidth {token} MB/s is implausibly small")
            rows.add(op, size, time, seq, stat=stat)
        seq += 1
    if op is None:
        raise fail(path, None, "no OSU title line ('# OSU MPI ... Test vX.Y') found")
    if len(rows) == 0:
        raise fail(path, None, f"OSU {op} output without any result line",
                   "the benchmark probably failed; check its stderr")
    warnings = [f"{path.name}: {preamble} line(s) before the OSU title ignored"] if preamble else []
    if zeros:
        warnings.append(f"{path.name}: bandwidth printed as 0.00 MB/s (below OSU's resolution "
                        f"of 0.01) left out, no time per message to store: {', '.join(zeros)}")
    run = ParsedRun(tool="osu", sources=[path], rows=rows.frame(), warnings=warnings,
                    tool_version=f"OSU {version}" if version else None)
    run = apply_job_record(run, path)
    _check_last_size(path, run, max(rows.cols["size"]))
    return run


def _size_range(command: list[str] | None) -> tuple[int, int, str]:
    """(min, max, where from) of the sizes OSU was asked for: ``-m [MIN:]MAX`` in the job's
    command line, else OSU's defaults."""
    words = list(command or [])
    for i, word in enumerate(words):
        value = None
        if word in ("-m", "--message-size") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("-m") and len(word) > 2:
            value = word[2:]
        elif word.startswith("--message-size="):
            value = word.split("=", 1)[1]
        if value is not None:
            lo, _, hi = value.rpartition(":")
            try:
                low = int(lo) if lo else 1
                high = int(hi)
            except ValueError:
                break
            if 0 <= low <= high:
                return low, high, f"-m {value} in job.json"
            break
    return 1, DEFAULT_MAX_SIZE, "OSU's default maximum"


def _check_last_size(path: Path, run: ParsedRun, last: int) -> None:
    """OSU prints sizes from MIN doubling up to MAX and no trailer, so an output cut at a line
    boundary is only visible as a last size below the expected one."""
    low, high, origin = _size_range(job_command(path))
    size = max(low, 1)
    while size * 2 <= high:
        size *= 2
    if last < size:
        run.mark_incomplete(
            f"output stops at {last} B, expected sizes up to {size} B ({origin})",
            f"{path.name}: the output stops at {last} B but OSU's size range ends at {size} B "
            f"({origin}); run marked incomplete (if it was run with -m, ingest it from its "
            "job directory so job.json gives the range)")


# --- campaign: the options of a `- tool: osu` entry, the binaries, the command ----------

_OSU_RE = re.compile(r"^osu_[a-z0-9_]{1,40}$")


def _options(ck: Checker, entry: dict[str, Any], path: PathKey) -> dict[str, Any]:
    benchmarks = ck.text_list(entry.get("benchmarks", ["osu_latency"]), (*path, "benchmarks"),
                              pattern=_OSU_RE, hint="name OSU benchmarks such as osu_latency, "
                                                    "osu_bw, osu_bibw")
    if not benchmarks:
        raise ck.fail((*path, "benchmarks"), "no benchmark listed", "list e.g. [osu_latency]")
    return {"benchmarks": list(benchmarks),
            "options": list(ck.text_list(entry.get("options", []), (*path, "options")))}


def find_osu(name: str, view: Path) -> Path | None:
    """An OSU binary: in the view or a PT2PT_TOOLS_PATH prefix, either in ``bin/`` or under
    ``libexec/osu-micro-benchmarks/mpi/pt2pt[/standard]/`` (depending on the OSU version),
    then on PATH."""
    candidates = []
    for prefix in (view, *binaries.tools_dirs()):
        candidates += [prefix / "bin" / name, prefix / name]
        for sub in ("mpi/pt2pt", "mpi/pt2pt/standard"):
            candidates.append(prefix / "libexec" / "osu-micro-benchmarks" / sub / name)
    for path in candidates:
        if binaries.executable(path):
            return path
    return binaries.which(name)


class Osu(Tool):
    """OSU micro-benchmarks: one job per listed benchmark; the printed table is the output."""

    name = "osu"
    description = "OSU micro-benchmarks 7.x (osu_latency, osu_bw, osu_bibw; -z percentiles)"
    order = 20
    option_keys = ("benchmarks", "options")
    template = "osu.sbatch.j2"
    sniff_order = HELP_CHECK_ORDER + 10
    sample_order = "blocked"  # sizes in turn, each size's iterations back to back

    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        return _options(ck, entry, path)

    def find(self, what: str, view: Path) -> Path | None:
        return find_osu(what, view)

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        return [Executable(bench, bench, f"OSU benchmark {bench}",
                           "install the Spack environment (spack.yaml) or mark the "
                           "tool 'optional: true'", find_osu(bench, view))
                for bench in spec.options["benchmarks"]]

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        out = f"{benchmark}.txt"
        return JobParts(template="osu.sbatch.j2",
                        command=[str(binary), *spec.options["options"]],
                        outputs=[out], stdout_name=out)

    def sniff(self, path: Path, lines: list[str]) -> bool:
        return looks_like(lines)

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = Osu()
