"""Run an MPI program under SMPI on a cluster platform: ``pt2pt simulate --app`` (issue 57).

Why: the kit's closed loop stopped at its own ping-pong; what a model is worth shows on an
application. This module builds the program with ``smpicc`` from the same source as the real
runs (``kit.tools.app``), runs it ``reps`` times under ``smpirun`` on a platform folder
written by ``pt2pt export --hosts`` (``kit.outputs.export.platform``), each run with the
network plugin's noise under its own seed, and reads what each run printed
(``kit.tools.app.read_result``: halo's wall time and per-rank times, OSU's figure).

How the program's own computation is handled is stated with every result: ``skip`` (the
default, ``smpi/simulate-computation:no``: only MPI calls and explicit ``smpi_execute``
phases such as halo's compute phase take simulated time) or ``benchmark`` (SMPI times each
CPU burst on this machine and injects it, at the platform's host speed: as noisy as the
machine is).

Variants (what ``pt2pt predict-app`` compares): ``calibrated`` (the platform's factors and
noise, through the plugin), ``nominal`` (the same links with every factor 1 and no
overheads: latency and bandwidth only). A Hockney baseline is a platform folder of its own.

A program that does not build, that SimGrid stops (a deadlock, an MPI feature SMPI lacks,
an abort), or that exceeds the time limit gives one :class:`AppError` naming the program and
SimGrid's own words; no result is written unless every run succeeded.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kit.core.atomicwrite import write_text
from kit.core.errors import UserError
from kit.outputs.export.platform import load_platform
from kit.outputs.export.simgrid import factor_keys, parse_version
from kit.tools import app as apps

VARIANTS = ("calibrated", "nominal")
COMPUTE = {"skip": ("--cfg=smpi/simulate-computation:no",),
           "benchmark": ("--cfg=smpi/simulate-computation:yes",)}
#: What each computation mode means, said beside every result.
COMPUTE_TEXT = {
    "skip": "computation not simulated (smpi/simulate-computation:no): only MPI calls and "
            "explicit smpi_execute phases (halo's compute phase) take simulated time",
    "benchmark": "computation benchmarked: SMPI times each CPU burst on this machine and "
                 "injects it at the platform's host speed",
}
DEFAULT_TIME_LIMIT_S = 600.0
#: Collective algorithms as Open MPI's tuned component picks them (the real runs' MPI):
#: SMPI's default selector would simulate other algorithms than ran for real.
COLL_SELECTOR = "--cfg=smpi/coll-selector:ompi"
#: SimGrid's words that mean the run did not complete, whatever its exit status (a
#: deadlock exits 0).
_FATAL = re.compile(r"CRITICAL|Deadlock|Not yet implemented|MPI_Abort|Segmentation|"
                    r"xbt_die|Aborted|error", re.IGNORECASE)


class AppError(UserError):
    """A program SimGrid cannot run: the program, SimGrid's own error, what to do."""


@dataclass
class AppRun:
    """One simulated run: its seed, the program's figure (s) at ``size``, per-rank times."""

    seed: int
    size: int
    seconds: float
    ranks: list[float] = field(default_factory=list)


@dataclass
class AppSimulation:
    """The runs of one program on one platform variant, and how they were made."""

    program: str
    args: list[str]
    np: int
    label: str
    platform: str
    variant: str
    noise: bool
    compute: str
    simgrid_version: str
    runs: list[AppRun]
    elapsed_s: float
    notes: list[str] = field(default_factory=list)

    def values(self) -> list[float]:
        return [r.seconds for r in self.runs]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(compute_text=COMPUTE_TEXT[self.compute], format="pt2pt-app-simulation",
                 statistic="the program's own figure per run (halo: wall time of the slowest "
                 "rank; OSU: latency, or size / bandwidth), seconds")
        return d


def _plugin() -> Path:
    from kit.outputs.simulate import build

    _, plugin = build(noise=True)
    assert plugin is not None
    return plugin


def _reason(stderr: str, stdout: str) -> str:
    """SimGrid's own words: its CRITICAL/error lines, not the backtrace."""
    keep = [ln.strip() for ln in stderr.splitlines()
            if _FATAL.search(ln) and not ln.lstrip().startswith("->")
            and "backtrace" not in ln.lower()]
    text = " | ".join(dict.fromkeys(keep)) or (stderr.strip() or stdout.strip())[-600:]
    return text[:1500]


def _hostfile(doc: dict[str, Any], np: int, ranks_per_host: int | None) -> str:
    hosts, cores = int(doc["hosts"]), int(doc["cores"])
    per = ranks_per_host or max(1, math.ceil(np / hosts))
    if per > cores or np > hosts * per:
        raise UserError(f"{np} ranks do not fit the platform ({hosts} hosts x {cores} cores"
                        + (f", {per} ranks per host" if ranks_per_host else "") + ")",
                        where="option --np", hint="give fewer ranks, or write a platform "
                        "with more hosts or cores (pt2pt export --hosts N --cores C)")
    prefix = str(doc.get("prefix", "node-"))
    return "".join(f"{prefix}{i}:{per}\n" for i in range(hosts))


