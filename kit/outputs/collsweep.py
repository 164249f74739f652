"""Sweep collective algorithms under SMPI: ``pt2pt collectives sweep`` (issue 61).

Why: the 2015 study behind this kit ran SMPI's collective algorithms over numproc x message
size and asked which algorithm is within a few percent of the best. This module runs that
sweep on a cluster platform written by ``pt2pt export --hosts`` (the folder
``kit.outputs.appsim`` runs programs on), with the kit's driver ``collbench``
(``kit/tools/apps/collbench.c``, built by ``kit.tools.app``): one smpirun per point
(collective, algorithm, numproc, size), the algorithm forced with
``--cfg=smpi/<collective>:<algorithm>``, R repetitions inside the run with the network
plugin's noise.

Each point records the simulated time of every repetition (the slowest rank's, see
collbench), the host's wall time and CPU seconds of the whole smpirun, and its peak memory:
the anonymous resident memory plus the page tables (``RssAnon`` + ``VmPTE`` of
/proc/PID/status) summed over the run's processes, plus the pages of the /dev/shm files they
hold open (SimGrid's ``local`` shared-malloc buffers: unlinked, kept open), each file once,
sampled while it runs. Why not max RSS, nor ``RssShmem``: with ``SMPI_SHARED_MALLOC`` buffers
every rank maps the same pages again and RSS counts each mapping (187 GB for 512 ranks at 1 MiB
that used 0.1 GB; ``bruck``, whose ranks touch all of their buffers, 2 GiB of ``RssShmem`` at
32 ranks x 1 MiB for 64 MiB of files, which PSS confirms); why not PSS:
/proc/PID/smaps_rollup walks those mappings, 8.5 s (0.7 s of kernel CPU, under the run's
memory-map lock) per read at 512 ranks. Why the page tables: they are what the ranks' mappings
cost (0.66 GB at 512 ranks x 1 MiB in SimGrid's ``global`` shared-malloc mode). The figure
leaves out the binaries; a sample misses a peak shorter than its period
(:data:`SAMPLE_PERIOD_S`).

Shared buffers (:data:`SHARED_MALLOC`): ``local`` by default, not SimGrid's ``global``. Both
skip copying payloads between ranks; ``global`` maps one 64 MiB file block over and over and
maps it with MAP_POPULATE, so every rank's page tables are filled for its whole send and
receive buffers (numproc x size each): numproc^2 x size of kernel work and page tables
(at 512 ranks x 1 MiB: 12 s of kernel CPU, 0.66 GB). ``local`` maps one shared file per
allocation site, unpopulated; only the pages a rank touches (its own block, copied locally by
every alltoall algorithm) become memory, once: 2 x numproc x size at most (2 GiB at 1,024 x
1 MiB), in /dev/shm (a /dev/shm too small for it stops the run with SIGBUS, recorded as
``memory``). The simulated times are the same in both modes (tested).

A point that exceeds the time limit or the memory limit is killed and recorded as
``timeout`` / ``memory``; one SimGrid stops for lack of memory (a failed mapping, an
allocation) is ``memory`` too. Memory is limited twice: the sampled figure above, killed over
the memory limit, and a hard cap, each process's RLIMIT_DATA (``prlimit --data``, util-linux),
by default the host's physical memory, so an allocation burst between two samples (``bruck``
allocates numproc x size per rank at once) fails inside SimGrid (``std::bad_alloc``) instead of
pushing the host into its OOM killer. RLIMIT_DATA counts private writable mappings (heap, the
ranks' stacks), not the shared-malloc file mappings, which RLIMIT_AS would count once per rank
(terabytes of address space at 1,024 ranks x 1 MiB). Why not the memory limit itself: it
counts address space, touched or not (``2dmesh`` at 32 x 1 MiB reserves over 4 GiB and
touches 0.3). An optional CPU
limit (``cpu_limit``, RLIMIT_CPU through the same prlimit) stops a run after so many CPU
seconds (``timeout``): on a shared machine the wall-time limit measures the neighbours too.
Any other failure is ``failed``, with SimGrid's words; the sweep goes on. The journal
``points.jsonl`` gets one line per finished point (flushed and synced), so an interrupted
sweep resumes where it stopped; ``collectives.parquet`` (one row per
repetition, or one per point that did not complete) is rewritten from it at the end.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kit.analyses.collectives import SPLIT
from kit.core.atomicwrite import make_dirs, replacing, write_text
from kit.core.errors import UserError
from kit.outputs.appsim import _hostfile, _plugin, _reason
from kit.outputs.export.platform import load_platform
from kit.tools import app as apps
from kit.tools.collectives import COLLECTIVES
from kit.tools.collectives import SWEEP_DIR as JOB_SWEEP_DIR

STATUSES = ("ok", "timeout", "memory", "failed")
JOURNAL = "points.jsonl"
DATASET = "collectives.parquet"
SAMPLE_PERIOD_S = 0.2
#: The smallest RLIMIT_DATA the runs get: under a few MiB smpirun's shell and SimGrid die at
#: start (SIGSEGV), which would read as a failure instead of the memory limit it is.
DATA_CAP_FLOOR = 32 << 20
#: What lets 1,024 ranks fit on one host (../shared/notes/simgrid-scale.md): small stacks, no
#: privatization (collbench has no globals to privatize), computation not simulated.
SCALE_CFG = ("--cfg=contexts/stack-size:256", "--cfg=smpi/privatization:no",
             "--cfg=smpi/simulate-computation:no")
#: SimGrid's shared-malloc modes as the sweep sets them (see the module doc for the choice):
#: ``global`` needs blocks large enough that the mappings stay under vm.max_map_count.
SHARED_MALLOC = {"local": ("--cfg=smpi/shared-malloc:local",),
                 "global": ("--cfg=smpi/shared-malloc:global",
                            "--cfg=smpi/shared-malloc-blocksize:67108864")}
#: Exit statuses of a run killed for memory: SIGKILL (the kernel's OOM killer, ours), SIGBUS
#: (a shared-malloc page that /dev/shm has no room for), as signals or as a shell reports them.
_MEMORY_EXITS = (-9, 137, -7, 135)
_MEMORY = re.compile(r"Could not map|bad_alloc|out of memory|Cannot allocate memory|"
                     r"Memory allocation of \d+ bytes failed|"
                     r"mmap|MAP_FAILED", re.IGNORECASE)
#: SIGXCPU (the CPU limit), as a signal or as smpirun's shell reports it.
_CPU_EXITS = (-24, 152)
_VALID = re.compile(r"has no algorithm '[^']*'! Valid algorithms: ([^.]+)\.")

#: Columns of ``collectives.parquet``.
SCHEMA: dict[str, pl.DataType] = {
    "series": pl.String(),  # collective/algorithm: one series each
    "collective": pl.String(), "algorithm": pl.String(),
    "numproc": pl.UInt32(), "size": pl.UInt64(),
    "rep": pl.UInt32(),  # null for a point that did not complete
    "time": pl.Float64(),  # simulated seconds of the repetition (slowest rank); null if none
    "status": pl.String(),
    "wall_s": pl.Float64(), "cpu_s": pl.Float64(), "peak_memory_bytes": pl.UInt64(),
    "seed": pl.UInt32(), "reason": pl.String(),
}


@dataclass(frozen=True)
class Sweep:
    """What to run: a platform folder, algorithms per collective, numprocs, sizes."""

    platform: Path
    algorithms: dict[str, list[str]]
    numprocs: list[int]
    sizes: list[int]
    reps: int = 3
    seed: int = 1
    noise: bool = True
    time_limit: float = 600.0
    memory_limit: int = 8 << 30
    cpu_limit: int | None = None  # CPU seconds of the run (RLIMIT_CPU), None: none
    data_cap: int | None = None  # RLIMIT_DATA per process; None: the host's memory (doc)
    ranks_per_host: int | None = None
    shared_malloc: str = "local"
    #: more ``--cfg=KEY:VALUE`` for smpirun, after the sweep's own (benchmarks of the cost)
    cfg: tuple[str, ...] = ()

    def points(self) -> list[tuple[str, str, int, int]]:
        return [(c, a, n, s) for c, algs in self.algorithms.items() for a in algs
                for n in self.numprocs for s in self.sizes]


@dataclass
class Point:
    """One smpirun: its key, what it measured, and how it ended."""

    collective: str
    algorithm: str
    numproc: int
    size: int
    status: str
    times: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_bytes: int = 0
    seed: int = 1
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.collective, self.algorithm, self.numproc, self.size)


# --------------------------------------------------------------------------- algorithms


@functools.cache
def valid_algorithms(collective: str) -> tuple[str, ...]:
    """The algorithm names the installed SimGrid offers for ``collective``, as SimGrid itself
    lists them when given a name it lacks (one tiny smpirun)."""
    if collective not in COLLECTIVES:
        raise UserError(f"unknown collective {collective!r}", where="option --collective",
                        hint="give one of " + ", ".join(COLLECTIVES))
    binary = apps.build(apps.program("collbench"), "smpicc")
    with tempfile.TemporaryDirectory(prefix="pt2pt-coll-") as tmp:
        d = Path(tmp)
        (d / "p.xml").write_text(
            "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">"
            '\n<platform version="4.1"><zone id="z" routing="Full">'
            '<host id="h" speed="1Gf"/></zone></platform>\n')
        (d / "hosts").write_text("h\n")
        proc = subprocess.run(
            ["smpirun", "-platform", str(d / "p.xml"), "-hostfile", str(d / "hosts"), "-np", "1",
             f"--cfg=smpi/{collective}:pt2pt-no-such-algorithm", str(binary), "-c", collective,
             "-s", "4"], capture_output=True, text=True, cwd=d, timeout=120, check=False,
            stdin=subprocess.DEVNULL)
    m = _VALID.search(proc.stderr)
    if m is None:
        raise UserError(f"SimGrid did not list its {collective} algorithms: "
                        f"{_reason(proc.stderr, proc.stdout)}", where="smpirun",
                        hint="check the SimGrid installation (apt-get install libsimgrid-dev)")
    return tuple(a.strip() for a in m.group(1).split(",") if a.strip())


def check_algorithms(algorithms: dict[str, list[str]]) -> None:
    """Refuse an unknown collective or algorithm, listing the valid ones."""
    for collective, names in algorithms.items():
        valid = valid_algorithms(collective)
        bad = [a for a in names if a not in valid]
        if bad:
            raise UserError(f"SimGrid has no {collective} algorithm {', '.join(map(repr, bad))}",
                            where="option --algorithms",
                            hint=f"this SimGrid's {collective} algorithms: {', '.join(valid)}")


# --------------------------------------------------------------------------- one point


def _shared_files(pid: str) -> dict[tuple[int, int], int]:
    """The /dev/shm files process ``pid`` holds open (SimGrid's shared-malloc buffers, unlinked
    but kept open), each once: (device, inode) -> the bytes it occupies."""
    found = {}
    for fd in os.scandir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(fd.path).startswith("/dev/shm/"):
                st = os.stat(fd.path)
                found[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return found


def _session_memory(sid: int) -> int:
    """Resident anonymous bytes and page tables (RssAnon + VmPTE) of the processes of session
    ``sid``, plus the pages of the shared-memory files they hold, each file once."""
    total = 0
    shared: dict[tuple[int, int], int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[3]) != sid:
                continue
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith(("RssAnon:", "VmPTE:")):
                    total += int(line.split()[1]) * 1024
            shared.update(_shared_files(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return total + sum(shared.values())


def _session_cpu(sid: int) -> float:
    """CPU seconds so far of the processes of session ``sid`` and the children they reaped.
    Why: a run killed over a limit dies with its simulator unreaped by us (its parent, the
    smpirun shell, dies first), so RUSAGE_CHILDREN never sees that CPU time."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def _caps(sweep: Sweep) -> list[str]:
    """``prlimit --data=MEMORY [--cpu=SOFT:HARD] --``: the hard half of the memory limit and
    the CPU-time limit, per process of the run (see the module doc); none without prlimit."""
    tool = shutil.which("prlimit")
    if tool is None:
        return []
    cpu = [f"--cpu={sweep.cpu_limit}:{sweep.cpu_limit + 5}"] if sweep.cpu_limit else []
    cap = sweep.data_cap or max(sweep.memory_limit, os.sysconf("SC_PHYS_PAGES")
                                * os.sysconf("SC_PAGE_SIZE"))
    return [tool, f"--data={max(cap, DATA_CAP_FLOOR)}", *cpu, "--"]


