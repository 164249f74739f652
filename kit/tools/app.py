"""Tool ``app``: real MPI programs, run for real (a campaign) and in SimGrid (``simulate --app``).

Why one module: the same program must run both ways, from the same source, or the comparison
says nothing. A program is one of

* ``halo``: the kit's mini-app (``kit/tools/apps/halo.c``: 1-D Jacobi, halo exchanges of
  ``8 * WIDTH`` bytes, a compute phase of known cost; prints ``wall_time_s``);
* ``collbench``: one collective in a timed loop (``kit/tools/apps/collbench.c``), the driver
  of ``pt2pt collectives`` (its output is read by ``kit.outputs.collsweep``);
* an OSU 7.4 benchmark, ``osu_bw``, ``osu_bibw``, ``osu_latency``, ``osu_alltoall``,
  ``osu_allreduce``, ``osu_bcast``: built from the OSU tarball of a Spack source mirror
  (``PT2PT_OSU_TARBALL``, else ``$PT2PT_SPACK_MIRROR/osu-micro-benchmarks/...``, else the
  shared mirror beside the checkout), never from code in this repository;
* a path to a user's ``.c`` file.

:func:`build` compiles it with ``mpicc`` (real runs) or ``smpicc`` (SimGrid), cached by the
content of the sources, the compiler and the flags. :func:`read_result` reads what a run
printed: halo's ``wall_time_s``, or OSU's table (latency in µs, bandwidth in MB/s, turned
into seconds per message, ``size / bandwidth``) at the size asked for.

As a campaign tool (``- tool: app``, keys ``program``, ``args``, ``np``), each job runs the
program once with ``np`` ranks, one per node (inter-node) or all on one node (intra-node);
the campaign's repetitions are the runs. Each run is one row, op ``app``, at the message size
the program reports, with its series key ``program`` = :func:`label` (program, arguments, np),
so two programs, argument lists or rank counts are never one series. The job record
(``job.json``: the program, its command line, nodes x tasks, start, end, job id, run state)
says what was run; without it an output is not recognised as an app run.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.core.errors import UserError
from kit.core.paths import REPO_ROOT
from kit.tools.base import Executable, JobParts, Tool
from kit.tools.jobrecord import apply_job_record, job_plan
from kit.tools.parsing import ParsedRun, Rows, fail, read_text

if TYPE_CHECKING:
    from kit.core.checks import Checker
    from kit.core.yamlmarks import PathKey
    from kit.tools.base import ToolSpec

APPS_DIR = Path(__file__).parent / "apps"
OSU_VERSION = "7.4"
#: The OSU programs the kit builds, and where their source sits in the OSU tree.
OSU_PROGRAMS = {
    "osu_latency": "c/mpi/pt2pt/standard", "osu_bw": "c/mpi/pt2pt/standard",
    "osu_bibw": "c/mpi/pt2pt/standard", "osu_alltoall": "c/mpi/collective/blocking",
    "osu_allreduce": "c/mpi/collective/blocking", "osu_bcast": "c/mpi/collective/blocking",
}
_OSU_UTIL = ("osu_util.c", "osu_util_mpi.c", "osu_util_graph.c", "osu_util_papi.c")
#: OSU point-to-point programs run with exactly two ranks.
TWO_RANKS = ("osu_latency", "osu_bw", "osu_bibw")
OUTPUT = "app.txt"
BUILD_TIMEOUT_S = 600


class BuildError(UserError):
    """A program does not build (under mpicc or smpicc): the compiler's own words."""


@dataclass(frozen=True)
class Program:
    """What to compile: the sources, include folders, flags and libraries of one program."""

    name: str
    sources: tuple[Path, ...]
    includes: tuple[Path, ...] = ()
    cflags: tuple[str, ...] = ("-O2",)
    libs: tuple[str, ...] = ("-lm",)
    #: the OSU benchmark's name, or "" (halo, a user's file)
    osu: str = ""

    def digest(self, compiler: str) -> str:
        h = hashlib.sha256()
        for src in self.sources:
            h.update(src.read_bytes())
        h.update(" ".join((compiler, *self.cflags, *self.libs)).encode())
        return h.hexdigest()[:16]


