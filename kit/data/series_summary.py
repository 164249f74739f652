"""The stored series summary (``DATASET/series.json``), readable without Polars.

Listing a dataset (`pt2pt datasets`) should cost what starting Python costs: importing Polars
alone takes ~0.5 s. The summary is small (one row per series), so it is kept as JSON that this
module reads and checks with the standard library; :mod:`kit.data.dataset` computes it (a Polars
scan) and writes it through :func:`write`.

A summary is served only when its **stamp** matches the committed data: a fingerprint of
runs.parquet's bytes, the committed part files' names and sizes, and the summary format. Which
part files are committed follows from the runs table, which needs Polars to read; the file
therefore also records which runs each partition folder holds, and since the runs table's
bytes are in the stamp, that record can only be reused while the runs table is unchanged.
A **digest** of the content rejects a file that parses but holds other values. A summary that
fails either check, or does not parse, is ignored and recomputed: it costs time, never
correctness.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.core.atomicwrite import write_text
from kit.core.inputs import read_regular
from kit.data.series_keys import SERIES_KEYS

SAMPLES_DIR = "samples"
RUNS_FILE = "runs.parquet"
SUMMARY_FILE = "series.json"
#: The Parquet summary of kits before series.json; removed when a new summary is written.
OLD_SUMMARY_FILE = "series.parquet"
PART_PREFIX = "part-"
TMP_SUFFIX = ".tmp"
#: Bump whenever the summary's columns or definitions change: summaries stamped with another
#: version are then recomputed instead of being shown with the old meaning.
SUMMARY_VERSION = 5  # 3: ``pairs`` became a series key; 4: stored as JSON; 5: kit.figures'
#: latency and bandwidth with their intervals
#: The summary's columns, in order: the series keys (strings), then these. The figures are
#: kit.figures.latency's and kit.figures.bandwidth's, each with its interval.
COUNT_COLUMNS = ("n_samples", "size_min", "size_max")
FLOAT_COLUMNS = ("latency_s", "latency_s_lo", "latency_s_hi",
                 "bandwidth_Bps", "bandwidth_Bps_lo", "bandwidth_Bps_hi")
COLUMNS: tuple[str, ...] = (*SERIES_KEYS, *COUNT_COLUMNS, *FLOAT_COLUMNS)
_KIND = "pt2pt-series-summary"


def partition_dir(dataset: Path, campaign: str, tool: str) -> Path:
    """The folder of one campaign's parts of one tool (hive partitioning)."""
    return Path(dataset) / SAMPLES_DIR / f"campaign={campaign}" / f"tool={tool}"


def part_path(dataset: Path, campaign: str, tool: str, run_id: str) -> Path:
    return partition_dir(dataset, campaign, tool) / f"{PART_PREFIX}{run_id}.parquet"


def run_of_part(name: str) -> str | None:
    """The run_id in a part file name (``part-<run>.parquet`` or ``part-<run>-0003.parquet``)."""
    if not (name.startswith(PART_PREFIX) and name.endswith(".parquet")):
        return None
    return name[len(PART_PREFIX):-len(".parquet")].split("-")[0]


def committed_files(wanted: Mapping[Path, set[str]]) -> list[Path]:
    """Part files in each folder whose run is in that folder's set (large runs have several)."""
    files: list[Path] = []
    for folder, run_ids in wanted.items():
        if folder.is_dir():
            files.extend(sorted(p for p in folder.iterdir() if run_of_part(p.name) in run_ids))
    return files


