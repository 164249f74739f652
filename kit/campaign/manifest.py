"""Reading a planned campaign directory: the manifest, submissions, and each job's record.

Layout (written by ``pt2pt plan``; the jobs add their own files):

    DIR/manifest.json          what was planned, jobs in run order
    DIR/campaign.yaml          the campaign file as planned
    DIR/submitted.json         Slurm job ids, written by ``pt2pt submit``
    DIR/jobs/<id>/job.sbatch   the rendered job; plan.json its static description
    DIR/jobs/<id>/job.json     written by the job when it ends (state, exit status, check)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.errors import CampaignError

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
    path = campaign_dir / job["dir"] / "job.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        return {"state": "unreadable", "reason": f"job.json unreadable: {exc}"}


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
    """Job id -> Slurm job id, as recorded by ``pt2pt submit``."""
    path = campaign_dir / SUBMITTED_NAME
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CampaignError(f"cannot read the submission record: {exc}", where=str(path),
                            hint="remove the file if no job was submitted") from None
    return {str(k): str(v) for k, v in data.get("jobs", {}).items()}
