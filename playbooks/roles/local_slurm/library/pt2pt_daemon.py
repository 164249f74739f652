#!/usr/bin/python
"""Ansible module: start or stop self-daemonizing processes by their pid files, without systemd.

Why a module and not ``command``: the machines this runs on (containers, CI VMs) often have a
PID 1 that is not systemd and does not reap orphans, so a killed daemon stays a ``<defunct>``
zombie and ``kill -0`` keeps succeeding on it.  Liveness here is therefore "the pid in the pid
file is a non-zombie process running ``exe`` with ``match`` among its arguments"; that also
keeps a stale pid file (pid reused by an unrelated process, or by another cluster's daemon)
from being mistaken for ours, so ``state=stopped`` only ever signals the daemon we started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule

#: One daemon's options, at the top level or as an element of ``daemons``.
DAEMON_OPTIONS = {
    "name": {"type": "str", "required": True},
    "pidfile": {"type": "path", "required": True},
    "exe": {"type": "path", "required": True},
    "match": {"type": "str", "required": True},
    "command": {"type": "list", "elements": "str"},
    "log": {"type": "path"},
    # Up means listening on this TCP port (not only a live pid), when given.
    "port": {"type": "int"},
}

DOCUMENTATION = r"""
module: pt2pt_daemon
short_description: Start/stop a daemon by pid file, zombie-aware (no systemd needed)
description:
  - One daemon (name, pidfile, exe, match, ...) or several (daemons), handled in order.
    Several in one task cost one module run instead of one per daemon (about 0.4 s each on
    a slow 2-core machine).
options:
  name:
    description: Label used in messages.
    type: str
  pidfile:
    description: Pid file the daemon writes.
    type: path
  exe:
    description: Absolute path of the daemon executable (compared with /proc/PID/exe).
    type: path
  match:
    description: One argument the daemon's command line must contain (tells instances apart).
    type: str
  daemons:
    description: Several daemons, each with the options name, pidfile, exe, match, command,
      log and port; instead of the top-level ones.
    type: list
    elements: dict
  command:
    description: argv that starts (and daemonizes) it; required for state=started.
    type: list
    elements: str
  state:
    description: Desired state.
    type: str
    choices: [started, stopped]
    default: started
  timeout:
    description: Seconds to wait for start or stop.
    type: float
    default: 30
  log:
    description: Log file whose tail is shown when the daemon does not come up.
    type: path
  port:
    description: TCP port the daemon listens on once it is up.
    type: int
