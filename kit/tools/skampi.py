"""SkaMPI ``.sko`` result files, plus the per-repetition debug logs of ``skampi -d 8``.

A result line reads ``count= C  BYTES  TIME  STDERR  REPS  T_rank0  T_rank1 ...`` with times
in µs. SkaMPI's ``Pingpong_*`` time is a round trip and its TIME is a trimmed mean over REPS
repetitions, so each line becomes one row: op ``pingpong``, stat ``mean``, n = REPS,
time = TIME / 2 × 1e-6 (one-way, like OSU). Measurements other than ping-pongs are rejected:
we would not know how to make them comparable.

With ``-d 8`` SkaMPI also writes ``<prefix>_procNNNN.log`` per rank, holding every
repetition as ``local_results[i] = µs``, one "starting measurement" block per result line.
When ``<sko stem>_proc0000.log`` sits next to the ``.sko``, rank 0's values (rank 0 times the
round trip) become raw rows of the same run: op ``pingpong``, stat ``raw``, time = value / 2.
Run metadata (start, end, hosts, job id, forced variables, completeness) comes from the kit's
``job.json`` beside the ``.sko`` when there is one (``kit.tools.jobrecord``).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.core.checks import ENV_NAME_RE
from kit.core.errors import CampaignError
from kit.core.paths import JOBS_DIR
from kit.tools import binaries
from kit.tools.base import HELP_CHECK_ORDER, Executable, JobParts, Tool
from kit.tools.jobrecord import apply_job_record
from kit.tools.parsing import (
    US,
    Companion,
    ParsedRun,
    Rows,
    fail,
    parse_count,
    parse_size,
    parse_time,
    read_text,
)

if TYPE_CHECKING:
    from kit.core.checks import Checker
    from kit.core.yamlmarks import PathKey
    from kit.tools.base import ToolSpec

# A user's text template (a .ski file) comes from a campaign, i.e. from someone else: it is
# never given to a template engine (Jinja2 would evaluate `{{ cycler.__init__.__globals__...}}`
# and run code at plan time). The only constructs are a declared parameter, `{{ name }}`, and
# a parameter with a literal fallback, `{{ name | default("8mb") }}`; anything else between
# `{{ }}`, and every `{% %}` / `{# #}` tag, is refused with the file and line.
_TAG = re.compile(r"\{\{(.*?)\}\}|\{%|%\}|\{#|#\}|\{\{|\}\}", re.S)
_SUBST = re.compile(
    r"""^\s*([A-Za-z_][A-Za-z0-9_]*)\s*"""
    r"""(?:\|\s*default\s*\(\s*(?:"([^"\\{}]*)"|'([^'\\{}]*)')\s*\)\s*)?$""")
MAX_TEXT_TEMPLATE_BYTES = 1 << 20


def render_text_template(text: str, params: dict[str, str], source: str) -> str:
    """Substitute the declared ``params`` into a user's text template (a .ski file).

    Plain substitution, no template engine: see the comment above for the accepted forms.
    """
    if len(text) > MAX_TEXT_TEMPLATE_BYTES:
        raise CampaignError(f"the template is larger than {MAX_TEXT_TEMPLATE_BYTES} bytes",
                            where=source, hint="give a SkaMPI input file, not a data file")
    out: list[str] = []
    pos = 0
    for match in _TAG.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        expr = match.group(1)
        sub = _SUBST.match(expr) if expr is not None else None
        if sub is None:
            shown = match.group(0) if len(match.group(0)) <= 60 else match.group(0)[:57] + "..."
            raise CampaignError(
                f"unsupported template syntax {shown!r}", where=f"{source}:{line}",
                hint="a .ski template may only use '{{ name }}' or "
                     "'{{ name | default(\"value\") }}' with a name declared under 'params:' "
                     "in the campaign; no expressions, filters, blocks or comments")
        name, fallback = sub.group(1), sub.group(2) if sub.group(2) is not None else sub.group(3)
        if name in params:
            value = str(params[name])
        elif fallback is not None:
            value = fallback
        else:
            raise CampaignError(f"'{name}' is not a declared parameter", where=f"{source}:{line}",
                                hint="define the variable under 'params:' in the campaign")
        out.append(text[pos:match.start()])
        out.append(value)
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def read_text_template(path: Path, params: dict[str, str]) -> str:
    """Read and render a user's text template file; unreadable or non-UTF-8 is a CampaignError."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TEXT_TEMPLATE_BYTES + 1)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise CampaignError(f"cannot read the template ({exc.strerror})", where=str(path),
                            hint="check the 'ski:' path in the campaign") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise CampaignError("the template is not UTF-8 text", where=f"{path}:{line}",
                            hint="save the .ski file as UTF-8 text") from None
    return render_text_template(text, params, str(path))


_BEGIN = re.compile(r'^# begin result "([^"]*)"')
_LOCAL = re.compile(r"^local_results\[(\d+)\]\s*=\s*(\S+)\s*$")


def looks_like(lines: list[str]) -> bool:
    head = lines[:10]
    return any(line.startswith("# SKaMPI Version") for line in head) or any(
        _BEGIN.match(line) for line in lines[:40])


def looks_like_console(lines: list[str]) -> bool:
    """``skampi -d`` stdout: only ``#proc N: pid=...`` lines, the results are in the .sko."""
    return bool(lines) and all(line.startswith("#proc ") for line in lines if line.strip())


