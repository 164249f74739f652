"""What the node was doing around a run: load, stolen CPU time, CPU pressure, governor, tenants.

The job-side helper (:mod:`kit.measure.campaign.jobrecord`) reads these before the tool starts,
while it runs (``jobrecord.py watch``, one sample a second) and after it ends, and writes them
into ``job.json`` as ``conditions``; ingest turns them into columns of ``runs.parquet``
(:mod:`kit.measure.conditions` judges them). A run is a measurement of the network *and* of
whatever else ran on its cores: two demos minutes apart differed 12x in TCP bandwidth at load
7-8, and nothing but these figures tells the two apart afterwards.

Standard library only, like the helper: ``pt2pt plan`` copies this file beside
``jobrecord.py`` into the campaign's ``bin/``, and compute nodes need only ``python3``.
Every reader returns None where the kernel does not offer the figure (no PSI before Linux
4.20, no cpufreq in most VMs, no squeue outside Slurm): unknown is recorded as unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

#: Seconds over which the "before" and "after" steal shares are measured (the job waits
#: that long once before launching the tool and once after it ends).
WINDOW_S = 0.3
#: Seconds between two samples of the watcher.
WATCH_INTERVAL_S = 1.0


def loadavg() -> tuple[float, int] | None:
    """(1-minute load average, tasks runnable now other than the reader), or None."""
    try:
        fields = Path("/proc/loadavg").read_text(encoding="ascii").split()
        running = int(fields[3].split("/")[0])
        return float(fields[0]), max(running - 1, 0)  # the reading task counts itself
    except (OSError, ValueError, IndexError):
        with contextlib.suppress(OSError, AttributeError):
            return os.getloadavg()[0], 0
        return None


def cpu_jiffies() -> tuple[int, int] | None:
    """(all CPU time, stolen CPU time) since boot, in clock ticks (/proc/stat's cpu line)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        if fields[0] != "cpu":
            return None
        values = [int(v) for v in fields[1:]]
        # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
        # already counted in user/nice
        total = sum(values[:8])
        return total, values[7] if len(values) > 7 else 0
    except (OSError, ValueError, IndexError):
        return None


def pressure_us() -> int | None:
    """Microseconds some task waited for a CPU since boot (PSI ``/proc/pressure/cpu``)."""
    try:
        for line in Path("/proc/pressure/cpu").read_text(encoding="ascii").splitlines():
            if line.startswith("some"):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def governor() -> str | None:
    """The CPU frequency governors in use (``performance``, ``powersave,performance``), or
    None where cpufreq is not exposed (most virtual machines)."""
    found = set()
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"):
        with contextlib.suppress(OSError):
            found.add(path.read_text(encoding="ascii").strip())
    return ",".join(sorted(found)) or None


def _topology(cpu: int, item: str) -> int:
    try:
        return int(Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/{item}").read_text())
    except (OSError, ValueError):
        return -1


def cores(allowed: set[int] | None = None) -> list[int]:
    """One CPU per physical core this process may run on, socket by socket: the lowest
    CPU of each core (its hyperthread siblings are left out, so two ranks never share a
    core), sockets with more allowed cores first."""
    if allowed is None:
        allowed = set(os.sched_getaffinity(0))
    first: dict[tuple[int, int], int] = {}
    for cpu in sorted(allowed):
        key = (_topology(cpu, "physical_package_id"), _topology(cpu, "core_id"))
        if key[1] < 0:
            key = (key[0], cpu)  # no topology: every CPU is its own core
        first.setdefault(key, cpu)
    per_socket: dict[int, list[int]] = {}
    for (socket, _), cpu in sorted(first.items(), key=lambda kv: kv[1]):
        per_socket.setdefault(socket, []).append(cpu)
    ordered = sorted(per_socket.values(), key=lambda cs: (-len(cs), cs[0]))
    return [cpu for group in ordered for cpu in group]


#: Binding policies a campaign may choose (``binding:``); ``cpus:A,B,..`` names the CPUs.
BINDINGS = ("cores", "none")


def bind_cpu(rank: int, policy: str) -> int | None:
    """The CPU rank ``rank`` is pinned to under ``policy``, or None (not pinned).

    ``cores``: the rank-th physical core of this node (:func:`cores`): the two ranks of an
    intra-node run get the same two cores of one socket in every run, the ranks of an
    inter-node run one core each on their own node (different ones, so that nodes sharing
    a machine, like the local test cluster's, do not put both on one core). ``cpus:A,B``:
    rank r on the r-th listed CPU. ``none``: not pinned (the scheduler may move it).
    """
    if policy == "none":
        return None
    if policy.startswith("cpus:"):
        listed = [int(c) for c in policy[5:].split(",") if c.strip()]
        return listed[rank % len(listed)] if listed else None
    found = cores()
    return found[rank % len(found)] if found else None


def share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Stolen share of the CPU time between two :func:`cpu_jiffies` readings."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return round((after[1] - before[1]) / (after[0] - before[0]), 4)


def window(seconds: float = WINDOW_S) -> dict[str, Any]:
    """The node now: 1-minute load average and the stolen share over ``seconds``."""
    first = cpu_jiffies()
    time.sleep(seconds)
    load = loadavg()
    return {"load1": load[0] if load else None, "steal": share(first, cpu_jiffies())}


def _own_jobs() -> set[str]:
    ids = {os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID")}
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        ids.add(f"{array}_{task}")
    return {i for i in ids if i}


def tenants() -> list[str] | None:
    """Other Slurm jobs running on this job's nodes (``squeue``), or None outside Slurm.

    An empty list is an answer (Slurm says the nodes are ours alone), None is not.
    """
    nodes = os.environ.get("SLURM_JOB_NODELIST")
    if not os.environ.get("SLURM_JOB_ID") or not nodes:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-w", nodes, "-o", "%A %i"],
                             capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    own = _own_jobs()
    others = []
    for line in out.stdout.splitlines():
        ids = set(line.split())
        if ids and not ids & own:
            others.append(line.split()[-1])
    return sorted(set(others))


def before() -> dict[str, Any]:
    """What ``jobrecord.py begin`` records just before the tool starts."""
    return {**window(), "epoch": time.time(), "cpus_online": os.cpu_count(),
            "governor": governor(), "tenants": tenants()}


def after() -> dict[str, Any]:
    """What ``jobrecord.py finish`` records once the tool has ended."""
    return window()


class Watch:
    """Samples the node while the tool runs and keeps the running summary in a JSON file.

    ``load`` is the mean number of runnable tasks (the ranks themselves included: each
    spins while it waits for a message), which the 1-minute load average would show only
    a minute late and smeared; ``cpu_pressure`` the share of wall time some task waited for
    a CPU; ``steal`` the share of CPU time the hypervisor gave to other guests.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = time.time()
        self.jiffies = cpu_jiffies()
        self.pressure = pressure_us()
        self.n = 0
        self.running = 0
        self.load1_max: float | None = None

    def sample(self) -> None:
        load = loadavg()
        if load is None:
            return
        self.n += 1
        self.running += load[1]
        self.load1_max = max(load[0], self.load1_max or 0.0)

    def summary(self) -> dict[str, Any]:
        now = time.time()
        psi = pressure_us()
        waited = (None if psi is None or self.pressure is None or now <= self.start
                  else round(min((psi - self.pressure) / 1e6 / (now - self.start), 1.0), 4))
        return {"samples": self.n, "seconds": round(now - self.start, 3),
                "load": round(self.running / self.n, 3) if self.n else None,
                "load1_max": self.load1_max, "steal": share(self.jiffies, cpu_jiffies()),
                "cpu_pressure": waited}

    def write(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(self.summary()) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (an exited child its parent has not reaped yet, a
    zombie, has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


class _Stop(Exception):
    pass


def _stop(*_: Any) -> None:
    raise _Stop


def watch(pid: int, path: Path, interval: float = WATCH_INTERVAL_S) -> int:
    """Sample until process ``pid`` ends (or TERM), rewriting ``path`` after every sample."""
    w = Watch(path)
    signal.signal(signal.SIGTERM, _stop)
    if not alive(pid):  # the tool ended before the watcher started: no figure
        w.write()
        return 0
    try:
        while True:
            w.sample()
            w.write()
            if not alive(pid):
                break
            time.sleep(interval)
    except _Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    w.write()
    return 0


def read_during(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
