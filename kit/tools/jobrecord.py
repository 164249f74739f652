"""Run metadata from the ``job.json`` that the kit's job templates write beside a tool's output.

The probe records its own start/end, hosts, environment and completeness in
``PREFIX.meta.json``; OSU and SkaMPI print none of that. When their output sits in a job
directory written by ``pt2pt plan`` + sbatch/run-local, ``job.json`` there knows it: without
it the first real OSU/SkaMPI campaign had runs with null start/end/hosts/job_id, and a
cancelled job's partial output was recorded as ``complete: true``. Outputs from anywhere else
(no ``job.json``, or one that is unreadable or not ours) keep the parser's defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.tools.parsing import ParsedRun, transport_from_env
from kit.tools.records import JOB_RECORD_SCHEMA, problem, read_record

JOB_JSON = "job.json"


def _inspect(output: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the record describing ``output``, None), or (None, what is wrong with the job.json
    beside it), or (None, None) when there is none or it describes other files.

    A job.json that cannot be read, or whose fields have the wrong types
    (kit.tools.records.JOB_RECORD_SCHEMA), says the run's metadata is unknown: the run is
    marked incomplete rather than trusted (or crashing ingest).
    """
    path = output.parent / JOB_JSON
    if not path.exists():
        return None, None
    record, why = read_record(path)
    if why is not None:
        return None, f"{path} {why}"
    if not isinstance(record, dict) or not isinstance(record.get("plan"), dict):
        return None, None  # not a record of the kit's job templates
    outputs = record["plan"].get("outputs")
    # Only a job.json that names this very file as one of its outputs describes this run.
    if not isinstance(outputs, list) or output.name not in outputs:
        return None, None
    bad = problem(record, JOB_RECORD_SCHEMA)
    if bad is not None:
        return None, f"{path}: {bad}"
    return record, None


def _load(output: Path) -> dict[str, Any] | None:
    return _inspect(output)[0]


def apply_job_record(run: ParsedRun, output: Path) -> ParsedRun:
    """Fill ``run``'s start, end, job id, hosts, env and completeness from ``job.json``."""
    record, why = _inspect(output)
    if why is not None:
        run.mark_incomplete(f"job record invalid: {why}",
                            f"{output.name}: the job record {why}; its metadata is not used "
                            "and the run is marked incomplete (fix or remove that job.json)")
    if record is None:
        return run
    plan = record["plan"]

    def text(key: str) -> str | None:
        value = record.get(key)
        return value if isinstance(value, str) and value else None

    run.start = run.start or text("start")
    run.end = run.end or text("end")
    run.job_id = run.job_id or text("slurm_job_id")
    host = text("host")
    # job.json knows the batch host only: that is every rank's host for one-node placements.
    if not run.hosts and host and plan.get("nodes") == 1:
        run.hosts = [host] * int(plan.get("ntasks_per_node") or 1)
    pair = plan.get("host_pair")
    # A planned pair is forced on Slurm (--nodelist): the ranks ran there.
    if not run.hosts and isinstance(pair, list) and len(pair) == 2 \
            and all(isinstance(h, str) and h for h in pair):
        run.hosts = [str(h) for h in pair]
    placement = plan.get("placement")
    if run.placement is None and isinstance(placement, str) and placement:
        run.placement = placement
    env = plan.get("transport_env")
    if not run.env and isinstance(env, dict):
        run.env = {str(k): str(v) for k, v in env.items()}
    if run.transport_hint is None and run.env:
        run.transport_hint = transport_from_env(run.env, run.hosts)
    conditions = record.get("conditions")
    if run.conditions is None and isinstance(conditions, dict):
        run.conditions = conditions
    binding = record.get("binding")
    if run.binding is None and isinstance(binding, dict) and isinstance(binding.get("policy"),
                                                                        str):
        run.binding = describe_binding(binding)
    state = record.get("state")
    if isinstance(state, str) and state != "completed":
        run.mark_incomplete(f"job state {state}", f"{output.name}: the job ended as "
                            f"{state!r}; run marked incomplete")
    return run


def job_plan(output: Path) -> dict[str, Any] | None:
    """The ``plan`` of the valid ``job.json`` that names ``output`` (None without one)."""
    record = _load(output)
    return dict(record["plan"]) if record is not None else None


def describe_binding(binding: dict[str, Any]) -> str:
    """``cores 0,1`` / ``cpus 2,3`` / ``none``: the policy and the CPUs the ranks were pinned
    to, in rank order."""
    cpus = binding.get("cpus")
    pinned = ([str(cpus[k]) for k in sorted(cpus, key=lambda r: int(r) if str(r).isdigit()
                                              else 0)] if isinstance(cpus, dict) else [])
    return " ".join([str(binding["policy"]).split(":")[0], ",".join(pinned)]).strip()


def job_command(output: Path) -> list[str] | None:
    """The tool command line ``job.json`` planned for ``output`` (binary + options), if any.

    Untrusted like the record itself: anything but a list of strings counts as absent.
    """
    record = _load(output)
    if record is None:
        return None
    command = record["plan"].get("command")
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        return None
    return list(command)