def stamp(dataset: Path, runs_bytes: bytes, files: Sequence[Path]) -> str:
    """The fingerprint of what a summary is computed from (see the module docstring)."""
    digest = hashlib.sha256(f"pt2pt series summary v{SUMMARY_VERSION} "
                            f"keys={','.join(SERIES_KEYS)}\n".encode())
    digest.update(hashlib.sha256(runs_bytes).digest())
    for path in files:  # parts are immutable once committed; sizes catch manual tampering
        try:
            size = path.stat().st_size
        except OSError:
            size = -1
        digest.update(f"{path.relative_to(dataset).as_posix()}\0{size}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class Summary:
    """One row per series (:data:`COLUMNS`), and how many runs know their placement how
    (``placement_source`` counts of the runs table, for the notes under the listing)."""

    rows: list[tuple[Any, ...]]
    placement_sources: dict[str, int]


def _digest(rows: list[tuple[Any, ...]], placement_sources: Mapping[str, int]) -> str:
    # JSON floats are the shortest round-trip repr, so equal digests mean equal values.
    payload = json.dumps([list(COLUMNS), [list(r) for r in rows], dict(sorted(
        placement_sources.items()))])
    return hashlib.sha256(payload.encode()).hexdigest()


def _valid_row(row: object) -> bool:
    if not isinstance(row, list) or len(row) != len(COLUMNS):
        return False
    keys, counts, floats = (row[:len(SERIES_KEYS)], row[len(SERIES_KEYS):-len(FLOAT_COLUMNS)],
                            row[-len(FLOAT_COLUMNS):])
    return (all(isinstance(v, str) for v in keys)
            and all(type(v) is int and 0 <= v < 2**64 for v in counts)
            and all(v is None or type(v) is float for v in floats))


@dataclass(frozen=True)
class _Stored:
    """A parsed, intact summary file: its stamp, its record of committed runs per partition
    folder (relative paths), and the summary itself."""

    stamp: object
    folders: dict[Path, set[str]]
    summary: Summary


def _parse(data: bytes, expected_stamp: str | None) -> _Stored | None:
    """The stored summary if well-formed, intact and (when given) of that stamp."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("kind") != _KIND or doc.get("columns") != list(
            COLUMNS):
        return None
    rows, sources = doc.get("rows"), doc.get("placement_sources")
    if not isinstance(rows, list) or not all(_valid_row(r) for r in rows):
        return None
    if not isinstance(sources, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in sources.items()):
        return None
    if expected_stamp is not None and doc.get("stamp") != expected_stamp:
        return None
    folders = _folders(doc.get("parts"))
    if folders is None:
        return None
    summary = Summary([tuple(r) for r in rows], dict(sources))
    if doc.get("digest") != _digest(summary.rows, summary.placement_sources):
        return None
    return _Stored(doc.get("stamp"), folders, summary)


def _folders(parts: object) -> dict[Path, set[str]] | None:
    """The record of committed runs per partition folder (relative paths), if well-formed.
    Folders outside ``samples/`` are refused: this file must never make a reader list them."""
    if not isinstance(parts, dict):
        return None
    wanted: dict[Path, set[str]] = {}
    for folder, run_ids in parts.items():
        rel = Path(folder) if isinstance(folder, str) else None
        if (rel is None or rel.is_absolute() or ".." in rel.parts or not rel.parts
                or rel.parts[0] != SAMPLES_DIR or not isinstance(run_ids, list)
                or not all(isinstance(r, str) for r in run_ids)):
            return None
        wanted[rel] = set(run_ids)
    return wanted


def read(dataset: Path, expected_stamp: str) -> Summary | None:
    """The stored summary if it belongs to ``expected_stamp`` and is intact, else None."""
    try:
        data = read_regular(Path(dataset) / SUMMARY_FILE)
    except OSError:  # missing, a folder, a FIFO, unreadable
        return None
    parsed = _parse(data, expected_stamp)
    return None if parsed is None else parsed.summary


def read_current(dataset: Path) -> Summary | None:
    """The stored summary if it is current, decided without Polars (None: ask kit.data.dataset).

    The runs each partition folder holds come from the file itself; they are trusted only
    because the stamp they reproduce includes the runs table's bytes (a different runs table
    gives a different stamp). Folders outside ``samples/`` are never listed.
    """
    dataset = Path(dataset)
    try:
        runs_bytes = read_regular(dataset / RUNS_FILE)
        data = read_regular(dataset / SUMMARY_FILE)
    except OSError:
        return None
    parsed = _parse(data, None)
    if parsed is None:
        return None
    wanted = {dataset / rel: run_ids for rel, run_ids in parsed.folders.items()}
    try:
        current = stamp(dataset, runs_bytes, committed_files(wanted))
    except (OSError, ValueError):
        return None
    return parsed.summary if parsed.stamp == current else None


def write(dataset: Path, summary: Summary, stamp_: str,
          wanted: Mapping[Path, set[str]]) -> None:
    """Atomically replace series.json (temp file + rename). No fsync: after a crash a torn
    summary fails to parse or its digest and is recomputed."""
    dataset = Path(dataset)
    doc = {
        "kind": _KIND, "version": SUMMARY_VERSION, "stamp": stamp_,
        "digest": _digest(summary.rows, summary.placement_sources),
        "parts": {folder.relative_to(dataset).as_posix(): sorted(ids)
                  for folder, ids in sorted(wanted.items())},
        "placement_sources": dict(sorted(summary.placement_sources.items())),
        "columns": list(COLUMNS),
        "rows": [list(r) for r in summary.rows],
    }
    write_text(dataset / SUMMARY_FILE, json.dumps(doc) + "\n")
    with contextlib.suppress(OSError):
        (dataset / OLD_SUMMARY_FILE).unlink(missing_ok=True)
