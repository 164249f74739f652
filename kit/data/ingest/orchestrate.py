"""``ingest()``: files and folders in, committed dataset runs out.

Each input file is detected, hashed, parsed and written to a temp part file on its own; any
IngestError is recorded against that file and the others carry on. Only at the end are the
written parts renamed into place and the runs table replaced (kit.data.dataset.commit), so an
interrupted ingest leaves the previous dataset readable and unchanged. Then, still under the
lock, the series summary (kit.data.dataset.refresh_summary) is brought up to date.

Re-ingesting is a no-op: a run's id is the SHA-256 of the bytes of its files (the primary
file plus its companions), and a run already in the runs table is skipped. Changing
``--campaign``/``--transport``/``--op`` therefore does not re-ingest a file already in the
dataset; ingest into a fresh dataset for that.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import signal
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import polars as pl

from kit import tools
from kit.core.errors import IngestError, UserError
from kit.core.inputs import kind_of
from kit.data import dataset as ds
from kit.data import integrity
from kit.data.ingest import sniff
from kit.data.placement import resolve as resolve_placement
from kit.data.schema import OPTIONAL_SAMPLE_DEFAULTS, PLACEMENTS, RUNS_SCHEMA
from kit.measure.conditions import Conditions, columns
from kit.tools import identity
from kit.tools.parsing import (
    Frame,
    ParsedRun,
    fail,
    make_frame,
    safe_name,
    transport_from_name,
)


@dataclass
class IngestReport:
    """What one ingest did. ``files_failed`` holds (path, one-paragraph message)."""

    files_ok: int = 0
    files_failed: list[tuple[Path, str]] = field(default_factory=list)
    rows_added: int = 0
    runs_added: int = 0
    files_skipped: list[tuple[Path, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    #: files not ingested because their writer is still at work (kit.tools.identity)
    running: list[Path] = field(default_factory=list)
    #: (run replaced, run replacing it): a longer copy of the same run
    replaced: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.files_failed

    def summary(self) -> str:
        text = (f"{self.files_ok} file(s) ingested: {self.runs_added} run(s), "
                f"{self.rows_added} row(s) added; {len(self.files_skipped)} skipped; "
                f"{len(self.files_failed)} failed")
        return text + "."


class DatasetWriteError(UserError):
    """The dataset cannot be written (disk full, read-only, permission denied): nothing of
    this ingest was committed. Not an IngestError: it is no input file's fault, and the
    whole ingest stops instead of failing file after file."""


_STORAGE_ERRNOS = {
    errno.ENOSPC: ("no space left on the device", "free some space, or give --dataset a folder "
                   "on another file system, and run the same command again"),
    errno.EDQUOT: ("the disk quota is exceeded", "free some space within your quota and run "
                   "the same command again"),
    errno.EROFS: ("the file system is read-only", "ingest into a dataset on a writable file "
                  "system (copy the dataset first if you want to extend it)"),
    errno.EACCES: ("permission denied", "check the dataset folder's owner and permissions, "
                   "or ingest into a dataset you can write"),
    errno.EPERM: ("operation not permitted", "check the dataset folder's owner and "
                  "permissions, or ingest into a dataset you can write"),
}
_OS_ERROR_IN_TEXT = re.compile(r"os error (\d+)")


def storage_error(exc: BaseException, dataset: Path) -> DatasetWriteError | None:
    """The one-paragraph error for a failed write into ``dataset``, if it is a storage error.

    Polars reports a failed write as a ComputeError whose text ends in ``(os error 28)``,
    not as an OSError; both forms are recognised.
    """
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None and isinstance(exc, pl.exceptions.PolarsError):
        found = _OS_ERROR_IN_TEXT.search(str(exc))
        code = int(found.group(1)) if found else None
    if code not in _STORAGE_ERRNOS:
        return None
    what, hint = _STORAGE_ERRNOS[code]
    return DatasetWriteError(f"cannot write to the dataset: {what} ({errno.errorcode[code]}); "
                             "nothing of this ingest was committed and the dataset is as it "
                             "was before", where=str(dataset), hint=hint, exit_code=1)


class Interrupted(BaseException):
    """SIGTERM/SIGINT during an ingest (a BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` swallows it). ``report`` says what was read; ``committed`` whether
    this ingest's runs were committed before it stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.report: IngestReport | None = None
        self.committed = False

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


_commit_state: dict[str, int | bool | None] = {"in_commit": False, "pending": None,
                                               "received": None}


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _commit_state["received"] = signum
    if _commit_state["in_commit"]:  # finish the commit first: all of this ingest or none
        _commit_state["pending"] = signum
        return
    raise Interrupted(signum)


def _signalled() -> Interrupted | None:
    """The Interrupted of a signal received during this ingest, if any.

    The handler's exception can be lost: when the signal lands in Python code that native code
    calls back (Polars converting a schema), Polars prints "Exception ignored" and then fails
    with an error of its own, or carries on. So a received signal is raised again at the next
    safe point, and an error raised after it is reported as the interruption it is.
    """
    signum = _commit_state["received"]
    return None if signum is None else Interrupted(int(signum))


def _stop_if_signalled() -> None:
    stop = _signalled()
    if stop is not None:
        raise stop


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While active (main thread only: the CLI), SIGTERM and SIGINT raise :class:`Interrupted`
    at a clean point: temp parts are removed, and a signal inside the commit is held until
    the commit is complete."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _commit_state["received"] = None
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    old_hook = sys.unraisablehook

    def quiet_lost_signal(unraisable: Any) -> None:
        # The handler's Interrupted, lost in native code that called back into Python
        # (Polars prints it as "Exception ignored ... Traceback"): it is raised again at the
        # next safe point (_signalled), so the user sees the one-paragraph message only.
        if not isinstance(unraisable.exc_value, Interrupted):
            old_hook(unraisable)

    sys.unraisablehook = quiet_lost_signal
    try:
        yield
    finally:
        sys.unraisablehook = old_hook
        for sig, handler in old.items():
            signal.signal(sig, handler)
        _commit_state["received"] = None


@contextlib.contextmanager
def _commit_window() -> Iterator[None]:
    _commit_state["in_commit"], _commit_state["pending"] = True, None
    failed = False
    try:
        _test_pause()
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _commit_state["in_commit"] = False
        pending = _commit_state["pending"]
        _commit_state["pending"] = None
        if pending is not None and not failed:
            exc = Interrupted(int(pending))
            exc.committed = True
            raise exc


def _test_pause() -> None:
    """Test hook: ``PT2PT_TEST_COMMIT_PAUSE=FILE:SECONDS`` creates FILE on entering the commit
    window and waits there, so a test can send a signal inside it."""
    spec = os.environ.get("PT2PT_TEST_COMMIT_PAUSE")
    if spec:
        marker, _, seconds = spec.rpartition(":")
        Path(marker).touch()
        time.sleep(float(seconds))


def _option_name(value: str | None, option: str) -> str | None:
    if value is None:
        return None
    if not value or safe_name(value) != value:
        raise UserError(f"'{value}' is not usable as a name", where=f"option {option}",
                        hint="use letters, digits and . _ + - only")
    return value


def _walk(root: Path, report: IngestReport, dataset: Path | None) -> list[Path]:
    """Regular files under ``root``, symbolic links to folders followed (each folder once),
    hidden names left out. Nothing is left out silently: a folder that cannot be read is a
    failure, a FIFO or device is skipped with its reason, and so is a pt2pt dataset (the one
    being written to, or any other: its Parquet files are not tool outputs)."""
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue  # a link back to a folder already walked
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            failed = fail(folder, None, f"cannot read the folder ({exc.strerror}); the files "
                          "in it were not ingested", "check its permissions, or leave it out")
            report.files_failed.append((folder, failed.paragraph()))
            continue
        if (folder != root and (folder / ds.RUNS_FILE).is_file()) or (
                dataset is not None and folder.resolve() == dataset):
            report.files_skipped.append((folder, "a pt2pt dataset, not tool outputs"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            try:
                if entry.is_dir():  # follows a link to a folder
                    todo.append(path)
                elif entry.is_file():
                    found.append(path)
                else:
                    mode = os.stat(path).st_mode
                    report.files_skipped.append((path, f"{kind_of(mode)}, not a file"))
            except OSError as exc:  # a dangling link, a vanished entry
                report.files_skipped.append((path, f"cannot be read ({exc.strerror})"))
    return sorted(found)


def _expand(paths: Iterable[str | Path], report: IngestReport,
            dataset: Path | None = None) -> list[tuple[Path, bool]]:
    """(file, came from a folder walk), in a stable order, without duplicates."""
    seen: set[Path] = set()
    files: list[tuple[Path, bool]] = []
    for raw in paths:
        path = Path(raw)
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            why = "no such file or folder" if isinstance(exc, FileNotFoundError) else \
                f"cannot be read ({exc.strerror})"
            report.files_failed.append((path, fail(path, None, why).paragraph()))
            continue
        if stat.S_ISDIR(mode):
            entries = [(p, True) for p in _walk(path, report, dataset)]
        elif stat.S_ISREG(mode):
            entries = [(path, False)]
        else:  # a FIFO would block the first read for ever
            refused = fail(path, None, f"this is {kind_of(mode)}, not a file",
                           "give the tool's output files or folders")
            report.files_failed.append((path, refused.paragraph()))
            continue
        for p, walked in entries:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                files.append((p, walked))
    return files


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _run_id(hashes: dict[Path, str], sources: list[Path]) -> str:
    """A run's id: from the SHA-256 of each of its files, in order."""
    return hashlib.sha256("".join(hashes[p] for p in sources).encode()).hexdigest()[:20]


def _unlink(paths: list[Path]) -> None:
    for p in paths:
        p.unlink(missing_ok=True)


def _companions(fmt: str, path: Path) -> list[Path]:
    """Files its tool reads with ``path`` (a probe's meta.json, SkaMPI's debug log)."""
    return tools.get(fmt).companions(path)


def parse_file(path: Path, tool: str | None = None, op: str | None = None) -> ParsedRun:
    """Detect (unless ``tool`` is given) and parse one file, without touching a dataset.

    Raises IngestError, or sniff.Companion for files read with another one.
    """
    fmt = sniff.check_forced(tool) if tool else sniff.detect(path)
    return tools.get(fmt).parse(path, op)


def _default_campaign(path: Path) -> str:
    return safe_name(path.resolve().parent.name or "unknown")


def ingest(paths: Iterable[str | Path], dataset: str | Path, *, campaign: str | None = None,
           transport: str | None = None, tool: str | None = None, op: str | None = None,
           placement: str | None = None,
           on_file: Callable[[int, int, Path], None] | None = None,
           allow_running: bool = False) -> IngestReport:
    """Ingest tool outputs (files or folders) into ``dataset``; see the module docstring.

    campaign: default = the name of the folder holding each file.
    transport: default = inferred (probe meta env, then words of the file/folder names such as
    ``tcp``, ``vader``, ``eth``, ``loopback``), else ``unknown``.
    tool: force the format instead of detecting it. op: the op of ``csv`` files (pingpong).
    placement: what the campaign planned (intra-socket/intra-node/inter-node); default = the
    job record's, if any. Checked against the hosts the run recorded (kit.data.placement).
    on_file(index, n_files, path): called before each file is read (progress bars).
    allow_running: also commit runs whose writer is still at work (their samples so far,
    marked incomplete); by default they are skipped and listed in ``report.running``.
    """
    campaign = _option_name(campaign, "--campaign")
    transport = _option_name(transport, "--transport")
    op = _option_name(op, "--op")
    if placement is not None and placement not in PLACEMENTS:
        raise UserError(f"'{placement}' is not a placement", where="option --placement",
                        hint=f"use one of {', '.join(PLACEMENTS)}")
    forced = sniff.check_forced(tool) if tool is not None else None
    dataset = Path(dataset)
    if dataset.exists() and not dataset.is_dir():
        raise UserError(f"{dataset} exists and is not a folder", where="option --dataset",
                        hint="give a folder (it is created if missing)")
    report = IngestReport()
    files = _expand(paths, report, dataset.resolve())
    try:
        _ingest_locked(dataset, files, report, forced=forced, campaign=campaign,
                       transport=transport, op=op, placement=placement, on_file=on_file,
                       allow_running=allow_running)
    except Interrupted as exc:
        exc.report = report
        raise
    except (OSError, pl.exceptions.PolarsError) as exc:
        err = storage_error(exc, dataset)
        if err is None:
            raise
        raise err from None
    return report


def _ingest_locked(dataset: Path, files: list[tuple[Path, bool]], report: IngestReport, *,
                   forced: str | None, campaign: str | None, transport: str | None,
                   op: str | None, placement: str | None,
                   on_file: Callable[[int, int, Path], None] | None = None,
                   allow_running: bool = False) -> None:
    dataset.mkdir(parents=True, exist_ok=True)
    with ds.locked(dataset):
        existing = ds.runs(dataset)
        ds.remove_leftovers(dataset, existing)
        batch = _Batch(dataset, report, set(existing["run_id"].to_list()),
                       known_paths=_source_paths(existing), forced=forced,
                       campaign=campaign, transport=transport, op=op, placement=placement,
                       allow_running=allow_running, identities=_identities(existing))
        try:
            for index, (path, walked) in enumerate(files):
                if on_file is not None:
                    on_file(index, len(files), path)
                batch.add(path, walked)
                _stop_if_signalled()
            _stop_if_signalled()
            with _commit_window():
                ds.commit(dataset, batch.parts,
                          pl.DataFrame(batch.new_runs, schema=RUNS_SCHEMA), drop=batch.drop)
        except Interrupted as exc:
            if not exc.committed:
                _discard(dataset, batch)
            else:
                report.runs_added = len(batch.new_runs)
            raise
        except BaseException as exc:
            _discard(dataset, batch)
            stop = _signalled()
            if stop is not None:  # the signal, lost in native code, surfaced as this error
                raise stop from exc
            raise
        report.runs_added = len(batch.new_runs)
        # After the commit, not inside it: the summary is a cache stamped with what it was
        # computed from, so a kill here leaves a stale one that readers detect and ignore.
        # Large datasets are left to their first reader (memory; see SUMMARY_REFRESH_MAX_ROWS).
        try:
            ds.refresh_summary(dataset, max_rows=ds.SUMMARY_REFRESH_MAX_ROWS)
        except Interrupted as exc:
            exc.committed = True  # the stale summary is ignored by readers
            raise
        except BaseException as exc:
            stop = _signalled()
            if stop is not None:  # the signal, lost in native code, surfaced as this error
                stop.committed = True
                raise stop from exc
            if not isinstance(exc, OSError | pl.exceptions.PolarsError | UserError):
                raise
            report.warnings.append(f"{dataset}: could not update {ds.SUMMARY_FILE} ({exc}); "
                                   "the dataset is complete, its series table is recomputed "
                                   "when opened")
        stop = _signalled()
        if stop is not None:  # lost inside the refresh without an error
            stop.committed = True
            raise stop


def _identities(run_table: pl.DataFrame) -> dict[str, tuple[str, int]]:
    """identity -> (run id, rows) of the committed runs that have one."""
    found: dict[str, tuple[str, int]] = {}
    for key, run_id, rows in run_table.select("identity", "run_id", "n_samples").iter_rows():
        if key is not None:
            found[key] = (run_id, int(rows or 0))
    return found


def _source_paths(run_table: pl.DataFrame) -> set[str]:
    """The files the runs were read from (runs.parquet's ``sources``)."""
    paths: set[str] = set()
    for listed in run_table["sources"].drop_nulls().to_list():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            paths.update(str(item["path"]) for item in json.loads(listed))
    return paths


def _discard(dataset: Path, batch: _Batch) -> None:
    """Remove what a failed or interrupted ingest wrote: temp parts, parts renamed into
    place but not committed (runs.parquet was not replaced), a temp runs table."""
    for tmp, _final in batch.parts:
        tmp.unlink(missing_ok=True)
    with contextlib.suppress(OSError, UserError):
        ds.remove_leftovers(dataset, ds.runs(dataset))


@dataclass
class _Batch:
    """The runs staged by one ingest call, committed together at its end."""

    dataset: Path
    report: IngestReport
    known: set[str]
    #: Files (resolved paths) of the committed runs: such a file is hashed before it is
    #: parsed, so that re-ingesting a folder skips what it holds without reading it twice.
    known_paths: set[str] = field(default_factory=set)
    forced: str | None = None
    campaign: str | None = None
    transport: str | None = None
    op: str | None = None
    placement: str | None = None
    allow_running: bool = False
    #: identity -> (run id, rows) of the committed runs, then of the staged ones too
    identities: dict[str, tuple[str, int]] = field(default_factory=dict)
    parts: list[tuple[Path, Path]] = field(default_factory=list)
    new_runs: list[dict[str, object]] = field(default_factory=list)
    #: committed runs that longer copies replace (removed by the commit)
    drop: set[str] = field(default_factory=set)

    def _unstage(self, run_id: str) -> None:
        """Take a staged run (and its temp parts) out of this batch."""
        keep = [(tmp, final) for tmp, final in self.parts if ds.run_of_part(final.name) != run_id]
        for tmp, final in self.parts:
            if ds.run_of_part(final.name) == run_id:
                tmp.unlink(missing_ok=True)
        self.parts = keep
        self.new_runs = [r for r in self.new_runs if r["run_id"] != run_id]
        self.report.run_ids = [r for r in self.report.run_ids if r != run_id]

    def _same_run(self, path: Path, run: ParsedRun, run_id: str, n_rows: int) -> bool:
        """A copy of a run already there: True when this copy is to be skipped; a longer
        copy replaces the other (committed: dropped at the commit; staged: unstaged)."""
        if run.identity is None or run.identity not in self.identities:
            return False
        other, rows = self.identities[run.identity]
        if n_rows <= rows:
            self.report.files_skipped.append(
                (path, f"a copy of run {other}, which holds as many samples or more "
                       f"({rows:,} rows, this copy {n_rows:,}); not ingested again"))
            return True
        if other in self.known and all(r["run_id"] != other for r in self.new_runs):
            self.drop.add(other)
        else:
            self._unstage(other)
        self.report.replaced.append((other, run_id))
        self.report.warnings.append(
            f"{path}: a longer copy of run {other} ({n_rows:,} rows instead of {rows:,}): "
            "it replaces that run, so the samples are not counted twice")
        return False

    def add(self, path: Path, walked: bool) -> None:
        """Detect, parse and stage one file; its errors go to the report, not up."""
        report = self.report
        if walked and sniff.is_auxiliary(path):
            report.files_skipped.append((path, "not a measurement file"))
            return
        tmps: list[Path] = []
        try:
            fmt = self.forced or sniff.detect(path)
            sources = [path, *_companions(fmt, path)]
            hashes: dict[Path, str] = {}
            if str(path.resolve()) in self.known_paths:
                # Most likely a re-ingest: hash first, to skip it without parsing it.
                hashes = {p: _sha256(p) for p in sources}
                run_id = _run_id(hashes, sources)
                if run_id in self.known:
                    report.files_skipped.append((path, f"already ingested (run {run_id})"))
                    return
            run = parse_file(path, fmt, self.op)
            busy = None if self.allow_running else identity.live_writer(run)
            if busy is not None:
                report.running.append(path)
                report.files_skipped.append(
                    (path, f"still being written: {busy}; not ingested (run the same command "
                           "once the run has ended, or give --allow-running to take the "
                           "samples written so far as an incomplete run)"))
                return
            campaign = self.campaign or _default_campaign(path)
            transport = safe_name(self.transport or run.transport_hint or transport_from_name(
                path.name, path.resolve().parent.name) or "unknown")
            folder = ds.partition_dir(self.dataset, campaign, run.tool)
            try:
                folder.mkdir(parents=True, exist_ok=True)
                # The run id (the files' SHA-256) is known once they are read: the probe's
                # parser hashes its file as it parses it, instead of reading it twice.
                n_rows, _ = write_part(run, folder / f"pending-{len(self.parts)}.parquet", tmps)
            except (OSError, pl.exceptions.PolarsError) as exc:
                # Writing into the dataset failed: no other file would fare better.
                storage = storage_error(exc, self.dataset)
                if storage is None:
                    raise
                raise storage from None
            if run.check_rows is not None:
                run.check_rows(n_rows)
            if not hashes:
                hashes = {p: run.digests.get(p) or _sha256(p) for p in sources}
                run_id = _run_id(hashes, sources)
            if run_id in self.known:  # the same files under another name
                _unlink(tmps)
                report.files_skipped.append((path, f"already ingested (run {run_id})"))
                return
            if self._same_run(path, run, run_id, n_rows):
                _unlink(tmps)
                return
        except sniff.Companion as comp:
            report.files_skipped.append((path, comp.reason))
            return
        except IngestError as err:
            _unlink(tmps)
            report.files_failed.append((path, err.paragraph()))
            return
        except OSError as exc:
            _unlink(tmps)
            failure = fail(path, None, f"cannot read or write ({exc})")
            report.files_failed.append((path, failure.paragraph()))
            return
        except BaseException:
            _unlink(tmps)
            raise
        final = ds.part_path(self.dataset, campaign, run.tool, run_id)
        self.known.add(run_id)
        finals = _final_names(final, len(tmps))
        self.parts.extend(zip(tmps, finals, strict=True))
        # each part's size and checksum, committed with the run and checked by every reader
        parts = integrity.describe(zip(tmps, [f.name for f in finals], strict=True))
        listed = [{"path": str(p.resolve()), "sha256": hashes.get(p) or _sha256(p)}
                  for p in run.sources]
        where = resolve_placement(run.hosts, self.placement or run.placement,
                                  run.sockets or None, where=str(path), ranks=run.pair_ranks)
        if where.warning:
            report.warnings.append(where.warning)
        self.new_runs.append({
            "run_id": run_id, "campaign": campaign, "tool": run.tool, "transport": transport,
            "mpi_version": run.mpi_version, "hosts": ",".join(run.hosts) or None,
            "env": json.dumps(run.env, sort_keys=True) if run.env else None,
            "job_id": run.job_id, "start": run.start, "end": run.end,
            "sources": json.dumps(listed), "complete": run.complete, "n_samples": n_rows,
            "tool_version": run.tool_version,
            "incomplete_reason": run.incomplete_reason if run.complete is False else None,
            "placement": where.placement, "placement_source": where.source,
            "host_pair": where.host_pair,
            "cpus": ",".join(str(c) for c in run.cpus) or None,
            integrity.PARTS_COLUMN: parts,
            "identity": run.identity,
            "program": run.program or None,
            **run_conditions(run),
        })
        if run.identity is not None:
            self.identities[run.identity] = (run_id, n_rows)
        report.files_ok += 1
        report.rows_added += n_rows
        report.run_ids.append(run_id)
        report.warnings.extend(run.warnings)


def run_conditions(run: ParsedRun) -> dict[str, Any]:
    """The run's conditions columns (kit.measure.conditions), with the tool's own sample
    order when the run does not record one."""
    order = run.order
    if order is None:
        tool = tools.REGISTRY.get(run.tool)
        order = tool.sample_order if tool is not None else None
    return columns(Conditions.from_record(run.conditions, order=order, binding=run.binding,
                                          cpus_end=run.cpus_end))


def write_part(run: ParsedRun, beside: Path, written: list[Path] | None = None
               ) -> tuple[int, list[Path]]:
    """Write the run's rows to temp files named after ``beside``: (row count, temp files).

    ``written``: the caller's list, given each temp file's name before the file is begun, so
    that whatever the moment a signal stops this (even while it returns), the caller knows
    every file to remove. Here they are removed on any exception, including one raised while
    the writer threads are joined (a SIGTERM there left a temp part: CI rehearsal of c246d98).

    One temp file per frame; :func:`_final_names` gives their committed names once the run
    id is known (the probe's parser hashes the file as it reads it). Frames are written by
    helper threads while the parser makes the next one (both run in Polars' native code,
    outside the GIL); at most ``_IN_FLIGHT`` writes at a time, so memory stays at a few
    frames. A lazy frame is parsed by Polars' streaming engine as it is written.
    """
    frames = [run.rows] if isinstance(run.rows, pl.DataFrame) else run.rows
    written = [] if written is None else written
    n_rows = 0
    in_flight: deque[Future[int]] = deque()
    try:
        with ThreadPoolExecutor(max_workers=_IN_FLIGHT,
                                thread_name_prefix="pt2pt-write") as pool:
            try:
                for index, frame in enumerate(frames):
                    _stop_if_signalled()
                    tmp = beside.with_name(
                        f"{beside.name}.{index}.{os.getpid()}{ds.TMP_SUFFIX}")
                    written.append(tmp)
                    if len(in_flight) >= _IN_FLIGHT:
                        n_rows += in_flight.popleft().result()
                    in_flight.append(pool.submit(_write_frame, run, frame, tmp))
                while in_flight:
                    n_rows += in_flight.popleft().result()
                if n_rows == 0:
                    raise fail(run.sources[0], None, "no samples in the file",
                               "check that the run got past its first measurement")
            except BaseException:
                # no writer may still create a file once the names are removed below
                for job in in_flight:
                    job.cancel()
                for job in in_flight:
                    with contextlib.suppress(BaseException):
                        job.result()
                raise
    except BaseException:
        for tmp in written:
            tmp.unlink(missing_ok=True)
        raise
    return n_rows, written


#: Part files written at once: two streaming pipelines keep both cores busy where one
#: alone idles at its start and end (git show 1da3baf:BENCHMARKS.md, "Against Polars' own").
_IN_FLIGHT = 2

#: zstd level 1: as small as the default level at half the CPU (git show
#: 1da3baf:BENCHMARKS.md, "Ingest").
_PART_OPTIONS: dict[str, Any] = {"compression": "zstd", "compression_level": 1}


def _part_frame(frame: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame | pl.LazyFrame:
    """``frame`` with the part file's columns and types."""
    have = frame.collect_schema()
    # columns a parser may leave out (OPTIONAL_SAMPLE_DEFAULTS) are filled by the reader;
    # every other part column must be there
    cols = [c for c in ds.PART_COLUMNS if c in have or c not in OPTIONAL_SAMPLE_DEFAULTS]
    return frame.select(cols).cast(pl.Schema({c: ds.PART_DTYPES[c] for c in cols}))


def _write_frame(run: ParsedRun, frame: Frame, tmp: Path) -> int:
    """One part file; its row count. An eager frame must have no null anywhere; a lazy one
    no null ``op`` (its parser's mark for an invalid value, see ``ParsedRun.explain``)."""
    out = _part_frame(make_frame(frame))
    if isinstance(out, pl.DataFrame):
        if out.null_count().sum_horizontal().item():
            raise _internal_nulls(run)
        out.write_parquet(tmp, **_PART_OPTIONS)
        return out.height
    try:
        out.sink_parquet(tmp, **_PART_OPTIONS)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        if storage_error(exc, tmp.parent) is not None or run.explain is None:
            raise
        raise run.explain() from None
    # Invalid input values come out as a null op (the parser's contract: every other
    # column's invalid value invalidates op too). Read back from the part just written:
    # one dictionary-encoded column.
    rows, op_nulls = (pl.scan_parquet(tmp).select(pl.len(), pl.col("op").null_count())
                      .collect().row(0))
    if op_nulls:
        raise run.explain() if run.explain is not None else _internal_nulls(run)
    return int(rows)


def _internal_nulls(run: ParsedRun) -> IngestError:
    return fail(run.sources[0], None, "internal: a parser produced empty values",
                "report this as a bug with the file attached")


def _final_names(final: Path, count: int) -> list[Path]:
    """``part-<run>.parquet`` for one file, ``part-<run>-0001.parquet``... for several."""
    if count == 1:
        return [final]
    stem = final.name.removesuffix(".parquet")
    return [final.with_name(f"{stem}-{i:04d}.parquet") for i in range(count)]
