"""``pt2pt status``: one table row per planned job, from every source that knows something.

Slurm's view comes from ``squeue`` (queued/running), then ``scontrol show job`` (ended
jobs, for MinJobAge seconds), then ``sacct`` when the cluster keeps accounting (the local
cluster runs ``accounting_storage/none``, where sacct knows nothing). The job's own
``job.json`` says what actually happened (completed, skipped and why, check result).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.campaign import slurm
from kit.campaign.manifest import read_job_json, read_manifest, read_submitted


@dataclass
class JobStatus:
    job: str
    tool: str
    transport: str
    placement: str
    repetition: int
    slurm_id: str
    slurm_state: str
    result: str
    exit_status: str
    note: str


def job_statuses(campaign_dir: Path, *, env: Mapping[str, str] | None = None,
                 use_slurm: bool | None = None) -> list[JobStatus]:
    campaign_dir = campaign_dir.resolve()
    manifest = read_manifest(campaign_dir)
    submitted = read_submitted(campaign_dir)
    if use_slurm is None:
        use_slurm = bool(submitted)
    ids = list(submitted.values())
    queue = slurm.squeue_states(ids, env) if use_slurm else {}
    ended: dict[str, dict[str, str]] = {}
    if use_slurm:
        for sid in ids:
            if sid not in queue:
                info = slurm.scontrol_state(sid, env)
                if info is not None:
                    ended[sid] = info
        missing = [sid for sid in ids if sid not in queue and sid not in ended]
        if missing and slurm.accounting_enabled(env):
            ended.update(slurm.sacct_states(missing, env))
    rows = []
    for job in manifest["jobs"]:
        sid = submitted.get(job["id"], "")
        info = queue.get(sid) or ended.get(sid) or {}
        record = read_job_json(campaign_dir, job)
        if record is not None:
            result = str(record.get("state", "?"))
            exit_status = str(record.get("exit_status", ""))
            note = str(record.get("reason") or "")
            check = record.get("transport_check") or {}
            if result == "completed" and check.get("detail"):
                note = f"check {check.get('status')}: {check['detail']}"
        elif sid in queue:
            # squeue's %R: the node list when running, the reason when pending
            where = info.get("reason", "")
            running = info.get("state") == "RUNNING"
            result, exit_status = "-", ""
            note = f"on {where}, {info.get('time', '')}" if running else f"pending: {where}"
        elif info:
            result, exit_status, note = "-", info.get("exit_code", ""), info.get("reason", "")
        else:
            result = "not submitted" if not sid else "unknown"
            exit_status, note = "", ""
        rows.append(JobStatus(
            job=job["id"], tool=job.get("benchmark") or job["tool"],
            transport=job["transport"], placement=job["placement"],
            repetition=int(job["repetition"]), slurm_id=sid,
            slurm_state=info.get("state", "") if info else "", result=result,
            exit_status=exit_status, note=note if note not in ("None", "(null)") else ""))
    return rows


def render_table(rows: list[JobStatus], title: str) -> object:
    """A rich Table (built here so the CLI module stays thin)."""
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in ("job", "tool", "transport", "placement", "slurm id", "slurm state", "result",
                "exit", "note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.job, r.tool, r.transport, r.placement, r.slurm_id, r.slurm_state,
                      r.result, r.exit_status, r.note)
    return table
