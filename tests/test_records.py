"""job.json and the probe's meta.json are untrusted: wrong types never crash ingest/collect.

A damaged record does not throw the samples away: the run is ingested, marked incomplete,
and ``incomplete_reason`` (and the warning) name the file and the JSON path of the field.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kit.data import dataset as ds
from kit.data.collect import collect
from kit.data.ingest import ingest
from kit.measure.campaign.manifest import read_job_json
from kit.measure.campaign.plan import plan_campaign
from kit.tools import probe as probe_parser

PLAN = {"outputs": ["osu_latency.txt"], "nodes": 1, "ntasks_per_node": 2,
        "transport_env": {"OMPI_MCA_btl": "self,vader"}, "command": ["osu_latency"]}
GOOD_JOB = {"plan": PLAN, "state": "completed", "host": "n1", "start": "2026-01-01T00:00:00Z",
            "end": "2026-01-01T00:00:05Z", "slurm_job_id": "7"}

BAD_JOBS: list[tuple[str, Any, str]] = [
    ("ntasks-string", {**GOOD_JOB, "plan": {**PLAN, "ntasks_per_node": "abc"}},
     "$.plan.ntasks_per_node"),
    ("ntasks-list", {**GOOD_JOB, "plan": {**PLAN, "ntasks_per_node": [2]}},
     "$.plan.ntasks_per_node"),
    ("nodes-zero", {**GOOD_JOB, "plan": {**PLAN, "nodes": 0}}, "$.plan.nodes"),
    ("env-list", {**GOOD_JOB, "plan": {**PLAN, "transport_env": ["x"]}}, "$.plan.transport_env"),
    ("env-nested", {**GOOD_JOB, "plan": {**PLAN, "transport_env": {"A": {"b": 1}}}},
     "$.plan.transport_env.A"),
    ("command-string", {**GOOD_JOB, "plan": {**PLAN, "command": "osu_latency -m 8"}},
     "$.plan.command"),
    ("state-number", {**GOOD_JOB, "state": 5}, "$.state"),
    ("start-number", {**GOOD_JOB, "start": 1.5}, "$.start"),
    ("job-id-list", {**GOOD_JOB, "slurm_job_id": [7]}, "$.slurm_job_id"),
    ("host-object", {**GOOD_JOB, "host": {"n": 1}}, "$.host"),
]


def _osu_job(tmp_path: Path, fixtures_dir: Path, name: str, record: Any | bytes) -> Path:
    job = tmp_path / name
    job.mkdir()
    shutil.copy(fixtures_dir / "osu" / "osu_latency_vader_7.4.txt", job / "osu_latency.txt")
    raw = record if isinstance(record, bytes) else json.dumps(record).encode()
    (job / "job.json").write_bytes(raw)
    return job / "osu_latency.txt"


def test_a_good_job_record_is_used(tmp_path: Path, fixtures_dir: Path) -> None:
    out = _osu_job(tmp_path, fixtures_dir, "good", GOOD_JOB)
    ingest([out], tmp_path / "ds")
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["complete"] is True and run["job_id"] == "7" and run["hosts"] == "n1,n1"


@pytest.mark.parametrize("name,record,field", BAD_JOBS, ids=[b[0] for b in BAD_JOBS])
def test_a_job_record_of_wrong_types_marks_the_run_incomplete(
        name: str, record: Any, field: str, tmp_path: Path, fixtures_dir: Path) -> None:
    out = _osu_job(tmp_path, fixtures_dir, name, record)
    report = ingest([out], tmp_path / "ds")
    assert report.ok and report.files_ok == 1
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["complete"] is False
    assert field in run["incomplete_reason"] and "job.json" in run["incomplete_reason"]
    assert any(field in w for w in report.warnings)


@pytest.mark.parametrize("raw", [b"\xff\xfe{}", b'{"plan": ' * 3000 + b"{}" + b"}" * 3000,
                                 b'{"plan": {"outputs": ["osu_latency.txt"]}, "start": NaN}',
                                 b"{not json"])
def test_an_unreadable_job_record_marks_the_run_incomplete(raw: bytes, tmp_path: Path,
                                                           fixtures_dir: Path) -> None:
    out = _osu_job(tmp_path, fixtures_dir, "job", raw)
    report = ingest([out], tmp_path / "ds")
    assert report.ok
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["complete"] is False and "job.json" in run["incomplete_reason"]


META = {"probe_version": "0.1.0", "hosts": ["a", "a"], "env": {"OMPI_MCA_btl": "self,vader"},
        "ops": ["pingpong"], "samples_written": 3, "complete": True, "slurm_job_id": None,
        "start": "2026-01-01T00:00:00Z", "end": None}


@pytest.mark.parametrize("key,value", [("hosts", 5), ("hosts", [1, 2]), ("env", ["x"]),
                                       ("complete", "yes"), ("samples_written", "3"),
                                       ("samples_written", -1), ("start", {"t": 0}),
                                       ("ops", "pingpong"), ("slurm_job_id", [1])])
def test_a_meta_file_of_wrong_types_marks_the_run_incomplete(key: str, value: Any,
                                                             tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "r.samples.csv").write_text(probe_parser.HEADER + "\n0,pingpong,8,1,2e-06,,0\n"
                                          "1,pingpong,8,1,2e-06,,0\n2,pingpong,8,1,2e-06,,0\n")
    (folder / "r.meta.json").write_text(json.dumps({**META, key: value}))
    report = ingest([folder / "r.samples.csv"], tmp_path / "ds")
    assert report.ok, report.files_failed
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["complete"] is False
    assert f"$.{key}" in run["incomplete_reason"] and "r.meta.json" in run["incomplete_reason"]


def test_collect_with_a_damaged_job_record(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """collect reads job.json itself (state, reason): wrong types make the job 'partial',
    its samples ingested as incomplete, no traceback."""
    probe = tmp_path / "bin" / "pt2pt-probe"
    probe.parent.mkdir()
    probe.write_text("#!/bin/sh\nexit 0\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: rec\nmpi: openmpi\ntransports: [shm]\nplacement: intra-node\n"
                        "repetitions: 1\nseed: 1\nlauncher: mpirun\ntools:\n  - tool: probe\n"
                        "    ops: [pingpong]\n    sizes: list:8\n    samples: 3\n")
    out = tmp_path / "out"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    job = manifest["jobs"][0]
    jdir = out / job["dir"]
    (jdir / "probe.samples.csv").write_text(probe_parser.HEADER + "\n0,pingpong,8,1,2e-06,,0\n"
                                            "1,pingpong,8,1,2e-06,,0\n")
    (jdir / "probe.meta.json").write_text(json.dumps({**META, "samples_written": 2}))
    (jdir / "job.json").write_text(json.dumps({"plan": {"outputs": ["probe.samples.csv"]},
                                               "state": ["completed"], "reason": 5}))
    record = read_job_json(out, job)
    assert record is not None and record["state"] == "unreadable"
    assert "$.state" in record["reason"] and str(jdir / "job.json") in record["reason"]
    report = collect(out, tmp_path / "ds")
    assert [j.outcome for j in report.jobs] == ["partial"]
    assert ds.runs(tmp_path / "ds")["complete"].to_list() == [False]
