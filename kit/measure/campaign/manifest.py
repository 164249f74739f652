"""Reading a planned campaign directory: the manifest, submissions, and each job's record.

Layout (written by ``pt2pt plan``; the jobs add their own files):

    DIR/manifest.json          what was planned, jobs in run order
    DIR/campaign.yaml          the campaign file as planned
    DIR/submitted.json         Slurm array ids and ARRAY_TASK ids, written by ``pt2pt submit``
    DIR/arrays/<group>.sbatch  one job array per (tool, transport, placement)
    DIR/jobs/<id>/job.sbatch   the rendered job; plan.json its static description
    DIR/jobs/<id>/job.json     written by the job when it ends (state, exit status, check)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.core.errors import CampaignError

MANIFEST_NAME = "manifest.json"
SUBMITTED_NAME = "submitted.json"


def read_manifest(campaign_dir: Path) -> dict[str, Any]:
    path = campaign_dir / MANIFEST_NAME
    if not path.is_file():
        raise CampaignError("no manifest.json here: not a planned campaign directory",
                            where=str(campaign_dir),
                            hint="run 'pt2pt plan CAMPAIGN.yaml -o DIR' first")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CampaignError(f"cannot read the manifest: {exc}", where=str(path),
                            hint="plan the campaign again into a new directory") from None
    if not isinstance(data, dict) or "jobs" not in data:
        raise CampaignError("the manifest has no 'jobs'", where=str(path),
                            hint="plan the campaign again into a new directory")
    return data


def read_job_json(campaign_dir: Path, job: dict[str, Any]) -> dict[str, Any] | None:
    """The job's own record, or None if it has not ended (or never started)."""
    from kit.tools.records import JOB_RECORD_SCHEMA, problem, read_record

    path = campaign_dir / job["dir"] / "job.json"
    if not path.exists():
        return None
    # Untrusted (copied between sites, maybe edited): a record that cannot be read or has
    # fields of the wrong type counts as "unreadable", so its samples are kept as incomplete.
    record, why = read_record(path)
    if why is None and not isinstance(record, dict):
        why = "is not a JSON object"
    if why is None:
        bad = problem(record, JOB_RECORD_SCHEMA)
        why = f"has a field of the wrong type ({bad})" if bad else None
    if why is not None:
        return {"state": "unreadable", "reason": f"job.json unreadable: {path} {why}"}
    return record


def output_paths(campaign_dir: Path, job: dict[str, Any]) -> list[Path]:
    return [campaign_dir / job["dir"] / name for name in job.get("outputs", [])]


def has_results(campaign_dir: Path, manifest: dict[str, Any]) -> bool:
    for job in manifest.get("jobs", []):
        base = campaign_dir / job["dir"]
        if (base / "job.json").exists() or any(p.exists() for p in
                                                output_paths(campaign_dir, job)):
            return True
    return (campaign_dir / SUBMITTED_NAME).exists()


def read_submitted(campaign_dir: Path) -> dict[str, str]:
    """Job id -> Slurm id (``ARRAY_TASK`` for array tasks), as recorded by ``pt2pt submit``."""
    return read_submission(campaign_dir)[1]


def read_submission(campaign_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(group -> {id, released}, job id -> Slurm id) from ``submitted.json``."""
    path = campaign_dir / SUBMITTED_NAME
    if not path.is_file():
        return {}, {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CampaignError(f"cannot read the submission record: {exc}", where=str(path),
                            hint="remove the file if no job was submitted") from None
    jobs = {str(k): str(v) for k, v in data.get("jobs", {}).items()}
    return dict(data.get("arrays", {})), jobs


def pending_jobs(campaign_dir: Path, rerun: bool) -> int:
    """Jobs a local run will actually run (finished ones are reused unless ``rerun``)."""
    jobs = read_manifest(campaign_dir)["jobs"]
    if rerun:
        return len(jobs)
    done = ("completed", "skipped")
    return sum(1 for job in jobs
               if (read_job_json(campaign_dir, job) or {}).get("state") not in done)
