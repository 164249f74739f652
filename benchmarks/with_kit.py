"""Call a benchmark function with another ``kit`` package (before/after ratios in one run).

``call(kit_dir, module, function, *args)`` runs ``module.function(*args)`` in a fresh
interpreter whose ``kit`` comes from ``kit_dir`` (this checkout, or an older commit unpacked
with ``git archive COMMIT kit | tar -x -C DIR``) and returns its JSON result. A fresh process
per side: two versions of ``kit`` cannot share one interpreter.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def call(kit_dir: str | Path, module: str, function: str, *args: Any) -> Any:
    code = (f"import json, sys; sys.path.insert(0, {str(kit_dir)!r}); "
            f"sys.path.insert(1, {str(HERE)!r}); from {module} import {function}; "
            f"print(json.dumps({function}(*json.loads(sys.argv[1]))))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code, json.dumps(args)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def print_ratio_table(times: dict[str, dict[str, list[float]]], runs: list[str]) -> None:
    """A Markdown table of each side's median [min] per run and, with a "before" side, the
    ratio of medians before / after (``times``: side -> run -> measurements)."""
    sides = list(times)
    compare = "before" in times
    print("| run | " + " | ".join(f"{s} median [min]" for s in sides)
          + (" | ratio of medians |" if compare else " |"))
    print("|---|" + "---:|" * (len(sides) + (1 if compare else 0)))
    for name in runs:
        med = {s: statistics.median(times[s][name]) for s in sides}
        cells = [f"{med[s]:.2f} [{min(times[s][name]):.2f}]" for s in sides]
        if compare:
            cells.append(f"{med['before'] / med['after']:.2f}x")
        print(f"| {name} | " + " | ".join(cells) + " |")
