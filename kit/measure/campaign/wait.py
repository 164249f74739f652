"""Submit a planned campaign through Slurm and wait until every job of it has ended.

What an adaptive campaign's round needs (the next round is chosen from this one's samples):
``pt2pt submit`` (arrays already recorded in ``submitted.json`` are not submitted again, so
an interrupted wait resumes by calling this again), then ``squeue`` until none of the jobs
is queued or running, then each job's outcome as ``pt2pt status`` sees it (its own
``job.json`` first). The result is the record run-local gives, so a caller treats both alike.
Called again on a campaign whose jobs have all ended, some not completed (nor skipped), it
submits those jobs' arrays again, as run-local runs an unfinished job again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kit.core.progress import bar
from kit.measure.campaign.manifest import read_manifest, read_submitted
from kit.measure.campaign.runlocal import LocalResult
from kit.measure.campaign.slurm import Queue, wait_gone
from kit.measure.campaign.status import JobStatus, job_statuses
from kit.measure.campaign.submit import forget, format_submissions, submit

#: Seconds between two squeue calls (one call per array, cheap for the controller).
POLL_S = 2.0
#: Seconds a controller may stay silent (stopped, or stalled) before the wait gives up; the
#: jobs go on, and the same command waits for them again.
UNREACHABLE_S = 600.0


def _exit(text: str) -> int | None:
    head = text.split(":", 1)[0].strip()
    return int(head) if head.lstrip("-").isdigit() else None


_DONE = ("completed", "skipped")


def _forget_failed(campaign_dir: Path, env: Mapping[str, str] | None) -> None:
    if not read_submitted(campaign_dir):
        return
    rows = job_statuses(campaign_dir, env=env)
    if any(r.slurm_source == "squeue" for r in rows):
        return  # still queued or running: wait for them
    bad = {r.job for r in rows if r.slurm_id and r.result not in _DONE}
    groups = {j["group"] for j in read_manifest(campaign_dir)["jobs"] if j["id"] in bad}
    if groups:
        forget(campaign_dir, groups)


def submit_and_wait(campaign_dir: Path, *, env: Mapping[str, str] | None = None,
                    poll: float = POLL_S) -> list[LocalResult]:
    """Submit ``campaign_dir`` (what is not submitted yet), wait for its jobs, and return
    how each ended (``state``: job.json's state, ``-`` or ``unknown`` when it wrote none)."""
    campaign_dir = campaign_dir.resolve()
    _forget_failed(campaign_dir, env)
    subs = submit(campaign_dir, env=env)
    ids = list(read_submitted(campaign_dir).values())
    label = f"slurm {campaign_dir.name}"
    rows: list[JobStatus] = []

    def ended() -> bool:
        # status's own squeue must agree: a job requeued meanwhile is waited for too
        rows[:] = job_statuses(campaign_dir, env=env)
        return not any(r.slurm_source == "squeue" for r in rows)

    with bar(label, total=len(ids), transient=False) as shown:
        shown.print(format_submissions(subs))

        def show(queued: Queue | None) -> None:
            if queued is None:
                shown.update(description="the controller does not answer; asking again")
                return
            running = sum(1 for v in queued.values() if v["state"] == "RUNNING")
            shown.update(completed=len(ids) - sum(1 for i in ids if i in queued),
                         description=f"{running} running, {len(queued) - running} queued")

        # no deadline: a round runs as long as its jobs; only a silent controller ends it
        wait_gone(ids, env, timeout=None, poll=poll, silence=UNREACHABLE_S, until=ended,
                  on_poll=show)
    return [LocalResult(job=r.job, state=r.result, exit_status=_exit(r.exit_status),
                        reason=r.note) for r in rows]