def label(name: str, args: list[str], np: int) -> str:
    """The series key ``program`` of a run: ``halo -w 8192 -i 20 np=4``."""
    return " ".join([name, *(shlex.quote(a) for a in args), f"np={np}"])


def parse_label(text: str) -> tuple[str, list[str], int]:
    """(program, arguments, np) of a :func:`label`."""
    words = shlex.split(text)
    if len(words) < 2 or not re.fullmatch(r"np=\d+", words[-1]):
        raise UserError(f"{text!r} is not an app series' program (NAME ARGS... np=N)",
                        where="series key program", hint="select an op=app series")
    return words[0], words[1:-1], int(words[-1][3:])


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pt2pt" / "apps"


def osu_tarball() -> Path:
    """The OSU 7.4 tarball of a Spack source mirror (see the module doc for the order)."""
    name = f"osu-micro-benchmarks-{OSU_VERSION}.tar.gz"
    candidates = []
    if os.environ.get("PT2PT_OSU_TARBALL"):
        candidates.append(Path(os.environ["PT2PT_OSU_TARBALL"]))
    for mirror in (os.environ.get("PT2PT_SPACK_MIRROR"), REPO_ROOT.parent / "shared" / "spack"
                   / "mirror", Path("/work/shared/spack/mirror")):
        if mirror:
            candidates.append(Path(mirror) / "osu-micro-benchmarks" / name)
    for path in candidates:
        if path.is_file():
            return path
    raise UserError(f"the OSU {OSU_VERSION} sources ({name}) were not found",
                    where="PT2PT_OSU_TARBALL",
                    hint="set PT2PT_OSU_TARBALL to the tarball (a Spack source mirror has it "
                    "under osu-micro-benchmarks/), or PT2PT_SPACK_MIRROR to the mirror")


def osu_tree() -> Path:
    """The unpacked OSU sources (once per tarball content, in the cache)."""
    tarball = osu_tarball()
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:16]
    root = cache_root() / f"osu-{OSU_VERSION}-{digest}"
    top = root / f"osu-micro-benchmarks-{OSU_VERSION}"
    if (top / "c" / "util" / "osu_util.c").is_file():
        return top
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot unpack {tarball}: {exc}", where=str(tarball),
                        hint="check the tarball (PT2PT_OSU_TARBALL)") from None
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    return top


def program(spec: str, base: Path | None = None) -> Program:
    """The program ``spec`` names: ``halo``, an OSU benchmark, or a ``.c`` file."""
    if spec == "halo":
        return Program("halo", (APPS_DIR / "halo.c",),
                       cflags=("-O2", "-std=c99", "-D_POSIX_C_SOURCE=199309L"))
    if spec == "collbench":
        return Program("collbench", (APPS_DIR / "collbench.c",),
                       cflags=("-O2", "-std=c99", "-D_POSIX_C_SOURCE=200112L"))
    if spec in OSU_PROGRAMS:
        top = osu_tree()
        util = top / "c" / "util"
        # PACKAGE_VERSION: what OSU's configure defines; its title line then reads as the
        # installed benchmark's ("# OSU MPI Bandwidth Test v7.4")
        return Program(spec, (top / OSU_PROGRAMS[spec] / f"{spec}.c",
                              *(util / u for u in _OSU_UTIL)), includes=(util,), osu=spec,
                       cflags=("-O2", f'-DPACKAGE_VERSION="{OSU_VERSION}"'))
    path = Path(spec)
    if not path.is_absolute() and base is not None:
        path = base / path
    if path.suffix == ".c":
        if not path.is_file():
            raise UserError(f"program {spec}: no such file", where=str(path),
                            hint="give an existing C file, halo, or an OSU benchmark")
        return Program(path.stem, (path.resolve(),))
    raise UserError(f"unknown program {spec!r}", where="program",
                    hint="give halo, one of " + ", ".join(OSU_PROGRAMS) + ", or a .c file")


