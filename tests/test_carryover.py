"""Carry-over (kit.fit.carryover): a ping-pong slowed by the bytes an earlier send of the same
run left in flight is the measurement's order, not the ping-pong's noise. Synthetic truth: a
shuffled probe run whose ping-pongs after a send/isend wait for that send's backlog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kit.data.ingest import ingest
from kit.fit.carryover import ASYNC_OPS, assess
from kit.fit.fitting import FitOptions, fit_series, read_series

RATE = 25e6  # bytes/s of the shaped link
SIZES = 4 ** np.arange(0, 12)  # 1 B .. 4 MiB


def _truth_pingpong(size: Any) -> Any:
    return 10e-6 + size / RATE


def _probe_run(folder: Path, *, backlog: bool, ops: tuple[str, ...], seed: int = 3,
               n: int = 4000) -> tuple[Path, int]:
    """A shuffled probe run; with ``backlog`` a ping-pong after a send/isend of s bytes waits
    for what that send left on the link (s / RATE - its time; half of it one way).
    Returns the samples file and the count of ping-pongs right after a send/isend."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    op = rng.choice(ops, n)
    size = rng.choice(SIZES, n)
    rows, after, prev_left = [], 0, 0.0
    for i in range(n):
        noise = rng.lognormal(0.0, 0.05)
        if op[i] == "pingpong":
            # the probe writes the round trip; the dataset holds half of it
            t = 2 * _truth_pingpong(size[i]) * noise + prev_left
            after += int(i > 0 and op[i - 1] in ASYNC_OPS)
        else:
            t = (4e-6 + size[i] / 2e9) * noise
        prev_left = max(size[i] / RATE - t, 0.0) if backlog and op[i] in ASYNC_OPS else 0.0
        call = f"{t * 0.8:.9e}" if op[i] == "isend" else ""
        rows.append(f"{i},{op[i]},{size[i]},1,{t:.9e},{call},0")
    (folder / "probe.samples.csv").write_text("seq,op,size,count,time,call,warmup\n"
                                              + "\n".join(rows) + "\n")
    (folder / "probe.meta.json").write_text(json.dumps({
        "probe_version": "0.1.0", "hosts": ["n1", "n2"], "order": "shuffled",
        "complete": True, "samples_written": n, "ops": list(ops)}))
    return folder / "probe.samples.csv", after


def _dataset(tmp_path: Path, *, backlog: bool,
             ops: tuple[str, ...] = ("pingpong", "send", "recv", "isend")) -> tuple[Path, int]:
    out, after = _probe_run(tmp_path / "run", backlog=backlog, ops=ops)
    data = tmp_path / "ds"
    assert ingest([out], data, campaign="c", transport="tcp").ok
    return data, after


def test_planted_carry_over_is_found_and_left_out(tmp_path: Path) -> None:
    data, after = _dataset(tmp_path, backlog=True)
    samples = read_series(data, {"op": "pingpong"})
    found = samples.carry_over
    assert found is not None and found.excluded and found.n_after_async == after
    assert len(samples) == found.n_samples - after
    assert found.p_value is not None and found.p_value < 1e-6
    # the kept rows are the truth: per size, the median within 3 % and no stall left
    for s in (1, 1024):
        t = samples.time[samples.size == s]
        assert abs(np.median(t) / _truth_pingpong(s) - 1) < 0.03
        assert t.max() < 1.5 * _truth_pingpong(s)


def test_the_fit_records_it_and_its_tail_is_the_truth_s(tmp_path: Path) -> None:
    data, _ = _dataset(tmp_path, backlog=True)
    opts = FitOptions(validate=False, intervals=False)
    clean = fit_series(data, {"op": "pingpong"}, opts)
    assert clean.fitted.provenance["carry_over"]["excluded"] is True
    assert any(n.startswith("carry-over:") and n.endswith("left out") for n in clean.notes)
    kept = fit_series(data, {"op": "pingpong"}, FitOptions(validate=False, intervals=False,
                                                           keep_carry_over=True))
    assert kept.fitted.provenance["carry_over"]["kept_by_request"] is True
    p95_clean = clean.model.predict_quantiles(np.array([16.0]), np.array([0.95]))[0, 0]
    p95_kept = kept.model.predict_quantiles(np.array([16.0]), np.array([0.95]))[0, 0]
    truth_p95 = _truth_pingpong(16) * np.exp(1.645 * 0.05)
    assert abs(p95_clean / truth_p95 - 1) < 0.15
    assert p95_kept > 3 * truth_p95  # the stalls, drawn per message, were the model's tail


def test_interleaving_without_backlog_changes_nothing(tmp_path: Path) -> None:
    data, after = _dataset(tmp_path, backlog=False)
    samples = read_series(data, {"op": "pingpong"})
    assert samples.carry_over is not None and not samples.carry_over.found
    assert samples.carry_over.n_after_async == after and len(samples) == samples.n_rows
    fitted = fit_series(data, {"op": "pingpong"}, FitOptions(validate=False, intervals=False))
    assert "carry_over" not in fitted.fitted.provenance


def test_a_run_of_one_op_is_not_judged(tmp_path: Path) -> None:
    data, after = _dataset(tmp_path, backlog=True, ops=("pingpong",))
    samples = read_series(data, {"op": "pingpong"})
    assert after == 0 and samples.carry_over is not None
    assert samples.carry_over.n_after_async == 0 and not samples.carry_over.found


@pytest.mark.parametrize("op", ["send", "isend"])
def test_an_async_op_after_its_own_kind_is_not_carry_over(op: str) -> None:
    size = np.tile(SIZES.astype(float), 20)
    time = _truth_pingpong(size)
    found = assess(op, size, time, [op] * len(size))
    assert found.n_after_async == 0 and not found.found


def test_pt2pt_fit_says_it_and_keeps_it_when_told(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from kit.cli import main
    from kit.model.io import read_model

    data, after = _dataset(tmp_path, backlog=True)
    out = tmp_path / "m.json"
    assert main(["fit", str(data), "--series", "op=pingpong", "--no-intervals",
                 "--no-validate", "-o", str(out)]) == 0
    assert "carry-over:" in capsys.readouterr().err
    prov = read_model(out).provenance
    assert prov["carry_over"]["excluded"] and prov["carry_over"]["n_after_async"] == after
    assert main(["fit", str(data), "--series", "op=pingpong", "--no-intervals",
                 "--no-validate", "--keep-carry-over", "-o", str(out)]) == 0
    assert read_model(out).provenance["carry_over"]["kept_by_request"]
