"""``pt2pt fit`` says what its optional parts cost, next to the flag that skips them, and
never writes that into the model file (a file must not change from one run to the next)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kit.cli import main
from kit.core import cost


def _dataset(root: Path) -> Path:
    from kit.data.ingest import ingest
    from kit.fit import synth

    size, time = synth.sample(synth.ethernet_like(), 3000, grid=40, seed=2)
    csv = root / "pingpong.csv"
    csv.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                               for s, t in zip(size, time, strict=True)))
    ingest([csv], root / "ds", campaign="c", transport="tcp")
    return root / "ds"


def test_fit_prints_the_cpu_cost_of_validation_and_intervals(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cost, "_SPENT", {})
    ds = _dataset(tmp_path)
    assert main(["fit", str(ds), "-o", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"scores: \d+\.\d\d CPU-s; --no-validate skips it", err), err[-2000:]
    assert re.search(r"bootstrap: \d+\.\d\d CPU-s; --no-intervals skips it", err), err[-2000:]
    assert "CPU-s" not in (tmp_path / "m.json").read_text()
    monkeypatch.setattr(cost, "_SPENT", {})
    assert main(["fit", str(ds), "-o", str(tmp_path / "n.json"), "--no-validate",
                 "--no-intervals"]) == 0
    err = capsys.readouterr().err
    assert "skips it" not in err
    first, second = (json.loads((tmp_path / n).read_text()) for n in ("m.json", "n.json"))
    assert first["regimes"] == second["regimes"]  # the same model either way
