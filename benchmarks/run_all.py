"""Run every benchmark in this folder, one after the other (``make bench``).

Benchmarks are not tests: they print figures to compare with the targets in BENCHMARKS.md.
They run in sequence because on a 2-core machine two of them at once measure each other.
Extra arguments are passed to every benchmark (e.g. ``--help``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        rc = subprocess.call([sys.executable, str(script), *argv])
        if rc != 0:
            failed.append(f"{script.name} (exit {rc})")
    if failed:
        print("benchmarks that failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