def looks_like_debug_log(lines: list[str]) -> bool:
    return bool(lines) and lines[0].startswith("starting measurement with min_repetitions")


def debug_log_for(sko: Path) -> Path:
    return sko.with_name(sko.stem + "_proc0000.log")


def parse(path: Path) -> ParsedRun:
    lines = read_text(path)
    rows = Rows()
    sizes: list[int] = []
    version = None
    current: str | None = None
    finished = False
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if line.startswith("# SKaMPI Version"):
            version = line[2:].split(" rev.")[0]
        begin = _BEGIN.match(line)
        if begin:
            current = begin.group(1)
            if "pingpong" not in current.lower():
                raise fail(path, lineno, f"SkaMPI measurement '{current}' is not a ping-pong",
                           "only Pingpong_* measurements can be ingested")
            continue
        if line.startswith("# end result"):
            current = None
            continue
        if line.startswith("# Finished at"):
            finished = True
        if not line or line.startswith("#"):
            continue
        if current is None:
            raise fail(path, lineno, "expected a result line inside '# begin result' / "
                       f"'# end result', found {line[:40]!r}")
        fields = line.split()
        if fields[0] != "count=" or len(fields) < 6:
            raise fail(path, lineno, "expected 'count= C BYTES TIME STDERR REPS ...' "
                       f"(at least 6 fields), found {line[:60]!r}")
        size = parse_size(path, lineno, fields[2])
        rtt = parse_time(path, lineno, fields[3], "the round-trip time in µs", US)
        parse_time(path, lineno, fields[4], "the standard error in µs", US)
        reps = parse_count(path, lineno, fields[5], "the repetition count")
        rows.add("pingpong", size, rtt / 2, len(sizes), stat="mean", n=reps)
        sizes.append(size)
    if not rows.cols["op"]:
        raise fail(path, None, "no SkaMPI result line ('count= ...') found",
                   "the run probably aborted before its first measurement")
    sources = [path]
    log = debug_log_for(path)
    warnings: list[str] = []
    if log.is_file():
        _add_debug_rows(log, sizes, rows, warnings)
        sources.append(log)
    run = ParsedRun(tool="skampi", sources=sources, rows=rows.frame(), tool_version=version,
                    warnings=warnings)
    # SkaMPI closes every result with '# end result' and the file with '# Finished at':
    # without them the run stopped early (a line-boundary cut leaves nothing else to see).
    if current is not None:
        run.mark_incomplete(f"result '{current}' has no '# end result'",
                            f"{path.name}: result '{current}' is not closed by '# end "
                            "result' (the run stopped early); run marked incomplete")
    elif not finished:
        run.mark_incomplete("no '# Finished at' line",
                            f"{path.name}: no '# Finished at' line (the run stopped early); "
                            "run marked incomplete")
    return apply_job_record(run, path)


def _add_debug_rows(log: Path, sizes: list[int], rows: Rows, warnings: list[str]) -> None:
    """Rank 0's per-repetition round trips, one block per result line of the .sko."""
    blocks: list[dict[int, float]] = []
    for lineno, raw in enumerate(read_text(log), 1):
        if raw.startswith("starting measurement"):
            blocks.append({})
            continue
        match = _LOCAL.match(raw)
        if match:
            if not blocks:
                raise fail(log, lineno, "local_results before any 'starting measurement'")
            value = parse_time(log, lineno, match.group(2), "a repetition time in µs", US)
            blocks[-1][int(match.group(1))] = value  # later rounds overwrite earlier ones
    if len(blocks) != len(sizes):
        raise fail(log, None, f"the debug log has {len(blocks)} measurements but the .sko has "
                   f"{len(sizes)} result lines", "ingest the .sko with the log of the same run")
    seq = len(sizes)
    for size, block in zip(sizes, blocks, strict=True):
        for index in sorted(block):
            rows.add("pingpong", size, block[index] / 2, seq)
            seq += 1
    warnings.append(f"{log.name}: {seq - len(sizes)} raw repetitions read (SkaMPI prints "
                    "them with 0.1 µs resolution)")


def _skampi_log(path: Path) -> str:
    match = re.match(r"(.*)_proc\d{4}\.log$", path.name)
    if match:
        sko = path.with_name(match.group(1) + ".sko")
        if sko.is_file():
            raise Companion(sko, f"SkaMPI debug log, read with {sko.name}")
    raise fail(path, None, "SkaMPI debug log without its .sko result file",
               "ingest the .sko of the same run; its _proc0000.log is read with it")


# --- campaign: the options of a `- tool: skampi` entry, the binary, the command ---------

