"""Fit one series to a model file, and every series of a dataset in parallel (``fit --all``).

``pt2pt fit`` and ``pt2pt fit --all`` share :func:`fit_series` so that a model fitted in a
batch is the model ``pt2pt fit --series ...`` writes for that series, byte for byte.

One series per worker process (:mod:`kit.core.workers` says why processes, and how); each worker
reads its own series from the dataset (no large arrays are pickled). One series' failure
(bad data, too few samples, even a crashed worker) is reported for that series; the others'
models are kept.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.core import workers
from kit.core.atomicwrite import make_dirs
from kit.core.errors import ModelError, UserError

#: Rows of one series above which the fit uses a deterministic uniform subsample of this
#: many rows: a fit holds ~150 bytes per sample, so this bounds a fit's memory (~1-2 GiB
#: with validation and intervals) whatever the series' size; see git show
#: 1da3baf:BENCHMARKS.md, "Bounded memory", for
#: what the subsample costs in accuracy against the full fit.
MAX_FIT_SAMPLES = 4_000_000


@dataclass(frozen=True)
class FitOptions:
    """The ``pt2pt fit`` options that shape a model (everything but where it goes)."""

    aggregates: bool = False
    breakpoints: list[float] | None = None
    max_regimes: int = 6
    min_support: int | None = None
    overlap: bool = True
    mixture: bool = True
    seed: int = 0
    keep_disturbed: bool = False
    intervals: bool = True
    validate: bool = True
    max_samples: int | None = MAX_FIT_SAMPLES  # None or 0: every row, however many


@dataclass
class SeriesFit:
    """What fitting one series produced: the model file and its messages, or an error."""

    series: dict[str, str]
    n_rows: int = 0
    path: Path | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # warnings such as "not validated"
    cpu_s: float = 0.0  # CPU seconds of this series' fit in its process (read + fit + write)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def fit_series(dataset: str | Path, chosen: Mapping[str, str], opts: FitOptions,
               notes: list[str] | None = None) -> tuple[Any, Any]:
    """Read, fit, validate and bootstrap one series (``chosen``: all its keys).

    Returns the :class:`~kit.model.contract.ModelFile` (not yet written) and the run
    quality (None for aggregates, which carry no measurement order). ``notes`` collects
    what the user should read but is not an error (a validation that could not run).
    """
    from kit.data import dataset as ds
    from kit.fit.fitting import fit_samples

    chosen = dict(chosen)
    quality = None
    groups = seq = None
    subsample: dict[str, Any] | None = None
    if chosen.get("stat", ds.RAW) == ds.RAW:
        from kit.fit.runquality import quiet_samples

        if opts.max_samples:
            n_rows = count_raw_rows(dataset, chosen)
            if n_rows > opts.max_samples:
                subsample = {"rows": n_rows, "max_samples": int(opts.max_samples),
                             "rule": SUBSAMPLE_RULE}
        if subsample is None:
            # Run quality: disturbed windows are left out unless keep_disturbed.
            frame, quality = quiet_samples(dataset, chosen, keep=opts.keep_disturbed)
        else:
            frame, quality = _quiet_subsample(dataset, chosen, opts, subsample)
            if notes is not None:
                notes.append(f"fitted on a uniform subsample of {frame.height} of "
                             f"{subsample['rows']} rows (--max-samples {opts.max_samples})")
        size, time_ = frame["size"].to_numpy(), frame["time"].to_numpy()
        # run ids as their rank among the series' runs (what np.unique codes them as):
        # a million Python strings cost the bootstrap 0.4 s to code
        groups = (frame["run_id"].rank("dense") - 1).to_numpy()
        seq = frame["seq"].to_numpy()
    else:
        data = ds.select_series(dataset, chosen, aggregates=True)
        size, time_ = data.size, data.time
    fitted = fit_samples(dataset, chosen, size, time_, breakpoints=opts.breakpoints,
                         max_regimes=opts.max_regimes, min_support=opts.min_support,
                         overlap=opts.overlap, mixture=opts.mixture, random_state=opts.seed)
    if quality is not None:
        fitted.run_quality = quality.to_dict()
    if subsample is not None:
        fitted.provenance["subsample"] = {**subsample, "fitted": len(size)}
    if opts.validate:
        from kit.fit.validate import validate_into

        try:
            fitted.validation = validate_into(fitted.model, size, time_, random_state=opts.seed)
        except ModelError as err:
            if notes is not None:
                notes.append(f"not validated: {err.message}")
    if opts.intervals:
        from kit.model.uncertainty import bootstrap_intervals

        fitted.intervals = bootstrap_intervals(fitted.model, size, time_, groups=groups,
                                               seq=seq, random_state=opts.seed)
    return fitted, quality


#: How the subsample of a large series is drawn (recorded in the model's provenance).
SUBSAMPLE_RULE = ("rows whose Polars hash of seq, seeded from the run id (SHA-256), falls "
                  "below fraction x 2^64: uniform, deterministic, one part file at a time")


def _raw_rows(dataset: str | Path, chosen: Mapping[str, str]) -> Any:
    """The lazy rows of a series that :func:`kit.fit.runquality.read_frame` reads."""
    import polars as pl

    from kit.data import dataset as ds

    lf = ds.scan(dataset).filter((pl.col("stat").cast(pl.String) == ds.RAW) & ~pl.col("warmup"))
    for key, v in chosen.items():
        lf = lf.filter(pl.col(key).cast(pl.String) == str(v))
    return lf


def count_raw_rows(dataset: str | Path, chosen: Mapping[str, str]) -> int:
    """Raw rows of a series, counted while streaming (no column is held in memory)."""
    import polars as pl

    return int(_raw_rows(dataset, chosen).select(pl.len()).collect(engine="streaming").item())


def read_subsample(dataset: str | Path, chosen: Mapping[str, str], rows: int, n_total: int,
                   seed: int = 0) -> Any:
    """About ``rows`` of a series' ``n_total`` raw rows, uniformly and deterministically.

    Read one part file at a time (ingest writes parts of about 0.8 M rows), each
    filtered to the series and the hash rule before the next is read: memory holds one
    part plus the subsample, never the series. (Polars' streaming engine on the whole scan
    held 2.4-3.6 GiB at 10^8 rows for the same filter.) Rows come sorted by
    (run_id, seq), as :func:`kit.fit.runquality.read_frame` returns them.
    """
    import polars as pl

    from kit.data import dataset as ds

    root = ds.require_ingested(dataset)
    run_table = ds.runs(root)
    threshold = pl.lit(min(int(rows / max(n_total, 1) * 2.0**64), 2**64 - 1), dtype=pl.UInt64)
    columns = [pl.col("run_id").cast(pl.String), pl.col("seq").cast(pl.Int64),
               pl.col("size").cast(pl.Float64), pl.col("time")]
    parts = []
    for path in ds.committed_parts(root, run_table):
        # A part holds one run: hash seq with a seed taken from the run id, so the rule
        # reads one integer column (no per-row string of the run id is built).
        run_id = ds.run_of_part(path.name) or path.name
        run_seed = (seed * 1_000_003 + int(hashlib.sha256(run_id.encode()).hexdigest()[:12],
                                            16)) % 2**63
        lf = ds._scan_files([path], run_table)  # kit.data.dataset's own columns, defaults, casts
        lf = lf.filter((pl.col("stat").cast(pl.String) == ds.RAW) & ~pl.col("warmup"))
        for k, v in chosen.items():
            lf = lf.filter(pl.col(k).cast(pl.String) == str(v))
        lf = lf.filter(pl.col("seq").cast(pl.Int64).hash(run_seed) < threshold)
        parts.append(lf.select(columns).collect(engine="streaming"))
    frame = (pl.concat(parts) if parts else
             pl.DataFrame(schema={"run_id": pl.String, "seq": pl.Int64, "size": pl.Float64,
                                  "time": pl.Float64}))
    return frame.sort("run_id", "seq")


def _quiet_subsample(dataset: str | Path, chosen: Mapping[str, str], opts: FitOptions,
                     subsample: dict[str, Any]) -> tuple[Any, Any]:
    """:func:`kit.fit.runquality.quiet_samples` on the subsample of a large series."""
    from kit.fit.runquality import assess_frame, drop_disturbed, run_conditions
    from kit.model.estimator import MIN_SAMPLES

    frame = read_subsample(dataset, chosen, int(opts.max_samples or 0), subsample["rows"])
    quality = assess_frame(frame, conditions=run_conditions(dataset))
    if opts.keep_disturbed or quality.n_disturbed == 0:
        return frame, quality
    kept = drop_disturbed(frame, quality)
    if kept.height < MIN_SAMPLES:
        raise ModelError(f"run quality flagged {quality.n_disturbed} of {frame.height} "
                         "subsampled rows as disturbed, leaving too few to fit",
                         where=str(dataset),
                         hint="re-measure on a quiet node, or fit them anyway with "
                         "--keep-disturbed")
    return kept, quality


def model_filename(series: Mapping[str, str]) -> str:
    """A file name for a series' model that no other series of the dataset shares: every
    key's value in SERIES_KEYS order, characters unsafe in a file name replaced by ``_``.
    The pair count appears only for k > 1 (``k4``), so names fitted before it was a key stay."""
    from kit.data.schema import SERIES_KEYS, pairs_short
    from kit.data.series_keys import OPTIONAL_KEYS

    values = [pairs_short(series.get(k)) if k == "pairs" else str(series.get(k, "unknown"))
              for k in SERIES_KEYS if k not in OPTIONAL_KEYS or series.get(k)]
    parts = [re.sub(r"[^A-Za-z0-9.+=-]+", "_", v) for v in values if v]
    return "__".join(parts) + ".json"


def _fit_to_file(dataset: str, chosen: dict[str, str], output: str,
                 opts: FitOptions) -> SeriesFit:
    """One task: fit ``chosen`` and write its model to ``output``; never raises for a
    series' own fault (that is the result's ``error``), so the batch goes on."""
    from kit.model.io import write_model

    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = SeriesFit(series=dict(chosen))
    try:
        fitted, _ = fit_series(dataset, chosen, opts, result.notes)
        result.n_rows = int(fitted.provenance.get("n_samples", 0))
        result.path = write_model(fitted, output)
    except UserError as err:
        result.error = err.paragraph()
    except Exception as exc:  # one series' failure must not lose the others
        result.error = f"internal error while fitting: {type(exc).__name__}: {exc}"
    result.cpu_s = time.process_time() - cpu0
    result.wall_s = time.perf_counter() - wall0
    return result


#: What a fit worker needs imported (by the forkserver, once).
FIT_MODULES = ("kit.fit.fitall", "kit.fit.fitting", "kit.fit.validate", "kit.model.uncertainty",
               "kit.fit.runquality")


def fit_all(dataset: str | Path, series: list[dict[str, str]], out_dir: str | Path,
            opts: FitOptions, *, jobs: int | None = None,
            on_done: Callable[[int, int, SeriesFit], None] | None = None,
            filename: Callable[[Mapping[str, str]], str] = model_filename) -> list[SeriesFit]:
    """Fit every series in ``series`` (each with all its keys) into ``out_dir``.

    ``jobs`` processes (default: all cores; 1 fits in this process, one after the other).
    ``on_done(done, total, result)`` is called as each series finishes, in completion order.
    ``filename(series)`` names each model file (``pt2pt demo`` uses short names).
    Returns the results in the order of ``series``; failures are results with ``error``.
    """
    out = Path(out_dir)
    make_dirs(out)
    tasks = [(dict(s), str(out / filename(s))) for s in series]
    jobs = max(1, min(jobs or workers.default_jobs(), len(tasks) or 1))
    results: list[SeriesFit | None] = [None] * len(tasks)
    for done, (index, result) in enumerate(_run(str(dataset), tasks, opts, jobs), start=1):
        results[index] = result
        if on_done is not None:
            on_done(done, len(tasks), result)
    return [r for r in results if r is not None]


def _run(dataset: str, tasks: list[tuple[dict[str, str], str]], opts: FitOptions,
         jobs: int) -> Iterator[tuple[int, SeriesFit]]:
    if jobs == 1:
        for index, (chosen, output) in enumerate(tasks):
            yield index, _fit_to_file(dataset, chosen, output, opts)
        return
    from concurrent.futures.process import BrokenProcessPool

    with workers.pool(jobs, FIT_MODULES) as pool:
        futures: dict[Future[SeriesFit], int] = {
            pool.submit(_fit_to_file, dataset, chosen, output, opts): index
            for index, (chosen, output) in enumerate(tasks)}
        for future in as_completed(futures):
            index = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                result = SeriesFit(series=tasks[index][0], error=(
                    "the worker process fitting this series died (killed, perhaps out of "
                    "memory); the batch's other workers were stopped with it: rerun "
                    "this series alone, or with fewer --jobs"))
            except Exception as exc:  # e.g. a result that failed to pickle
                result = SeriesFit(series=tasks[index][0],
                                   error=f"internal error: {type(exc).__name__}: {exc}")
            yield index, result


__all__ = ["FitOptions", "SeriesFit", "fit_all", "fit_series", "model_filename"]
