"""A dataset's part files are checked before anything reads them.

Two flipped bytes in a part file gave 1,088 times like -1.5e223 s, read without complaint; a
truncated part made every reader end in a Polars traceback; a deleted part's rows vanished
without a word. So ingest records, for every run, its part files' names, sizes and SHA-256
(the runs table's ``parts`` column, committed with the run), and every reader asks
:func:`readable` which of the committed part files to read: a part that is missing, of
another size or another checksum is left out with a :class:`kit.core.errors.DataWarning`
naming it and its run, and the rest of the dataset is read as usual. Runs ingested before
checksums were recorded get the check Parquet allows without them (the ``PAR1`` magic at
both ends: a truncated file lacks it).

A checksum is computed once per file version in a process: the result is remembered by the
file's device, inode, size, modification and change times, so ``fit --all`` or the TUI,
which scan many times, hash each part once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kit.core.errors import warn
from kit.data.series_summary import run_of_part

#: The runs table's column holding a run's parts (JSON list of {name, bytes, sha256}).
PARTS_COLUMN = "parts"
_MAGIC = b"PAR1"
_memo: dict[tuple[int, ...], str] = {}


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def sha256(path: Path) -> str:
    """The file's SHA-256 (hex), remembered for this version of the file."""
    with open(path, "rb") as fh:
        key = _key(os.fstat(fh.fileno()))
        known = _memo.get(key)
        if known is not None:
            return known
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if len(_memo) > 100_000:
        _memo.clear()
    _memo[key] = digest
    return digest


def describe(files: Iterable[tuple[Path, str]]) -> str:
    """The ``parts`` value of a run: (written file, its committed name) pairs, as JSON."""
    listed = [{"name": name, "bytes": path.stat().st_size, "sha256": sha256(path)}
              for path, name in files]
    return json.dumps(listed, separators=(",", ":"))


def _manifest(value: Any) -> dict[str, tuple[int, str]] | None:
    """name -> (bytes, sha256) from a ``parts`` value; None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        items = json.loads(value)
        return {str(i["name"]): (int(i["bytes"]), str(i["sha256"])) for i in items}
    except (ValueError, TypeError, KeyError):
        return None


def _parquet_whole(path: Path, size: int) -> bool:
    """The check Parquet allows without a checksum: its magic at both ends."""
    if size < 12:
        return False
    with open(path, "rb") as fh:
        head = fh.read(4)
        fh.seek(-4, os.SEEK_END)
        return head == _MAGIC and fh.read(4) == _MAGIC


def _problem(path: Path, expected: tuple[int, str] | None) -> str | None:
    """Why ``path`` cannot be read, or None."""
    try:
        size = path.stat().st_size
        if expected is not None:
            if size != expected[0]:
                return f"is {size:,} bytes, {expected[0]:,} were written (truncated or replaced)"
            if sha256(path) != expected[1]:
                return "does not match its checksum (damaged)"
            return None
        return None if _parquet_whole(path, size) else "is not a whole Parquet file (truncated)"
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"


def readable(dataset: Path, files: list[Path], runs: list[tuple[str, Any, Path]]) -> list[Path]:
    """The part files of ``files`` that are whole; a warning for each one that is not and
    for each listed part that is missing.

    ``runs``: (run_id, its ``parts`` value, its partition folder) of every committed run.
    """
    by_run: dict[str, tuple[dict[str, tuple[int, str]] | None, Path]] = {
        run_id: (_manifest(parts), folder) for run_id, parts, folder in runs}
    present = {p.name for p in files}
    keep: list[Path] = []
    bad: list[str] = []
    for path in files:
        run_id = _run_of(path.name)
        listed, _folder = by_run.get(run_id or "", (None, path.parent))
        expected = listed.get(path.name) if listed is not None else None
        if listed is not None and expected is None:
            why: str | None = "is not one of its run's parts"
        else:
            why = _problem(path, expected)
        if why is None:
            keep.append(path)
        else:
            bad.append(f"{_rel(dataset, path)} (run {run_id}) {why}")
    for run_id, (listed, folder) in by_run.items():
        if listed is not None:
            bad += [f"{_rel(dataset, folder / name)} (run {run_id}) is missing"
                    for name in sorted(listed) if name not in present]
        elif not any(_run_of(name) == run_id for name in present):
            bad.append(f"{_rel(dataset, folder)}: no part file of run {run_id}")
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        warn(f"{dataset}: {len(bad)} part file(s) cannot be read and are left out (their "
             f"samples are missing from every result): {shown}. Restore them from a backup, "
             "or ingest the runs' source files into a new dataset.")
    return keep


def _rel(dataset: Path, path: Path) -> str:
    try:
        return path.relative_to(dataset).as_posix()
    except ValueError:
        return str(path)


def _run_of(name: str) -> str | None:
    return run_of_part(name)
