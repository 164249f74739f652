"""CPU seconds of the commands that use a saved model: predict, sample, export (issue 56).

Target: each <= 0.3 CPU-s beyond ``python3 -c pass`` (whole process, user + system, children
included: ``export`` asks ``smpirun --version`` which SimGrid is installed). The baseline is
the interpreter the commands run on (``sys.executable -c pass``): ``python3`` on PATH may be a
pyenv shim, a shell script that costs ~0.1 CPU-s by itself.

The model is ``pt2pt fit`` of the shared taurus ping-pong run (33,100 samples, defaults), or
``--model FILE``. Every round runs ``-c pass`` and each command once per side, alternating
(the sides' order too), in fresh interpreters (``python -m kit``, as the ``pt2pt`` script
does), so a load change hits both sides alike; medians over ``--rounds``. ``--compare-kit
DIR`` is another ``kit`` (``git archive COMMIT | tar -x -C DIR``, compiled kernels copied
in), run with this interpreter: the ratio now / before in one run. Both sides' bytecode is
compiled first (this machine sets PYTHONDONTWRITEBYTECODE: every run would compile the kit).

    nice .venv/bin/python benchmarks/bench_model_commands.py [--rounds 7] [--compare-kit DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAURUS = (REPO.parent / "shared" / "reference-data" / "platform-calibration"
          / "taurus_26_07_2016_calibration" / "taurus-2016-06-09--1_PingPong.csv")


def cpu_of(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """User + system CPU seconds of one command and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _env(kit: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(kit)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", type=Path, help="a model file (default: fit the taurus run)")
    ap.add_argument("--compare-kit", type=Path, help="the other side's checkout (before)")
    args = ap.parse_args()
    sides = {"now": REPO}
    if args.compare_kit:
        sides["before"] = args.compare_kit.resolve()
    for kit in sides.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(kit / "kit")],
                       check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="pt2pt-bench-model-") as tmp:
        model = args.model.resolve() if args.model else Path(tmp) / "taurus.json"
        if not args.model:
            env = _env(REPO)
            subprocess.run([sys.executable, "-m", "kit", "ingest", "--dataset", f"{tmp}/ds",
                            "--campaign", "bench", "--transport", "tcp", str(TAURUS)],
                           env=env, cwd=tmp, check=True, capture_output=True)
            subprocess.run([sys.executable, "-m", "kit", "fit", f"{tmp}/ds", "-o", str(model)],
                           env=env, cwd=tmp, check=True, capture_output=True)
        commands = {
            "predict": ["predict", str(model), "--sizes", "1,1024"],
            "sample": ["sample", str(model), "--sizes", "1,1024", "-n", "100", "--seed", "1"],
            "export": ["export", str(model), "--simgrid", "-o", f"{tmp}/sg"],
        }
        cpu: dict[str, list[float]] = {"python3 -c pass": []}
        cpu.update({f"{c} ({s})": [] for c in commands for s in sides})
        load0 = os.getloadavg()
        for r in range(args.rounds):
            cpu["python3 -c pass"].append(cpu_of([sys.executable, "-c", "pass"],
                                                 dict(os.environ), tmp))
            order = list(sides.items())
            for name, argv in commands.items():
                for side, kit in order[::-1] if r % 2 else order:  # A B, then B A
                    cpu[f"{name} ({side})"].append(
                        cpu_of([sys.executable, "-m", "kit", *argv], _env(kit), tmp))
        load1 = os.getloadavg()
    med = {k: statistics.median(v) for k, v in cpu.items()}
    base = med["python3 -c pass"]
    print(f"model {model.name if args.model else 'taurus (pt2pt fit, defaults)'}; "
          f"{args.rounds} rounds, medians of user+sys CPU s; load average "
          f"{load0[0]:.1f} at start, {load1[0]:.1f} at end\n")
    print("| command | CPU s median (min-max) | beyond python3 -c pass | now / before |")
    print("|---|---:|---:|---:|")
    for key, values in cpu.items():
        name = key.split(" (")[0]
        ratio = ""
        if key.endswith("(now)") and "before" in sides:
            ratio = f"{med[key] / med[f'{name} (before)']:.2f}x"
        beyond = "" if key == "python3 -c pass" else f"{med[key] - base:.3f}"
        print(f"| {key} | {med[key]:.3f} ({min(values):.3f}-{max(values):.3f}) | {beyond} "
              f"| {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
