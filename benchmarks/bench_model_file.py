"""CPU seconds to write and read a model file whose per-size layer stores many sizes.

Why: every reader of a model (predict, sample, export, simulate, report, diff, the TUI's
``--models``) loads and checks the whole file first. A fit of 1 M samples with the probe's
default log-uniform sizes stores ~65,000 sizes with 14 values each (a 16-20 MB file), where a
fixed size set stores tens. Cases: ``grid`` (33 k samples on 60 sizes) and ``loguniform``
(1 M samples, log-uniform sizes), both ``kit.fit.synth.ethernet_like``.

Per case: the fit once, then ``--repeat`` times the write (``kit.model.io.dumps``) and the
read (``load_model``: parse, schema, the physical check) in this process after a warm-up
(imports), medians of ``time.process_time``; then ``pt2pt predict`` on the file as a fresh
process (CPU of the child, imports included). ``--compare DIR`` also times the kit package
found in DIR (e.g. ``git archive COMMIT kit | tar -x -C DIR``) on the same model file, in
child processes, alternating.

    .venv/bin/python benchmarks/bench_model_file.py [--repeat 3] [--compare /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {"grid": (33_000, 60), "loguniform": (1_000_000, 0)}


def fit_and_save(case: str, path: str) -> int:
    """Fit the case's synthetic series and save its model to ``path``; the file's size."""
    from kit.fit import synth
    from kit.model import RegimeModel
    from kit.model.io import save_model

    n, grid = CASES[case]
    kw = {"grid": grid} if grid else {}
    s, t = synth.sample(synth.ethernet_like(), n, lo=1, hi=2**22, seed=1, **kw)
    save_model(RegimeModel().fit(s, t), path)
    return Path(path).stat().st_size


def measure(path: str, repeat: int) -> dict[str, list[float]]:
    """CPU seconds of ``repeat`` writes and reads of the model file at ``path``."""
    from kit.model.io import dumps, load_model

    model = load_model(path)  # warm-up: imports
    out: dict[str, list[float]] = {"write": [], "read": []}
    for _ in range(repeat):
        c0 = time.process_time()
        dumps(model)
        c1 = time.process_time()
        load_model(path)
        c2 = time.process_time()
        out["write"].append(c1 - c0)
        out["read"].append(c2 - c1)
    return out


def predict_cpu(kit_dir: str, path: str) -> float:
    """CPU seconds of ``python -m kit predict`` on the file (a fresh process)."""
    env = {**os.environ, "PYTHONPATH": kit_dir}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # cwd: not the checkout, whose kit would come first on sys.path
    subprocess.run([sys.executable, "-m", "kit", "predict", path, "--sizes", "1,1024,100000"],
                   env=env, capture_output=True, check=True, cwd=Path(path).parent)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def child(kit_dir: str, path: str, repeat: int) -> dict[str, list[float]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from with_kit import call

    result: dict[str, list[float]] = call(kit_dir, "bench_model_file", "measure", path, repeat)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare", metavar="DIR", help="also time the kit package in DIR")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    print(f"load average at start {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            path = str(Path(tmp) / f"{case}.json")
            size = fit_and_save(case, path)
            sides = {"now": here, **({"before": args.compare} if args.compare else {})}
            runs = {side: child(kit, path, args.repeat) for side, kit in sides.items()}
            cli = {side: [predict_cpu(kit, path) for _ in range(args.repeat)]
                   for side, kit in sides.items()}
            line = f"{case:<10} file {size / 2**20:6.2f} MiB:"
            for what in ("write", "read"):
                now = statistics.median(runs["now"][what])
                line += f" {what} {now:5.2f} s"
                if args.compare:
                    old = statistics.median(runs["before"][what])
                    line += f" (before {old:5.2f} s, {old / now:.1f}x)"
                line += ";"
            now = statistics.median(cli["now"])
            line += f" pt2pt predict {now:5.2f} CPU-s"
            if args.compare:
                old = statistics.median(cli["before"])
                line += f" (before {old:5.2f} s, {old / now:.1f}x)"
            print(line, flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
