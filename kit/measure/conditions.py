"""Run conditions: what the node was doing while a run measured, and whether that was quiet.

A run measures the network *and* whatever else ran on its cores. The job-side helper records
the node's load, stolen CPU time and CPU pressure before, during and after the tool
(:mod:`kit.measure.campaign.nodestate`, ``conditions`` in ``job.json``); the tool records the
ranks' CPUs and its sample order; the plan records the binding. :func:`columns` turns them into
the ``runs.parquet`` columns (:data:`kit.data.schema.RUNS_SCHEMA`), and :func:`judge` is the one
rule that calls a run ``quiet``, ``disturbed`` or ``unknown`` (nothing recorded): run quality,
the report, the TUI and ``pt2pt diff`` all read that verdict, never their own threshold.

The rule, with ``R`` ranks of the run on a node of ``C`` CPUs:

- *load*: the mean number of runnable tasks during the run (the ranks included: each spins
  while it waits) minus ``R`` is what else wanted a CPU; more than the ``C - R`` free CPUs
  plus :data:`LOAD_MARGIN` means the ranks had to share their cores. Two CPU burners beside
  the demo on 2 CPUs: runnable 4, disturbed; the same machine at rest: 2.0-2.3, quiet.
  Judged only from :data:`MIN_LOAD_SAMPLES` samples or more (see *short runs*).
- *short runs*: the watcher samples once a second, so a run shorter than a few seconds has
  one or two samples, and one instantaneous count is not a mean: it catches the job's own
  launcher (``mpirun``, ``prted``, the job shell, the rank wrappers starting) as often as
  anything else. Measured on an idle 2-CPU machine (54): runs of 0.25 s, one sample each,
  read 2.0 and 3.0 runnable tasks while CPU pressure was 8 % and the load average 0.5; a bare
  ``mpirun -np 2`` of the probe reads 1.97. Such a run is judged by what covers its whole
  wall time instead: CPU pressure (PSI), which counts every microsecond a task waited for a
  CPU, launcher or not, and so catches a CPU hog beside even a 0.2 s run. Where the kernel
  has no PSI, the 1-minute load average before or after stands in, judged like the during
  count (minus the ranks: back-to-back jobs of one campaign put their own ranks into it).
  When PSI is recorded the load average is not judged: it lags a minute, it counts the
  campaign's own previous jobs, and a hog that stopped before the run did not disturb it.
- *CPU pressure* (Linux PSI): some task waited for a CPU more than :data:`PRESSURE_MAX` of
  the run's wall time.
- *stolen time*: the hypervisor gave more than :data:`STEAL_MAX` of the CPU time to other
  guests during (or right before) the run.
- *tenants*: Slurm says other jobs ran on the run's nodes.

The CPU frequency governor, the binding and the sample order change the numbers too, but
they are settings, not disturbances: they are recorded and shown, and runs are compared
only when they agree (:func:`comparable`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Runnable tasks beyond the free CPUs that still count as quiet (a daemon waking up).
LOAD_MARGIN = 0.5
#: Fewest watcher samples whose mean runnable count is the run's ``load_during``: fewer
#: (a run shorter than ~2 watch intervals) are instants, not a mean (module docstring).
MIN_LOAD_SAMPLES = 3
#: Share of the run's wall time some task may wait for a CPU (PSI "some") and stay quiet.
PRESSURE_MAX = 0.2
#: Share of CPU time the hypervisor may steal and the run stay quiet.
STEAL_MAX = 0.05

QUIET = "quiet"
DISTURBED = "disturbed"
UNKNOWN = "unknown"
VERDICTS = (QUIET, DISTURBED, UNKNOWN)

#: runs.parquet columns this module fills (dtypes in kit.data.schema.RUNS_SCHEMA).
COLUMNS = ("load_before", "load_during", "load_after", "steal_before", "steal_during",
           "steal_after", "cpu_pressure", "node_cpus", "ranks_per_node", "governor",
           "binding", "cpus_end", "order", "tenants", "conditions", "conditions_why")


def _num(value: Any, lo: float = 0.0, hi: float = math.inf) -> float | None:
    """A finite number within [lo, hi] from an untrusted record, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and lo <= v <= hi else None


def _int(value: Any) -> int | None:
    v = _num(value, 1, 1 << 20)
    return int(v) if v is not None else None


