"""Run kit's command line once per argument list, each in a child forked from this process.

Usage: ``python tests/cli_forks.py TIMEOUT`` with a JSON list of argument lists on standard
input; prints a JSON list of ``{"rc": int, "stderr": str}`` (rc -9 for a child killed at
TIMEOUT seconds, a hang).

Why: a fresh ``python -m kit`` per malformed file costs its imports (about 0.3 CPU-s on a
slow core) a hundred times over. A child forked from one process that has imported them
starts in milliseconds and is still a process of its own running kit's real entry module
(``runpy``, as ``python -m kit`` does): its exit code, its stderr, a traceback the
interpreter would print and a hang are its own.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import tempfile
import time
import traceback

import kit.cli  # imported before forking: what every child would import
import kit.model.io  # noqa: F401


def child(argv: list[str], err_path: str) -> None:
    """In the forked child: stderr to a file, stdout away, then ``python -m kit ARGV``."""
    fd = os.open(err_path, os.O_WRONLY | os.O_TRUNC)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    sys.argv = ["pt2pt", *argv]
    code = 0
    try:
        runpy.run_module("kit", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(argv: list[str], timeout: float) -> dict[str, object]:
    with tempfile.NamedTemporaryFile("rb", prefix="cli-fork-", suffix=".err") as err:
        pid = os.fork()
        if pid == 0:
            child(argv, err.name)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"rc": -9, "stderr": err.read().decode(errors="replace")}
            time.sleep(0.002)
        return {"rc": os.waitstatus_to_exitcode(status),
                "stderr": err.read().decode(errors="replace")}


def main() -> None:
    timeout = float(sys.argv[1])
    jobs = json.load(sys.stdin)
    sys.stdout.flush()  # nothing buffered for a child to write out again
    print(json.dumps([run(argv, timeout) for argv in jobs]))


if __name__ == "__main__":
    main()
