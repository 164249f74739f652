"""``pt2pt plan``: expand a campaign into one rendered job per configuration + a manifest.

A configuration is (tool [benchmark], transport, placement, repetition). The job order is
shuffled with the campaign seed, so that drift over the campaign's duration (other users,
thermal state) does not line up with one transport or tool; the index in each job's id is
its position in that order. Planning is a pure function of its inputs: the same campaign,
transport table, binaries and output directory give byte-identical files (no time stamps).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kit import tools
from kit.core.atomicwrite import output_error
from kit.core.errors import CampaignError
from kit.measure.campaign import jobrecord, nodestate, pairplan, pairs
from kit.measure.campaign.fileio import dump_json, write_atomic
from kit.measure.campaign.manifest import MANIFEST_NAME, has_results, read_manifest
from kit.measure.campaign.render import environment
from kit.measure.campaign.schema import Campaign, load_campaign, time_limit_s
from kit.measure.campaign.site import load_site
from kit.measure.campaign.transports import TransportEntry, TransportTable, load_table
from kit.tools import binaries
from kit.tools.base import ToolSpec

MANIFEST_FORMAT = 2
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
    extra_modes: dict[str, int] = field(default_factory=dict)
    spec_index: int = 0
    id: str = ""
    seed: int = 0
    #: (node, node) this job is pinned to; intra-node placements use (n, n); None: Slurm picks
    host_pair: tuple[str, str] | None = None
    #: the job array it belongs to: (tool, transport, placement)
    group: str = ""
    #: concurrent pairs in the probe's contention mode (--pairs K, 2K ranks); 0: plain pair
    k: int = 0


def shape(placement: str, k: int = 0) -> tuple[int, int]:
    """(nodes, tasks per node): K concurrent pairs put K ranks per node across two nodes,
    or all 2K on one node (rank i measures against rank i+K)."""
    nodes, per_node = _PLACEMENT_SHAPE[placement]
    return nodes, per_node * max(k, 1)


def job_shape(campaign: Campaign, job: PlannedJob) -> tuple[int, int]:
    """(nodes, tasks per node) of a planned job: its tool's (app: np ranks), else the
    placement's pair shape."""
    own = tools.get(job.tool).shape(_spec_of(campaign, job), job.placement, job.k)
    return own or shape(job.placement, job.k)