def build(prog: Program, compiler: str = "mpicc", cache: Path | None = None) -> Path:
    """The program compiled with ``compiler`` (``mpicc`` or ``smpicc``), cached by content."""
    cc = shutil.which(compiler)
    if cc is None:
        package = "libsimgrid-dev" if compiler == "smpicc" else "libopenmpi-dev"
        raise BuildError(f"'{compiler}' is not installed, so {prog.name} cannot be built",
                         where=f"program {prog.name}",
                         hint=f"install it (Debian 12: apt-get install {package})")
    out_dir = (cache or cache_root()) / f"{prog.name}-{Path(compiler).name}-{prog.digest(cc)}"
    binary = out_dir / prog.name
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{prog.name}.{os.getpid()}"
    cmd = [cc, *prog.cflags, *(f"-I{d}" for d in prog.includes), "-o", str(tmp),
           *(str(s) for s in prog.sources), *prog.libs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                              check=False, cwd=out_dir, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"{compiler} did not finish building {prog.name} within "
                         f"{BUILD_TIMEOUT_S} s", where=f"program {prog.name}",
                         hint="check the machine's load and retry") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        errors = [line for line in (proc.stderr or proc.stdout).splitlines()
                  if "error" in line.lower()] or (proc.stderr or proc.stdout).splitlines()
        raise BuildError(f"{prog.name} does not build with {compiler}: "
                         + " | ".join(e.strip() for e in errors[:6])[:1500],
                         where=f"program {prog.name} ({prog.sources[0]})",
                         hint="fix the program (the compiler's words above), or check that "
                         f"{compiler} works on a small MPI program")
    tmp.replace(binary)
    return binary


# --------------------------------------------------------------------------- results

_OSU_TITLE = re.compile(r"^# OSU MPI(?:-\S+)? (.+?) Test(?: v(\d+\.\d+))?\s*$")


def read_result(text: str, *, where: str, size: int | None = None
                ) -> tuple[int, float, list[float]]:
    """(message size, seconds, per-rank seconds) of one run's output.

    halo: ``wall_time_s`` (and its ``rank R time T`` lines), the size its halo bytes. OSU:
    the row of ``size`` (default: the last row): latency (µs) as seconds, bandwidth (MB/s,
    10^6 B/s) as seconds per message. Raises UserError naming ``where`` when neither is there.
    """
    lines = text.splitlines()
    wall = [ln for ln in lines if ln.startswith("wall_time_s ")]
    if wall:
        m = re.search(r"\bbytes (\d+)", text)
        ranks = [float(ln.split()[3]) for ln in lines if re.match(r"^rank \d+ time \S+$", ln)]
        try:
            return int(m.group(1)) if m else 0, float(wall[-1].split()[1]), ranks
        except (ValueError, IndexError):
            raise UserError(f"cannot read {wall[-1]!r}", where=where,
                            hint="the program must print 'wall_time_s SECONDS'") from None
    title = next((m for m in map(_OSU_TITLE.match, lines) if m), None)
    if title is None:
        raise UserError("the output has neither 'wall_time_s' nor an OSU title line", where=where,
                        hint="the program failed or printed nothing; see its output")
    bandwidth = "Bandwidth" in title.group(1)
    rows = []
    for ln in lines:
        words = ln.split()
        if len(words) >= 2 and re.fullmatch(r"\d+", words[0]):
            try:
                rows.append((int(words[0]), float(words[1])))
            except ValueError:
                continue
    if not rows:
        raise UserError("OSU printed no result row", where=where,
                        hint="the benchmark probably failed; see its output")
    chosen = rows[-1] if size is None else next((r for r in rows if r[0] == size), None)
    if chosen is None:
        raise UserError(f"OSU printed no row for {size} B", where=where,
                        hint="run it with -m SIZE:SIZE")
    s, value = chosen
    if bandwidth:
        if value <= 0:
            raise UserError(f"bandwidth {value} MB/s at {s} B", where=where,
                            hint="the benchmark probably failed")
        return s, s / (value * 1e6), []
    return s, value * 1e-6, []


# --------------------------------------------------------------------------- campaign tool


@dataclass
class AppSpec:
    program: str
    args: list[str] = field(default_factory=list)
    np: list[int] = field(default_factory=lambda: [2])