def _parse(out: str) -> list[float]:
    return [float(ln.split()[3]) for ln in out.splitlines()
            if re.match(r"^rep \d+ time_s \S+$", ln)]


def _watch(proc: subprocess.Popen[str], sweep: Sweep, point: Point, started: float) -> str:
    """Sample the run's memory until it ends; kill it over a limit ("memory", "timeout")."""
    killed = ""
    while proc.poll() is None:
        point.peak_memory_bytes = max(point.peak_memory_bytes, _session_memory(proc.pid))
        if point.peak_memory_bytes > sweep.memory_limit:
            killed = "memory"
        elif time.monotonic() - started > sweep.time_limit:
            killed = "timeout"
        if killed:
            point.cpu_s = _session_cpu(proc.pid)  # see _session_cpu: lost once killed
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        left = sweep.time_limit - (time.monotonic() - started)
        # not sleep: the wall time ends when the run does
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.001, min(SAMPLE_PERIOD_S, left)))
    return killed


def run_point(sweep: Sweep, collective: str, algorithm: str, numproc: int, size: int, *,
              binary: Path, doc: dict[str, Any], work: Path) -> Point:
    """One smpirun of collbench; never raises for what the run does (see the module doc)."""
    platform = sweep.platform.resolve()
    (work / "hostfile").write_text(_hostfile(doc, numproc, sweep.ranks_per_host))
    env = [f"LD_PRELOAD={_plugin()}", f"PT2PT_SIMGRID_NOISE={platform / 'network.tsv'}",
           f"PT2PT_SIMGRID_SEED={sweep.seed}"]
    if not sweep.noise:
        env.append("PT2PT_SIMGRID_DETERMINISTIC=1")
    cfg = (platform / "smpi-config.txt").read_text().split()
    cmd = [*_caps(sweep), "smpirun", "-wrapper", "env " + " ".join(env), "-platform",
           str(platform / "platform.xml"), "-hostfile", str(work / "hostfile"), "-np",
           str(numproc), *cfg, *SCALE_CFG, *SHARED_MALLOC[sweep.shared_malloc],
           f"--cfg=smpi/{collective}:{algorithm}", *(f"--cfg={c}" for c in sweep.cfg),
           "--log=root.thres:critical", str(binary), "-c", collective, "-s", str(size),
           "-r", str(sweep.reps), "-w", "1"]
    point = Point(collective, algorithm, numproc, size, "failed", seed=sweep.seed)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with open(work / "out.txt", "w+") as out, open(work / "err.txt", "w+") as err:
        proc = subprocess.Popen(cmd, cwd=work, stdout=out, stderr=err, text=True,
                                start_new_session=True, stdin=subprocess.DEVNULL)
        try:
            killed = _watch(proc, sweep, point, started)
        except BaseException:  # interrupted: the run is in its own session, stop it too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        point.wall_s = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        point.cpu_s = max(point.cpu_s, (after.ru_utime - before.ru_utime)
                          + (after.ru_stime - before.ru_stime))
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if killed == "memory":
        point.status = "memory"
        point.reason = (f"killed at {point.peak_memory_bytes / 2**30:.2f} GiB (limit "
                        f"{sweep.memory_limit / 2**30:.2f} GiB)")
    elif killed == "timeout":
        point.status = "timeout"
        point.reason = f"killed after {sweep.time_limit:g} s (time limit)"
    elif proc.returncode in _CPU_EXITS and sweep.cpu_limit:
        point.status = "timeout"
        point.reason = f"stopped after {sweep.cpu_limit} CPU-s (CPU limit, SIGXCPU)"
    else:
        times = _parse(stdout)
        if proc.returncode == 0 and len(times) == sweep.reps and "Deadlock" not in stderr:
            point.status, point.times = "ok", times
        else:
            reason = _reason(stderr, stdout)
            if proc.returncode in (-7, 135):
                reason = ("SIGBUS: no room for the shared buffers in /dev/shm (df /dev/shm; "
                          "--shared-malloc global needs none) | " + reason)
            point.status = "memory" if _MEMORY.search(stderr) or proc.returncode in (
                _MEMORY_EXITS) else "failed"
            point.reason = f"exit {proc.returncode}: {reason}"
    return point


