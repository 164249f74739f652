"""The tidy dataset's schema: one row per sample (or per printed statistic).

Kept in one place because ingest writes it, analysis and the TUI read it, and the
Parquet files must agree across kit versions. See ``docs``/README "Dataset format".
"""

from __future__ import annotations

import polars as pl

from kit.data.series_keys import (  # noqa: F401  (re-exported: kit.data.schema names them too)
    LOGGP_KEYS,
    SERIES_KEYS,
    pairs_count,
    pairs_label,
    pairs_short,
)

#: Columns of the samples table, in order, with their Polars dtypes.
SAMPLES_SCHEMA: dict[str, pl.DataType] = {
    "campaign": pl.String(),
    "run_id": pl.String(),
    "tool": pl.Categorical(),
    "transport": pl.Categorical(),
    # Where the two ranks ran: intra-socket / intra-node / inter-node / unknown. Part of a
    # series' identity (intra- and inter-node samples are never fitted together). Per run,
    # so it lives in the runs table, not in the part files; :func:`kit.data.dataset.scan` adds it.
    "placement": pl.Categorical(),
    # The hosts of the measured pair in rank order, ``n1:n2`` (``unknown`` when the tool did
    # not say); in contention runs the first pair's (initiator:peer), not ranks 0 and 1.
    "host_pair": pl.String(),
    "op": pl.Categorical(),
    "size": pl.UInt64(),
    "time": pl.Float64(),  # seconds; pingpong rows hold the one-way time (round trip / 2)
    "seq": pl.UInt32(),
    "stat": pl.Categorical(),  # "raw", or mean/min/max/median/pNN/... for aggregating tools
    "n": pl.UInt32(),  # how many messages the row stands for (1 for raw; a stream window's count)
    "warmup": pl.Boolean(),
    # probe contention mode (--pairs): concurrent pairs in the run, and which pair took the
    # sample; 1 and 0 for every other run (see OPTIONAL_SAMPLE_DEFAULTS)
    "pairs": pl.UInt16(),
    "pair": pl.UInt16(),
    "program": pl.String(),  # run-level (runs.parquet): an application run's program, else ""
}

#: Sample columns that parsers may omit and part files written before they existed lack:
#: ingest and :func:`kit.data.dataset.scan` fill them with these values.
OPTIONAL_SAMPLE_DEFAULTS: dict[str, int] = {"pairs": 1, "pair": 0}

#: What ``time`` means for ops whose row is not one message's duration (stated in the model's
#: provenance, the fit summary and the report, so nobody reads a gap as a latency).
OP_QUANTITY: dict[str, str] = {
    "stream": "per-message gap g = window time / messages per window (one window of "
              "back-to-back sends, timed from the first send to the receiver's ack; one sample "
              "per window)",
    "gap": "per-message gap g as the tool reports it",
}

#: Columns of the runs table (one row per run_id).
RUNS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "campaign": pl.String(),
    "tool": pl.String(),
    "transport": pl.String(),
    "mpi_version": pl.String(),
    "hosts": pl.String(),  # comma-separated, rank order
    "env": pl.String(),  # JSON object of the transport-selecting environment
    "job_id": pl.String(),
    "start": pl.String(),  # ISO 8601
    "end": pl.String(),
    "sources": pl.String(),  # JSON list of {"path","sha256"}
    "complete": pl.Boolean(),
    "n_samples": pl.UInt64(),
    "tool_version": pl.String(),  # e.g. "OSU 7.4", "SKaMPI Version 6.0.0", probe version
    "incomplete_reason": pl.String(),  # why complete is false (truncated output, job state)
    # Placement of the ranks (PLACEMENTS) and how it is known (PLACEMENT_SOURCES); null in
    # datasets written before these columns: kit.data.dataset derives them from ``hosts`` then.
    "placement": pl.String(),
    "placement_source": pl.String(),
    "host_pair": pl.String(),  # "n1:n2" (rank order), from ``hosts``
    "cpus": pl.String(),  # comma-separated CPU of each rank (probe meta "cpus"), when known
    "program": pl.String(),  # tool app: program, arguments, rank count (a series key), else ""
    # Run conditions (kit.measure.conditions; null where not recorded, e.g. older datasets):
    # 1-minute load average before/after, mean runnable tasks during (ranks included),
    # share of CPU time stolen by the hypervisor, share of wall time tasks waited for a CPU
    "load_before": pl.Float64(),
    "load_during": pl.Float64(),
    "load_after": pl.Float64(),
    "steal_before": pl.Float64(),
    "steal_during": pl.Float64(),
    "steal_after": pl.Float64(),
    "cpu_pressure": pl.Float64(),
    "node_cpus": pl.Int32(),
    "ranks_per_node": pl.Int32(),
    "governor": pl.String(),  # CPU frequency governor(s), when the node exposes them
    "binding": pl.String(),  # how the ranks were pinned: "cores", "none", "cpus 2,3"
    "cpus_end": pl.String(),  # CPU of each rank when measuring ended (a move = unbound)
    "order": pl.String(),  # sample order: shuffled | blocked
    "tenants": pl.String(),  # other Slurm jobs on the nodes ("" none, null unknown)
    "conditions": pl.String(),  # quiet | disturbed | unknown (kit.measure.conditions.judge)
    "conditions_why": pl.String(),
    # JSON [{name, bytes, sha256}] of the run's part files, checked before they are read
    # (kit.data.integrity); null for runs ingested before checksums were recorded.
    "parts": pl.String(),
    # The run beyond its bytes (kit.tools.identity): a longer copy replaces a shorter
    # one; null for tools that record nothing to tell two runs apart.
    "identity": pl.String(),
}

#: Columns of SAMPLES_SCHEMA that are per run and kept in the runs table, not the part files
#: (a part file's run is in its name, see :func:`kit.data.series_summary.run_of_part`). Part
#: files written before 2026-11-27 also hold run_id and transport; readers ignore them.
RUN_LEVEL_COLUMNS: tuple[str, ...] = ("run_id", "transport", "placement", "host_pair",
                                      "program")

#: Where two ranks can run relative to each other, closest first.
PLACEMENTS: tuple[str, ...] = ("intra-socket", "intra-node", "inter-node")
#: The placement of a run nothing tells (no hosts recorded, no campaign given).
UNKNOWN = "unknown"
#: How a run's placement is known: the hosts (and CPUs' sockets) the tool recorded agree
#: with the campaign's; only one of them said; or nothing did.
PLACEMENT_SOURCES: tuple[str, ...] = ("campaign+hosts", "hosts", "campaign", "hosts-override",
                                      "unknown")

TOOLS = ("probe", "osu", "skampi", "logp", "reprompi", "calibration", "csv", "netgauge",
         "synthetic")
