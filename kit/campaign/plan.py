"""``pt2pt plan``: expand a campaign into one rendered job per configuration + a manifest.

A configuration is (tool [benchmark], transport, placement, repetition). The job order is
shuffled with the campaign seed, so that drift over the campaign's duration (other users,
thermal state) does not line up with one transport or tool; the index in each job's id is
its position in that order. Planning is a pure function of its inputs: the same campaign,
transport table, binaries and output directory give byte-identical files (no time stamps).
"""

from __future__ import annotations

import hashlib
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.campaign import binaries
from kit.campaign.fileio import dump_json, write_atomic
from kit.campaign.manifest import MANIFEST_NAME, has_results, read_manifest
from kit.campaign.render import render, render_text_template
from kit.campaign.schema import Campaign, ToolSpec, load_campaign
from kit.campaign.transports import TransportEntry, TransportTable, load_table
from kit.errors import CampaignError

MANIFEST_FORMAT = 1
_PLACEMENT_SHAPE = {"intra-node": (1, 2), "inter-node": (2, 1)}
_PLACEMENT_SHORT = {"intra-node": "intra", "inter-node": "inter"}


@dataclass
class PlannedJob:
    """One job before it is written: identity, how to render it, what it will produce."""

    key: str
    tool: str
    benchmark: str | None
    transport: str
    placement: str
    repetition: int
    template: str
    command: list[str]
    outputs: list[str]
    stdout_name: str = "stdout.txt"
    meta_file: str | None = None
    extra_files: dict[str, str] = field(default_factory=dict)
    spec_index: int = 0
    id: str = ""
    seed: int = 0