# --------------------------------------------------------------------------- the sweep


def read_journal(out_dir: Path, *, repair: bool = True) -> list[Point]:
    """The finished points of ``out_dir``; a last line cut by an interruption is dropped
    (and, with ``repair``, cut off the file, so the resumed sweep appends whole lines; not
    when reading a journal another process may be writing, as a campaign's running job)."""
    path = out_dir / JOURNAL
    if not path.is_file():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):  # interrupted mid-line: keep whole lines only
        data = data[: data.rfind(b"\n") + 1]
        if repair:
            with open(path, "r+b") as fh:
                fh.truncate(len(data))
    points = []
    for no, line in enumerate(data.decode().splitlines(), 1):
        try:
            points.append(Point(**json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise UserError(f"line {no} is not a sweep point ({exc})", where=f"{path}:{no}",
                            hint="the journal was edited or damaged; remove that line (its "
                            "point runs again) or start a new output folder") from None
    return points


def _append(out_dir: Path, point: Point) -> None:
    with open(out_dir / JOURNAL, "a") as fh:
        fh.write(json.dumps(asdict(point)) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def frame(points: Iterable[Point]) -> pl.DataFrame:
    """The dataset: one row per repetition of a completed point, one per other point."""
    rows: list[dict[str, Any]] = []
    for p in points:
        base = {"series": f"{p.collective}/{p.algorithm}", "collective": p.collective,
                "algorithm": p.algorithm, "numproc": p.numproc, "size": p.size,
                "status": p.status, "wall_s": p.wall_s, "cpu_s": p.cpu_s,
                "peak_memory_bytes": p.peak_memory_bytes, "seed": p.seed,
                "reason": p.reason}
        if p.status == "ok":
            rows += [{**base, "rep": i, "time": t} for i, t in enumerate(p.times)]
        else:
            rows.append({**base, "rep": None, "time": None})
    return pl.DataFrame(rows, schema=SCHEMA)


def write_dataset(out_dir: Path, points: list[Point]) -> Path:
    with replacing(out_dir / DATASET) as tmp:
        frame(points).write_parquet(tmp)
    return out_dir / DATASET


def read_dataset(out_dir: Path) -> pl.DataFrame:
    """The sweep's rows (from the journal, so a sweep stopped early is read whole)."""
    if not (out_dir / JOURNAL).is_file():
        raise UserError(f"{out_dir} holds no collective sweep ({JOURNAL} missing)",
                        where=str(out_dir), hint="run 'pt2pt collectives sweep OUT ...' first")
    return frame(read_journal(out_dir))


def topology_split(out_dir: Path) -> tuple[int | None, str]:
    """Where the analysis splits numproc, and why: at a cabinet's capacity in ranks when the
    sweep's platform has cabinets (the ranks of a point fill hosts in order, one per host
    unless the sweep gave ``ranks_per_host``: up to that capacity they stay in the first
    cabinet, beyond it messages cross the uplinks); else the 2015 study's boundary, 256,
    kept so the shares compare with its figures although nothing changes there."""
    study = (SPLIT, f"{SPLIT}: the 2015 study's cabinet boundary (this platform is "
             "flat)")
    try:
        doc = json.loads((out_dir / "sweep.json").read_text())
        topo = doc.get("topology") or load_platform(Path(doc["platform"]))
        cabinet, hosts = topo.get("cabinet"), int(topo["hosts"])
        per = int(doc.get("ranks_per_host") or 1)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError):
        return (study[0], f"{SPLIT}: the 2015 study's cabinet boundary (the sweep's "
                "platform is not readable)")
    if not cabinet or int(cabinet) >= hosts:
        return study
    cap = int(cabinet) * per
    return cap, (f"{cap}: a cabinet's ranks ({cabinet} hosts x {per} rank(s) per host); above, "
                 "messages cross the cabinets' uplinks")


def run_sweep(sweep: Sweep, out_dir: Path,
              on_point: Callable[[Point, int, int], None] | None = None) -> list[Point]:
    """Run every point of ``sweep`` not yet in ``out_dir``'s journal; returns all points."""
    doc = load_platform(sweep.platform)
    if sweep.shared_malloc not in SHARED_MALLOC:
        raise UserError(f"unknown shared-malloc mode {sweep.shared_malloc!r}",
                        where="option --shared-malloc", hint=" or ".join(SHARED_MALLOC))
    check_algorithms(sweep.algorithms)
    for n in sweep.numprocs:  # every numproc fits before anything runs
        _hostfile(doc, n, sweep.ranks_per_host)
    make_dirs(out_dir)
    done = read_journal(out_dir)
    seen = {p.key for p in done}
    todo = [k for k in sweep.points() if k not in seen]
    write_text(out_dir / "sweep.json", json.dumps(
        {**asdict(sweep), "platform": str(sweep.platform.resolve()),
         "topology": {k: doc.get(k) for k in ("hosts", "cores", "cabinet")}},
        indent=2) + "\n")
    binary = apps.build(apps.program("collbench"), "smpicc")
    with tempfile.TemporaryDirectory(prefix="pt2pt-coll-") as tmp:
        for i, (c, a, n, s) in enumerate(todo, 1):
            point = run_point(sweep, c, a, n, s, binary=binary, doc=doc, work=Path(tmp))
            _append(out_dir, point)
            done.append(point)
            if on_point is not None:
                on_point(point, i, len(todo))
    write_dataset(out_dir, done)
    return done


# --------------------------------------------------------------------------- campaigns


@dataclass
class Collected:
    """What :func:`collect_campaign` gathered: points added, and each job's state."""

    added: int = 0
    duplicates: int = 0
    jobs: dict[str, str] = field(default_factory=dict)  # job id -> what was taken


def collect_campaign(campaign_dir: Path, out_dir: Path) -> Collected:
    """Merge the point journals of a campaign's ``collectives`` jobs into ``out_dir``, the
    folder a local sweep writes (journal, ``sweep.json``, dataset), so ``analyze`` and the TUI
    read both alike. Run it again as jobs end: a point already in ``out_dir`` is kept as it
    is (one run of it is a point; a campaign's repetitions of a job add none), a job still
    running gives what it has finished."""
    from kit.measure.campaign.manifest import read_job_json, read_manifest

    manifest = read_manifest(campaign_dir)
    jobs = [j for j in manifest.get("jobs", []) if j.get("tool") == "collectives"]
    if not jobs:
        raise UserError("the campaign has no collectives jobs", where=str(campaign_dir),
                        hint="plan a campaign with a '- tool: collectives' entry")
    make_dirs(out_dir)
    done = read_journal(out_dir)
    seen = {p.key for p in done}
    found = Collected()
    first_sweep: dict[str, Any] | None = None
    for job in jobs:
        folder = campaign_dir / job["dir"] / JOB_SWEEP_DIR
        record = read_job_json(campaign_dir, job)
        state = str(record.get("state")) if record else "not ended"
        points = read_journal(folder, repair=False)
        if first_sweep is None and (folder / "sweep.json").is_file():
            with contextlib.suppress(OSError, ValueError):
                first_sweep = json.loads((folder / "sweep.json").read_text())
        new = [p for p in points if p.key not in seen]
        found.duplicates += len(points) - len(new)
        for point in new:
            _append(out_dir, point)
            seen.add(point.key)
            done.append(point)
        found.added += len(new)
        found.jobs[job["id"]] = f"{state}, {len(points)} point(s), {len(new)} new"
    if first_sweep is not None:
        doc = {**first_sweep, "campaign": str(campaign_dir.resolve()),
               "algorithms": {c: sorted({p.algorithm for p in done if p.collective == c})
                              for c in dict.fromkeys(p.collective for p in done)},
               "numprocs": sorted({p.numproc for p in done}),
               "sizes": sorted({p.size for p in done})}
        write_text(out_dir / "sweep.json", json.dumps(doc, indent=2) + "\n")
    write_dataset(out_dir, done)
    return found