def _options(ck: Checker, entry: dict[str, Any], path: PathKey) -> dict[str, Any]:
    name = entry.get("program")
    if not isinstance(name, str) or not name:
        raise ck.fail((*path, "program"), "program is missing",
                      "name halo, an OSU benchmark (osu_bw, ...), or a .c file")
    args = [str(a) for a in ck.text_list(entry.get("args", []), (*path, "args"))]
    raw = entry.get("np", [2])
    nps = raw if isinstance(raw, list) else [raw]
    if not nps or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 4096
                          for n in nps):
        raise ck.fail((*path, "np"), f"np {raw!r} is not a rank count (or a list of them)",
                      "give e.g. np: 4 or np: [2, 4]")
    if name in TWO_RANKS and any(n != 2 for n in nps):
        raise ck.fail((*path, "np"), f"{name} runs with exactly 2 ranks", "give np: 2")
    return {"program": name, "args": args, "np": [int(n) for n in nps]}


class App(Tool):
    """Real MPI programs (halo, OSU, a C file): one run per job, its printed result a row."""

    name = "app"
    description = "MPI programs run whole (halo mini-app, OSU 7.4, a C file); op app"
    order = 60
    option_keys = ("program", "args", "np")
    variant_tag = "np"
    fragment = ("# Tool: application {{ benchmark|sbatch }}, {{ job.nodes }} node(s) x "
                "{{ job.ntasks_per_node }}.\nPT2PT_CMD=({{ command|words }})")
    sniff_order = 30  # before the help/error check: app.json beside it decides

    def options(self, ck: Checker, entry: dict[str, Any], path: PathKey,
                base: Path | None) -> dict[str, Any]:
        opts = _options(ck, entry, path)
        if opts["program"].endswith(".c") and base is not None:
            opts["program"] = str((base / opts["program"]).resolve())
        return opts

    def executables(self, spec: ToolSpec, view: Path) -> list[Executable]:
        name = spec.options["program"]
        path = build(program(name))
        return [Executable(Path(name).stem, Path(name).stem, f"program {name}",
                           "install mpicc (libopenmpi-dev)", path)]

    def concurrency(self, spec: ToolSpec) -> list[int]:
        return list(spec.options["np"])

    def shape(self, spec: ToolSpec, placement: str, k: int) -> tuple[int, int]:
        """np ranks: one per node across np nodes, or all on one node (intra-node)."""
        return (1, k) if placement in ("intra-node", "intra-socket") else (k, 1)

    def job(self, spec: ToolSpec, benchmark: str | None, binary: Path) -> JobParts:
        return JobParts(template=self.template_name(),
                        command=[str(binary), *spec.options["args"]],
                        outputs=[OUTPUT], stdout_name=OUTPUT)

    def record_ops(self, spec: ToolSpec) -> list[str] | None:
        return ["app"]

    def sniff(self, path: Path, lines: list[str]) -> bool:
        if path.name != OUTPUT:
            return False
        plan = job_plan(path)
        return plan is not None and plan.get("tool") == "app"

    def parse(self, path: Path, op: str | None = None) -> ParsedRun:
        plan = job_plan(path)
        command = (plan or {}).get("command")
        try:
            assert plan is not None and isinstance(command, list) and command
            name = str(plan["benchmark"])
            np = int(plan["nodes"]) * int(plan["ntasks_per_node"])
            args = [str(a) for a in command[1:]]
        except (AssertionError, KeyError, TypeError, ValueError):
            raise fail(path, None, "an app run needs the job.json its job wrote beside it "
                       "(program, command line, nodes x tasks)",
                       "ingest app outputs from their campaign's job folders") from None
        text = "\n".join(read_text(path))
        try:
            size, seconds, _ = read_result(text, where=str(path))
        except UserError as err:
            raise fail(path, None, err.message, err.hint) from None
        rows = Rows()
        rows.add("app", size, seconds, 0)
        run = ParsedRun(tool="app", sources=[path], rows=rows.frame(),
                        program=label(name, args, np))
        return apply_job_record(run, path)


TOOL = App()
