"""``pt2pt submit``: one ``sbatch --array`` per (tool, transport, placement) group.

A campaign of 10,000 configurations is a handful of array jobs, not 10,000 submissions.
Slurm cannot give array tasks different node lists at submission, so an array whose tasks
are pinned to node pairs is submitted held (``--hold``), each task's ``ReqNodeList`` is set
with ``scontrol update JobId=<array>_<task>``, and the array is released. Array ids are
recorded in ``submitted.json`` after every sbatch (with ``released`` once pinned), so an
interrupted submission resumes: arrays already recorded are not submitted again, an
unreleased one is pinned again (idempotent) and released.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.core.errors import UserError
from kit.measure.campaign import slurm
from kit.measure.campaign.fileio import write_atomic
from kit.measure.campaign.manifest import SUBMITTED_NAME, read_manifest, read_submission
from kit.measure.campaign.pairs import expand_hostlist


@dataclass
class Submission:
    group: str
    slurm_id: str | None
    command: list[str]
    note: str = ""
    tasks: int = 0
    #: the scontrol commands that pin tasks to their node pairs, and the release
    pin_commands: list[list[str]] = field(default_factory=list)


def _pin_commands(array_id: str, nodelists: list[str | None]) -> list[list[str]]:
    cmds = [["scontrol", "update", f"JobId={array_id}_{i}", f"ReqNodeList={nl}"]
            for i, nl in enumerate(nodelists) if nl]
    return [*cmds, ["scontrol", "release", array_id]] if cmds else []


def _save(campaign_dir: Path, arrays: dict[str, Any], jobs: dict[str, str]) -> None:
    write_atomic(campaign_dir / SUBMITTED_NAME,
                 json.dumps({"arrays": arrays, "jobs": jobs}, indent=2, sort_keys=True) + "\n")


def _run_checked(command: list[str], env: Mapping[str, str] | None, what: str,
                 where: str, recorded: int) -> str:
    proc = slurm.run(command, env)
    if proc.returncode != 0:
        raise UserError(
            f"{what}: {proc.stderr.strip() or proc.stdout.strip()}", where=where,
            hint=f"{recorded} array job(s) are recorded in {SUBMITTED_NAME}; fix the Slurm "
                 "settings in the campaign (partition, account, qos, time, pairs) and plan "
                 "again, or submit again to resume")
    return proc.stdout


def node_cpus(partition: str | None, env: Mapping[str, str] | None) -> dict[str, int]:
    """CPUs of each node (of ``partition``) from ``sinfo``; empty when sinfo cannot say."""
    argv = ["sinfo", "-h", "-N", "-o", "%N %c"] + (["-p", partition] if partition else [])
    try:
        proc = slurm.run(argv, env)
    except (UserError, subprocess.SubprocessError):  # no sinfo here: sbatch will tell
        return {}
    cpus: dict[str, int] = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            cpus[parts[0]] = int(parts[1])
    return cpus


def check_fits_nodes(manifest: dict[str, Any], cpus: dict[str, int]) -> None:
    """Refuse an array whose tasks need more ranks per node than its nodes have CPUs.

    Slurm accepts such a job and keeps it pending for ever (BadConstraints): K concurrent
    pairs need K ranks per node across nodes and 2K on one node (``concurrent_pairs``).
    """
    if not cpus:
        return
    source = manifest.get("campaign", {}).get("source") or "the campaign file"
    for group, array in manifest.get("arrays", {}).items():
        need = int(array.get("ntasks_per_node") or 0)
        pinned = {n for nl in array.get("nodelists", []) if nl
                  for n in expand_hostlist(nl)}
        nodes = [n for n in pinned if n in cpus] if pinned else list(cpus)
        if not nodes or need <= 1:
            continue
        short = [n for n in nodes if cpus[n] < need] if pinned else (
            nodes if max(cpus[n] for n in nodes) < need else [])
        if short:
            have = ", ".join(f"{n}: {cpus[n]}" for n in sorted(short)[:4])
            raise UserError(
                f"array {group} needs {need} ranks per node, more than the CPUs of "
                f"{'its nodes' if pinned else 'any node of the partition'} ({have}); Slurm "
                "would accept it and keep it pending for ever",
                where=f"{source}: concurrent_pairs",
                hint="lower concurrent_pairs (K pairs need K ranks per node across nodes, 2K "
                     "on one node), or choose nodes with more CPUs (pairs, partition), then "
                     "plan again")


def submit(campaign_dir: Path, *, dry_run: bool = False,
           env: Mapping[str, str] | None = None) -> list[Submission]:
    campaign_dir = campaign_dir.resolve()
    manifest = read_manifest(campaign_dir)
    arrays, jobs = read_submission(campaign_dir)
    if not dry_run:
        check_fits_nodes(manifest, node_cpus(manifest.get("campaign", {}).get("partition"), env))
    done: list[Submission] = []
    for group, array in manifest.get("arrays", {}).items():
        script = campaign_dir / array["script"]
        pinned = any(array["nodelists"])
        command = ["sbatch", "--parsable", *(["--hold"] if pinned else []), str(script)]
        have = arrays.get(group)
        if have and have.get("released", True):
            done.append(Submission(group, have["id"], command, "already submitted",
                                   len(array["tasks"])))
            continue
        if dry_run:
            done.append(Submission(group, None, command, "dry run", len(array["tasks"]),
                                   _pin_commands("ARRAY", array["nodelists"])))
            continue
        if have:
            array_id = have["id"]
        else:
            out = _run_checked(command, env, f"sbatch refused array {group}", str(script),
                               len(arrays))
            array_id = out.strip().split(";")[0]
            arrays[group] = {"id": array_id, "released": not pinned}
            jobs.update({task: f"{array_id}_{i}" for i, task in enumerate(array["tasks"])})
            _save(campaign_dir, arrays, jobs)
        pins = _pin_commands(array_id, array["nodelists"])
        for cmd in pins:
            _run_checked(cmd, env, f"cannot pin array {group} ({' '.join(cmd[1:])})",
                         str(script), len(arrays))
        if pins:
            arrays[group]["released"] = True
            _save(campaign_dir, arrays, jobs)
        done.append(Submission(group, array_id, command, "", len(array["tasks"]), pins))
    return done


def forget(campaign_dir: Path, groups: set[str]) -> None:
    """Drop the records of ``groups``' arrays (ended, some task failed), so that the next
    :func:`submit` sends them again; the jobs move their earlier outputs to previous/."""
    arrays, jobs = read_submission(campaign_dir)
    manifest = read_manifest(campaign_dir)
    tasks = {task for g in groups for task in manifest["arrays"].get(g, {}).get("tasks", [])}
    _save(campaign_dir, {g: a for g, a in arrays.items() if g not in groups},
          {j: sid for j, sid in jobs.items() if j not in tasks})


def format_submissions(subs: list[Submission]) -> str:
    lines = []
    for s in subs:
        if s.note == "dry run":
            lines.append(shlex.join(s.command))
            lines.extend("  " + shlex.join(c) for c in s.pin_commands)
        else:
            note = f" ({s.note})" if s.note else ""
            pins = f", {len(s.pin_commands) - 1} task(s) pinned" if s.pin_commands else ""
            lines.append(f"{s.group}: Slurm array {s.slurm_id} ({s.tasks} tasks{pins}){note}")
    return "\n".join(lines)
