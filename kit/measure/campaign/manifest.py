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
from kit.core.inputs import read_bytes

MANIFEST_NAME = "manifest.json"
SUBMITTED_NAME = "submitted.json"


#: A manifest lists every job of a campaign: 64 MiB is millions of them.
MAX_MANIFEST_BYTES = 64 << 20
_REPLAN = ("plan the campaign again into a new directory (manifest.json is written by "
           "'pt2pt plan', not by hand)")


def read_manifest(campaign_dir: Path) -> dict[str, Any]:
    """The manifest, checked: every path it names stays inside ``campaign_dir``.

    A manifest is untrusted (copied between sites, maybe edited): a job whose ``dir`` was
    ``../../../../etc`` made collect read /etc/shadow. Job folders, scripts and output names
    must be relative, without ``..``, and resolve (symbolic links followed) inside the
    campaign folder; anything else is a CampaignError naming the job and the field.
    """
    path = campaign_dir / MANIFEST_NAME
    if not path.is_file():
        raise CampaignError("no manifest.json here: not a planned campaign directory",
                            where=str(campaign_dir),
                            hint="run 'pt2pt plan CAMPAIGN.yaml -o DIR' first")
    raw = read_bytes(path, "manifest", limit=MAX_MANIFEST_BYTES, error=CampaignError)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CampaignError(f"cannot read the manifest: {exc}", where=str(path),
                            hint=_REPLAN) from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise CampaignError("the manifest has no 'jobs' list", where=str(path), hint=_REPLAN)
    if not isinstance(data.get("campaign", {}), dict):
        raise CampaignError("the manifest's 'campaign' is not an object", where=str(path),
                            hint=_REPLAN)
    root = campaign_dir.resolve()
    for i, job in enumerate(data["jobs"]):
        _check_job(root, path, i, job)
    arrays = data.get("arrays", {})
    if not isinstance(arrays, dict):
        raise CampaignError("the manifest's 'arrays' is not an object", where=str(path),
                            hint=_REPLAN)
    for group, array in arrays.items():
        if not isinstance(array, dict):
            raise CampaignError(f"array {group!r} is not an object", where=str(path),
                                hint=_REPLAN)
        _inside(root, path, f"array {group!r}", "script", array.get("script"))
    return data


def _inside(root: Path, manifest: Path, what: str, key: str, value: Any) -> None:
    """``value`` is a relative path that stays inside ``root`` (links followed)."""
    rel = Path(value) if isinstance(value, str) and value and "\0" not in value else None
    if rel is None or rel.is_absolute() or ".." in rel.parts or not (
            root / rel).resolve().is_relative_to(root):
        raise CampaignError(f"{what} has '{key}': {value!r}, which is not a path inside the "
                            "campaign folder", where=str(manifest), hint=_REPLAN)


def _check_job(root: Path, manifest: Path, index: int, job: Any) -> None:
    if not isinstance(job, dict) or not isinstance(job.get("id"), str):
        raise CampaignError(f"job {index} is not an object with an 'id'", where=str(manifest),
                            hint=_REPLAN)
    what = f"job {job['id']!r}"
    _inside(root, manifest, what, "dir", job.get("dir"))
    if "script" in job:
        _inside(root, manifest, what, "script", job.get("script"))
    outputs = job.get("outputs", [])
    if not isinstance(outputs, list) or not all(
            isinstance(o, str) and o and "/" not in o and o not in (".", "..")
            for o in outputs):
        raise CampaignError(f"{what} has 'outputs': {outputs!r}; outputs are file names in "
                            "its job folder", where=str(manifest), hint=_REPLAN)


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
