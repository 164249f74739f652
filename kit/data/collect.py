"""``pt2pt collect``: ingest what the jobs wrote, and say what is missing and why.

Each job's outputs are ingested with the campaign name, transport and tool from the
manifest (not guessed from file names). Runs that were cancelled or failed after writing
samples are ingested too: the probe flushed whole blocks before it was killed, and its
meta says ``complete: false``, which ingest carries into the runs table. Runs whose
transport check failed are *not* ingested: their samples are not what they claim to be.
The outcome per job is written to ``collect.json`` in the campaign directory.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kit import tools
from kit.core.errors import UserError
from kit.core.liveness import file_locked, pid_alive, this_host
from kit.measure.campaign import slurm
from kit.measure.campaign.fileio import dump_json, write_atomic
from kit.measure.campaign.jobrecord import COUNTERS
from kit.measure.campaign.manifest import output_paths, read_job_json, read_manifest, read_submitted

COLLECT_NAME = "collect.json"
_PARTIAL_STATES = ("cancelled", "timeout", "failed", "unreadable")


@dataclass
class JobOutcome:
    job: str
    outcome: str  # ingested | partial | skipped | failed | missing | running | check-failed
    detail: str = ""
    run_ids: list[str] = field(default_factory=list)
    rows_added: int = 0
    complete: bool | None = None


@dataclass
class CollectReport:
    campaign: str
    dataset: str
    jobs: list[JobOutcome]

    def by_outcome(self, outcome: str) -> list[JobOutcome]:
        return [j for j in self.jobs if j.outcome == outcome]

    @property
    def ok(self) -> bool:
        return not any(j.outcome in ("failed", "missing", "check-failed") for j in self.jobs)


def _has_samples(paths: list[Path]) -> bool:
    """True if an output holds more than a header line."""
    for p in paths:
        try:
            with p.open("rb") as fh:
                fh.readline()
                if fh.readline():
                    return True
        except OSError:
            continue
    return False


def _ingest(job: dict[str, Any], paths: list[Path], dataset: Path, campaign: str,
            outcome: JobOutcome) -> None:
    from kit.data.ingest import ingest

    report = ingest([p for p in paths if p.exists()], dataset, campaign=campaign,
                    transport=job["transport"], tool=job["tool"],
                    placement=job.get("placement"))
    outcome.run_ids = list(report.run_ids)
    outcome.rows_added = report.rows_added
    already = [why for _p, why in report.files_skipped if "already ingested" in why]
    if report.running and not report.run_ids:
        # the job's record says it ended, but a rank of it still writes (a probe that
        # outlived its launcher): nothing taken, said as such rather than as 'partial'
        outcome.outcome, outcome.complete = "running", None
        outcome.detail = "; ".join(why for p, why in report.files_skipped
                                   if p in report.running)
    elif report.files_failed:
        outcome.outcome = "failed"
        outcome.detail = "; ".join(msg for _p, msg in report.files_failed)
    elif already and not report.run_ids:
        outcome.detail = (outcome.detail + "; " if outcome.detail else "") + \
            "already in the dataset"


def _running(campaign_dir: Path, env: Mapping[str, str] | None) -> set[str]:
    submitted = read_submitted(campaign_dir)
    if not submitted:
        return set()
    try:
        queue = slurm.squeue_states(list(submitted.values()), env)
    except (UserError, OSError, subprocess.SubprocessError):
        # no Slurm here (e.g. a directory copied off the cluster): nothing is running
        return set()
    return {job for job, sid in submitted.items() if sid in queue}


def _alive_here(job_dir: Path, paths: list[Path]) -> str | None:
    """Why the job is still running on this machine (run-local, or a job script without
    Slurm), or None: its script's process is alive, or its output is locked by the probe."""
    try:
        snap = json.loads((job_dir / COUNTERS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        snap = {}
    if isinstance(snap, dict) and this_host(snap.get("host")) and pid_alive(
            snap.get("pid"), started=snap.get("pid_start")):
        return f"still running on this host (job script, process {snap.get('pid')})"
    if any(file_locked(p) for p in paths if p.exists()):
        return "its output is still being written (locked by the probe)"
    return None


def _collected_by(job: dict[str, Any]) -> str | None:
    """The command that gathers the job's outputs when its tool's are not samples."""
    name = str(job.get("tool"))
    return tools.get(name).collected_by if name in tools.names() else None


def collect(campaign_dir: Path, dataset: Path, *,
            env: Mapping[str, str] | None = None) -> CollectReport:
    campaign_dir = campaign_dir.resolve()
    manifest = read_manifest(campaign_dir)
    name = manifest["campaign"]["name"]
    running = _running(campaign_dir, env)
    outcomes: list[JobOutcome] = []
    for job in manifest["jobs"]:
        record = read_job_json(campaign_dir, job)
        paths = output_paths(campaign_dir, job)
        out = JobOutcome(job=job["id"], outcome="missing")
        state = record.get("state") if record else None
        reason = str(record.get("reason") or "") if record else ""
        other = _collected_by(job)
        if other and state in ("completed", *_PARTIAL_STATES):
            out.outcome, out.detail = "skipped", f"{state}: not samples; gather with {other}"
        elif state == "completed":
            out.outcome, out.complete = "ingested", True
            _ingest(job, paths, dataset, name, out)
        elif state == "skipped":
            out.outcome, out.detail = "skipped", reason
        elif state == "transport-check-failed":
            out.outcome, out.detail = "check-failed", reason + " (not ingested)"
        elif state is None and (busy := _alive_here(campaign_dir / job["dir"], paths)):
            out.outcome, out.detail = "running", f"{busy}; collect it when it has ended"
        elif state in _PARTIAL_STATES or (state is None and job["id"] not in running):
            why = reason or ("the job ended without writing job.json (killed, or never ran)"
                             if state is None else state)
            if _has_samples(paths):
                out.outcome, out.complete = "partial", False
                out.detail = f"{state or 'ended'}: {why}; samples written so far ingested, " \
                             "run marked incomplete"
                _ingest(job, paths, dataset, name, out)
            else:
                out.outcome = "failed" if state else "missing"
                out.detail = why if state else "no job.json and no output"
        elif state is None:
            out.outcome, out.detail = "running", "still queued or running in Slurm"
        else:
            out.outcome, out.detail = "failed", f"unknown state {state!r}"
        outcomes.append(out)
    report = CollectReport(campaign=name, dataset=str(dataset), jobs=outcomes)
    write_atomic(campaign_dir / COLLECT_NAME,
                 dump_json({"campaign": name, "dataset": str(Path(dataset).resolve()),
                            "jobs": [asdict(o) for o in outcomes]}))
    return report


def format_report(report: CollectReport) -> str:
    counts: dict[str, int] = {}
    for j in report.jobs:
        counts[j.outcome] = counts.get(j.outcome, 0) + 1
    lines = [f"campaign {report.campaign} -> {report.dataset}: " +
             ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))]
    for j in report.jobs:
        if j.outcome != "ingested" or j.detail:
            lines.append(f"  {j.outcome:<12} {j.job}: {j.detail}")
    return "\n".join(lines)
