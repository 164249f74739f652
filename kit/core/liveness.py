"""Is the process that writes a file still running? (ingest, collect: never commit a run
whose writer is alive, since its longer copy would later be a second run of the same samples.)

Two signs, either enough: the file is ``flock``'ed (the probe holds a lock on its samples
file while it runs; the kernel drops it when the process dies, even by SIGKILL), or a
recorded process id on this host is alive and still the same program (``/proc/PID/stat``'s
start time, so a reused pid is not taken for the writer).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from pathlib import Path


def file_locked(path: Path) -> bool:
    """Whether another process holds an exclusive ``flock`` on ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # a file system without locks: no sign either way
        return False
    finally:
        os.close(fd)  # also releases our shared lock
    return False


def this_host(name: str | None) -> bool:
    """Whether ``name`` (an MPI processor name, a hostname) is this machine."""
    if not name:
        return False
    mine = socket.gethostname()
    return name == mine or name.split(".")[0] == mine.split(".")[0]


def start_time(pid: int) -> int | None:
    """The process' start time in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    with contextlib.suppress(ValueError, IndexError):
        return int(stat.rsplit(")", 1)[1].split()[19])
    return None


def pid_alive(pid: object, *, program: str | None = None,
              started: object = None) -> bool:
    """Whether process ``pid`` on this host is running (and is ``program``, started at
    ``started`` clock ticks, when given)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    except OSError:
        return False
    if program is not None:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return False
        if not program.startswith(comm) and comm != program:
            return False
    if isinstance(started, int) and not isinstance(started, bool):
        return start_time(pid) == started
    return True
