"""``ingest()``: files and folders in, committed dataset runs out.

Each input file is detected, hashed, parsed and written to a temp part file on its own; any
IngestError is recorded against that file and the others carry on. Only at the end are the
written parts renamed into place and the runs table replaced (kit.dataset.commit), so an
interrupted ingest leaves the previous dataset readable and unchanged. Then, still under the
lock, the series summary (kit.dataset.refresh_summary) is brought up to date.

Re-ingesting is a no-op: a run's id is the SHA-256 of the bytes of its files (the primary
file plus its companions), and a run already in the runs table is skipped. Changing
``--campaign``/``--transport``/``--op`` therefore does not re-ingest a file already in the
dataset; ingest into a fresh dataset for that.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from kit import dataset as ds
from kit.errors import IngestError, UserError
from kit.ingest import calibration, logp, netgauge, osu, plaincsv, probe, reprompi, skampi, sniff
from kit.ingest.common import ParsedRun, fail, safe_name, transport_from_name
from kit.schema import RUNS_SCHEMA

_PARSERS: dict[str, Callable[[Path], ParsedRun]] = {
    "probe": probe.parse, "osu": osu.parse, "skampi": skampi.parse, "logp": logp.parse,
    "reprompi": reprompi.parse, "calibration": calibration.parse, "netgauge": netgauge.parse,
}


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

    @property
    def ok(self) -> bool:
        return not self.files_failed

    def summary(self) -> str:
        text = (f"{self.files_ok} file(s) ingested: {self.runs_added} run(s), "
                f"{self.rows_added} row(s) added; {len(self.files_skipped)} skipped; "
                f"{len(self.files_failed)} failed")
        return text + "."


def _option_name(value: str | None, option: str) -> str | None:
    if value is None:
        return None
    if not value or safe_name(value) != value:
        raise UserError(f"'{value}' is not usable as a name", where=f"option {option}",
                        hint="use letters, digits and . _ + - only")
    return value


def _expand(paths: Iterable[str | Path], report: IngestReport) -> list[tuple[Path, bool]]:
    """(file, came from a folder walk), in a stable order, without duplicates."""
    seen: set[Path] = set()
    files: list[tuple[Path, bool]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            entries = [(p, True) for p in found]
        elif path.is_file():
            entries = [(path, False)]
        else:
            missing = fail(path, None, "no such file or folder")
            report.files_failed.append((path, missing.paragraph()))
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


def _companions(fmt: str, path: Path) -> list[Path]:
    if fmt == "probe":
        meta = probe.meta_path(path)
        return [meta] if meta.is_file() else []
    if fmt == "skampi":
        log = skampi.debug_log_for(path)
        return [log] if log.is_file() else []
    return []


def parse_file(path: Path, tool: str | None = None, op: str | None = None) -> ParsedRun:
    """Detect (unless ``tool`` is given) and parse one file, without touching a dataset.

    Raises IngestError, or sniff.Companion for files read with another one.
    """
    fmt = sniff.check_forced(tool) if tool else sniff.detect(path)
    return plaincsv.parse(path, op or "pingpong") if fmt == "csv" else _PARSERS[fmt](path)


def _default_campaign(path: Path) -> str:
    return safe_name(path.resolve().parent.name or "unknown")


def ingest(paths: Iterable[str | Path], dataset: str | Path, *, campaign: str | None = None,
           transport: str | None = None, tool: str | None = None, op: str | None = None,
           ) -> IngestReport:
    """Ingest tool outputs (files or folders) into ``dataset``; see the module docstring.

    campaign: default = the name of the folder holding each file.
    transport: default = inferred (probe meta env, then words of the file/folder names such as
    ``tcp``, ``vader``, ``eth``, ``loopback``), else ``unknown``.
    tool: force the format instead of detecting it. op: the op of ``csv`` files (pingpong).
    """
    campaign = _option_name(campaign, "--campaign")
    transport = _option_name(transport, "--transport")
    op = _option_name(op, "--op")
    forced = sniff.check_forced(tool) if tool is not None else None
    dataset = Path(dataset)
    if dataset.exists() and not dataset.is_dir():
        raise UserError(f"{dataset} exists and is not a folder", where="option --dataset",
                        hint="give a folder (it is created if missing)")
    report = IngestReport()
    files = _expand(paths, report)
    dataset.mkdir(parents=True, exist_ok=True)
    with ds.locked(dataset):
        existing = ds.runs(dataset)
        ds.remove_leftovers(dataset, existing)
        batch = _Batch(dataset, report, set(existing["run_id"].to_list()), forced=forced,
                       campaign=campaign, transport=transport, op=op)
        try:
            for path, walked in files:
                batch.add(path, walked)
            ds.commit(dataset, batch.parts, pl.DataFrame(batch.new_runs, schema=RUNS_SCHEMA))
        except BaseException:
            for tmp, _final in batch.parts:
                tmp.unlink(missing_ok=True)
            raise
        # After the commit, not inside it: the summary is a cache stamped with what it was
        # computed from, so a kill here leaves a stale one that readers detect and ignore.
        # Large datasets are left to their first reader (memory; see SUMMARY_REFRESH_MAX_ROWS).
        try:
            ds.refresh_summary(dataset, max_rows=ds.SUMMARY_REFRESH_MAX_ROWS)
        except (OSError, pl.exceptions.PolarsError, UserError) as exc:
            report.warnings.append(f"{dataset}: could not update {ds.SUMMARY_FILE} ({exc}); "
                                   "the dataset is complete, its series table is recomputed "
                                   "when opened")
    report.runs_added = len(batch.new_runs)
    return report


@dataclass
class _Batch:
    """The runs staged by one ingest call, committed together at its end."""

    dataset: Path
    report: IngestReport
    known: set[str]
    forced: str | None = None
    campaign: str | None = None
    transport: str | None = None
    op: str | None = None
    parts: list[tuple[Path, Path]] = field(default_factory=list)
    new_runs: list[dict[str, object]] = field(default_factory=list)

    def add(self, path: Path, walked: bool) -> None:
        """Detect, parse and stage one file; its errors go to the report, not up."""
        report = self.report
        if walked and sniff.is_auxiliary(path):
            report.files_skipped.append((path, "not a measurement file"))
            return
        try:
            fmt = self.forced or sniff.detect(path)
            sources = [path, *_companions(fmt, path)]
            hashes = {p: _sha256(p) for p in sources}
            run_id = hashlib.sha256("".join(hashes.values()).encode()).hexdigest()[:20]
            if run_id in self.known:
                report.files_skipped.append((path, f"already ingested (run {run_id})"))
                return
            run = parse_file(path, fmt, self.op)
            campaign = self.campaign or _default_campaign(path)
            transport = safe_name(self.transport or run.transport_hint or transport_from_name(
                path.name, path.resolve().parent.name) or "unknown")
            final = ds.part_path(self.dataset, campaign, run.tool, run_id)
            final.parent.mkdir(parents=True, exist_ok=True)
            n_rows, tmps = write_part(run, run_id, transport, final)
        except sniff.Companion as comp:
            report.files_skipped.append((path, comp.reason))
            return
        except IngestError as err:
            report.files_failed.append((path, err.paragraph()))
            return
        except OSError as exc:
            err = fail(path, None, f"cannot read or write ({exc})")
            report.files_failed.append((path, err.paragraph()))
            return
        self.known.add(run_id)
        self.parts.extend(zip(tmps, _final_names(final, len(tmps)), strict=True))
        listed = [{"path": str(p.resolve()), "sha256": hashes.get(p) or _sha256(p)}
                  for p in run.sources]
        self.new_runs.append({
            "run_id": run_id, "campaign": campaign, "tool": run.tool, "transport": transport,
            "mpi_version": run.mpi_version, "hosts": ",".join(run.hosts) or None,
            "env": json.dumps(run.env, sort_keys=True) if run.env else None,
            "job_id": run.job_id, "start": run.start, "end": run.end,
            "sources": json.dumps(listed), "complete": run.complete, "n_samples": n_rows,
            "tool_version": run.tool_version,
        })
        report.files_ok += 1
        report.rows_added += n_rows
        report.run_ids.append(run_id)
        report.warnings.extend(run.warnings)


def write_part(run: ParsedRun, run_id: str, transport: str, final: Path) -> tuple[int, list[Path]]:
    """Write the run's rows to temp files beside ``final``: (row count, temp files).

    One temp file per frame; :func:`_final_names` gives their committed names.
    """
    frames = [run.rows] if isinstance(run.rows, pl.DataFrame) else run.rows
    written: list[Path] = []
    n_rows = 0
    try:
        for index, frame in enumerate(frames):
            out = frame.with_columns(run_id=pl.lit(run_id), transport=pl.lit(transport)).select(
                ds.PART_COLUMNS).cast(ds.PART_DTYPES)
            if out.null_count().sum_horizontal().item():
                raise fail(run.sources[0], None, "internal: a parser produced empty values",
                           "report this as a bug with the file attached")
            tmp = final.with_name(f"{final.name}.{index}.{os.getpid()}{ds.TMP_SUFFIX}")
            written.append(tmp)
            # zstd level 1: as small as the default level at half the CPU (BENCHMARKS.md)
            out.write_parquet(tmp, compression="zstd", compression_level=1)
            n_rows += out.height
        if n_rows == 0:
            raise fail(run.sources[0], None, "no samples in the file",
                       "check that the run got past its first measurement")
    except BaseException:
        for tmp in written:
            tmp.unlink(missing_ok=True)
        raise
    return n_rows, written


def _final_names(final: Path, count: int) -> list[Path]:
    """``part-<run>.parquet`` for one file, ``part-<run>-0001.parquet``... for several."""
    if count == 1:
        return [final]
    stem = final.name.removesuffix(".parquet")
    return [final.with_name(f"{stem}-{i:04d}.parquet") for i in range(count)]
