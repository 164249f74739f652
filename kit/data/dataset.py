"""The tidy Parquet dataset: layout, atomic commits, and the read API everyone else uses.

Layout (docs/architecture.md)::

    DATASET/samples/campaign=<c>/tool=<t>/part-<run_id>.parquet   hive-partitioned samples
    DATASET/runs.parquet                                           one row per run
    DATASET/series.json                                            cached series_table()

``runs.parquet`` is the commit log: a part file counts only once its run is listed there,
and runs.parquet is only ever replaced by ``os.replace`` of a fully written temp file. So a
crash at any point leaves either the old dataset or the new one; part files a crash left
behind without a run are invisible to :func:`scan` and removed by the next ingest.
Part files do not repeat the campaign/tool columns: they come from the directory names, which
lets Polars skip whole partitions when a query filters on them.

``series.json`` is a cache, never part of the commit: :func:`series_table` scans every sample
(seconds at 10 M), so its result is stored, stamped with a fingerprint of what it was computed
from (runs.parquet's bytes, the committed part files' names and sizes, the summary format). A
summary whose stamp or content digest does not match is ignored and recomputed, so a kill between
the runs.parquet replace and the summary write, or a damaged file, costs time, never correctness.
It is JSON and :mod:`kit.data.series_summary` (which owns it) reads it without Polars.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from kit.core import inputs
from kit.core.errors import ModelError, UserError
from kit.data import integrity
from kit.data import series_summary as summary_file
from kit.data.schema import (
    OPTIONAL_SAMPLE_DEFAULTS,
    RUN_LEVEL_COLUMNS,
    RUNS_SCHEMA,
    SAMPLES_SCHEMA,
    SERIES_KEYS,
    UNKNOWN,
)
from kit.data.series_keys import OPTIONAL_KEYS, series_dict
from kit.data.series_summary import (  # noqa: F401  (the layout's names, re-exported)
    PART_PREFIX,
    RUNS_FILE,
    SAMPLES_DIR,
    SUMMARY_FILE,
    TMP_SUFFIX,
    part_path,
    partition_dir,
    run_of_part,
)
from kit.figures.bandwidth import bandwidth_exprs
from kit.figures.bandwidth import bound_expr as large_bound_expr
from kit.figures.latency import bound_expr, latency_exprs

if TYPE_CHECKING:  # numpy costs ~0.1 s to import; `pt2pt datasets` never needs it
    import numpy as np

LOCK_FILE = ".ingest.lock"

#: The dataset's layout version, stored in runs.parquet's key-value metadata under
#: FORMAT_KEY. 2 (2026-11-27): part files hold only per-row columns, run_id and transport
#: come from runs.parquet. 1 (no key): every part also held run_id and transport. A reader
#: refuses a newer layout instead of reading missing columns as nulls.
DATASET_FORMAT = 2
FORMAT_KEY = "pt2pt.dataset_format"

#: Columns stored inside part files: what varies from row to row. Campaign and tool live
#: in the directory names, the run in the file name, and its transport, placement and host
#: pair in the runs table (RUN_LEVEL_COLUMNS): the same for every row of a run.
PART_COLUMNS = [c for c in SAMPLES_SCHEMA
                if c not in ("campaign", "tool") and c not in RUN_LEVEL_COLUMNS]
#: Their dtypes on disk (:func:`scan` casts to SAMPLES_SCHEMA).
PART_DTYPES = {c: SAMPLES_SCHEMA[c] for c in PART_COLUMNS}

#: series_table's result: column order and dtypes (a stored summary must match exactly).
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    **{k: pl.String() for k in SERIES_KEYS},
    "n_samples": pl.UInt64(), "size_min": pl.UInt64(), "size_max": pl.UInt64(),
    **{c: pl.Float64() for c in summary_file.FLOAT_COLUMNS},
}
assert tuple(SUMMARY_SCHEMA) == summary_file.COLUMNS


def _check(dataset: Path) -> Path:
    dataset = Path(dataset)
    if not dataset.is_dir():
        if dataset.exists():  # a file, /dev/null, a FIFO: "does not exist" would mislead
            raise UserError(f"{dataset} is not a folder, so it is not a dataset",
                            where=str(dataset), hint="give the folder that 'pt2pt ingest "
                            "PATH... --dataset DIR' wrote")
        raise UserError(f"dataset directory {dataset} does not exist", where=str(dataset),
                        hint="create it with 'pt2pt ingest PATH... --dataset DIR'")
    # A FIFO in its place would block every reader; is_file() alone would call it "absent".
    inputs.refuse_special(dataset / RUNS_FILE, "runs table")
    return dataset


def require_ingested(dataset: str | Path, what: str = "dataset") -> Path:
    """The folder, if something was ingested into it; else a UserError saying what to run.

    Readers accept an empty folder (it is a dataset nothing was ingested into yet), but a
    command given such a folder was almost always given the wrong one (the campaign folder,
    the demo's output folder): saying "no raw samples match" would send the user hunting for
    a series instead of the path.
    """
    dataset = _check(Path(dataset))
    if not (dataset / RUNS_FILE).is_file():
        inside = sorted(p.name for p in dataset.iterdir() if (p / RUNS_FILE).is_file()) \
            if dataset.is_dir() else []
        nearby = (f" It holds a dataset in '{dataset / inside[0]}': give that folder."
                  if inside else "")
        raise UserError(f"no pt2pt-kit {what} here: nothing has been ingested into this folder."
                        + nearby, where=str(dataset),
                        hint="ingest raw files first with 'pt2pt ingest FILES... --dataset "
                        f"{dataset}' (or 'pt2pt collect CAMPAIGN_DIR --dataset {dataset}' after "
                        "a campaign); 'pt2pt datasets DIR' lists what a folder holds")
    return dataset


def runs(dataset: str | Path) -> pl.DataFrame:
    """The runs table (RUNS_SCHEMA); empty when nothing was ingested yet."""
    return _load_runs(_check(Path(dataset)))[0]


def _load_runs(dataset: Path) -> tuple[pl.DataFrame, bytes]:
    """The runs table and the exact bytes it was read from (the summary stamp hashes them).

    Reading the bytes once means the table and its fingerprint can never come from two
    different commits.
    """
    path = dataset / RUNS_FILE
    if not path.is_file():
        return pl.DataFrame(schema=RUNS_SCHEMA), b""
    try:
        data = path.read_bytes()
        table = pl.read_parquet(io.BytesIO(data))
        layout = pl.read_parquet_metadata(io.BytesIO(data)).get(FORMAT_KEY, "1")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"cannot read the runs table ({exc})", where=str(path),
                        hint="the file is damaged; restore it from a backup") from None
    if not layout.isdigit() or int(layout) > DATASET_FORMAT:
        raise UserError(f"the dataset's format is {layout!r} ({FORMAT_KEY} in its runs "
                        f"table); this pt2pt-kit reads formats up to {DATASET_FORMAT}",
                        where=str(path), hint="read it with the pt2pt-kit that wrote it or a "
                        "newer one (git pull, then make venv)")
    missing = [c for c in ("run_id", "campaign", "tool") if c not in table.columns]
    if missing:
        raise UserError(f"runs table lacks column(s) {', '.join(missing)}", where=str(path),
                        hint="this is not a pt2pt-kit dataset, or one from another kit version")
    # Columns added to RUNS_SCHEMA after a dataset was written read as nulls.
    table = table.select([(pl.col(c) if c in table.columns else pl.lit(None)).cast(t).alias(c)
                          for c, t in RUNS_SCHEMA.items()])
    return _fill_placement(table), data


def _fill_placement(table: pl.DataFrame) -> pl.DataFrame:
    """Runs ingested before placement was recorded: derive it from their hosts.

    Same host for both ranks is intra-node, two hosts inter-node; no hosts means unknown
    (``placement_source`` says which). The next ingest into the dataset stores the result.
    """
    missing = table["placement"].is_null()
    if not missing.any():
        return table
    from kit.data.placement import resolve

    found = [resolve((hosts or "").split(",")) if gone else None
             for hosts, gone in zip(table["hosts"].to_list(), missing.to_list(), strict=True)]
    return table.with_columns(
        placement=pl.Series([f.placement if f else p for f, p in
                             zip(found, table["placement"].to_list(), strict=True)],
                            dtype=pl.String),
        placement_source=pl.Series([f.source if f else p for f, p in
                                    zip(found, table["placement_source"].to_list(),
                                        strict=True)], dtype=pl.String),
        host_pair=pl.Series([f.host_pair if f else p for f, p in
                             zip(found, table["host_pair"].to_list(), strict=True)],
                            dtype=pl.String))


def _wanted(dataset: Path, run_table: pl.DataFrame) -> dict[Path, set[str]]:
    """Partition folder -> the committed runs whose parts it holds."""
    wanted: dict[Path, set[str]] = {}
    for campaign, tool, run_id in run_table.select("campaign", "tool", "run_id").iter_rows():
        wanted.setdefault(partition_dir(dataset, campaign, tool), set()).add(run_id)
    return wanted


def committed_parts(dataset: Path, run_table: pl.DataFrame) -> list[Path]:
    """Part files whose run is committed in ``run_table`` (large runs have several), less
    those that are damaged or truncated (kit.data.integrity warns about them and about
    missing ones)."""
    return _readable(dataset, run_table, summary_file.committed_files(_wanted(dataset,
                                                                              run_table)))


def _readable(dataset: Path, run_table: pl.DataFrame, files: list[Path]) -> list[Path]:
    runs = [(run_id, parts, partition_dir(dataset, campaign, tool)) for run_id, parts, campaign,
            tool in run_table.select("run_id", integrity.PARTS_COLUMN, "campaign",
                                     "tool").iter_rows()]
    return integrity.readable(dataset, files, runs)


def scan(dataset: str | Path) -> pl.LazyFrame:
    """All committed samples as a lazy frame with every SAMPLES_SCHEMA column.

    Filters on ``campaign``/``tool`` prune whole partitions (hive partitioning).
    """
    dataset = _check(Path(dataset))
    run_table = runs(dataset)
    _tidy_if_idle(dataset, run_table)
    return _scan_files(committed_parts(dataset, run_table), run_table)


def scan_parts(files: list[Path], run_table: pl.DataFrame) -> pl.LazyFrame:
    """:func:`scan` of some committed part files only (``run_table``: :func:`runs`), with
    the same columns, defaults and casts (a caller reading a large series one part at a
    time)."""
    return _scan_files(files, run_table)


#: Above this many runs the run-level columns are joined on each row's part file instead
#: of one scan per run with them as literals (a plan of hundreds of scans is slow to build).
_MAX_RUN_GROUPS = 32


def _scan_files(files: list[Path], run_table: pl.DataFrame) -> pl.LazyFrame:
    """Scan part files; the run-level columns (run, transport, placement, host pair) come
    from ``run_table`` by each file's run (its name).

    With few runs, each run's files are scanned with its values as literals (a literal
    costs nothing per row); with many, every row carries its file's path (dictionary-
    encoded, about as cheap) and the values are joined on it.
    """
    if not files:
        return pl.LazyFrame(schema=SAMPLES_SCHEMA)
    groups, run_values = _runs_of_files(files, run_table)
    hive = {"campaign": pl.String, "tool": pl.String}
    # schema + missing_columns: part files written before a column of
    # OPTIONAL_SAMPLE_DEFAULTS existed read it as null, filled with its default below;
    # extra_columns: older parts also stored the run-level run_id and transport
    part: dict[str, Any] = {"schema": PART_DTYPES, "missing_columns": "insert",
                            "extra_columns": "ignore", "hive_partitioning": True,
                            "hive_schema": hive}

    if len(groups) <= _MAX_RUN_GROUPS:
        frames = [pl.scan_parquet(paths, **part)
                  .with_columns(**{c: pl.lit(v) for c, v in
                                   zip(RUN_LEVEL_COLUMNS, run_values(run_id), strict=True)})
                  for run_id, paths in groups.items()]
        lf = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    else:
        lookup = pl.DataFrame([(str(p), *run_values(run_id)) for run_id, paths in groups.items()
                               for p in paths],
                              schema=["_part", *RUN_LEVEL_COLUMNS], orient="row")
        lf = (pl.scan_parquet(files, include_file_paths="_part", **part)
              .join(lookup.lazy(), on="_part", how="left").drop("_part"))
    return lf.select([pl.col(c).cast(t).fill_null(OPTIONAL_SAMPLE_DEFAULTS[c])
                      if c in OPTIONAL_SAMPLE_DEFAULTS else pl.col(c).cast(t)
                      for c, t in SAMPLES_SCHEMA.items()])


def series_table(dataset: str | Path) -> pl.DataFrame:
    """One row per series (SERIES_KEYS) with counts, size range and two summary figures.

    * ``n_samples``: rows outside warm-up (aggregate rows count once each);
    * ``latency_s`` (+ ``_lo``, ``_hi``: its 95 % interval): kit.figures.latency's figure,
      the median time of messages <= 64 B (or of the series' smallest octave);
    * ``bandwidth_Bps`` (+ ``_lo``, ``_hi``): kit.figures.bandwidth's effective bandwidth,
      the median of size / time over the series' top octave of sizes, in bytes per second.

    Rows are those of :func:`series_predicate` (aggregate series count their rows).

    Served from ``series.json`` when its stamp matches the committed data (opening a
    10 M-sample dataset must not rescan it); otherwise computed from the samples and stored
    for next time if the folder is writable (best effort: a read-only dataset still opens).
    """
    return _series(dataset)[0]


def listing(dataset: str | Path) -> summary_file.Summary:
    """:func:`series_table`'s rows and the runs per ``placement_source`` (the notes under
    `pt2pt datasets`), from one read of the runs table."""
    table, state = _series(dataset)
    return summary_file.Summary(table.rows(), _placement_sources(state.run_table))


def _series(dataset: str | Path) -> tuple[pl.DataFrame, _Committed]:
    dataset = _check(Path(dataset))
    state = _committed(dataset)
    if not state.runs_bytes:  # nothing ingested: no summary to keep
        return _compute_series(state.files, state.run_table), state
    cached = summary_file.read(dataset, state.stamp)
    if cached is not None:
        return _as_table(cached), state
    table = _compute_series(state.files, state.run_table)
    _save_quietly(dataset, table, state)
    return table, state


#: Ingest refreshes the summary only up to this many committed rows. The refresh rescans the
#: whole dataset (exact medians do not merge) and its grouped medians need ~80 bytes a row, so
#: above this it would dominate ingest's bounded memory (~0.8 GiB at 10 M rows vs 0.24 GiB for
#: the ingest itself); the first reader computes and stores it instead (~1 s at 10 M).
SUMMARY_REFRESH_MAX_ROWS = 1_000_000


def refresh_summary(dataset: Path, *, max_rows: int | None = None) -> bool:
    """Bring ``series.json`` up to date; ingest calls it right after a commit, holding
    the dataset lock, so the first open after an ingest is served from the summary.

    With ``max_rows``, a dataset holding more committed rows is left alone (a stale summary
    is ignored by readers, so skipping is always safe). Returns whether a summary is current.
    Raises OSError / PolarsError when the file cannot be written (the caller reports it;
    the committed dataset is fine either way).
    """
    state = _committed(dataset)
    if not state.runs_bytes:
        return False
    if summary_file.read(dataset, state.stamp) is not None:
        return True
    if max_rows is not None and state.rows > max_rows:
        return False
    _write_summary(dataset, _compute_series(state.files, state.run_table), state)
    return True


@dataclass(frozen=True)
class _Committed:
    """What a series table is computed from, and the stamp that identifies it."""

    runs_bytes: bytes
    files: list[Path]
    stamp: str
    rows: int  # committed rows, warm-up included (the runs table's n_samples)
    run_table: pl.DataFrame
    wanted: dict[Path, set[str]]  # partition folder -> committed runs (stored in the summary)


def commit_stamp(dataset: str | Path) -> str:
    """A fingerprint of the dataset's committed data (the runs table's bytes, the committed
    part files' names and sizes): it changes with every ingest that adds anything. Caches
    derived from the samples (series.json, the TUI's drawing summaries) are stamped with it
    and ignored when it no longer matches."""
    return _committed(_check(Path(dataset))).stamp


def _committed(dataset: Path) -> _Committed:
    run_table, data = _load_runs(dataset)
    _tidy_if_idle(dataset, run_table)
    wanted = _wanted(dataset, run_table)
    files = _readable(dataset, run_table, summary_file.committed_files(wanted))
    rows = int(run_table["n_samples"].fill_null(0).sum())
    return _Committed(data, files, summary_file.stamp(dataset, data, files), rows, run_table,
                      wanted)


def _runs_of_files(files: list[Path], run_table: pl.DataFrame
                   ) -> tuple[dict[str, list[Path]], Callable[[str], tuple[str, ...]]]:
    """The files by run (their names), and each run's RUN_LEVEL_COLUMNS values as the
    scan gives them (a run missing from ``run_table`` has its id and blanks)."""
    # a run without a program (every tool but app, runs from before the column) has ""
    blank = [UNKNOWN if c != "program" else "" for c in RUN_LEVEL_COLUMNS[1:]]
    values = {r[0]: (r[0], *(v or b for v, b in zip(r[1:], blank, strict=True))) for r in
              run_table.select(*RUN_LEVEL_COLUMNS).iter_rows()}
    groups: dict[str, list[Path]] = {}
    for path in files:
        groups.setdefault(run_of_part(path.name) or "", []).append(path)

    def run_values(run_id: str) -> tuple[str, ...]:
        return values.get(run_id, (run_id, *blank))

    return groups, run_values


def _constant_keys(files: list[Path], run_table: pl.DataFrame) -> dict[str, str]:
    """Series keys with one value in every row of ``files``, known without reading them:
    campaign and tool from the partition folders, the run-level keys from the runs table.
    Grouping millions of rows by them costs time and tells nothing."""
    groups, run_values = _runs_of_files(files, run_table)
    seen: dict[str, set[str]] = {k: set() for k in SERIES_KEYS}
    for path in files:
        for part in path.parent.parts[-2:]:
            name, sep, value = part.partition("=")
            if sep and name in ("campaign", "tool"):
                # (a '%' may be decoded by the hive reader: then read the rows' value)
                seen[name].update((value, "%") if "%" in value else (value,))
    for run_id in groups:
        for name, value in zip(RUN_LEVEL_COLUMNS, run_values(run_id), strict=True):
            if name in seen:
                seen[name].add(value)
    return {k: next(iter(v)) for k, v in seen.items()
            if len(v) == 1 and k in ("campaign", "tool", *RUN_LEVEL_COLUMNS)}


def _compute_series(files: list[Path], run_table: pl.DataFrame) -> pl.DataFrame:
    """series_table from the samples themselves (a full scan).

    Two passes so that the medians only hold the rows they use: counts and size range first
    (streaming, little memory), then the small/large rows of each series. At 10 M samples this
    halves the peak memory (1.7 -> 0.8 GiB) and the time of one grouped pass with windows.
    """
    # Only the keys that can differ are grouped on; the others are put back as columns.
    constant = _constant_keys(files, run_table) if files else {}
    keys = [k for k in SERIES_KEYS if k not in constant]
    size, time = pl.col("size"), pl.col("time")
    lf = (_scan_files(files, run_table).filter(series_predicate(aggregates=True))
          .select(*keys, "size", "time"))
    head = (lf.group_by(keys)
            .agg(n_samples=pl.len().cast(pl.UInt64), size_min=size.min(), size_max=size.max())
            .collect(engine="streaming"))
    if head.height == 0:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    bounds = head.select(*keys, _small_hi=bound_expr(pl.col("size_min")),
                         _large_lo=large_bound_expr(pl.col("size_max")))
    # A loose filter with the extreme bounds first, so the join only sees candidate rows.
    wide = (size <= bounds["_small_hi"].max()) | (size >= bounds["_large_lo"].min())
    medians = (lf.filter(wide).join(bounds.lazy(), on=keys, how="inner")
               .group_by(keys)
               .agg(*latency_exprs(size, time, pl.col("_small_hi")),
                    *bandwidth_exprs(size, time, pl.col("_large_lo")))
               .collect(engine="streaming"))
    table = head.join(medians, on=keys, how="left").sort(keys)
    return (table.with_columns(**{k: pl.lit(v, dtype=pl.String) for k, v in constant.items()})
            .with_columns([pl.col(c).cast(pl.String) for c in keys])
            .select(SUMMARY_SCHEMA.keys()))


def _as_table(summary: summary_file.Summary) -> pl.DataFrame:
    return pl.DataFrame(summary.rows, schema=SUMMARY_SCHEMA, orient="row")


def _placement_sources(run_table: pl.DataFrame) -> dict[str, int]:
    counts = run_table.group_by("placement_source").len().iter_rows()
    return {str(k): int(v) for k, v in counts if k is not None}


def _write_summary(dataset: Path, table: pl.DataFrame, state: _Committed) -> None:
    summary = summary_file.Summary(table.rows(), _placement_sources(state.run_table))
    summary_file.write(dataset, summary, state.stamp, state.wanted)


def _save_quietly(dataset: Path, table: pl.DataFrame, state: _Committed) -> None:
    """Store a summary computed by a reader, unless that cannot or should not happen.

    Skipped when an ingest holds the lock (it writes a fresher summary itself) or committed
    since ``table`` was computed; errors (read-only folder, full disk) are ignored because
    the caller already has its answer. Never waits: opening a dataset must not block.
    """
    fd = None
    try:
        lock = dataset / LOCK_FILE
        if lock.exists():
            fd = os.open(lock, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: BlockingIOError
        if _committed(dataset).stamp == state.stamp:
            _write_summary(dataset, table, state)
    except (OSError, pl.exceptions.PolarsError, UserError):
        pass
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


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


def _has_leftovers(dataset: Path, committed: set[str]) -> bool:
    """Whether a killed writer left files behind (a listing, nothing is read)."""
    if (dataset / (RUNS_FILE + TMP_SUFFIX)).exists():
        return True
    if any(dataset.glob(f"{SUMMARY_FILE}.*{TMP_SUFFIX}")) or any(
            dataset.glob(f".{SUMMARY_FILE}.*{TMP_SUFFIX}")):
        return True
    root = dataset / SAMPLES_DIR
    for folder in root.glob("campaign=*/tool=*") if root.is_dir() else ():
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                run_id = run_of_part(entry.name)
                if entry.name.endswith(TMP_SUFFIX) or (run_id is not None
                                                       and run_id not in committed):
                    return True
    return False


def _tidy_if_idle(dataset: Path, run_table: pl.DataFrame) -> None:
    """Remove what a killed ingest left behind (temp and uncommitted parts, a temp runs
    table) when no ingest is running: the next reader cleans up, not only the next ingest.

    Never waits and never fails the reader: a running ingest holds the lock (its temp files
    are live), a read-only dataset cannot be cleaned. The runs table is read again under the
    lock, so parts an ingest committed after ``run_table`` was read are not taken for
    leftovers.
    """
    try:
        if not _has_leftovers(dataset, set(run_table["run_id"].to_list())):
            return
        fd = os.open(dataset / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by an ingest: BlockingIOError
        remove_leftovers(dataset, _load_runs(dataset)[0])
    except (OSError, UserError, pl.exceptions.PolarsError):
        pass
    finally:
        os.close(fd)


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
    for tmp in [*dataset.glob(f"{SUMMARY_FILE}.*{TMP_SUFFIX}"),  # a killed summary write
                *dataset.glob(f".{SUMMARY_FILE}.*{TMP_SUFFIX}"),
                *dataset.glob(f"{summary_file.OLD_SUMMARY_FILE}.*{TMP_SUFFIX}")]:
        tmp.unlink(missing_ok=True)
    return removed


def fsync_path(path: Path) -> None:
    """fsync a file's data, or a folder's entries (what a rename wrote), by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(dataset: Path, parts: list[tuple[Path, Path]], new_runs: pl.DataFrame,
           drop: set[str] | None = None) -> None:
    """Make written temp parts visible: rename them, then replace runs.parquet atomically.

    The runs.parquet replace is the single commit point (see the module docstring). Runs in
    ``drop`` (replaced by a longer copy) leave the runs table in the same replace; their part
    files are removed after it (a kill in between leaves them uncommitted: leftovers).
    """
    drop = drop or set()
    if not parts and new_runs.height == 0 and not drop:
        return
    old = runs(dataset)
    gone = committed_parts(dataset, old.filter(pl.col("run_id").is_in(list(drop)))) \
        if drop else []
    for tmp, _final in parts:
        fsync_path(tmp)
    for tmp, final in parts:
        os.replace(tmp, final)
    for folder in {final.parent for _tmp, final in parts}:  # once per partition folder
        fsync_path(folder)
    added = new_runs.select(list(RUNS_SCHEMA)).cast(pl.Schema(RUNS_SCHEMA))
    table = pl.concat([old.filter(~pl.col("run_id").is_in(list(drop))), added])
    tmp_runs = dataset / (RUNS_FILE + TMP_SUFFIX)
    table.write_parquet(tmp_runs, metadata={FORMAT_KEY: str(DATASET_FORMAT)})
    fsync_path(tmp_runs)
    os.replace(tmp_runs, dataset / RUNS_FILE)
    fsync_path(dataset)
    for path in gone:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------- one series
#
# Everything that reads "the samples of one series" (fit, validate, report, compare, demo,
# the TUI) selects them here, so they all see the same rows: outside warm-up, a finite
# time, and -- unless the caller explicitly allows aggregates -- raw single-message rows
# only. Zero times are kept: the engine refuses them with a message that counts them (a
# timer too coarse), where dropping them here would hide that silently. An aggregate row
# (OSU's mean of 1000 messages, SkaMPI's average) is not a draw from the distribution of
# one message's time; fitting it is allowed when asked for, and then every output says so
# (:attr:`SeriesData.aggregate`).

#: The ``stat`` of rows that are single measured messages.
RAW = "raw"


def series_predicate(*, aggregates: bool) -> pl.Expr:
    """The row rule of every selection: what counts as a sample of a series.

    ``stat`` is compared as it is stored (Categorical): casting it to String first cost
    0.35 CPU-s per 10 M rows, half of reading a series' two columns."""
    rule = ~pl.col("warmup").fill_null(False) & pl.col("time").is_finite()
    return rule if aggregates else rule & (pl.col("stat") == RAW)


def parse_selector(text: str | None, where: str = "--series") -> dict[str, str]:
    """``campaign=a,placement=inter-node,host_pair=n1:n2`` → dict; UserError naming the item."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in SERIES_KEYS or not value:
            raise ModelError(f"bad series selector item {item!r}", where=where,
                             hint=f"use KEY=VALUE pairs with KEY in {', '.join(SERIES_KEYS)}, "
                             "e.g. --series transport=tcp,placement=inter-node,op=pingpong")
        out[key] = value
    return out


def describe(series: Mapping[str, object]) -> str:
    """``campaign=c,tool=probe,...`` for messages (keys in SERIES_KEYS order; an empty
    optional key, e.g. the program of a non-app series, left out)."""
    return ",".join(f"{k}={series[k]}" for k in SERIES_KEYS
                    if k in series and (series[k] != "" or k not in OPTIONAL_KEYS))


def model_selector(series: Mapping[str, object] | None) -> dict[str, str]:
    """The selector of a model's provenance ``series``: its keys, ``stat`` raw if absent.

    Models written before ``stat``/``placement``/``host_pair``/``pairs`` were recorded name
    fewer keys; a missing ``stat`` means raw (fit only used raw rows), a missing ``pairs`` one
    pair (the two-rank probe), a missing placement matches any (and :func:`select_series`
    lists the candidates when that is ambiguous).
    """
    out = {str(k): str(v) for k, v in (series or {}).items()
           if k in SERIES_KEYS and v is not None}
    out.setdefault("stat", RAW)
    out.setdefault("pairs", "1")
    return out


def _check_keys(series: Mapping[str, str], where: str) -> None:
    unknown = [k for k in series if k not in SERIES_KEYS]
    if unknown:
        raise ModelError(f"unknown series key {unknown[0]!r}", where=where,
                         hint=f"use {', '.join(SERIES_KEYS)}")


def series_rows(source: str | Path | pl.LazyFrame, series: Mapping[str, str] | None = None, *,
                aggregates: bool) -> pl.LazyFrame:
    """The rows of the series matching ``series`` (keys not given match anything).

    ``source`` is a dataset folder or a frame from :func:`scan`. Filters only: the caller
    that wants exactly one series uses :func:`select_series`.
    """
    series = dict(series or {})
    _check_keys(series, "series")
    lf = scan(source) if isinstance(source, str | Path) else source
    for k, v in series.items():
        lf = lf.filter(pl.col(k).cast(pl.String) == str(v))
    return lf.filter(series_predicate(aggregates=aggregates))


def matching_series(source: str | Path | pl.LazyFrame, series: Mapping[str, str] | None = None,
                    *, aggregates: bool) -> pl.DataFrame:
    """The series (SERIES_KEYS as strings) matching ``series``, with ``n`` rows each, sorted."""
    keys = list(SERIES_KEYS)
    return (series_rows(source, series, aggregates=aggregates)
            .group_by([pl.col(k).cast(pl.String) for k in keys]).agg(n=pl.len())
            .sort(keys).collect(engine="streaming"))  # bounded memory at 10^8 rows


@dataclass(frozen=True)
class SeriesData:
    """The selected rows of one series: what a model of it is fitted and validated on."""

    keys: dict[str, str]  # every SERIES_KEYS value of the series
    size: np.ndarray  # float64 bytes
    time: np.ndarray  # float64 seconds
    run_id: np.ndarray  # the run of each row (for group splits)

    @property
    def aggregate(self) -> bool:
        """True when the rows are statistics a tool printed (mean, p99...), not samples."""
        return self.keys.get("stat", RAW) != RAW

    def __len__(self) -> int:
        return int(self.size.shape[0])


def resolve_series(dataset: str | Path, series: Mapping[str, str] | None = None, *,
                   aggregates: bool = False, where: str = "--series") -> dict[str, str]:
    """The one series matching ``series``: every SERIES_KEYS value, without reading its rows.

    With a single series in the dataset no selector is needed; several matches are a
    UserError listing them, so the user can add keys. ``aggregates`` is the caller's
    explicit choice: False selects raw rows only (an aggregate-only match is an error that
    says how to allow it).
    """
    series = dict(series or {})
    _check_keys(series, where)
    lf = scan(dataset)
    found = matching_series(lf, series, aggregates=aggregates)
    if found.height == 0:
        stats = (series_rows(lf, series, aggregates=True)
                 .select(pl.col("stat").cast(pl.String).unique()).collect()
                 .to_series().to_list())
        if stats and not aggregates and RAW not in stats:
            kinds = ", ".join(sorted(stats))
            if series.get("op") == "stream" and stats == ["mean"]:
                raise ModelError("these stream rows were ingested as per-window means (before "
                                 "stream windows became raw samples of the per-message gap)",
                                 where=str(dataset),
                                 hint="ingest the probe's files again into a new dataset, or "
                                 "fit them as they are with pt2pt fit --aggregates")
            raise ModelError(f"the selected rows hold only aggregates ({kinds}), not raw samples",
                             where=str(dataset),
                             hint="fit a series measured by the probe or another raw-timing "
                             "tool, or allow aggregates (pt2pt fit --aggregates): the model "
                             "then describes the tool's statistic, and its noise is unknown")
        what = "rows" if aggregates else "raw samples"
        raise ModelError(f"no {what} match {describe(series) or 'the dataset'}",
                         where=str(dataset),
                         hint="list the series with 'pt2pt datasets' and pick one with --series")
    if found.height > 1:
        listing = "; ".join(f"{describe(r)} ({r['n']} rows)" for r in found.iter_rows(named=True))
        raise ModelError(f"{found.height} series match, a model needs one: {listing}",
                         where=where, hint="add keys to --series to pick exactly one")
    row = found.row(0, named=True)
    return series_dict(row)


#: The columns of :func:`series_frame`, in its order and dtypes.
FRAME_SCHEMA: dict[str, pl.DataType] = {"run_id": pl.String(), "seq": pl.Int64(),
                                        "size": pl.Float64(), "time": pl.Float64()}


def series_lazy(dataset: str | Path, series: Mapping[str, str]) -> pl.LazyFrame:
    """:func:`series_frame`'s query, not yet collected (to count or subsample it lazily).

    A key with one value in the whole dataset selects nothing, and comparing strings over
    millions of rows is most of a series' read time: only the keys that differ between
    the dataset's series (its stored :func:`series_table`) are filtered on.
    """
    series = {k: str(v) for k, v in series.items()}
    _check_keys(series, "series")
    table = series_table(dataset)
    varying = {k: v for k, v in series.items()
               if table.height == 0 or table[k].n_unique() > 1 or table[k][0] != v}
    aggregates = series.get("stat", RAW) != RAW
    return (series_rows(dataset, varying, aggregates=aggregates)
            .select([pl.col(c).cast(t) for c, t in FRAME_SCHEMA.items()]))


def series_frame(dataset: str | Path, series: Mapping[str, str]) -> pl.DataFrame:
    """THE rows of one series: ``run_id``, ``seq``, ``size``, ``time``, sorted by run and seq.

    ``series`` names the series by its keys (all of them, as :func:`resolve_series` gives;
    keys left out match anything). Its ``stat`` decides the rows: raw samples for a raw
    series, the tool's statistic otherwise; :func:`series_predicate` drops warm-up and
    non-finite times. Every surface that reads a series' rows (fit, report, TUI, diff,
    simulate, validate, LogGP, compare) reads them here, so they all see the same rows.
    """
    return series_lazy(dataset, series).sort("run_id", "seq").collect()


def select_series(dataset: str | Path, series: Mapping[str, str] | None = None, *,
                  aggregates: bool = False, where: str = "--series") -> SeriesData:
    """The one series matching ``series`` (:func:`resolve_series`) and its rows
    (:func:`series_frame`)."""
    chosen = resolve_series(dataset, series, aggregates=aggregates, where=where)
    data = series_frame(dataset, chosen)
    return SeriesData(chosen, data["size"].to_numpy(), data["time"].to_numpy(),
                      data["run_id"].to_numpy())