def simulate_app(program: str, args: list[str], *, np: int, platform: Path, reps: int = 10,
                 noise: bool = True, seed: int = 1, compute: str = "skip",
                 variant: str = "calibrated", ranks_per_host: int | None = None,
                 time_limit: float = DEFAULT_TIME_LIMIT_S, size: int | None = None,
                 base: Path | None = None) -> AppSimulation:
    """``reps`` runs of ``program args`` with ``np`` ranks on the platform folder ``platform``.

    ``noise``: each run draws its messages' factors (seed ``seed + i``); without it one
    deterministic run (every message at its model's median) is repeated ``reps`` times only
    if asked. ``ranks_per_host``: default as few per host as fit. ``size``: the OSU row to
    read (default: the last one printed).
    """
    if compute not in COMPUTE:
        raise UserError(f"unknown computation mode {compute!r}", where="option --compute",
                        hint="skip or benchmark")
    if variant not in VARIANTS:
        raise UserError(f"unknown variant {variant!r}", where="variant",
                        hint=" or ".join(VARIANTS))
    if not 1 <= np <= 65536:
        raise UserError(f"{np} ranks", where="option --np", hint="give 1..65536")
    if reps < 1:
        raise UserError(f"{reps} repetitions", where="option --reps", hint="give at least 1")
    doc = load_platform(platform)
    prog = apps.program(program, base)
    if prog.osu in apps.TWO_RANKS and np != 2:
        raise UserError(f"{prog.name} runs with exactly 2 ranks", where="option --np",
                        hint="give --np 2")
    hostfile = _hostfile(doc, np, ranks_per_host)
    binary = apps.build(prog, "smpicc")
    version = parse_version(str(doc["simgrid_version"]), where=str(platform / "platform.json"))
    cfg = (platform / "smpi-config.txt").read_text().split()
    wrapper: list[str] = []
    if variant == "nominal":
        lat_key, bw_key = factor_keys(version)
        cfg = [c for c in cfg if c.startswith(("--cfg=network/crosstraffic", "--cfg=smpi/wtime",
                                               "--cfg=network/TCP-gamma"))]
        # "0:1", not "1": SimGrid 3.32 reads a bare number as an entry without a value and
        # crashes (segmentation fault) at the first message
        cfg += [f"--cfg={lat_key}:0:1", f"--cfg={bw_key}:0:1"]
    started = time.monotonic()
    runs = []
    with tempfile.TemporaryDirectory(prefix="pt2pt-app-") as tmp:
        work = Path(tmp)
        (work / "hostfile").write_text(hostfile)
        count = reps if (noise and variant == "calibrated") else 1
        for i in range(count):
            if variant == "calibrated":
                env = [f"LD_PRELOAD={_plugin()}",
                       f"PT2PT_SIMGRID_NOISE={platform.resolve() / 'network.tsv'}",
                       f"PT2PT_SIMGRID_SEED={seed + i}"]
                if not noise:
                    env.append("PT2PT_SIMGRID_DETERMINISTIC=1")
                wrapper = ["-wrapper", "env " + " ".join(env)]
            cmd = ["smpirun", *wrapper, "-platform", str(platform.resolve() / "platform.xml"),
                   "-hostfile", str(work / "hostfile"), "-np", str(np), *cfg, COLL_SELECTOR,
                   *COMPUTE[compute], "--cfg=smpi/host-speed:" + str(doc.get("speed_flops",
                                                                             1e9)),
                   "--log=root.thres:critical", str(binary), *args]
            runs.append(_run_once(cmd, work, prog.name, seed + i, time_limit, size))
    elapsed = time.monotonic() - started
    if count < reps:  # deterministic: every repetition is the same run
        runs = [AppRun(seed + i, runs[0].size, runs[0].seconds, runs[0].ranks)
                for i in range(reps)]
    notes = [COMPUTE_TEXT[compute], "collectives: Open MPI's algorithm choices "
             "(smpi/coll-selector:ompi)"]
    if variant == "nominal":
        notes.append("nominal: the platform's links with every factor 1, no smpi/os or "
                     "smpi/or, no noise (latency and bandwidth only)")
    elif not noise:
        notes.append("no noise: every message at its model's median "
                     "(PT2PT_SIMGRID_DETERMINISTIC=1)")
    else:  # what the platform says about its calibration (a disturbed run's noise...)
        notes.extend(f"platform: {n}" for n in doc.get("notes", []))
    return AppSimulation(program=prog.name, args=list(args), np=np,
                         label=apps.label(prog.name, list(args), np), platform=str(platform),
                         variant=variant, noise=noise and variant == "calibrated",
                         compute=compute, simgrid_version=str(doc["simgrid_version"]),
                         runs=runs, elapsed_s=elapsed, notes=notes)


def _run_once(cmd: list[str], work: Path, name: str, seed: int, time_limit: float,
              size: int | None) -> AppRun:
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AppError(f"{name} did not finish within {time_limit:g} s under SimGrid (a "
                       "deadlock SimGrid cannot see, e.g. a busy wait on a flag, or a run "
                       "too long to simulate)", where=f"program {name}",
                       hint="check the program, or give a longer --time-limit") from None
    deadlock = "Deadlock detected" in err
    try:
        result = apps.read_result(out, where=f"program {name}", size=size)
    except UserError:
        result = None
    if proc.returncode != 0 or deadlock or result is None:
        raise AppError(f"{name} failed under SimGrid (exit {proc.returncode}): "
                       f"{_reason(err, out)}", where=f"program {name}",
                       hint="a deadlock, an MPI feature SMPI lacks or a crash in the program; "
                       "run it by hand with smpirun to see the whole log")
    s, seconds, ranks = result
    return AppRun(seed=seed, size=s, seconds=seconds, ranks=ranks)


def write_result(sim: AppSimulation, path: Path) -> Path:
    """The simulation as JSON, written whole (only ever called with every run done)."""
    return write_text(path, json.dumps(sim.to_dict(), indent=2) + "\n")