#: The kit's own campaigns and their .ski templates (a relative ``ski:`` found nowhere else).
SHIPPED_CAMPAIGNS = JOBS_DIR / "campaigns"

def _options(ck: Checker, entry: dict[str, Any], path: PathKey,
            base: Path | None) -> dict[str, Any]:
    if "ski" not in entry:
        raise ck.fail(path, "a skampi entry needs 'ski' (the .ski input template)",
                      "add e.g. 'ski: pingpong.ski' (relative to the campaign file)")
    given = Path(ck.text(entry["ski"], (*path, "ski")))
    ski = base / given if not given.is_absolute() and base is not None else given
    shipped = SHIPPED_CAMPAIGNS / given
    if not ski.exists() and not given.is_absolute() and shipped.is_file():
        # A campaign copied out of jobs/campaigns (as the tutorial says) keeps naming the
        # kit's own templates, which stayed behind.
        ski = shipped
    # The template is copied into every job folder: it must be a file meant to be shared,
    # beside the campaign (or one of the kit's own), never /etc/shadow, /proc/self/environ,
    # ../../.. or a symbolic link out of the folder.
    shared = [base.resolve()] if base is not None else []
    shared.append(SHIPPED_CAMPAIGNS.resolve())
    resolved = ski.resolve()
    if not any(resolved.is_relative_to(folder) for folder in shared):
        raise ck.fail((*path, "ski"), f"the .ski template {ski} is outside the campaign's "
                      f"folder{f' ({base})' if base is not None else ''}",
                      "copy the template beside the campaign file (plan copies it into every "
                      "job folder) and name it relative to the campaign")
    if not ski.exists():
        raise ck.fail((*path, "ski"), f"the .ski template {ski} does not exist (nor a "
                      f"template of that name among the kit's, {SHIPPED_CAMPAIGNS})",
                      "give a path relative to the campaign file, or copy the .ski beside it "
                      f"(e.g. 'cp {SHIPPED_CAMPAIGNS / 'pingpong.ski'} .')")
    if not resolved.is_file():
        raise ck.fail((*path, "ski"), f"the .ski template {ski} is not a regular file",
                      "give a .ski text file")
    raw = entry.get("params") if entry.get("params") is not None else {}
    params = ck.mapping(raw, (*path, "params"), tuple(raw) if isinstance(raw, dict) else ())
    for key in params:
        if not ENV_NAME_RE.match(key):
            raise ck.fail((*path, "params", key), f"invalid template variable '{key}'",
                          "use letters, digits and _")
    options = list(ck.text_list(entry.get("options", []), (*path, "options")))
    for i, option in enumerate(options):
        if option in ("-i", "-o") or option.startswith(("-i", "-o")):
            raise ck.fail((*path, "options", i), f"'{option}' would change SkaMPI's input or "
                          "output file, which the job sets (input.ski, skampi.sko)",
                          "remove it: the results stay in the job folder")
    return {"ski": str(resolved),
            "params": {k: ck.text(v, (*path, "params", k)) for k, v in params.items()},
            "options": options}


def find_skampi(view: Path) -> Path | None:
    for prefix in (view, *binaries.tools_dirs()):
        for path in (prefix / "bin" / "skampi", prefix / "skampi"):
            if binaries.executable(path):
                return path
    return binaries.which("skampi")


class Skampi(Tool):
    """SkaMPI with the campaign's .ski input (rendered at plan time into input.ski)."""

    name = "skampi"
    description = "SkaMPI .sko result files (+ the -d 8 per-repetition debug logs)"
    order = 30
    option_keys = ("ski", "params", "options")
    template = "skampi.sbatch.j2"
    sniff_order = HELP_CHECK_ORDER + 20
    sample_order = "blocked"  # sizes in turn, each size's iterations back to back

    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        return _options(ck, entry, path, base)

    def find(self, what: str, view: Path) -> Path | None:
        return find_skampi(view)

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        return [Executable(None, "skampi", "SkaMPI (skampi)",
                           "install the Spack environment or mark the tool 'optional: true'",
                           find_skampi(view))]

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        ski = Path(spec.options["ski"])
        text = read_text_template(ski, spec.options["params"])
        try:  # the copy is as private as its source
            mode = stat.S_IMODE(ski.stat().st_mode) & 0o666
        except OSError:
            mode = 0o600
        return JobParts(template="skampi.sbatch.j2",
                        command=[str(binary), "-i", "input.ski", "-o", "skampi.sko",
                                 *spec.options["options"]],
                        outputs=["skampi.sko"], extra_files={"input.ski": text},
                        extra_modes={"input.ski": mode})

    def sniff(self, path: Path, lines: list[str]) -> bool:
        if looks_like(lines):
            return True
        if looks_like_console(lines):
            raise fail(path, None, "this is SkaMPI's console output (process list only)",
                       "ingest the .sko result file of the same run")
        if looks_like_debug_log(lines):
            _skampi_log(path)
        return False

    def companions(self, path: Path) -> list[Path]:
        log = debug_log_for(path)
        return [log] if log.is_file() else []

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        return parse(path)


TOOL = Skampi()