def job_seed(campaign_seed: int, key: str) -> int:
    """A per-job seed derived from the campaign seed and the job's identity (not its order)."""
    digest = hashlib.sha256(f"{campaign_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


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


def _units(placement: str, node_pairs: list[tuple[str, str]] | None
           ) -> list[tuple[str, str] | None]:
    """Where the jobs of one placement run: each pair (inter-node), each node (intra-node)."""
    if not node_pairs:
        return [None]
    if placement == "inter-node":
        return list(node_pairs)
    nodes = list(dict.fromkeys(n for p in node_pairs for n in p))
    return [(n, n) for n in nodes]


def _pair_tag(pair: tuple[str, str] | None) -> str:
    if pair is None:
        return ""
    return f"-{pair[0]}" if pair[0] == pair[1] else f"-{pair[0]}.{pair[1]}"


def expand(campaign: Campaign, out_dir: Path,
           node_pairs: list[tuple[str, str]] | None = None
           ) -> tuple[list[PlannedJob], list[dict[str, Any]]]:
    """All jobs of the campaign in shuffled order, and the tools left out (with reasons)."""
    view = binaries.spack_view(campaign.spack_view)
    jobs: list[PlannedJob] = []
    not_planned: list[dict[str, Any]] = []
    jobs_dir = out_dir / "jobs"
    tool_names = [s.tool for s in campaign.tools]
    for spec_index, spec in enumerate(campaign.tools):
        tool = tools.get(spec.tool)
        variants: list[tuple[str | None, Path]] = []
        for exe in tool.executables(spec, view):
            path = _locate(spec, exe.path, exe.label, exe.what, exe.hint, campaign, not_planned)
            variants.extend([(exe.benchmark, path)] if path else [])
        ks = tool.concurrency(spec)
        for (bench, binary), k in ((v, k) for v in variants for k in ks):
            for transport in campaign.transports:
                for placement in campaign.transport_placements.get(transport,
                                                                   campaign.placements):
                    name = bench or spec.tool
                    if tool_names.count(spec.tool) > 1:  # two entries of one tool
                        name += str(spec_index)
                    if k:
                        name += f"-{tool.variant_tag}{k}"
                    group = f"{name}-{transport}-{_PLACEMENT_SHORT[placement]}"
                    for pair in _units(placement, node_pairs):
                        for rep in range(1, campaign.repetitions + 1):
                            key = f"{group}{_pair_tag(pair)}-r{rep}"
                            job = _job(spec, bench, binary, transport, placement, rep, key)
                            job.spec_index, job.host_pair, job.group = spec_index, pair, group
                            job.k = k
                            jobs.append(job)
    rng = random.Random(campaign.seed)
    rng.shuffle(jobs)
    if node_pairs:
        jobs = _by_rounds(jobs, campaign)
    width = max(3, len(str(len(jobs))))
    for index, job in enumerate(jobs):
        job.id = f"{index:0{width}d}-{job.key}"
        job.seed = job_seed(campaign.seed, job.key)
        job_dir = jobs_dir / job.id
        job.command = tools.get(job.tool).command(_spec_of(campaign, job), job.command,
                                                  seed=job.seed, job_dir=job_dir, k=job.k)
    return jobs, not_planned


def _by_rounds(jobs: list[PlannedJob], campaign: Campaign) -> list[PlannedJob]:
    """Pairs' jobs round by round (kit.measure.campaign.pairplan.visit_order: repetition r
    of every pair before r + 1, each round disjoint matchings in a random order); other
    jobs keep their shuffled place, spread over the same span. Stable: ties stay shuffled."""
    def link(job: PlannedJob) -> tuple[str, str] | None:
        if not job.host_pair or job.host_pair[0] == job.host_pair[1]:
            return None
        a, b = job.host_pair
        return (a, b) if a < b else (b, a)

    inter = [p for p in map(link, jobs) if p is not None]
    if not inter:
        return jobs
    order = pairplan.visit_order(inter, campaign.repetitions, campaign.seed)
    span = len(order) / max(len(jobs), 1)

    def key(item: tuple[int, PlannedJob]) -> float:
        index, job = item
        pair = link(job)
        return float(order[(pair, job.repetition)]) if pair else index * span

    return [j for _, j in sorted(enumerate(jobs), key=key)]


def _budget(campaign: Campaign, out_dir: Path, node_pairs: list[tuple[str, str]] | None
            ) -> tuple[Campaign, pairplan.BudgetPlan | None]:
    """The campaign with ``samples: auto`` set from ``pairs: {budget: ...}`` (and the plan),
    or as it is; CampaignError for ``auto`` without a budget, or a budget it cannot meet."""
    budget = campaign.pairs.budget if campaign.pairs else None
    src = campaign.source or "campaign"
    auto = [spec for spec in campaign.tools if spec.options.get("samples") == 0]
    if budget is None:
        if auto:
            raise CampaignError("samples: auto needs a budget to size it",
                                where=f"{src}:{auto[0].line} (tools)",
                                hint='add pairs: {all-pairs: N, budget: {time: "04:00:00"}}, '
                                "or give samples: N")
        return campaign, None
    where = f"{src}:{budget.line} (pairs budget)"
    if len(campaign.tools) != 1 or campaign.tools[0].tool != "probe":
        raise CampaignError("a budget plans a campaign of one probe entry", where=where,
                            hint="keep one '- tool: probe' entry, or drop the budget")
    spec = campaign.tools[0]
    probe = replace(campaign, tools=(replace(spec, options={**spec.options, "samples": 1}),))
    n_jobs = len(expand(probe, out_dir, node_pairs)[0])
    nodes = {n for p in node_pairs or [] for n in p}
    result = pairplan.plan_budget(budget, n_nodes=len(nodes), n_jobs=n_jobs,
                                  sizes=_plan_sizes(spec.options["sizes"]),
                                  warmup=int(spec.options["warmup"]),
                                  samples=int(spec.options["samples"]), where=where)
    limit = time_limit_s(campaign.slurm.time) - campaign.slurm.signal_lead
    if result.job_s > limit:
        raise CampaignError(f"one job takes about {result.job_s:.0f} s under this budget, "
                            f"over the jobs' Slurm time limit {campaign.slurm.time} (less "
                            f"{campaign.slurm.signal_lead} s to write the record)",
                            where=f"{src} (slurm time)", hint="raise slurm: {time: ...}, or "
                            "give the budget more concurrent pairs")
    sized = replace(spec, options={**spec.options, "samples": result.samples})
    return replace(campaign, tools=(sized,)), result


def _plan_sizes(spec: str) -> list[int]:
    """The sizes a probe plan draws from, for its mean round trip (a log grid of 64 sizes
    stands for loguniform)."""
    from kit.core.checks import parse_size

    kind, _, rest = spec.partition(":")
    if kind == "list":
        return [parse_size(v) for v in rest.split(",")]
    parts = rest.split(":")
    lo, hi = max(parse_size(parts[0]), 1), max(parse_size(parts[1]), 1)
    if kind == "grid":
        factor = float(parts[2]) if len(parts) > 2 and float(parts[2]) > 1 else 2.0
        out, v = [], float(lo)
        while v <= hi:
            out.append(int(v))
            v *= factor
        return out or [lo]
    return [int(lo * (hi / lo) ** (i / 63)) for i in range(64)]


def _spec_of(campaign: Campaign, job: PlannedJob) -> ToolSpec:
    return campaign.tools[job.spec_index]


def _job(spec: ToolSpec, bench: str | None, binary: Path, transport: str, placement: str,
         rep: int, key: str) -> PlannedJob:
    common: dict[str, Any] = {"key": key, "tool": spec.tool, "benchmark": bench,
                              "transport": transport, "placement": placement, "repetition": rep}
    parts = tools.get(spec.tool).job(spec, bench, binary)
    return PlannedJob(**common, template=parts.template, command=parts.command,
                      outputs=parts.outputs, stdout_name=parts.stdout_name,
                      meta_file=parts.meta_file, extra_files=dict(parts.extra_files),
                      extra_modes=dict(parts.extra_modes))


def _launch_words(campaign: Campaign, entry: TransportEntry,
                  forced: list[str], ranks: int = 2) -> tuple[list[str], list[str]]:
    """(launch under Slurm, launch under run-local) for one job."""
    forward: list[str] = []
    if campaign.mpi == "openmpi":
        # mpirun forwards OMPI_* itself; anything else must be named to reach remote ranks.
        for name in [*forced, *campaign.env]:
            if not name.startswith("OMPI_"):
                forward += ["-x", name]
    slurm = list(campaign.launcher.words)
    if campaign.launcher.command == "srun" and not any(
            a.startswith(("--kill-on-bad-exit", "-K")) for a in campaign.launcher.args):
        # a rank that crashes must end the step (mpirun does this itself); without it the
        # peer waits in MPI until the time limit (seen: a probe segfault on one rank)
        slurm.append("--kill-on-bad-exit=1")
    local = ["mpirun", "-n", str(ranks)]
    if ranks > 2 and campaign.mpi == "openmpi":  # contention mode on a small machine
        local.append("--oversubscribe")
    # The job's rank wrapper pins the ranks (campaign ``binding``); the launcher must not pin
    # them first (Open MPI binds two ranks to cores by default, srun per its TaskPlugin), or
    # the wrapper would see one CPU, and ``binding: none`` would not float.
    words = " ".join(campaign.launcher.args)
    if campaign.mpi == "openmpi" and "--bind-to" not in words:
        local += ["--bind-to", "none"]
        if campaign.launcher.command in ("mpirun", "mpiexec"):
            slurm += ["--bind-to", "none"]
    if campaign.launcher.command == "srun" and "--cpu-bind" not in words:
        slurm.append("--cpu-bind=none")
    if campaign.launcher.command in ("mpirun", "mpiexec"):
        slurm += forward
        local = [*local, *campaign.launcher.args, *forward]
    else:
        local += forward
    return slurm, local


HELPER = "bin/jobrecord.py"


def kit_python() -> str:
    """The Python that runs the job-side helper on the compute nodes.

    ``PT2PT_KIT_PYTHON``, else the site file's ``python``, else ``python3`` on the node's
    PATH: the helper (kit/measure/campaign/jobrecord.py) uses only the standard library and
    is copied into the campaign directory at plan time, so compute nodes need neither the planning
    checkout nor the kit's dependencies, and a campaign keeps the helper it was planned with.
    """
    return os.environ.get("PT2PT_KIT_PYTHON") or load_site().python or "python3"


def _context(campaign: Campaign, table: TransportTable, job: PlannedJob,
             job_dir: Path) -> dict[str, Any]:
    entry = table.entry(campaign.mpi, job.transport).for_placement(job.placement)
    forced = list(dict.fromkeys([*entry.env, *(k for o in entry.env_by_major.values()
                                                for k in o)]))
    nodes, per_node = job_shape(campaign, job)
    slurm_launch, local_launch = _launch_words(campaign, entry, forced, nodes * per_node)
    spec = _spec_of(campaign, job)
    return {
        "job": {"id": job.id, "slurm_name": f"{campaign.name}.{job.id}"[:120],
                "nodes": nodes, "ntasks_per_node": per_node, "placement": job.placement,
                "nodelist": _nodelist(job.host_pair)},
        "kit_python": campaign_python(campaign),
        "helper": str(job_dir.parent.parent / HELPER),
        "job_dir": str(job_dir), "campaign_name": campaign.name, "mpi": campaign.mpi,
        "slurm": campaign.slurm, "exits": {"skipped": table.skipped_exit,
                                           "check_failed": table.check_failed_exit},
        "clear_env": table.clear_env.get(campaign.mpi, ()), "transport": entry,
        "forced_vars": forced, "campaign_env": campaign.env,
        "spack_view": str(binaries.spack_view(campaign.spack_view)),
        "slurm_launch": slurm_launch, "local_launch": local_launch, "command": job.command,
        "stdout_name": job.stdout_name, "meta_file": job.meta_file,
        "tool": spec.options, "benchmark": job.benchmark or "",
        "binding": campaign.binding,
    }


def _nodelist(pair: tuple[str, str] | None) -> str | None:
    if pair is None:
        return None
    return pair[0] if pair[0] == pair[1] else f"{pair[0]},{pair[1]}"


_PYTHON: dict[int, str] = {}


def campaign_python(campaign: Campaign) -> str:
    key = id(campaign)
    if key not in _PYTHON:
        _PYTHON.clear()
        _PYTHON[key] = kit_python()
    return _PYTHON[key]


def _job_record(campaign: Campaign, job: PlannedJob, table: TransportTable) -> dict[str, Any]:
    flavour = table.entry(campaign.mpi, job.transport)
    entry = flavour.for_placement(job.placement)
    nodes, per_node = job_shape(campaign, job)
    forced = list(dict.fromkeys([*entry.env, *(k for o in entry.env_by_major.values()
                                                for k in o)]))
    return {
        "group": job.group, "host_pair": list(job.host_pair) if job.host_pair else None,
        "nodelist": _nodelist(job.host_pair),
        "exits": {"skipped": table.skipped_exit, "check_failed": table.check_failed_exit},
        "unavailable": list(entry.unavailable), "stdout_name": job.stdout_name,
        "meta_file": job.meta_file, "forced_vars": forced,
        "time_limit_s": time_limit_s(campaign.slurm.time),
        "signal_lead_s": campaign.slurm.signal_lead,
        "concurrent_pairs": job.k or None,
        "id": job.id, "dir": f"jobs/{job.id}", "script": f"jobs/{job.id}/job.sbatch",
        "tool": job.tool, "benchmark": job.benchmark, "transport": job.transport,
        "placement": job.placement, "nodes": nodes, "ntasks_per_node": per_node,
        "repetition": job.repetition, "seed": job.seed, "mpi": campaign.mpi,
        "command": job.command, "outputs": job.outputs,
        "transport_env": entry.env, "transport_check": entry.check,
        "ops": tools.get(job.tool).record_ops(_spec_of(campaign, job)),
        "binding": campaign.binding,
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
        shutil.rmtree(out_dir / "arrays", ignore_errors=True)


def _write_new(path: Path, text: str, mode: int = 0o644) -> None:
    """A file in a job directory this plan just created: no reader can see it half-written
    before the manifest (written last, atomically) names it, so no temp file + rename (which
    costs two file operations per file in a 10,000-job campaign)."""
    # created with its final bits (never readable by others, even for an instant, when the
    # source was private)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w",
                   encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path, mode)


def _array_context(campaign: Campaign, group: str, jobs: list[PlannedJob],
                   out_dir: Path) -> dict[str, Any]:
    nodes, per_node = job_shape(campaign, jobs[0])
    return {
        "array": {"group": group, "size": len(jobs),
                  "slurm_name": f"{campaign.name}.{group}"[:120],
                  "log_dir": str(out_dir / "arrays")},
        "job": {"nodes": nodes, "ntasks_per_node": per_node},
        "slurm": campaign.slurm, "campaign_name": campaign.name,
        "kit_python": campaign_python(campaign), "manifest": str(out_dir / MANIFEST_NAME),
        "helper": str(out_dir / HELPER),
    }


def plan_campaign(campaign_path: Path, out_dir: Path, *, force: bool = False,
                  table: TransportTable | None = None,
                  slurm_env: dict[str, str] | None = None) -> Path:
    """Validate ``campaign_path``, render every job into ``out_dir``; returns the manifest.

    Jobs are grouped into one Slurm job array per (tool, transport, placement): the array
    script ``arrays/<group>.sbatch`` runs task i as the group's i-th job in the manifest.
    """
    table = table or load_table()
    campaign = load_campaign(campaign_path, table=table)
    if campaign.adaptive is not None:  # its rounds are planned one by one as they are chosen
        raise CampaignError("an adaptive campaign ('design: adaptive') is planned round by "
                            "round, as the measurements decide", where=str(campaign_path),
                            hint="run it with 'pt2pt plan CAMPAIGN.yaml -o DIR' then "
                                 "'pt2pt submit DIR' (or 'pt2pt run-local DIR'), or write "
                                 "'design: fixed'")
    out_dir = out_dir.resolve()
    node_pairs = (pairs.resolve(campaign.pairs, campaign.seed, campaign.slurm.partition,
                                slurm_env) if campaign.pairs else None)
    campaign, budget = _budget(campaign, out_dir, node_pairs)  # refused: no folder left
    created = not out_dir.exists()
    _prepare_dir(out_dir, force)
    jobs, not_planned = expand(campaign, out_dir, node_pairs)
    if not jobs:
        raise CampaignError("no job could be planned (every tool is missing its binary)",
                            where=str(campaign_path),
                            hint="build the probe or install the Spack environment")
    try:
        return _write_plan(campaign_path, campaign, table, out_dir, jobs, not_planned,
                           node_pairs, budget)
    except OSError as exc:
        # A full disk or a folder we may not write: no half plan is left to be submitted.
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        else:
            for job in jobs:
                shutil.rmtree(out_dir / "jobs" / job.id, ignore_errors=True)
        raise output_error(exc, exc.filename or out_dir,
                           "cannot write the campaign plan") from None


def _write_plan(campaign_path: Path, campaign: Campaign, table: TransportTable, out_dir: Path,
                jobs: list[PlannedJob], not_planned: list[Any],
                node_pairs: Any, budget: pairplan.BudgetPlan | None = None) -> Path:
    """Render and write every file of the plan; the manifest last (it names the rest)."""
    helper = out_dir / HELPER
    write_atomic(helper, Path(jobrecord.__file__).read_text(encoding="utf-8"), 0o755)
    # the helper's own module, imported beside it (standard library only, like the helper)
    write_atomic(helper.with_name("nodestate.py"),
                 Path(nodestate.__file__).read_text(encoding="utf-8"))
    env = environment()
    templates: dict[str, Any] = {}
    records = []
    arrays: dict[str, dict[str, Any]] = {}
    by_group: dict[str, list[PlannedJob]] = {}
    for job in jobs:
        job_dir = out_dir / "jobs" / job.id
        template = templates.get(job.template) or env.get_template(job.template)
        templates[job.template] = template
        script = template.render(**_context(campaign, table, job, job_dir))
        members = by_group.setdefault(job.group, [])
        record = _job_record(campaign, job, table)
        record["array_index"] = len(members)
        members.append(job)
        job_dir.mkdir(parents=True, exist_ok=True)
        _write_new(job_dir / "plan.json", dump_json(record))
        for name, text in sorted(job.extra_files.items()):
            _write_new(job_dir / name, text, job.extra_modes.get(name, 0o644))
        _write_new(job_dir / "job.sbatch", script, 0o755)
        records.append(record)
    array_template = env.get_template("array.sbatch.j2")
    for group, members in by_group.items():
        script_rel = f"arrays/{group}.sbatch"
        write_atomic(out_dir / script_rel,
                     array_template.render(**_array_context(campaign, group, members,
                                                            out_dir)), 0o755)
        arrays[group] = {"script": script_rel, "tasks": [j.id for j in members],
                         "nodelists": [_nodelist(j.host_pair) for j in members],
                         "tool": members[0].benchmark or members[0].tool,
                         "transport": members[0].transport,
                         "placement": members[0].placement,
                         "ntasks_per_node": job_shape(campaign, members[0])[1]}
    source = campaign_path.read_bytes()
    write_atomic(out_dir / "campaign.yaml", source.decode("utf-8"))
    manifest = {
        "format": MANIFEST_FORMAT,
        "campaign": {"name": campaign.name, "mpi": campaign.mpi, "seed": campaign.seed,
                     "repetitions": campaign.repetitions, "description": campaign.description,
                     "transports": list(campaign.transports),
                     "placements": list(campaign.placements),
                     "source": str(campaign.source),
                     "sha256": hashlib.sha256(source).hexdigest(),
                     "pairs": [list(p) for p in node_pairs] if node_pairs else None,
                     "throttle": campaign.slurm.throttle,
                     "order": "rounds" if node_pairs else "shuffled",
                     "budget": budget.to_dict() if budget else None, "binding": campaign.binding,
                     "partition": campaign.slurm.partition},
        "transport_table": {"path": table.source, "skipped_exit": table.skipped_exit,
                            "check_failed_exit": table.check_failed_exit},
        "jobs": records,
        "arrays": arrays,
        "not_planned": not_planned,
    }
    path = out_dir / MANIFEST_NAME
    write_atomic(path, dump_json(manifest))
    return path
