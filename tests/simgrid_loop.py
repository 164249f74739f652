"""The closed loop as a user runs it by hand: ``pt2pt export``, ``smpirun``, ``pt2pt predict``.

Shared by the SimGrid tests (reference runs) and the demo test (the demo's own models): the
export is run as docs/simgrid.md says (``smpirun -platform sg/platform.xml -hostfile
sg/hostfile -np 2 APP``, nothing else), and compared with the numbers ``pt2pt predict``
prints at the sizes the closed loop checks.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path


def _cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True,
                          timeout=900, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def hand_run_over_predict(model_path: Path, work: Path) -> dict[int, float]:
    """Simulated one-way time / ``pt2pt predict``'s median per check size of the model."""
    from kit.model.io import load_model
    from kit.outputs.simulate import RUN_CFG, build, check_sizes

    sizes = [s for s, _ in check_sizes(load_model(model_path))]
    export = work / "sg"
    _cli("export", str(model_path), "--simgrid", "-o", str(export))
    printed = _cli("predict", str(model_path), "--sizes", ",".join(map(str, sizes)))
    predicted = {int(r["size"]): float(r["median"]) for r in csv.DictReader(io.StringIO(printed))}
    binary, _ = build(noise=False)
    (work / "sizes.txt").write_text("\n".join(map(str, sizes)) + "\n")
    proc = subprocess.run(["smpirun", "-platform", str(export / "platform.xml"), "-hostfile",
                           str(export / "hostfile"), "-np", "2", *RUN_CFG, str(binary),
                           str(work / "sizes.txt"), "1"],
                          capture_output=True, text=True, timeout=600, cwd=work, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split(",") for line in proc.stdout.splitlines()[1:] if line.strip()]
    # one ping-pong per size (deterministic without the noise plugin): RTT/2, as measured
    return {int(r[0]): float(r[1]) / predicted[int(r[0])] for r in rows}
