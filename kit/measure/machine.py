"""Is this machine quiet enough to measure on? The load average, read before a local run.

A local run (``pt2pt demo``, ``pt2pt run-local``) puts two MPI ranks on this host. When other
processes already keep the CPUs busy the ranks wait for a core, and what gets measured is the
scheduler, not the network: a load of 15 on 2 cores gave a 20 ms p95 at 1 B over TCP, about a
hundred times the quiet machine's. Nothing stops the measurement; the user is told, before and
after, and can ask to wait for a quiet machine instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: CPUs the two ranks of a local run keep busy (each spins while it waits for a message).
RANKS = 2


@dataclass(frozen=True)
class Load:
    """The 1-minute load average against what a local two-rank run can tolerate."""

    load1: float
    cpus: int
    limit: float

    @property
    def busy(self) -> bool:
        return self.load1 > self.limit

    def describe(self) -> str:
        return (f"load average {self.load1:.1f} over the last minute on {self.cpus} CPU(s); "
                f"the two ranks need {RANKS} idle CPUs, so it should stay below {self.limit:.1f}")


def busy_limit(cpus: int) -> float:
    """Load above which the ranks compete for a core: all CPUs but the ranks' are busy.

    At least 1.0, so that a 2-CPU machine tolerates the odd background task.
    """
    return max(1.0, float(cpus - RANKS) + 0.5) if cpus > RANKS else 1.0


def current_load() -> Load:
    """The load now. Where the OS has no load average it reads as 0 (never blocks a run)."""
    cpus = os.cpu_count() or 1
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = 0.0
    return Load(load1, cpus, busy_limit(cpus))


def wait_for_idle(max_wait_s: float, *, poll_s: float = 10.0,
                  on_wait: Callable[[Load, float], None] | None = None,
                  sample: Callable[[], Load] = current_load,
                  sleep: Callable[[float], None] = time.sleep) -> Load:
    """Poll until the machine is quiet or ``max_wait_s`` has passed; returns the last load.

    ``on_wait(load, waited_s)`` is called before each pause (to tell the user why nothing
    happens). The 1-minute average lags: a machine that just became idle needs a minute or
    two to read as idle, so ``max_wait_s`` should be a few minutes.
    """
    waited = 0.0
    load = sample()
    while load.busy and waited < max_wait_s:
        if on_wait is not None:
            on_wait(load, waited)
        step = min(poll_s, max_wait_s - waited)
        sleep(step)
        waited += step
        load = sample()
    return load


def check_machine(console: Console, wait_idle_s: float,
                  again: str = "pt2pt demo --rerun --wait-idle") -> str | None:
    """Warn (or first wait, up to ``wait_idle_s``) when the load would distort the timings.

    Returns the note for the end of the run, or None when the machine is quiet. ``again`` is
    the command that measures again, waiting for a quiet machine first.
    """
    load = current_load()
    if load.busy and wait_idle_s > 0:
        def waiting(now: Load, waited: float) -> None:
            console.print(f"waiting for a quiet machine ({now.describe()}); "
                          f"{waited:.0f} of {wait_idle_s:.0f} s", highlight=False)

        load = wait_for_idle(wait_idle_s, on_wait=waiting)
    if not load.busy:
        return None
    note = (f"Busy machine: {load.describe()}. The ranks likely waited for CPUs: small-message "
            "times are slower and noisier than this machine's network is; the models describe "
            f"the load too. Measure again on a quiet machine: '{again}' "
            "waits (up to 10 minutes) for the load to drop first.")
    console.print(f"[yellow]warning[/]: {note}", highlight=False)
    return note
