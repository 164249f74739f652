"""``pt2pt status``: one table row per planned job, from every source that knows something.

Slurm's view comes from ``squeue`` (queued/running), then ``sacct`` for ended jobs when the
cluster keeps accounting (the local cluster can: ``local_slurm_accounting``), then
``scontrol show job`` (ended jobs, for MinJobAge seconds) for what sacct does not know. The
job's own ``job.json`` says what actually happened (completed, skipped and why, check result).
Array tasks are ``ARRAY_TASK`` everywhere (squeue -r, scontrol per array, sacct's JobID).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.measure.campaign import slurm
from kit.measure.campaign.manifest import read_job_json, read_manifest, read_submitted


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
    host_pair: str = ""
    #: which Slurm command knew the state: squeue, sacct or scontrol
    slurm_source: str = ""


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
        gone = [sid for sid in ids if sid not in queue]
        # sacct is the record that outlives MinJobAge; scontrol covers clusters without it
        if gone and slurm.accounting_enabled(env):
            ended.update({k: v for k, v in slurm.sacct_states(gone, env).items()
                          if k in gone})
        rest = [sid for sid in gone if sid not in ended]
        if rest:
            known = slurm.scontrol_states(rest, env)
            ended.update({sid: known[sid] for sid in rest if sid in known})
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
            exit_status=exit_status, note=note if note not in ("None", "(null)") else "",
            host_pair=",".join(job.get("host_pair") or []),
            slurm_source=info.get("source", "") if info else ""))
    return rows


def render_table(rows: list[JobStatus], title: str) -> object:
    """A rich Table (built here so the CLI module stays thin)."""
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in ("job", "tool", "transport", "placement", "slurm id", "slurm state", "result",
                "exit", "note", "pair"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.job, r.tool, r.transport, r.placement, r.slurm_id, r.slurm_state,
                      r.result, r.exit_status, r.note, r.host_pair)
    return table