def _sub(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Conditions:
    """One run's conditions as recorded (None: not recorded)."""

    load_before: float | None = None
    load_during: float | None = None
    load_after: float | None = None
    steal_before: float | None = None
    steal_during: float | None = None
    steal_after: float | None = None
    cpu_pressure: float | None = None
    node_cpus: int | None = None
    ranks_per_node: int | None = None
    governor: str | None = None
    binding: str | None = None
    cpus_end: str | None = None
    order: str | None = None
    tenants: str | None = None  # comma-separated Slurm job ids; "" = Slurm says none

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None, *, order: str | None = None,
                    binding: str | None = None, cpus_end: Sequence[int] = ()) -> Conditions:
        """From ``job.json``'s ``conditions`` (untrusted: wrong types read as unknown)."""
        rec = record if isinstance(record, Mapping) else {}
        before, during, after = _sub(rec, "before"), _sub(rec, "during"), _sub(rec, "after")
        tenants = rec.get("tenants")
        tenant_text = (",".join(str(t) for t in tenants) if isinstance(tenants, list)
                       else None)
        gov = rec.get("governor")
        samples = _num(during.get("samples"))
        few = samples is not None and samples < MIN_LOAD_SAMPLES
        return cls(
            load_before=_num(before.get("load1")),
            load_during=None if few else _num(during.get("load")),
            load_after=_num(after.get("load1")),
            steal_before=_num(before.get("steal"), hi=1.0),
            steal_during=_num(during.get("steal"), hi=1.0),
            steal_after=_num(after.get("steal"), hi=1.0),
            cpu_pressure=_num(during.get("cpu_pressure"), hi=1.0),
            node_cpus=_int(rec.get("cpus_online")), ranks_per_node=_int(rec.get("ranks_per_node")),
            governor=gov if isinstance(gov, str) and gov else None, binding=binding,
            cpus_end=",".join(str(c) for c in cpus_end) or None, order=order,
            tenants=tenant_text)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Conditions:
        """From a ``runs.parquet`` row (columns absent in older datasets read as None)."""
        return cls(**{k: row.get(k) for k in cls.__dataclass_fields__})

    @property
    def recorded(self) -> bool:
        return any(v is not None for v in (self.load_before, self.load_during,
                                           self.load_after, self.cpu_pressure))


def judge(c: Conditions) -> tuple[str, str]:
    """(verdict, why): ``quiet``, ``disturbed`` (why names every reason) or ``unknown``."""
    if not c.recorded and c.tenants is None:
        return UNKNOWN, "no load recorded (run outside the kit's job scripts, or before " \
                        "the kit recorded conditions)"
    why: list[str] = []
    cpus, ranks = c.node_cpus, c.ranks_per_node or 2
    if c.load_during is not None and cpus:
        others = c.load_during - ranks
        free = max(cpus - ranks, 0)
        if others > free + LOAD_MARGIN:
            why.append(f"load {c.load_during:.1f} during the run on {cpus} CPU(s) with "
                       f"{ranks} rank(s): other tasks wanted {others:.1f} CPU(s), "
                       f"{free} were free")
    elif cpus and c.cpu_pressure is None:
        # no during-run count (a short run) and no PSI: the minute around the run
        worst = max((v for v in (c.load_before, c.load_after) if v is not None), default=None)
        free = max(cpus - ranks, 0)
        if worst is not None and worst - ranks > free + LOAD_MARGIN:
            why.append(f"load average {worst:.1f} around the run on {cpus} CPU(s) with "
                       f"{ranks} rank(s): other tasks wanted {worst - ranks:.1f} CPU(s), "
                       f"{free} were free")
    if c.cpu_pressure is not None and c.cpu_pressure > PRESSURE_MAX:
        why.append(f"tasks waited for a CPU {100 * c.cpu_pressure:.0f} % of the time")
    steal = max((v for v in (c.steal_during, c.steal_before) if v is not None), default=None)
    if steal is not None and steal > STEAL_MAX:
        why.append(f"the hypervisor stole {100 * steal:.0f} % of the CPU time")
    if c.tenants:
        why.append(f"Slurm ran other job(s) on the node(s): {c.tenants}")
    if why:
        return DISTURBED, "; ".join(why)
    return QUIET, describe(c)


def describe(c: Conditions) -> str:
    """The conditions in one short line (what the report, the TUI and diff print)."""
    parts = []
    if c.load_during is not None:
        parts.append(f"load {c.load_during:.1f} during")
    elif c.load_before is not None:
        parts.append(f"load {c.load_before:.1f} before")
    if c.node_cpus:
        parts.append(f"{c.node_cpus} CPU(s), {c.ranks_per_node or '?'} rank(s) per node")
    if c.cpu_pressure is not None:
        parts.append(f"CPU pressure {100 * c.cpu_pressure:.0f} %")
    if c.steal_during is not None:
        parts.append(f"steal {100 * c.steal_during:.0f} %")
    parts.append(f"binding {c.binding or 'unknown'}")
    parts.append(f"order {c.order or 'unknown'}")
    if c.governor:
        parts.append(f"governor {c.governor}")
    if c.tenants == "":
        parts.append("no other Slurm job on the node")
    return ", ".join(parts)


