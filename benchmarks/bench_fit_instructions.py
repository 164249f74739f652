"""Instructions one 33 k-sample fit executes, counted by Valgrind (callgrind): a before/after
figure that does not move with the machine's load.

CPU seconds of the same fit move by 20-40 % from one minute to the next on a shared 2-core VM
(git show 1da3baf:BENCHMARKS.md, "Issue 19 on a slower VM"); instruction counts are exact
and repeatable. They
are not time: an ``exp`` counts as its instructions, a cache miss as nothing. Each kit runs
twice under callgrind, once with one fit and once with two (after the same warm-up fit of
3,000 samples); the difference is one fit, imports and warm-up cancel (a fixed hash seed:
set and dict orders move the count by a few percent otherwise). About 3 minutes per
run on the slower VM (callgrind runs the interpreter ~50x slower); the runs of one side go
in parallel.

``--intervals on`` counts the fit and its bootstrap intervals (120 resamples) together.

    .venv/bin/python benchmarks/bench_fit_instructions.py [--compare /tmp/old] [--per-size on]
        [--intervals on]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import kit
assert kit.__file__.startswith(sys.argv[1]), kit.__file__
from kit.fit import synth
from kit.model import RegimeModel
from kit.model.uncertainty import bootstrap_intervals
per_size, fits, intervals = sys.argv[2] == "on", int(sys.argv[3]), sys.argv[4] == "on"
s, t = synth.sample(synth.ethernet_like(), 33_000, lo=1, hi=2**22, seed=1, grid=60)
warm = RegimeModel(per_size=per_size).fit(s[:3000], t[:3000])
if intervals:
    bootstrap_intervals(warm, s[:3000], t[:3000], n_boot=5)
for _ in range(fits):
    model = RegimeModel(per_size=per_size).fit(s, t)
    if intervals:
        bootstrap_intervals(model, s, t, random_state=0)
"""


def instructions(kit_dir: str, per_size: str, fits: int, intervals: str) -> int:
    """Instructions (callgrind's "Collected") of a child that fits ``fits`` times."""
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out",
             sys.executable, "-c", CHILD, kit_dir, per_size, str(fits), intervals],
            capture_output=True, text=True, check=True,
            env={"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"})
    found = re.search(r"Collected : (\d+)", res.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{res.stderr[-2000:]}")
    return int(found.group(1))


def per_fit(kit_dir: str, per_size: str, intervals: str) -> int:
    with ThreadPoolExecutor(2) as pool:
        one, two = pool.map(lambda n: instructions(kit_dir, per_size, n, intervals), (1, 2))
    return two - one


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="DIR", help="also count the kit package in DIR")
    ap.add_argument("--per-size", default="off", choices=("off", "on"))
    ap.add_argument("--intervals", default="off", choices=("off", "on"))
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found: apt-get install valgrind")
    now = per_fit(str(HERE.parent), args.per_size, args.intervals)
    line = (f"33 k fit, per-size {args.per_size}, intervals {args.intervals}: "
            f"{now / 1e9:.3f} G instructions")
    if args.compare:
        before = per_fit(str(Path(args.compare).resolve()), args.per_size, args.intervals)
        line += f"; before {before / 1e9:.3f} G -> {now / before:.3f}x"
    print(line)


if __name__ == "__main__":
    main()
