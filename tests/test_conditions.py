"""Run conditions: recorded by the job helper, columns of runs.parquet, judged in one place,
read by run quality and diff. (The real demo beside CPU burners: test_conditions_demo.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.analyses.diff import Side, diff
from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.fit.runquality import assess, quality_lines, run_conditions
from kit.measure import conditions as cond
from kit.measure.campaign import jobrecord, nodestate

PLAN = {"outputs": ["osu_latency.txt"], "nodes": 1, "ntasks_per_node": 2,
        "transport_env": {"OMPI_MCA_btl": "self,vader"}, "command": ["osu_latency"]}


def record(load_during: float | None, *, cpus: int = 2, before: float = 0.3,
           pressure: float | None = 0.01, steal: float | None = 0.0,
           tenants: list[str] | None = None, samples: int = 5) -> dict[str, object]:
    """A job.json ``conditions`` as jobrecord writes it."""
    return {"before": {"load1": before, "steal": 0.0},
            "during": {"load": load_during, "samples": samples, "cpu_pressure": pressure,
                       "steal": steal, "load1_max": before},
            "after": {"load1": before, "steal": 0.0}, "cpus_online": cpus,
            "ranks_per_node": 2, "governor": None, "tenants": tenants}


@pytest.mark.parametrize("rec,verdict,word", [
    (record(2.1), "quiet", "load 2.1"),
    (record(4.2), "disturbed", "other tasks wanted 2.2 CPU(s), 0 were free"),
    (record(7.6, cpus=2), "disturbed", "load 7.6"),
    (record(9.0, cpus=16), "quiet", "16 CPU(s)"),  # 14 free CPUs take the others
    (record(2.0, pressure=0.6), "disturbed", "waited for a CPU 60 %"),
    (record(2.0, steal=0.2), "disturbed", "stole 20 %"),
    (record(2.0, tenants=["41", "42"]), "disturbed", "41,42"),
    (record(None, before=6.0, pressure=None), "disturbed", "load average 6.0 around the run"),
    (None, "unknown", "no load recorded"),
    # A 0.25 s run, one watcher sample: the count caught mpirun / the job shell (measured at
    # rest, 54); judged by CPU pressure over the whole run, not by that instant.
    (record(3.0, samples=1, pressure=0.08, before=0.5), "quiet", "CPU pressure 8 %"),
    (record(2.0, samples=1, pressure=0.45, before=0.5), "disturbed", "waited for a CPU 45 %"),
    # no PSI: the minute around, less the ranks (a campaign's own previous jobs are in it)
    (record(3.0, samples=2, pressure=None, before=2.3), "quiet", "load 2.3 before"),
    (record(3.0, samples=1, pressure=None, before=4.6), "disturbed", "load average 4.6"),
], ids=["rest", "two-burners", "load-7", "big-node", "pressure", "steal", "tenants",
        "before-only", "nothing", "short-launcher-seen", "short-beside-hog",
        "short-no-psi-own-jobs", "short-no-psi-busy"])
def test_one_rule_judges_a_run(rec: dict[str, object] | None, verdict: str, word: str) -> None:
    found, why = cond.judge(cond.Conditions.from_record(rec, order="shuffled",
                                                        binding="cores 0,1"))
    assert found == verdict and word in why, why


def test_untrusted_records_read_as_unknown() -> None:
    bad = {"before": {"load1": "high"}, "during": {"load": float("nan"), "cpu_pressure": 3},
           "after": [], "cpus_online": True, "tenants": "x"}
    c = cond.Conditions.from_record(bad)
    assert (c.load_before, c.load_during, c.cpu_pressure, c.node_cpus, c.tenants) == \
        (None, None, None, None, None)
    assert cond.judge(c)[0] == "unknown"


def test_withheld_names_the_disturbed_side_and_different_settings() -> None:
    quiet = cond.Conditions.from_record(record(2.0), order="shuffled", binding="cores 0,1")
    busy = cond.Conditions.from_record(record(5.0), order="shuffled", binding="cores 0,1")
    blocked = cond.Conditions.from_record(record(2.0), order="blocked", binding="none")
    unknown = cond.Conditions()
    assert cond.withheld({"A": [quiet], "B": [quiet]}) is None
    assert "B: 1 of 1 run(s) disturbed" in str(cond.withheld({"A": [quiet], "B": [busy]}))
    assert cond.withheld({"A": [quiet], "B": [unknown]}) is None
    assert "unknown" in str(cond.withheld({"A": [quiet], "B": [unknown]}, quiet_only=True))
    why = cond.withheld({"probe": [quiet], "osu": [blocked]}, same_settings=True)
    assert why is not None and "order blocked" in why and "order shuffled" in why


def test_the_watcher_samples_the_node_while_the_tool_runs(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.5)"])
    try:
        assert nodestate.watch(child.pid, tmp_path / "during.json", interval=0.5) == 0
    finally:
        child.wait()
    during = json.loads((tmp_path / "during.json").read_text())
    assert during["samples"] >= 3 and during["load"] is not None and during["load"] >= 0
    assert during["seconds"] >= 2.0
    # a tool that ended before the watcher started gives no figure, not a wrong one
    assert nodestate.watch(child.pid, tmp_path / "late.json") == 0
    assert json.loads((tmp_path / "late.json").read_text())["load"] is None


def test_the_job_helper_records_conditions_in_job_json(tmp_path: Path) -> None:
    """begin / watch / finish as the job script calls them, with a bare python (-I)."""
    job = tmp_path / "job"
    job.mkdir()
    plan = {"outputs": ["out.txt"], "nodes": 1, "ntasks_per_node": 2, "tool": "osu"}
    (job / "plan.json").write_text(json.dumps(plan))
    helper = Path(jobrecord.__file__)
    bare = [sys.executable, "-I", str(helper)]
    assert subprocess.run([*bare, "begin", "true", "true", "--", "true"], cwd=job).returncode == 0
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    watch = subprocess.Popen([*bare, "watch", str(sleeper.pid)], cwd=job)
    sleeper.wait()
    assert watch.wait(timeout=30) == 0
    for rank in (0, 1):
        (job / f"rank-{rank}.rc").write_text("0\n")
    subprocess.run([*bare, "finish", "--rc", "0"], cwd=job, check=True)
    rec = json.loads((job / "job.json").read_text())["conditions"]
    assert rec["before"]["load1"] is not None and rec["after"]["load1"] is not None
    assert rec["during"]["samples"] >= 1 and rec["ranks_per_node"] == 2
    assert rec["cpus_online"] >= 1 and rec["tenants"] is None  # not under Slurm


def _osu_run(tmp_path: Path, fixtures_dir: Path, name: str,
             conditions: dict[str, object] | None) -> Path:
    job = tmp_path / name
    job.mkdir()
    shutil.copy(fixtures_dir / "osu" / "osu_latency_vader_7.4.txt", job / "osu_latency.txt")
    rec = {"plan": PLAN, "state": "completed", "host": "n1"}
    if conditions is not None:
        rec["conditions"] = conditions
    (job / "job.json").write_text(json.dumps(rec))
    return job / "osu_latency.txt"


def test_ingest_writes_the_conditions_columns(tmp_path: Path, fixtures_dir: Path) -> None:
    out = _osu_run(tmp_path, fixtures_dir, "busy", record(6.5))
    ingest([out], tmp_path / "ds")
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["conditions"] == "disturbed" and run["load_during"] == 6.5
    assert run["node_cpus"] == 2 and run["ranks_per_node"] == 2
    assert run["order"] == "blocked"  # OSU sweeps sizes, each size's iterations back to back
    assert run_conditions(tmp_path / "ds") == {run["run_id"]: ("disturbed",
                                                               run["conditions_why"])}


def test_a_dataset_written_before_conditions_reads_as_unknown(tmp_path: Path,
                                                              fixtures_dir: Path) -> None:
    ingest([_osu_run(tmp_path, fixtures_dir, "old", None)], tmp_path / "ds")
    path = tmp_path / "ds" / "runs.parquet"
    old = pl.read_parquet(path).drop(*cond.COLUMNS)
    meta = pl.read_parquet_metadata(path)
    old.write_parquet(path, metadata=meta)
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["conditions"] is None and run["load_during"] is None
    assert set(run_conditions(tmp_path / "ds").values()) == {("unknown", "")}


def _three_runs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    n = 300
    size = np.tile(np.exp(rng.uniform(0, 10, n)), 3)
    time = 1e-6 * (1 + size / 1e3) * rng.lognormal(0, 0.05, 3 * n)
    run = np.repeat(["r0", "r1", "r2"], n)
    seq = np.tile(np.arange(n), 3)
    return run, seq, size, time


def test_runs_on_a_busy_node_leave_the_fit_when_a_quiet_run_exists() -> None:
    run, seq, size, time = _three_runs(np.random.default_rng(1))
    busy = ("disturbed", "load 7.1 during the run on 2 CPU(s)")
    quiet = ("quiet", "load 2.0 during")
    q = assess(run, seq, size, time, conditions={"r0": quiet, "r1": busy, "r2": quiet})
    assert q.verdict == "disturbed"
    assert q.disturbed[run == "r1"].all() and not q.disturbed[run != "r1"].any()
    assert any("r1: measured on a disturbed node: load 7.1" in line for line in q.lines())
    d = q.to_dict()
    assert d["verdict"] == "disturbed" and d["runs"][1]["conditions"] == "disturbed"


def test_every_run_busy_keeps_them_and_says_the_model_describes_the_load() -> None:
    run, seq, size, time = _three_runs(np.random.default_rng(2))
    busy = ("disturbed", "load 7.1 during the run")
    q = assess(run, seq, size, time, conditions=dict.fromkeys(("r0", "r1", "r2"), busy))
    assert q.verdict == "disturbed" and q.n_disturbed == 0
    assert any("describes the load too" in line for line in quality_lines(q.to_dict()))


def test_quiet_needs_recorded_conditions() -> None:
    run, seq, size, time = _three_runs(np.random.default_rng(3))
    assert assess(run, seq, size, time).verdict == "conditions not recorded"
    quiet = ("quiet", "load 2.0 during")
    q = assess(run, seq, size, time, conditions=dict.fromkeys(("r0", "r1", "r2"), quiet))
    assert q.verdict == "quiet" and q.lines() == []


def test_diff_calls_no_change_on_a_disturbed_side_unless_told_to() -> None:
    rng = np.random.default_rng(4)
    size = np.exp(rng.uniform(0, 10, 2000))
    a_t = 1e-6 * (1 + size / 1e3) * rng.lognormal(0, 0.05, 2000)
    b_t = 1.4 * 1e-6 * (1 + size / 1e3) * rng.lognormal(0, 0.05, 2000)
    quiet = [cond.Conditions.from_record(record(2.0))]
    busy = [cond.Conditions.from_record(record(6.0))]
    held = diff(Side("A", size, a_t, conditions=quiet), Side("B", size, b_t, conditions=busy),
                n_boot=40)
    assert held.withheld and not held.changed and held.verdict.startswith("no verdict")
    assert held.conditions["B"]["verdict"] == "disturbed"
    called = diff(Side("A", size, a_t, conditions=quiet), Side("B", size, b_t, conditions=busy),
                  n_boot=40, allow_disturbed=True)
    assert called.changed and not called.withheld and "slower" in called.verdict
    plain = diff(Side("A", size, a_t, conditions=quiet), Side("B", size, b_t, conditions=quiet),
                 n_boot=40)
    assert plain.changed and not plain.withheld


def _probe_job(folder: Path, conditions: dict[str, object], order: str, seed: int = 5) -> Path:
    """A probe run (blocked or shuffled) in a job folder whose job.json records conditions."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    sizes = np.repeat(2 ** np.arange(0, 23), 40)
    rows = [f"{i},pingpong,{s},1,{2 * 20e-6 * (1 + s / 1.2e8) * rng.lognormal(0, .05):.9e},,0"
            for i, s in enumerate(sizes)]
    (folder / "probe.samples.csv").write_text("seq,op,size,count,time,call,warmup\n"
                                              + "\n".join(rows) + "\n")
    meta = {"probe_version": "0.1.0", "hosts": ["n1", "n1"], "order": order, "complete": True,
            "samples_written": len(rows), "ops": ["pingpong"],
            "env": {"OMPI_MCA_btl": "self,tcp"}}
    (folder / "probe.meta.json").write_text(json.dumps(meta))
    plan = {**PLAN, "outputs": ["probe.samples.csv"], "command": ["pt2pt-probe"]}
    (folder / "job.json").write_text(json.dumps({
        "plan": plan, "state": "completed", "host": "n1", "conditions": conditions,
        "binding": {"policy": "cores", "cpus": {"0": 0, "1": 1}}}))
    return folder / "probe.samples.csv"


