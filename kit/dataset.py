"""The tidy Parquet dataset: layout, atomic commits, and the read API everyone else uses.

Layout (docs/architecture.md)::

    DATASET/samples/campaign=<c>/tool=<t>/part-<run_id>.parquet   hive-partitioned samples
    DATASET/runs.parquet                                           one row per run

``runs.parquet`` is the commit log: a part file counts only once its run is listed there,
and runs.parquet is only ever replaced by ``os.replace`` of a fully written temp file. So a
crash at any point leaves either the old dataset or the new one; part files a crash left
behind without a run are invisible to :func:`scan` and removed by the next ingest.
Part files do not repeat the campaign/tool columns: they come from the directory names, which
lets Polars skip whole partitions when a query filters on them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from kit.errors import UserError
from kit.schema import RUNS_SCHEMA, SAMPLES_SCHEMA, SERIES_KEYS

SAMPLES_DIR = "samples"
RUNS_FILE = "runs.parquet"
LOCK_FILE = ".ingest.lock"
PART_PREFIX = "part-"
TMP_SUFFIX = ".tmp"

#: Columns stored inside part files (campaign and tool live in the directory names).
PART_COLUMNS = [c for c in SAMPLES_SCHEMA if c not in ("campaign", "tool")]
#: Their dtypes on disk: repeated strings as Categorical (dictionary-encoded, cheaper to
#: write); :func:`scan` casts back to SAMPLES_SCHEMA.
PART_DTYPES = {c: (pl.Categorical() if c == "run_id" else SAMPLES_SCHEMA[c])
               for c in PART_COLUMNS}

#: Below this size (bytes) a message counts as "small" in :func:`series_table`.
SMALL_SIZE = 64


def part_path(dataset: Path, campaign: str, tool: str, run_id: str) -> Path:
    return (Path(dataset) / SAMPLES_DIR / f"campaign={campaign}" / f"tool={tool}"
            / f"{PART_PREFIX}{run_id}.parquet")


def _check(dataset: Path) -> Path:
    dataset = Path(dataset)
    if not dataset.is_dir():
        raise UserError(f"dataset directory {dataset} does not exist", where=str(dataset),
                        hint="create it with 'pt2pt ingest PATH... --dataset DIR'")
    return dataset


def runs(dataset: str | Path) -> pl.DataFrame:
    """The runs table (RUNS_SCHEMA); empty when nothing was ingested yet."""
    path = _check(Path(dataset)) / RUNS_FILE
    if not path.is_file():
        return pl.DataFrame(schema=RUNS_SCHEMA)
    try:
        table = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"cannot read the runs table ({exc})", where=str(path),
                        hint="the file is damaged; restore it from a backup") from None
    missing = [c for c in ("run_id", "campaign", "tool") if c not in table.columns]
    if missing:
        raise UserError(f"runs table lacks column(s) {', '.join(missing)}", where=str(path),
                        hint="this is not a pt2pt-kit dataset, or one from another kit version")
    # Columns added to RUNS_SCHEMA after a dataset was written read as nulls.
    return table.select([(pl.col(c) if c in table.columns else pl.lit(None)).cast(t).alias(c)
                         for c, t in RUNS_SCHEMA.items()])


def run_of_part(name: str) -> str | None:
    """The run_id in a part file name (``part-<run>.parquet`` or ``part-<run>-0003.parquet``)."""
    if not (name.startswith(PART_PREFIX) and name.endswith(".parquet")):
        return None
    return name[len(PART_PREFIX):-len(".parquet")].split("-")[0]


def committed_parts(dataset: Path, run_table: pl.DataFrame) -> list[Path]:
    """Part files whose run is committed in ``run_table`` (large runs have several)."""
    wanted: dict[Path, set[str]] = {}
    for campaign, tool, run_id in run_table.select("campaign", "tool", "run_id").iter_rows():
        wanted.setdefault(part_path(dataset, campaign, tool, run_id).parent, set()).add(run_id)
    files = []
    for folder, run_ids in wanted.items():
        if folder.is_dir():
            files.extend(sorted(p for p in folder.iterdir() if run_of_part(p.name) in run_ids))
    return files


def scan(dataset: str | Path) -> pl.LazyFrame:
    """All committed samples as a lazy frame with every SAMPLES_SCHEMA column.

    Filters on ``campaign``/``tool`` prune whole partitions (hive partitioning).
    """
    dataset = _check(Path(dataset))
    files = committed_parts(dataset, runs(dataset))
    if not files:
        return pl.LazyFrame(schema=SAMPLES_SCHEMA)
    lf = pl.scan_parquet(files, hive_partitioning=True,
                         hive_schema={"campaign": pl.String, "tool": pl.String})
    return lf.select([pl.col(c).cast(t) for c, t in SAMPLES_SCHEMA.items()])


def series_table(dataset: str | Path) -> pl.DataFrame:
    """One row per series (SERIES_KEYS) with counts, size range and two summary figures.

    * ``n_samples``: rows outside warm-up (aggregate rows count once each);
    * ``small_median_s``: median time of sizes <= 64 B, or of the series' smallest size
      when it has none that small;
    * ``large_bw_Bps``: median of size/time over the series' top octave of sizes
      (size >= size_max / 2), i.e. the large-message bandwidth in bytes per second.
    """
    lf = scan(dataset).filter(~pl.col("warmup"))
    keys = list(SERIES_KEYS)
    size_max = pl.col("size").max().over(keys)
    size_min = pl.col("size").min().over(keys)
    small = pl.col("size") <= pl.max_horizontal(pl.lit(SMALL_SIZE, pl.UInt64), size_min)
    large = (pl.col("size") >= size_max // 2) & (pl.col("size") > 0) & (pl.col("time") > 0)
    table = (
        lf.with_columns(_small=small, _large=large)
        .group_by(keys)
        .agg(
            n_samples=pl.len().cast(pl.UInt64),
            size_min=pl.col("size").min(),
            size_max=pl.col("size").max(),
            small_median_s=pl.col("time").filter(pl.col("_small")).median(),
            large_bw_Bps=(pl.col("size").cast(pl.Float64) / pl.col("time"))
            .filter(pl.col("_large")).median(),
        )
        .sort(keys)
        .collect()
    )
    return table.with_columns([pl.col(c).cast(pl.String) for c in keys])


@contextlib.contextmanager
def locked(dataset: Path) -> Iterator[None]:
    """Serialise writers of one dataset (two ingests at once would race on runs.parquet)."""
    dataset.mkdir(parents=True, exist_ok=True)
    with (dataset / LOCK_FILE).open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def remove_leftovers(dataset: Path, run_table: pl.DataFrame) -> int:
    """Delete temp files and uncommitted parts an interrupted ingest left behind."""
    committed = set(run_table["run_id"].to_list())
    removed = 0
    root = dataset / SAMPLES_DIR
    if not root.is_dir():
        return 0
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        run_id = run_of_part(path.name)
        if path.name.endswith(TMP_SUFFIX) or (run_id is not None and run_id not in committed):
            path.unlink(missing_ok=True)
            removed += 1
    tmp_runs = dataset / (RUNS_FILE + TMP_SUFFIX)
    if tmp_runs.exists():
        tmp_runs.unlink()
    return removed


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(dataset: Path, parts: list[tuple[Path, Path]], new_runs: pl.DataFrame) -> None:
    """Make written temp parts visible: rename them, then replace runs.parquet atomically.

    The runs.parquet replace is the single commit point (see the module docstring).
    """
    if not parts and new_runs.height == 0:
        return
    for tmp, _final in parts:
        fsync_file(tmp)
    for tmp, final in parts:
        os.replace(tmp, final)
        _fsync_dir(final.parent)
    table = pl.concat([runs(dataset), new_runs.select(list(RUNS_SCHEMA)).cast(RUNS_SCHEMA)])
    tmp_runs = dataset / (RUNS_FILE + TMP_SUFFIX)
    table.write_parquet(tmp_runs)
    fsync_file(tmp_runs)
    os.replace(tmp_runs, dataset / RUNS_FILE)
    _fsync_dir(dataset)
