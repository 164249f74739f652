"""The tidy dataset's schema: one row per sample (or per printed statistic).

Kept in one place because ingest writes it, analysis and the TUI read it, and the
Parquet files must agree across kit versions. See ``docs``/README "Dataset format".
"""

from __future__ import annotations

import polars as pl

#: Columns of the samples table, in order, with their Polars dtypes.
SAMPLES_SCHEMA: dict[str, pl.DataType] = {
    "campaign": pl.String(),
    "run_id": pl.String(),
    "tool": pl.Categorical(),
    "transport": pl.Categorical(),
    "op": pl.Categorical(),
    "size": pl.UInt64(),
    "time": pl.Float64(),  # seconds; pingpong rows hold the one-way time (round trip / 2)
    "seq": pl.UInt32(),
    "stat": pl.Categorical(),  # "raw", or mean/min/max/median/pNN/... for aggregating tools
    "n": pl.UInt32(),  # how many messages the row stands for (1 for raw)
    "warmup": pl.Boolean(),
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
}

#: The columns that identify one series (what one model is fitted to).
SERIES_KEYS: tuple[str, ...] = ("campaign", "tool", "transport", "op", "stat")

TOOLS = ("probe", "osu", "skampi", "logp", "reprompi", "calibration", "csv", "netgauge",
         "synthetic")
