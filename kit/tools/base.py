"""What a tool is to the kit: everything about one external benchmark, in one class.

ReFrame's hpctestlib keeps one class per benchmark (executable, options, sanity check,
metrics); the kit does the same. A :class:`Tool` subclass in its own module under
``kit/tools/`` holds, for one tool:

* its **options schema**: the keys of its campaign ``tools:`` entry and their checks
  (:meth:`Tool.options`, with :class:`kit.core.checks.Checker`);
* its **binary lookup** (:meth:`Tool.find`, :meth:`Tool.executables`);
* its **command line** and **job template** (:meth:`Tool.job`, :meth:`Tool.command`;
  :attr:`Tool.template` names a file in ``jobs/templates``, or :attr:`Tool.fragment` is the
  body of the ``tool`` block of ``base.sbatch.j2`` for a tool without its own file);
* its **output detection** (:meth:`Tool.sniffers`: ordered tests on a file's first lines)
  and **parser** (:meth:`Tool.parse`, :meth:`Tool.companions`).

Only :mod:`kit.tools` (the registry) knows which tools exist: plan, the campaign schema,
the job renderer, detection and ingest all ask it. A tool that is only ingested (logp,
ReproMPI, ...) leaves :attr:`Tool.option_keys` at None and is not plannable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kit.core.checks import Checker
    from kit.core.yamlmarks import PathKey
    from kit.tools.parsing import ParsedRun

#: A sniffer: (first lines of the file) -> this tool's output? It may also raise
#: IngestError (a recognisable non-measurement file) or kit.tools.parsing.Companion.
Sniff = Callable[[Path, list[str]], bool]

#: Where detection runs the generic check for help texts and error captures: sniffers
#: ordered below it see those files first (formats that cannot be mistaken for them).
HELP_CHECK_ORDER = 40
#: Default order of a tool's sniffer: after the built-in formats, before the probe's
#: "a lone meta.json" rule (100).
DEFAULT_SNIFF_ORDER = 95


@dataclass(frozen=True)
class ToolSpec:
    """One campaign ``tools:`` entry (kit.measure.campaign.schema reads it); ``options``
    holds the tool-specific, already validated settings."""

    tool: str
    options: dict[str, Any]
    optional: bool = False
    line: int = 0


@dataclass(frozen=True)
class Executable:
    """One binary a tool entry runs (OSU: one per benchmark), or where it was not found."""

    benchmark: str | None
    #: the binary's name, as listed in the manifest's ``not_planned``
    label: str
    #: what the error message calls it ("OSU benchmark osu_bw")
    what: str
    #: what to do when it is missing
    hint: str
    path: Path | None


@dataclass
class JobParts:
    """What a tool contributes to one planned job (kit.measure.campaign.plan.PlannedJob)."""

    template: str
    command: list[str]
    outputs: list[str]
    stdout_name: str = "stdout.txt"
    meta_file: str | None = None
    extra_files: dict[str, str] = field(default_factory=dict)
    #: permission bits of extra files (default 0644): a copy is as private as its source
    extra_modes: dict[str, int] = field(default_factory=dict)


class Tool:
    """Base class: a tool that is only ingested. Override what the tool supports."""

    #: the dataset's ``tool`` column, ``--tool``, and the campaign's ``tool:``
    name: str = ""
    #: one line for listings
    description: str = ""
    #: position in listings (``--tool`` choices, error messages)
    order: int = 100
    #: keys of the campaign ``tools:`` entry; None: the tool cannot be planned
    option_keys: tuple[str, ...] | None = None
    #: job template file in jobs/templates (extends base.sbatch.j2)
    template: str | None = None
    #: or: the body of base.sbatch.j2's ``tool`` block (must set PT2PT_CMD)
    fragment: str | None = None
    #: order of :meth:`sniff` among all tools' sniffers (see HELP_CHECK_ORDER)
    sniff_order: int = DEFAULT_SNIFF_ORDER
    #: the order its samples are taken in, when the tool fixes it: ``blocked`` (each size's
    #: repetitions back to back, as OSU and SkaMPI do) or ``shuffled``; None: unknown or
    #: recorded per run (the probe's ``--order``, in its meta file)
    sample_order: str | None = None

    # --- campaign ---------------------------------------------------------------------

    @property
    def plannable(self) -> bool:
        return self.option_keys is not None

    def template_name(self) -> str:
        """The template a job of this tool renders (a file, or one made from ``fragment``)."""
        return self.template or f"{self.name}.sbatch.j2"

    def template_source(self) -> str | None:
        """Template text built from :attr:`fragment` (None when the tool has a file)."""
        if self.fragment is None:
            return None
        return ('{% extends "base.sbatch.j2" %}\n{% block tool %}\n'
                f"{self.fragment.strip()}\n{{%- endblock %}}\n")

    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        """The entry's validated options (its keys are already checked against
        :attr:`option_keys`); raise ``ck.fail(...)`` at the bad line."""
        return {}

    def find(self, what: str, view: Path) -> Path | None:
        """The binary called ``what`` (a label from :meth:`executables`), or None."""
        return None

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        """The binaries one campaign entry runs, found or not."""
        return []

    def concurrency(self, spec: ToolSpec) -> list[int]:
        """Concurrent pairs per job (0: one plain pair); one job variant per value."""
        return [0]

    #: the command that gathers this tool's job outputs when they are not samples (``pt2pt
    #: collect`` leaves such jobs to it); None: ``pt2pt collect`` ingests them
    collected_by: str | None = None

    #: how a variant of :meth:`concurrency` is named in job names (``-k4``; app: ``-np4``)
    variant_tag: str = "k"

    def shape(self, spec: ToolSpec, placement: str, k: int) -> tuple[int, int] | None:
        """(nodes, tasks per node) of a job, or None for the placement's pair shape (K
        concurrent pairs: K ranks per node). The app tool runs np ranks, one per node."""
        return None

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        """Template, command, outputs of one job (before its seed and folder are known)."""
        raise NotImplementedError(f"tool {self.name} cannot be planned")

    def command(self, spec: ToolSpec, command: list[str], *, seed: int, job_dir: Path,
                k: int = 0) -> list[str]:
        """The final command once the job's seed and folder are known (default: as is)."""
        return command

    def record_ops(self, spec: ToolSpec) -> list[str] | None:
        """The ops a job measures, for its job record (plan.json ``ops``), if the tool says."""
        return None

    # --- ingest -----------------------------------------------------------------------

    def sniffers(self) -> list[tuple[int, Sniff]]:
        """(order, test) pairs; the default is :meth:`sniff` at :attr:`sniff_order`."""
        return [(self.sniff_order, self.sniff)]

    def sniff(self, path: Path, lines: list[str]) -> bool:
        return False

    def companions(self, path: Path) -> list[Path]:
        """Files read together with ``path`` (hashed into the run id)."""
        return []

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        raise NotImplementedError(f"tool {self.name} has no parser")