def _osu_job(tmp_path: Path, fixtures_dir: Path, conditions: dict[str, object]) -> Path:
    job = tmp_path / "osu"
    job.mkdir()
    shutil.copy(fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt", job / "osu_latency.txt")
    (job / "job.json").write_text(json.dumps({
        "plan": PLAN, "state": "completed", "host": "n1", "conditions": conditions,
        "binding": {"policy": "cores", "cpus": {"0": 0, "1": 1}}}))
    return job / "osu_latency.txt"


@pytest.mark.parametrize("probe_order,probe_load,shown", [
    ("blocked", 2.0, True), ("shuffled", 2.0, False), ("blocked", 7.6, False)],
    ids=["same-conditions", "probe-shuffled", "probe-at-load-7.6"])
def test_crosscheck_only_in_the_same_conditions(tmp_path: Path, fixtures_dir: Path,
                                                probe_order: str, probe_load: float,
                                                shown: bool) -> None:
    from rich.console import Console

    from kit.model import RegimeModel
    from kit.model.io import save_model
    from kit.outputs.demo import SeriesResult, crosscheck

    data = tmp_path / "ds"
    osu = _osu_job(tmp_path, fixtures_dir, record(2.0))
    probe = _probe_job(tmp_path / "probe", record(probe_load), probe_order)
    assert ingest([osu, probe], data, campaign="c", transport="tcp").ok
    (series,) = [{k: str(v) for k, v in r.items()} for r in ds.series_table(data)
                 .filter(pl.col("tool") == "probe").select(ds.SERIES_KEYS).to_dicts()]
    frame = ds.select_series(data, series)
    path = save_model(RegimeModel(random_state=0).fit(frame.size, frame.time),
                      tmp_path / "m.json")
    found = crosscheck(data, [SeriesResult(series=series, model_path=path)])
    if shown:
        assert found.table is not None and not found.withheld
        console = Console(width=200, record=True)
        console.print(found.table)
        text = console.export_text()
        assert "tcp osu mean" in text and "binding cores" in text and "order blocked" in text
        assert "same conditions" in text
        return
    assert found.table is None and len(found.withheld) == 1
    why = found.withheld[0]
    if probe_order == "shuffled":
        assert "order shuffled" in why and "order blocked" in why
    else:
        assert "probe: 1 of 1 run(s) disturbed (load 7.6" in why


def test_the_tui_shows_the_runs_conditions_and_its_diff_withholds(tmp_path: Path) -> None:
    """The explorer's series table carries each series' conditions (its `runs` column), and
    its diff of two marked series calls no change when one ran on a disturbed node."""
    from tui import loading
    from tui.diffing import diff_series

    data = tmp_path / "ds"
    quiet = _probe_job(tmp_path / "quiet", record(2.0), "shuffled")
    busy = _probe_job(tmp_path / "busy", record(6.5), "shuffled", seed=6)
    assert ingest([quiet], data, campaign="quiet", transport="tcp").ok
    assert ingest([busy], data, campaign="busy", transport="tcp").ok
    rows = {r.key.get("campaign"): r for r in loading.series_rows(data)}
    assert rows["quiet"].conditions == "quiet"
    assert rows["busy"].conditions == "disturbed" and "load 6.5" in rows["busy"].conditions_why
    keys = [r.key for r in rows.values()]
    a = loading.load_samples(data, rows["quiet"].key, keys)
    b = loading.load_samples(data, rows["busy"].key, keys)
    result = diff_series(a, b, data)
    assert result.withheld and result.verdict.startswith("no verdict")
    assert not diff_series(a, b).withheld  # without the dataset nothing is known
