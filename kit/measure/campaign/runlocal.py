"""``pt2pt run-local``: run the planned job scripts with bash on this machine, no Slurm.

The very scripts that sbatch would run are executed in the manifest's (shuffled) order
with ``PT2PT_RUN_LOCAL=1``, which makes them launch with ``mpirun -n 2`` instead of the
Slurm launcher; everything else (transport forcing, checks, job.json) is identical, so
a local run and a Slurm run of one campaign give the same series. Jobs that already
ended as completed or skipped are not run again (re-running a campaign resumes it).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import CampaignError
from kit.measure.campaign.manifest import read_job_json, read_manifest

_DONE_STATES = ("completed", "skipped")


@dataclass
class LocalResult:
    job: str
    state: str
    exit_status: int | None
    reason: str = ""
    reused: bool = False


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    # A Slurm allocation around run-local must not make the scripts think they are jobs.
    for key in [k for k in env if k.startswith("SLURM_")]:
        del env[key]
    env["PT2PT_RUN_LOCAL"] = "1"
    if extra:
        env.update(extra)
    return env


#: Seconds a job script has, after SIGTERM, to stop its tool and write its record.
STOP_GRACE_S = 30.0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the job script (it records "cancelled" and stops the tool, as under Slurm's
    scancel), then SIGKILL it if it has not ended within STOP_GRACE_S."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def run_local(campaign_dir: Path, *, env: Mapping[str, str] | None = None,
              on_start: Callable[[int, int, str], None] | None = None,
              on_end: Callable[[LocalResult], None] | None = None,
              rerun: bool = False) -> list[LocalResult]:
    campaign_dir = campaign_dir.resolve()
    manifest = read_manifest(campaign_dir)
    jobs = manifest["jobs"]
    for job in jobs:  # a folder deleted since the plan: say so before anything runs
        script = campaign_dir / job.get("script", f"{job['dir']}/job.sbatch")
        if not (campaign_dir / job["dir"]).is_dir() or not script.is_file():
            raise CampaignError(f"job {job['id']}'s folder or script is missing "
                                f"({script.relative_to(campaign_dir)})",
                                where=str(campaign_dir),
                                hint="plan the campaign again (pt2pt plan CAMPAIGN.yaml -o "
                                     "DIR --force keeps the results already there)")
    results: list[LocalResult] = []
    run_env = _env(env)
    for index, job in enumerate(jobs):
        if on_start:
            on_start(index, len(jobs), job["id"])
        record = read_job_json(campaign_dir, job)
        if record and record.get("state") in _DONE_STATES and not rerun:
            result = LocalResult(job["id"], str(record["state"]), record.get("exit_status"),
                                 str(record.get("reason") or ""), reused=True)
        else:
            job_dir = campaign_dir / job["dir"]
            with (job_dir / "run-local.log").open("w", encoding="utf-8") as log:
                proc = subprocess.Popen(["bash", str(campaign_dir / job["script"])],
                                        cwd=job_dir, env=run_env, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT)
                try:
                    proc.wait()
                except BaseException:
                    _stop(proc)  # run-local stopped: the job ends as Slurm would end it
                    raise
            record = read_job_json(campaign_dir, job) or {}
            result = LocalResult(job["id"], str(record.get("state", "failed")),
                                 proc.returncode,
                                 str(record.get("reason") or
                                     ("" if record else "the script wrote no job.json; "
                                      f"see {job_dir / 'run-local.log'}")))
        results.append(result)
        if on_end:
            on_end(result)
    return results


def run_local_with_progress(campaign_dir: Path, *, rerun: bool = False,
                            env: Mapping[str, str] | None = None) -> list[LocalResult]:
    """run_local with a progress bar on a terminal's stderr and one line per job.

    Not a terminal: the job lines only (a CI log stays readable). ``pt2pt --quiet``: nothing.
    """
    from kit.core.progress import bar

    with bar("run-local", transient=False) as progress:
        def start(index: int, total: int, job: str) -> None:
            progress.update(total=total, completed=index, description=job)

        def end(result: LocalResult) -> None:
            progress.update(advance=1)
            note = f" ({result.reason})" if result.reason else ""
            again = " [already done]" if result.reused else ""
            progress.print(f"{result.job}: {result.state}{again}{note}")

        return run_local(campaign_dir, env=env, on_start=start, on_end=end, rerun=rerun)
