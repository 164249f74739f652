"""Run metadata from the ``job.json`` that the kit's job templates write beside a tool's output.

The probe records its own start/end, hosts, environment and completeness in
``PREFIX.meta.json``; OSU and SkaMPI print none of that. When their output sits in a job
directory written by ``pt2pt plan`` + sbatch/run-local, ``job.json`` there knows it: without
it the first real OSU/SkaMPI campaign had runs with null start/end/hosts/job_id, and a
cancelled job's partial output was recorded as ``complete: true``. Outputs from anywhere else
(no ``job.json``, or one that is unreadable or not ours) keep the parser's defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.ingest.common import ParsedRun

JOB_JSON = "job.json"


def _load(output: Path) -> dict[str, Any] | None:
    path = output.parent / JOB_JSON
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("plan"), dict):
        return None
    plan = record["plan"]
    # Only a job.json that names this very file as one of its outputs describes this run.
    if output.name not in (plan.get("outputs") or []):
        return None
    return record


def apply_job_record(run: ParsedRun, output: Path) -> ParsedRun:
    """Fill ``run``'s start, end, job id, hosts, env and completeness from ``job.json``."""
    record = _load(output)
    if record is None:
        return run
    plan = record["plan"]

    def text(key: str) -> str | None:
        value = record.get(key)
        return value if isinstance(value, str) and value else None

    run.start = run.start or text("start")
    run.end = run.end or text("end")
    run.job_id = run.job_id or text("slurm_job_id")
    host = text("host")
    # job.json knows the batch host only: that is every rank's host for one-node placements.
    if not run.hosts and host and plan.get("nodes") == 1:
        run.hosts = [host] * int(plan.get("ntasks_per_node") or 1)
    env = plan.get("transport_env")
    if not run.env and isinstance(env, dict):
        run.env = {str(k): str(v) for k, v in env.items()}
    if run.transport_hint is None and run.env:
        from kit.ingest.probe import transport_from_env

        run.transport_hint = transport_from_env(run.env, run.hosts)
    state = record.get("state")
    if isinstance(state, str) and state != "completed":
        run.complete = False
        run.warnings.append(f"{output.name}: the job ended as {state!r}; run marked incomplete")
    return run
