"""The collective-algorithm sweep as a campaign tool (issue 61): ``- tool: collectives``.

Why a tool: the 2015 study's configuration space is hours of CPU, and a cluster runs it like
any campaign: ``pt2pt plan`` makes one job per (algorithm, numproc), all the entry's sizes in
it, ``pt2pt submit`` puts each group's jobs in one Slurm job array (the existing templates:
base.sbatch.j2 with this tool's fragment), and ``pt2pt collectives collect CAMPAIGN OUT``
merges the jobs' point journals into the folder a local ``pt2pt collectives sweep OUT``
writes (the same journal, dataset and ``sweep.json``), which ``analyze`` and the TUI read.

A job runs ``pt2pt collectives sweep JOB_DIR/sweep ...`` of the planning checkout (one task,
one node: SMPI simulates every rank in one process), so the compute nodes must see that
checkout and the platform folder at the same paths (a shared file system, as for the
campaign folder itself) and have SimGrid. Its journal ``sweep/points.jsonl`` is not among
the job's outputs (which the job helper moves aside before a rerun), so a requeued or rerun
job keeps it and resumes after its last finished point. The per-job seed (the campaign's
seed and the job's identity) seeds the noise.

Algorithm names are checked by SimGrid when the job runs (the sweep refuses an unknown one,
listing the valid ones); ``pt2pt collectives sweep`` checks them at once on this machine.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.core.checks import parse_size
from kit.tools.base import Executable, JobParts, Tool

if TYPE_CHECKING:
    from kit.core.checks import Checker
    from kit.core.yamlmarks import PathKey
    from kit.tools.base import ToolSpec

#: The collectives the sweep's driver (collbench) calls.
COLLECTIVES = ("alltoall", "allreduce", "bcast", "allgather", "reduce")
SHARED_MALLOC_MODES = ("local", "global")
#: A job's sweep folder, inside its job folder (kept by a rerun: see the module doc).
SWEEP_DIR = "sweep"


def pt2pt_command() -> Path | None:
    """The ``pt2pt`` of the running checkout (its venv's script beside this Python)."""
    here = Path(sys.executable).parent / "pt2pt"
    if here.is_file():
        return here
    found = shutil.which("pt2pt")
    return Path(found) if found else None


class Collectives(Tool):
    """SMPI's collective algorithms over numproc x size on an exported platform."""

    name = "collectives"
    description = ("collective algorithms under SMPI on an exported platform (pt2pt "
                   "collectives sweep per job; collected by pt2pt collectives collect)")
    order = 70
    option_keys = ("platform", "collective", "algorithms", "np", "sizes", "reps",
                   "deterministic", "time_limit", "memory_limit", "cpu_limit", "ranks_per_host",
                   "shared_malloc")
    variant_tag = "np"
    collected_by = "pt2pt collectives collect CAMPAIGN OUT"
    fragment = ("# Tool: collectives, algorithm {{ benchmark|sbatch }} (SMPI: every rank "
                "in this one task).\nPT2PT_CMD=({{ command|words }})")

    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        platform = ck.text(entry.get("platform"), (*path, "platform"),
                           hint="the folder 'pt2pt export MODEL --simgrid --hosts N' wrote")
        folder = Path(platform)
        if base is not None and not folder.is_absolute():
            folder = base / folder
        collective = str(entry.get("collective", "alltoall"))
        if collective not in COLLECTIVES:
            raise ck.fail((*path, "collective"), f"unknown collective {collective!r}",
                          f"choose from: {', '.join(COLLECTIVES)}")
        algorithms = ck.text_list(entry.get("algorithms", []), (*path, "algorithms"))
        if not algorithms or len(set(algorithms)) != len(algorithms):
            raise ck.fail((*path, "algorithms"), "give each algorithm once, at least one",
                          "e.g. algorithms: [basic_linear, bruck, pair]")
        raw_np = entry.get("np")
        nps = raw_np if isinstance(raw_np, list) else [raw_np]
        numprocs = [ck.integer(n, (*path, "np"), 1, 65536) for n in nps]
        raw_sizes = entry.get("sizes")
        sizes = []
        for i, s in enumerate(raw_sizes if isinstance(raw_sizes, list) else [raw_sizes]):
            try:
                value = parse_size(str(s)) if not isinstance(s, bool) else -1
            except ValueError:
                value = -1
            if not 0 <= value <= 1 << 34:
                raise ck.fail((*path, "sizes", i), f"size {s!r} is not a message size",
                              "give bytes, with K or M for KiB or MiB, e.g. sizes: [1K, 1M]")
            sizes.append(value)
        mode = str(entry.get("shared_malloc", "local"))
        if mode not in SHARED_MALLOC_MODES:
            raise ck.fail((*path, "shared_malloc"), f"unknown mode {mode!r}",
                          " or ".join(SHARED_MALLOC_MODES))
        rph = entry.get("ranks_per_host")
        cpu = entry.get("cpu_limit")
        if not (folder / "platform.json").is_file():
            raise ck.fail((*path, "platform"), f"{folder} is not a platform folder (no "
                          "platform.json)", "write one with 'pt2pt export MODEL --simgrid "
                          "--hosts N [--cabinet K]'; a relative path is from the campaign file")
        return {
            "platform": str(folder.resolve()), "collective": collective,
            "algorithms": list(algorithms), "np": numprocs, "sizes": sizes,
            "reps": ck.integer(entry.get("reps", 3), (*path, "reps"), 1, 10000),
            "deterministic": ck.boolean(entry.get("deterministic", False),
                                        (*path, "deterministic")),
            "time_limit": ck.integer(entry.get("time_limit", 600), (*path, "time_limit"),
                                     1, 86400),
            "memory_limit": ck.integer(entry.get("memory_limit", 8), (*path, "memory_limit"),
                                       1, 4096),
            "cpu_limit": None if cpu is None else ck.integer(cpu, (*path, "cpu_limit"), 1,
                                                             86400),
            "ranks_per_host": None if rph is None else ck.integer(
                rph, (*path, "ranks_per_host"), 1, 4096),
            "shared_malloc": mode,
        }

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        """One per algorithm (the job's ``benchmark``); each runs this checkout's pt2pt, and
        needs SimGrid's smpirun."""
        pt2pt = pt2pt_command() if shutil.which("smpirun") else None
        return [Executable(a, a, f"SimGrid's smpirun (for {spec.options['collective']} {a})",
                           "install SimGrid (apt-get install libsimgrid-dev) where you plan "
                           "and on the nodes", pt2pt) for a in spec.options["algorithms"]]

    def concurrency(self, spec: ToolSpec) -> list[int]:
        return list(spec.options["np"])

    def shape(self, spec: ToolSpec, placement: str, k: int) -> tuple[int, int]:
        return (1, 1)

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        o = spec.options
        # the sweep folder (JOB_DIR/sweep) goes after "sweep" once the job's folder is known
        command = [str(binary), "collectives", "sweep", "--platform", o["platform"],
                   "--collective", o["collective"], "--algorithms", str(benchmark),
                   "--sizes", ",".join(map(str, o["sizes"])), "--reps", str(o["reps"]),
                   "--time-limit", str(o["time_limit"]),
                   "--memory-limit", str(o["memory_limit"]),
                   "--shared-malloc", o["shared_malloc"]]
        if o["deterministic"]:
            command.append("--deterministic")
        if o.get("cpu_limit"):
            command += ["--cpu-limit", str(o["cpu_limit"])]
        if o["ranks_per_host"]:
            command += ["--ranks-per-host", str(o["ranks_per_host"])]
        # no outputs: the job helper moves a rerun's outputs aside, and the journal must stay
        # for the rerun to resume (pt2pt collect does not ingest it either)
        return JobParts(template=self.template_name(), command=command, outputs=[])

    def command(self, spec: ToolSpec, command: list[str], *, seed: int, job_dir: Path,
                k: int = 0) -> list[str]:
        return [*command[:3], str(job_dir / SWEEP_DIR), *command[3:], "--np", str(k),
                "--seed", str(seed)]

    def record_ops(self, spec: ToolSpec) -> list[str] | None:
        return [spec.options["collective"]]


TOOL = Collectives()