def worst(verdicts: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """Several runs' (verdict, why) as one: disturbed if any run was (naming how many and
    the first reason), quiet if every run was, else unknown."""
    bad = [w for v, w in verdicts if v == DISTURBED]
    if bad:
        return DISTURBED, f"{len(bad)} of {len(verdicts)} run(s) disturbed: {bad[0]}"
    if verdicts and all(v == QUIET for v, _ in verdicts):
        return QUIET, f"{len(verdicts)} run(s), every one quiet"
    unknown = sum(v != QUIET for v, _ in verdicts)
    return UNKNOWN, f"{unknown} of {len(verdicts)} run(s) without recorded conditions"


#: Run-level keys of a series (a run measures every op of its series at once).
RUN_KEYS = ("campaign", "tool", "transport", "placement", "host_pair")


def conditions_by_series(runs: Any) -> dict[tuple[str, ...], tuple[str, str]]:
    """(campaign, tool, transport, placement, host_pair) -> the conditions of its runs as one
    (:func:`worst`), from a runs table (``kit.data.dataset.runs``): what the TUI's series
    table shows before any fit."""
    grouped: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    if "conditions" not in runs.columns:
        return {}
    for row in runs.select(*RUN_KEYS, "conditions", "conditions_why").iter_rows():
        key = tuple(str(v) for v in row[:len(RUN_KEYS)])
        grouped.setdefault(key, []).append((str(row[-2] or UNKNOWN), str(row[-1] or "")))
    return {k: worst(v) for k, v in grouped.items()}


def columns(c: Conditions) -> dict[str, Any]:
    """The runs.parquet columns of one run (:data:`COLUMNS`)."""
    verdict, why = judge(c)
    out: dict[str, Any] = {k: getattr(c, k) for k in COLUMNS if hasattr(c, k)}
    out["conditions"], out["conditions_why"] = verdict, why
    return out


def settings(c: Conditions) -> tuple[str | None, str | None]:
    """What must agree for two runs to be compared like for like: (binding, order)."""
    return _binding_kind(c.binding), c.order


def _binding_kind(binding: str | None) -> str | None:
    """``cores 0,1`` -> ``cores``: which CPUs differ between nodes, the policy must not."""
    return binding.split()[0] if binding else None


def _show(s: set[tuple[str | None, str | None]]) -> str:
    return "; ".join(f"binding {x or 'unknown'}, order {y or 'unknown'}"
                     for x, y in sorted(s, key=str))


def withheld(sides: Mapping[str, Sequence[Conditions]], *, quiet_only: bool = False,
             same_settings: bool = False) -> str | None:
    """Why numbers measured in these conditions must not be compared, or None.

    ``sides``: name -> the conditions of its runs. A side with a disturbed run always
    withholds; ``quiet_only`` also withholds runs whose conditions were not recorded (a
    cross-check of two tools must show both were quiet), ``same_settings`` different
    binding or sample order (which change the numbers by themselves: the shuffled order
    costs x1.3-1.5 over shared memory, kit/probe/README.md).
    """
    problems = []
    for name, runs in sides.items():
        verdicts = [judge(c) for c in runs]
        bad = [(v, w) for v, w in verdicts if v == DISTURBED or (quiet_only and v != QUIET)]
        if bad:
            kinds = "/".join(sorted({v for v, _ in bad}))
            problems.append(f"{name}: {len(bad)} of {len(runs)} run(s) {kinds} "
                            f"({bad[0][1]})")
    if same_settings:
        found = {name: {settings(c) for c in runs} for name, runs in sides.items() if runs}
        if len({frozenset(v) for v in found.values()}) > 1:
            problems.append("; ".join(f"{name} ran with {_show(v)}" for name, v in
                                      found.items()))
    return "; ".join(problems) or None


def unrecorded(sides: Mapping[str, Sequence[Conditions]]) -> list[str]:
    """Sides with runs whose conditions were not recorded (a note, not a refusal)."""
    return [name for name, runs in sides.items()
            if any(judge(c)[0] == UNKNOWN for c in runs) or not runs]
