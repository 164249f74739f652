"""Call a benchmark function with another ``kit`` package (before/after ratios in one run).

``call(kit_dir, module, function, *args)`` runs ``module.function(*args)`` in a fresh
interpreter whose ``kit`` comes from ``kit_dir`` (this checkout, or an older commit unpacked
with ``git archive COMMIT kit | tar -x -C DIR``) and returns its JSON result. A fresh process
per side: two versions of ``kit`` cannot share one interpreter.
"""

from __future__ import annotations

import json
import os
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
