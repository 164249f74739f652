"""CPU seconds and peak memory of one command, measured on that command's own process.

Why not ``os.wait4`` on a child of the benchmark: Linux carries a process's peak RSS across
``exec`` from the memory it had before (``exec_mmap`` keeps the old high-water mark), and
``subprocess`` starts children by vfork, which shares the parent's memory until the exec. So
the peak a benchmark read for ``pt2pt fit`` was at least the benchmark's own: after it had
generated 10^7 rows, 1-2 GiB that the fit never held. Here a small launcher (a fresh
interpreter, ~10 MiB) forks the command and reports its ``wait4`` usage: the command's
peak starts from the launcher's, not the benchmark's.

    wall, cpu, peak_gib, stderr = run([sys.executable, "-m", "kit", "fit", ...], env)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

_LAUNCHER = r"""
import json, os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump({"code": os.waitstatus_to_exitcode(status), "cpu": usage.ru_utime + usage.ru_stime,
               "maxrss_kib": usage.ru_maxrss}, fh)
"""


def run(cmd: Sequence[str], env: Mapping[str, str] | None = None,
        cwd: str | None = None) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS GiB, stderr) of ``cmd``; AssertionError if it fails."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _LAUNCHER, out.name, *cmd],
                              env=dict(env) if env is not None else None, cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        text = out.read()
    assert text, f"the launcher reported nothing (exit {proc.returncode}): {proc.stderr[-3000:]}"
    usage = json.loads(text)
    assert proc.returncode == 0 and usage["code"] == 0, proc.stderr[-3000:]
    return wall, float(usage["cpu"]), usage["maxrss_kib"] / 2**20, proc.stderr


__all__ = ["run"]


if __name__ == "__main__":  # e.g. python benchmarks/child_usage.py python3 -c pass
    w, c, m, _ = run(sys.argv[1:], os.environ)
    print(f"wall {w:.3f} s, CPU {c:.3f} s, peak RSS {m * 1024:.1f} MiB")