"""


def _read_pid(pidfile: str) -> int | None:
    try:
        with open(pidfile, encoding="ascii") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_ours(pid: int | None, exe: str, match: str) -> bool:
    """True if ``pid`` is a live (non-zombie) ``exe`` process with ``match`` in its argv."""
    if pid is None or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return False
        if os.path.realpath(os.readlink(f"/proc/{pid}/exe")) != os.path.realpath(exe):
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except (OSError, IndexError):
        return False
    return match.encode() in argv


def listens(pid: int, port: int) -> bool:
    """True if ``pid`` itself holds a listening TCP socket on ``port``.

    A Slurm daemon writes its pid file before it binds its port, and exits with
    "fatal: ... Address already in use" when the bind fails; a live pid alone is not "up".
    Another process listening on the same port does not count (the inode must be ours).
    Reads the process's own network namespace, so it works for slurmd in a fake node.
    """
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as fh:
                next(fh, None)
                for line in fh:
                    cols = line.split()  # sl local_address rem_address st ... inode
                    listening = len(cols) > 9 and cols[3] == "0A"
                    if listening and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{cols[9]}]")
        except (OSError, ValueError, IndexError):
            continue
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


def _tail(path: str | None, lines: int = 15) -> str:
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return ""


def _log_size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _log_since(path: str | None, offset: int) -> str:
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            fh.seek(offset)
            return fh.read()
    except OSError:
        return ""


def _never() -> bool:
    return False


def _wait(cond: Callable[[], bool], timeout: float,
          give_up: Callable[[], bool] = _never) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        if give_up():
            break
        time.sleep(0.05)
    return bool(cond())


def start(module: AnsibleModule, p: dict[str, Any]) -> dict[str, object]:
    pid = _read_pid(p["pidfile"])
    if is_ours(pid, p["exe"], p["match"]):
        return {"changed": False, "pid": pid}
    if not p["command"]:
        module.fail_json(msg=f"{p['name']}: 'command' is required for state=started")
    if module.check_mode:
        return {"changed": True, "pid": None}
    # A stale pid file would satisfy the wait below with the wrong pid; drop it first.
    if os.path.exists(p["pidfile"]):
        os.unlink(p["pidfile"])
    log_offset = _log_size(p["log"])
    # Output goes to a file, not a pipe: a daemon that kept an inherited pipe open would
    # make us wait for EOF forever.
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.run(p["command"], stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
        out.seek(0)
        output = out.read().strip()
    if proc.returncode != 0:
        module.fail_json(msg=f"{p['name']} failed to start (exit {proc.returncode}): {output}",
                         log_tail=_tail(p["log"]), cmd=p["command"])

    def up() -> bool:
        pid = _read_pid(p["pidfile"])
        return is_ours(pid, p["exe"], p["match"]) and (
            p["port"] is None or (pid is not None and listens(pid, p["port"])))

    def fatal() -> bool:  # Slurm daemons log "fatal:" and exit: no need to wait it out
        return "fatal:" in _log_since(p["log"], log_offset)

    if not _wait(up, p["timeout"], fatal):
        new_log = _log_since(p["log"], log_offset).strip().splitlines()
        said = f"; its log says: {' | '.join(new_log[-2:])}" if new_log else ""
        listening = f" listening on port {p['port']}" if p["port"] else ""
        module.fail_json(msg=f"{p['name']} did not stay up (no live process{listening} in "
                         f"{p['pidfile']}){said}; see {p['log'] or 'its log'}",
                         log_tail=_tail(p["log"]), cmd=p["command"])
    return {"changed": True, "pid": _read_pid(p["pidfile"])}


def stop(module: AnsibleModule, p: dict[str, Any]) -> dict[str, object]:
    pid = _read_pid(p["pidfile"])
    if not is_ours(pid, p["exe"], p["match"]):
        # Not running (or the pid now belongs to someone else): never signal it.
        if os.path.exists(p["pidfile"]) and not module.check_mode:
            os.unlink(p["pidfile"])
        return {"changed": False, "pid": None}
    if module.check_mode:
        return {"changed": True, "pid": pid}
    assert pid is not None

    def gone() -> bool:
        return not is_ours(pid, p["exe"], p["match"])

    os.kill(pid, signal.SIGTERM)
    killed = False
    if not _wait(gone, p["timeout"]):
        os.kill(pid, signal.SIGKILL)
        killed = True
        _wait(gone, 5.0)
    if os.path.exists(p["pidfile"]):
        os.unlink(p["pidfile"])
    return {"changed": True, "pid": pid, "sigkill": killed}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **{k: {**v, "required": False} for k, v in DAEMON_OPTIONS.items()},
            "daemons": {"type": "list", "elements": "dict", "options": DAEMON_OPTIONS},
            "state": {"type": "str", "choices": ["started", "stopped"], "default": "started"},
            "timeout": {"type": "float", "default": 30.0},
        },
        mutually_exclusive=[[k, "daemons"] for k in DAEMON_OPTIONS],
        required_one_of=[["name", "daemons"]],
        required_together=[["name", "pidfile", "exe", "match"]],
        supports_check_mode=True,
    )
    params = module.params
    daemons = params["daemons"] or [{k: params[k] for k in DAEMON_OPTIONS}]
    act = start if params["state"] == "started" else stop
    results = [act(module, {**d, "timeout": params["timeout"]}) for d in daemons]
    if params["daemons"] is None:
        module.exit_json(**results[0])
    module.exit_json(changed=any(r["changed"] for r in results), daemons=results)


if __name__ == "__main__":
    main()
