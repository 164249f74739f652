"""Thin wrappers around the Slurm client commands (sbatch, squeue, scontrol, sacct).

Every call takes an optional environment so that a test or the self-test can point the
clients at a private cluster (``SLURM_CONF``). A missing client is a user error with a
hint, not a traceback.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from kit.core.errors import UserError


def run(argv: Sequence[str], env: Mapping[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0], path=(env or {}).get("PATH")) is None:
        raise UserError(f"'{argv[0]}' is not installed or not on PATH", where=argv[0],
                        hint="run this on a Slurm login node, or use 'pt2pt run-local' "
                             "to run the jobs on this machine without Slurm")
    return subprocess.run(list(argv), env=dict(env) if env is not None else None,
                          capture_output=True, text=True, timeout=timeout, check=False)


class SlurmUnreachable(UserError):
    """A Slurm client could not get an answer from the controller (down, or stalled past
    MessageTimeout): unlike "no such job", this says nothing about the jobs."""


#: squeue's words when none of the jobs asked about is known any more (all ended long ago)
_GONE = "Invalid job id specified"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def base_ids(ids: Sequence[str]) -> list[str]:
    """Distinct job ids to ask Slurm about: ``123_4`` (array task) is asked as ``123``."""
    return list(dict.fromkeys(i.split("_", 1)[0] for i in ids))


def squeue_states(ids: Sequence[str], env: Mapping[str, str] | None = None
                  ) -> dict[str, dict[str, str]]:
    """Slurm id (``ARRAY_TASK`` for array tasks) -> {state, time, reason} still in squeue."""
    if not ids:
        return {}
    # -r lists every array task on its own line (123_4), pending ones included
    proc = run(["squeue", "-r", "-h", "-o", "%i|%T|%M|%R", "-j", ",".join(base_ids(ids))],
               env)
    if proc.returncode != 0 and _GONE not in proc.stderr:
        # A controller that did not answer in time is not an empty queue: callers that
        # wait for their jobs to leave it would stop waiting while they still run.
        raise SlurmUnreachable(
            f"squeue failed (exit {proc.returncode}): {_last_line(proc.stderr)}",
            where="squeue", hint="the Slurm controller did not answer; check that it runs "
            "(scontrol ping) and retry")
    found: dict[str, dict[str, str]] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4:
            found[parts[0]] = {"state": parts[1], "time": parts[2], "reason": parts[3],
                               "source": "squeue"}
    return found


class SlurmWaitTimeout(UserError):
    """:func:`wait_gone` reached its deadline (jobs still queued, or the controller silent):
    a caller with a better sentence for its users (the self-test) catches this one only."""


#: What :func:`wait_gone` tells ``on_poll``: the jobs still queued, or None (no answer).
Queue = dict[str, dict[str, str]]


def wait_gone(ids: Sequence[str], env: Mapping[str, str] | None = None,
              timeout: float | None = 600.0, poll: float = 1.0, *,
              silence: float | None = None, until: Callable[[], bool] | None = None,
              on_poll: Callable[[Queue | None], None] | None = None) -> None:
    """Return once none of ``ids`` is pending or running any more (and ``until()`` holds).

    The one wait for Slurm jobs (tests, the self-test, ``pt2pt submit``'s adaptive rounds).
    A controller that does not answer (:class:`SlurmUnreachable`: stopped, or stalled past
    MessageTimeout, as when the VM itself pauses for 34-54 s) says nothing about the jobs,
    so it is asked again: until ``timeout`` (then :class:`SlurmWaitTimeout` with the last
    reason), or, with ``silence``, until it stayed silent that long (then the
    :class:`SlurmUnreachable` itself). ``timeout=None`` waits as long as the jobs run.
    ``until`` adds a condition checked once the queue is empty (e.g. every job wrote its
    record); ``on_poll`` sees each answer (a progress bar).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    silent_since: float | None = None
    while True:
        try:
            queued = squeue_states(ids, env)
            silent_since = None
            if on_poll is not None:
                on_poll(queued)
            if not queued and (until is None or until()):
                return
            why = (f"jobs {', '.join(ids)} still queued" if queued
                   else f"jobs {', '.join(ids)} left the queue, but not every job ended")
        except SlurmUnreachable as exc:
            silent_since = silent_since or time.monotonic()
            if silence is not None and time.monotonic() - silent_since > silence:
                raise
            if on_poll is not None:
                on_poll(None)
            why = exc.message
        if deadline is not None and time.monotonic() >= deadline:
            raise SlurmWaitTimeout(f"{why} after {timeout:.0f} s", where="squeue",
                                   hint="see squeue, scontrol show job and the jobs' "
                                        "slurm-*.out")
        time.sleep(poll)


def scontrol_state(job_id: str, env: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """JobState/ExitCode from ``scontrol show job`` (kept for MinJobAge after the end)."""
    return scontrol_states([job_id], env).get(job_id)


def scontrol_states(ids: Sequence[str], env: Mapping[str, str] | None = None
                    ) -> dict[str, dict[str, str]]:
    """Slurm id -> JobState/ExitCode/RunTime/Reason; one call per array, not per task."""
    found: dict[str, dict[str, str]] = {}
    for base in base_ids(ids):
        proc = run(["scontrol", "-o", "show", "job", base], env)
        if proc.returncode != 0:
            continue
        for line in proc.stdout.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            if "JobState" not in fields:
                continue
            task = fields.get("ArrayTaskId")
            key = (f"{fields['ArrayJobId']}_{task}" if task and "ArrayJobId" in fields
                   and task.isdigit() else fields.get("JobId", base))
            found[key] = {"state": fields["JobState"], "exit_code": fields.get("ExitCode", ""),
                          "time": fields.get("RunTime", ""), "reason": fields.get("Reason", ""),
                          "source": "scontrol"}
    return found


def accounting_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False on clusters with accounting_storage/none (sacct then knows nothing)."""
    proc = run(["scontrol", "show", "config"], env)
    for line in proc.stdout.splitlines():
        if line.startswith("AccountingStorageType"):
            return "accounting_storage/none" not in line
    return False


def sacct_states(ids: Sequence[str], env: Mapping[str, str] | None = None
                 ) -> dict[str, dict[str, str]]:
    if not ids:
        return {}
    proc = run(["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode,Elapsed",
                "-j", ",".join(base_ids(ids))], env)
    found: dict[str, dict[str, str]] = {}
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            found[parts[0]] = {"state": parts[1].split()[0] if parts[1] else "",
                               "exit_code": parts[2], "time": parts[3], "reason": "",
                               "source": "sacct"}
    return found
