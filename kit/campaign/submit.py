"""``pt2pt submit``: hand each planned job to sbatch, in the planned (shuffled) order.

Slurm job ids are recorded in ``submitted.json`` after every single submission, so an
sbatch failure half-way keeps the ids of what was already queued, and submitting again
only sends the jobs that are not recorded yet.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.campaign import slurm
from kit.campaign.fileio import write_atomic
from kit.campaign.manifest import SUBMITTED_NAME, read_manifest, read_submitted
from kit.errors import UserError


@dataclass
class Submission:
    job: str
    slurm_id: str | None
    command: list[str]
    note: str = ""


def submit(campaign_dir: Path, *, dry_run: bool = False,
           env: Mapping[str, str] | None = None) -> list[Submission]:
    campaign_dir = campaign_dir.resolve()
    manifest = read_manifest(campaign_dir)
    recorded = read_submitted(campaign_dir)
    done: list[Submission] = []
    for job in manifest["jobs"]:
        script = campaign_dir / job["script"]
        command = ["sbatch", "--parsable", str(script)]
        if job["id"] in recorded:
            done.append(Submission(job["id"], recorded[job["id"]], command,
                                   "already submitted"))
            continue
        if dry_run:
            done.append(Submission(job["id"], None, command, "dry run"))
            continue
        proc = slurm.run(command, env)
        if proc.returncode != 0:
            raise UserError(
                f"sbatch refused job {job['id']}: {proc.stderr.strip() or proc.stdout.strip()}",
                where=str(script),
                hint=f"{len(recorded)} job id(s) are recorded in {SUBMITTED_NAME}; fix the "
                     "Slurm settings in the campaign (partition, account, qos, time) and "
                     "plan again, or submit again to send the remaining jobs")
        slurm_id = proc.stdout.strip().split(";")[0]
        recorded[job["id"]] = slurm_id
        write_atomic(campaign_dir / SUBMITTED_NAME,
               json.dumps({"jobs": recorded}, indent=2, sort_keys=True) + "\n")
        done.append(Submission(job["id"], slurm_id, command))
    return done


def format_submissions(subs: list[Submission]) -> str:
    lines = []
    for s in subs:
        if s.note == "dry run":
            lines.append(shlex.join(s.command))
        else:
            note = f" ({s.note})" if s.note else ""
            lines.append(f"{s.job}: Slurm job {s.slurm_id}{note}")
    return "\n".join(lines)