def job_seed(campaign_seed: int, key: str) -> int:
    """A per-job seed derived from the campaign seed and the job's identity (not its order)."""
    digest = hashlib.sha256(f"{campaign_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _probe_command(spec: ToolSpec, probe: Path, seed: int, job_dir: Path) -> list[str]:
    o = spec.options
    cmd = [str(probe), "--op", ",".join(o["ops"]), "--sizes", o["sizes"],
           "--samples", str(o["samples"]), "--seed", str(seed), "--warmup", str(o["warmup"]),
           "--timer", o["timer"], "--output", str(job_dir / "probe")]
    if o["max_seconds"]:
        cmd += ["--max-seconds", str(o["max_seconds"])]
    return cmd + list(o["extra_args"])


def _not_planned(spec: ToolSpec, what: str, campaign: Campaign) -> dict[str, Any]:
    return {"tool": spec.tool, "what": what, "line": spec.line,
            "reason": f"{what} not found in the Spack view "
                      f"({binaries.spack_view(campaign.spack_view)}) or on PATH"}


def _missing(spec: ToolSpec, what: str, campaign: Campaign, hint: str) -> CampaignError:
    src = campaign.source or "campaign"
    return CampaignError(f"{what} not found in the Spack view "
                         f"({binaries.spack_view(campaign.spack_view)}) or on PATH",
                         where=f"{src}:{spec.line} (tools)", hint=hint)


def _locate(spec: ToolSpec, found: Path | None, label: str, what: str, hint: str,
            campaign: Campaign, not_planned: list[dict[str, Any]]) -> Path | None:
    """The binary; or None after listing an optional tool as not planned; else an error."""
    if found is not None:
        return found
    if spec.optional:
        not_planned.append(_not_planned(spec, label, campaign))
        return None
    raise _missing(spec, what, campaign, hint)


def expand(campaign: Campaign, out_dir: Path) -> tuple[list[PlannedJob], list[dict[str, Any]]]:
    """All jobs of the campaign in shuffled order, and the tools left out (with reasons)."""
    view = binaries.spack_view(campaign.spack_view)
    jobs: list[PlannedJob] = []
    not_planned: list[dict[str, Any]] = []
    jobs_dir = out_dir / "jobs"
    tool_names = [s.tool for s in campaign.tools]
    for spec_index, spec in enumerate(campaign.tools):
        variants: list[tuple[str | None, Path]] = []
        if spec.tool == "probe":
            path = _locate(spec, binaries.find_probe(), "pt2pt-probe", "the probe (pt2pt-probe)",
                           "build it with 'make -C kit/probe' or set PT2PT_PROBE",
                           campaign, not_planned)
            variants.extend([(None, path)] if path else [])
        elif spec.tool == "osu":
            for bench in spec.options["benchmarks"]:
                path = _locate(spec, binaries.find_osu(bench, view), bench,
                               f"OSU benchmark {bench}",
                               "install the Spack environment (spack.yaml) or mark the "
                               "tool 'optional: true'", campaign, not_planned)
                variants.extend([(bench, path)] if path else [])
        else:
            path = _locate(spec, binaries.find_skampi(view), "skampi", "SkaMPI (skampi)",
                           "install the Spack environment or mark the tool 'optional: true'",
                           campaign, not_planned)
            variants.extend([(None, path)] if path else [])
        for bench, binary in variants:
            for transport in campaign.transports:
                for placement in campaign.transport_placements.get(transport,
                                                                   campaign.placements):
                    for rep in range(1, campaign.repetitions + 1):
                        name = bench or spec.tool
                        if tool_names.count(spec.tool) > 1:  # two entries of one tool
                            name += str(spec_index)
                        key = f"{name}-{transport}-{_PLACEMENT_SHORT[placement]}-r{rep}"
                        job = _job(spec, bench, binary, transport, placement, rep, key)
                        job.spec_index = spec_index
                        jobs.append(job)
    rng = random.Random(campaign.seed)
    rng.shuffle(jobs)
    width = max(3, len(str(len(jobs))))
    for index, job in enumerate(jobs):
        job.id = f"{index:0{width}d}-{job.key}"
        job.seed = job_seed(campaign.seed, job.key)
        job_dir = jobs_dir / job.id
        if job.tool == "probe":
            job.command = _probe_command(_spec_of(campaign, job), Path(job.command[0]),
                                         job.seed, job_dir)
    return jobs, not_planned


def _spec_of(campaign: Campaign, job: PlannedJob) -> ToolSpec:
    return campaign.tools[job.spec_index]


def _job(spec: ToolSpec, bench: str | None, binary: Path, transport: str, placement: str,
         rep: int, key: str) -> PlannedJob:
    common = {"key": key, "tool": spec.tool, "benchmark": bench, "transport": transport,
              "placement": placement, "repetition": rep}
    if spec.tool == "probe":
        return PlannedJob(**common, template="probe.sbatch.j2", command=[str(binary)],
                          outputs=["probe.samples.csv"], meta_file="probe.meta.json")
    if spec.tool == "osu":
        out = f"{bench}.txt"
        return PlannedJob(**common, template="osu.sbatch.j2",
                          command=[str(binary), *spec.options["options"]],
                          outputs=[out], stdout_name=out)
    ski = Path(spec.options["ski"])
    text = render_text_template(ski.read_text(encoding="utf-8"), spec.options["params"],
                                str(ski))
    return PlannedJob(**common, template="skampi.sbatch.j2",
                      command=[str(binary), "-i", "input.ski", "-o", "skampi.sko",
                               *spec.options["options"]],
                      outputs=["skampi.sko"], extra_files={"input.ski": text})


def _launch_words(campaign: Campaign, entry: TransportEntry,
                  forced: list[str]) -> tuple[list[str], list[str]]:
    """(launch under Slurm, launch under run-local) for one job."""
    forward: list[str] = []
    if campaign.mpi == "openmpi":
        # mpirun forwards OMPI_* itself; anything else must be named to reach remote ranks.
        for name in [*forced, *campaign.env]:
            if not name.startswith("OMPI_"):
                forward += ["-x", name]
    slurm = list(campaign.launcher.words)
    local = ["mpirun", "-n", "2"]
    if campaign.launcher.command in ("mpirun", "mpiexec"):
        slurm += forward
        local = [*local, *campaign.launcher.args, *forward]
    else:
        local += forward
    return slurm, local


def _context(campaign: Campaign, table: TransportTable, job: PlannedJob,
             job_dir: Path) -> dict[str, Any]:
    entry = table.entry(campaign.mpi, job.transport).for_placement(job.placement)
    forced = list(dict.fromkeys([*entry.env, *(k for o in entry.env_by_major.values()
                                                for k in o)]))
    slurm_launch, local_launch = _launch_words(campaign, entry, forced)
    nodes, per_node = _PLACEMENT_SHAPE[job.placement]
    spec = _spec_of(campaign, job)
    return {
        "job": {"id": job.id, "slurm_name": f"{campaign.name}.{job.id}"[:120],
                "nodes": nodes, "ntasks_per_node": per_node, "placement": job.placement},
        "job_dir": str(job_dir), "campaign_name": campaign.name, "mpi": campaign.mpi,
        "slurm": campaign.slurm, "exits": {"skipped": table.skipped_exit,
                                           "check_failed": table.check_failed_exit},
        "clear_env": table.clear_env.get(campaign.mpi, ()), "transport": entry,
        "forced_vars": forced, "campaign_env": campaign.env,
        "spack_view": str(binaries.spack_view(campaign.spack_view)),
        "slurm_launch": slurm_launch, "local_launch": local_launch, "command": job.command,
        "stdout_name": job.stdout_name, "meta_file": job.meta_file,
        "tool": spec.options, "benchmark": job.benchmark or "",
    }


def _job_record(campaign: Campaign, job: PlannedJob, table: TransportTable) -> dict[str, Any]:
    entry = table.entry(campaign.mpi, job.transport).for_placement(job.placement)
    nodes, per_node = _PLACEMENT_SHAPE[job.placement]
    return {
        "id": job.id, "dir": f"jobs/{job.id}", "script": f"jobs/{job.id}/job.sbatch",
        "tool": job.tool, "benchmark": job.benchmark, "transport": job.transport,
        "placement": job.placement, "nodes": nodes, "ntasks_per_node": per_node,
        "repetition": job.repetition, "seed": job.seed, "mpi": campaign.mpi,
        "command": job.command, "outputs": job.outputs,
        "transport_env": entry.env, "transport_check": entry.check,
        "ops": _spec_of(campaign, job).options.get("ops") if job.tool == "probe" else None,
    }


def _prepare_dir(out_dir: Path, force: bool) -> None:
    """Refuse to overwrite results; clear an earlier plan that never ran."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise CampaignError("exists and is not a directory", where=str(out_dir),
                            hint="choose another output directory with -o")
    manifest = out_dir / MANIFEST_NAME
    if not manifest.is_file():
        if any(out_dir.iterdir()):
            raise CampaignError("the directory is not empty and holds no campaign plan",
                                where=str(out_dir), hint="choose an empty or new directory")
        return
    old = read_manifest(out_dir)
    if has_results(out_dir, old) and not force:
        raise CampaignError("this campaign directory already holds job results",
                            where=str(out_dir),
                            hint="collect them and plan into a new directory, or pass "
                                 "--force to discard the plan (results stay in place)")
    if not force:
        for job in old.get("jobs", []):
            shutil.rmtree(out_dir / job["dir"], ignore_errors=True)


def plan_campaign(campaign_path: Path, out_dir: Path, *, force: bool = False,
                  table: TransportTable | None = None) -> Path:
    """Validate ``campaign_path``, render every job into ``out_dir``; returns the manifest."""
    table = table or load_table()
    campaign = load_campaign(campaign_path, table=table)
    out_dir = out_dir.resolve()
    _prepare_dir(out_dir, force)
    jobs, not_planned = expand(campaign, out_dir)
    if not jobs:
        raise CampaignError("no job could be planned (every tool is missing its binary)",
                            where=str(campaign_path),
                            hint="build the probe or install the Spack environment")
    records = []
    for job in jobs:
        job_dir = out_dir / "jobs" / job.id
        script = render(job.template, _context(campaign, table, job, job_dir))
        record = _job_record(campaign, job, table)
        write_atomic(job_dir / "plan.json", dump_json(record))
        for name, text in sorted(job.extra_files.items()):
            write_atomic(job_dir / name, text)
        write_atomic(job_dir / "job.sbatch", script, 0o755)
        records.append(record)
    source = campaign_path.read_bytes()
    write_atomic(out_dir / "campaign.yaml", source.decode("utf-8"))
    manifest = {
        "format": MANIFEST_FORMAT,
        "campaign": {"name": campaign.name, "mpi": campaign.mpi, "seed": campaign.seed,
                     "repetitions": campaign.repetitions, "description": campaign.description,
                     "transports": list(campaign.transports),
                     "placements": list(campaign.placements),
                     "source": str(campaign.source),
                     "sha256": hashlib.sha256(source).hexdigest()},
        "transport_table": {"path": table.source, "skipped_exit": table.skipped_exit,
                            "check_failed_exit": table.check_failed_exit},
        "jobs": records,
        "not_planned": not_planned,
    }
    path = out_dir / MANIFEST_NAME
    write_atomic(path, dump_json(manifest))
    return path
