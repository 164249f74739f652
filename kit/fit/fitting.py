"""THE fit of one series: read its rows, judge the runs, fit, validate, bootstrap.

Every surface that shows a model of a dataset series fits it here: ``pt2pt fit``,
``fit --all`` (kit.fit.fitall, in worker processes), ``pt2pt report DATASET``, the TUI
(tui/fitting.py), ``pt2pt diff``, ``pt2pt simulate --against`` and ``pt2pt demo``. There
was a time when three pipelines fitted one series three ways (the TUI and the report kept
the disturbed windows that ``fit`` left out) and showed three medians; one path means one
model, byte for byte, whichever surface asks.

* :class:`FitOptions` is the only declaration of what shapes a fit (breakpoints, families,
  preview, run quality, validation, intervals, subsampling). A surface sets fields; it
  never passes estimator arguments of its own.
* :func:`read_series` gives the rows a fit sees (:class:`SeriesSamples`): the series' rows
  from :func:`kit.data.dataset.series_frame` (the one reader of a series' rows), a uniform
  subsample of a very large series, disturbed windows left out (kit.fit.runquality) unless
  ``keep_disturbed``.
* :func:`fit_samples` fits :class:`~kit.model.RegimeModel` to them and returns the model
  with its provenance (a :class:`~kit.model.contract.ModelFile`); :func:`validate_fit` and
  :func:`intervals_of` add the held-out validation and the bootstrap intervals.
* :func:`fit_series` does all of it: ``fit_series(dataset, series, FitOptions()) ->
  FitResult``.

By default only raw single-message rows outside warm-up enter the fit: aggregate rows
(means printed by OSU etc.) are not samples of the distribution being modelled. A series
whose ``stat`` is not ``raw`` is fitted as the tool's statistic: its noise is not searched
(lognormal), and the model's provenance says the rows were aggregates; the messages' noise
is what the tool reported, when it did (OSU ``-z`` percentiles, kit.fit.reportednoise),
else unknown.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from kit.core.errors import ModelError
from kit.data import dataset as ds
from kit.data.schema import OP_QUANTITY, SERIES_KEYS
from kit.data.series_keys import OPTIONAL_KEYS, series_dict
from kit.fit.reportednoise import ReportedNoise, reported_noise
from kit.model.contract import ModelFile
from kit.model.families import FAMILIES

if TYPE_CHECKING:
    from kit.fit.carryover import CarryOver
    from kit.fit.runquality import RunQuality
    from kit.model.estimator import RegimeModel

#: Rows of one series above which the fit uses a deterministic uniform subsample of this
#: many rows: a fit holds ~150 bytes per sample, so this bounds a fit's memory (~1-2 GiB
#: with validation and intervals) whatever the series' size; see git show
#: 1da3baf:BENCHMARKS.md, "Bounded memory", for what the subsample costs in accuracy
#: against the full fit.
MAX_FIT_SAMPLES = 4_000_000
#: Samples a preview fit uses (every k-th in run order).
PREVIEW_SAMPLES = 100_000
#: Families a user may fix per regime (``None`` lets the engine choose): the engine's list.
FAMILY_CHOICES: tuple[str | None, ...] = (None, *FAMILIES)
#: How the subsample of a large series is drawn (recorded in the model's provenance).
SUBSAMPLE_RULE = ("rows whose Polars hash of seq, seeded from the run id (SHA-256), falls "
                  "below fraction x 2^64: uniform, deterministic, one part file at a time")


@dataclass(frozen=True)
class FitOptions:
    """Everything that shapes the model of a series (everything but where it goes).

    The defaults are ``pt2pt fit``'s; every surface fits with them unless its user changed
    one (the TUI's breakpoint and family edits, ``--no-intervals``...), so the same series
    gives the same model everywhere.
    """

    #: a selector may pick a series of a tool's statistics (``pt2pt fit --aggregates``)
    aggregates: bool = False
    #: fixed regime boundaries (bytes) instead of the search
    breakpoints: tuple[float, ...] | None = None
    #: a family per regime (``None`` entries: the engine chooses); with ``breakpoints``
    families: tuple[str | None, ...] | None = None
    max_regimes: int = 6
    min_support: int | None = None
    overlap: bool = True
    mixture: bool = True
    seed: int = 0
    #: fit the samples run quality flags as disturbed too
    keep_disturbed: bool = False
    #: fit the samples slowed by an earlier asynchronous op's bytes too (kit.fit.carryover)
    keep_carry_over: bool = False
    intervals: bool = True
    validate: bool = True
    #: above this many rows, a uniform subsample of this many (None or 0: every row)
    max_samples: int | None = MAX_FIT_SAMPLES
    #: a quick fit of every k-th sample (about ``preview_samples``), without bands,
    #: overlaps, the noise search, validation or intervals: the TUI's first answer
    preview: bool = False
    preview_samples: int = PREVIEW_SAMPLES


@dataclass(frozen=True)
class SeriesSamples:
    """The rows a fit of one series sees, and why they are those rows.

    :func:`read_series` makes them from a dataset; :meth:`of_arrays` from samples that are
    no dataset's series (a half of one, in ``pt2pt diff --halves``; a test's arrays).
    """

    dataset: Path | None
    keys: dict[str, str]  # every SERIES_KEYS value known
    #: the fitted rows: ``run_id``, ``seq``, ``size``, ``time`` (kit.data.dataset.FRAME_SCHEMA)
    frame: pl.DataFrame
    #: kit.fit.runquality's findings on the rows read (None for aggregates: no order)
    quality: RunQuality | None = None
    n_rows: int = 0  # rows of the series, before subsampling and run quality
    #: provenance of a subsample (rows, max_samples, rule), None when every row was read
    subsample: dict[str, Any] | None = None
    #: kit.fit.carryover's finding (None: not judged: aggregates, arrays)
    carry_over: CarryOver | None = None

    @property
    def aggregate(self) -> bool:
        return self.keys.get("stat", ds.RAW) != ds.RAW

    @property
    def size(self) -> NDArray[np.float64]:
        return self.frame["size"].to_numpy()

    @property
    def time(self) -> NDArray[np.float64]:
        return self.frame["time"].to_numpy()

    @property
    def seq(self) -> NDArray[np.int64]:
        return self.frame["seq"].to_numpy()

    @property
    def groups(self) -> NDArray[np.int64]:
        """Run ids as their rank among the series' runs (what np.unique codes them as):
        a million Python strings cost the bootstrap 0.4 s to code."""
        return (self.frame["run_id"].rank("dense") - 1).to_numpy()

    @property
    def n_disturbed_left_out(self) -> int:
        q = self.quality
        return q.n_disturbed if q is not None and q.excluded else 0

    def __len__(self) -> int:
        return self.frame.height

    @classmethod
    def of_arrays(cls, size: Any, time: Any, *, run_id: Any = None, seq: Any = None,
                  keys: Mapping[str, str] | None = None,
                  dataset: Path | None = None) -> SeriesSamples:
        """Samples given as arrays (one run numbered in order when ``run_id``/``seq`` are
        not given), fitted as they are: no run quality."""
        n = len(size)
        frame = pl.DataFrame({
            "run_id": pl.Series(["0"] * n if run_id is None else [str(r) for r in run_id],
                                dtype=pl.String),
            "seq": np.arange(n, dtype=np.int64) if seq is None else np.asarray(seq, np.int64),
            "size": np.asarray(size, dtype=np.float64),
            "time": np.asarray(time, dtype=np.float64)})
        return cls(dataset, dict(keys or {"stat": ds.RAW}), frame, None, n)

    def subset(self, mask: NDArray[np.bool_]) -> SeriesSamples:
        """The rows where ``mask`` is true, as samples of their own (no run quality)."""
        frame = self.frame.filter(pl.Series(mask))
        return SeriesSamples(self.dataset, dict(self.keys), frame, None, frame.height)


@dataclass
class FitResult:
    """What :func:`fit_series` produced: the model file (not yet written), the rows it was
    fitted on, and what the user should read that is not an error (a validation that could
    not run, a subsample)."""

    fitted: ModelFile
    samples: SeriesSamples
    notes: list[str] = field(default_factory=list)

    @property
    def model(self) -> RegimeModel:
        return self.fitted.model

    @property
    def quality(self) -> RunQuality | None:
        return self.samples.quality


# --------------------------------------------------------------------------- reading


def resolve(dataset: str | Path, series: Mapping[str, str] | None,
            opts: FitOptions = FitOptions()) -> dict[str, str]:
    """The one series ``series`` selects, all keys (no scan when every key of a raw series,
    or of an aggregate one with ``opts.aggregates``, is given)."""
    chosen = {k: str(v) for k, v in (series or {}).items()}
    required = set(SERIES_KEYS) - set(OPTIONAL_KEYS)
    if set(chosen) >= required and (opts.aggregates or chosen["stat"] == ds.RAW):
        return series_dict({k: chosen.get(k, "") for k in SERIES_KEYS})
    return ds.resolve_series(dataset, chosen, aggregates=opts.aggregates)


def read_series(dataset: str | Path, series: Mapping[str, str] | None,
                opts: FitOptions = FitOptions()) -> SeriesSamples:
    """The rows a fit of ``series`` (all its keys, see :func:`resolve`) sees.

    Raw series: every row (or a uniform subsample above ``opts.max_samples``), judged by
    run quality; disturbed windows and runs are left out unless ``opts.keep_disturbed``
    (ModelError when too few quiet samples remain). Aggregate series: every row.
    """
    path = Path(dataset)
    keys = resolve(path, series, opts)
    if keys.get("stat", ds.RAW) != ds.RAW:
        frame = ds.series_frame(path, keys)
        return SeriesSamples(path, keys, frame, None, frame.height)
    from kit.fit.carryover import exclusion_mask
    from kit.fit.runquality import assess_frame, drop_disturbed, run_conditions

    subsample: dict[str, Any] | None = None
    n_rows = 0
    if opts.max_samples:
        n_rows = int(ds.series_lazy(path, keys).select(pl.len())
                     .collect(engine="streaming").item())
        if n_rows > opts.max_samples:
            subsample = {"rows": n_rows, "max_samples": int(opts.max_samples),
                         "rule": SUBSAMPLE_RULE}
    if subsample is None:
        frame = ds.series_frame(path, keys)
        n_rows = frame.height
    else:
        frame = read_subsample(path, keys, int(opts.max_samples or 0), n_rows)
    carry_over, kept_rows = exclusion_mask(path, keys.get("op", ""), frame,
                                           keep=opts.keep_carry_over)
    if carry_over.excluded:
        frame = frame.filter(pl.Series(kept_rows))
    quality = assess_frame(frame, conditions=run_conditions(path))
    if not opts.keep_disturbed and quality.n_disturbed:
        from kit.model.estimator import MIN_SAMPLES

        kept = drop_disturbed(frame, quality)
        if kept.height < MIN_SAMPLES:
            raise ModelError(
                f"run quality flagged {quality.n_disturbed} of {frame.height} samples as "
                f"disturbed (far above the runs' quiet level), leaving {kept.height}: too few "
                "to fit. " + " ".join(quality.lines()[:3]), where=str(dataset),
                hint="re-measure on a quiet node, or fit them anyway with --keep-disturbed")
        frame = kept
    return SeriesSamples(path, keys, frame, quality, n_rows, subsample, carry_over)


def read_subsample(dataset: str | Path, chosen: Mapping[str, str], rows: int, n_total: int,
                   seed: int = 0) -> pl.DataFrame:
    """About ``rows`` of a series' ``n_total`` raw rows, uniformly and deterministically.

    Read one part file at a time (ingest writes parts of about 0.8 M rows), each
    filtered to the series (kit.data.dataset's row rule) and the hash rule before the next
    is read: memory holds one part plus the subsample, never the series. (Polars'
    streaming engine on the whole scan held 2.4-3.6 GiB at 10^8 rows for the same filter.)
    Rows come sorted by (run_id, seq), as :func:`kit.data.dataset.series_frame` gives them.
    """
    root = ds.require_ingested(dataset)
    run_table = ds.runs(root)
    threshold = pl.lit(min(int(rows / max(n_total, 1) * 2.0**64), 2**64 - 1), dtype=pl.UInt64)
    columns = [pl.col(c).cast(t) for c, t in ds.FRAME_SCHEMA.items()]
    parts = []
    for path in ds.committed_parts(root, run_table):
        # A part holds one run: hash seq with a seed taken from the run id, so the rule
        # reads one integer column (no per-row string of the run id is built).
        run_id = ds.run_of_part(path.name) or path.name
        run_seed = (seed * 1_000_003 + int(hashlib.sha256(run_id.encode()).hexdigest()[:12],
                                            16)) % 2**63
        lf = ds.series_rows(ds.scan_parts([path], run_table), chosen, aggregates=False)
        lf = lf.filter(pl.col("seq").cast(pl.Int64).hash(run_seed) < threshold)
        parts.append(lf.select(columns).collect(engine="streaming"))
    frame = pl.concat(parts) if parts else pl.DataFrame(schema=ds.FRAME_SCHEMA)
    return frame.sort("run_id", "seq")


# --------------------------------------------------------------------------- fitting


def estimator_params(opts: FitOptions, keys: Mapping[str, str], n_rows: int
                     ) -> tuple[dict[str, Any], int]:
    """RegimeModel's arguments for ``opts`` on a series of ``n_rows`` rows, and the
    preview's step (1: every row). A preview fits every k-th sample without mixtures,
    overlaps or the noise-family search, with the full series' default minimum support
    scaled to the subsample, so it refuses exactly the edits the full fit refuses."""
    from kit.model.estimator import default_min_support

    params: dict[str, Any] = {"max_regimes": opts.max_regimes,
                              "min_support": opts.min_support, "overlap": opts.overlap,
                              "mixture": opts.mixture, "random_state": opts.seed}
    if opts.breakpoints is not None:
        params["breakpoints"] = [float(b) for b in opts.breakpoints]
        if opts.families is not None:
            params["families"] = list(opts.families)
    if keys.get("stat", ds.RAW) != ds.RAW:
        # A statistic per size has no message noise to find: lognormal only, no bands.
        params.update(noise=False, mixture=False)
    step = 1
    if opts.preview:
        step = max(n_rows // max(opts.preview_samples, 1), 1)
        support = opts.min_support or default_min_support(n_rows)
        params.update(mixture=False, overlap=False, noise=False,
                      min_support=max(1, math.ceil(support / step)))
    return params, step


def fit_samples(samples: SeriesSamples, opts: FitOptions = FitOptions()) -> ModelFile:
    """:class:`~kit.model.RegimeModel` on ``samples`` with ``opts``; the model file (model,
    provenance, run quality) is not written. Any failure is a ModelError naming the
    dataset and series."""
    from kit.model import RegimeModel

    size, time = samples.size, samples.time
    params, step = estimator_params(opts, samples.keys, len(size))
    where_data = (f"{samples.dataset} (series {ds.describe(samples.keys)})"
                  if samples.dataset is not None else f"series {ds.describe(samples.keys)}")
    try:
        model = RegimeModel(**params).fit(size[::step], time[::step])
    except ModelError as err:
        # Name the data rather than the Python call when the data is at fault.
        where = err.where
        if where is None or where.startswith("fit("):
            where = where_data
        raise ModelError(err.message, where=where, hint=err.hint) from None
    except (ValueError, RuntimeError, np.linalg.LinAlgError, FloatingPointError) as exc:
        raise ModelError(f"fitting failed: {exc}", where=where_data,
                         hint="move or delete breakpoints so each regime holds enough "
                         "distinct sizes, or fit without fixed breakpoints") from exc
    model, dropped = _physical_or_without_sizes(model, params, size[::step], time[::step],
                                                where_data)
    reported = None
    if samples.aggregate and samples.dataset is not None:
        reported = reported_noise(samples.dataset, samples.keys, model.breakpoints_)
    fitted = ModelFile(model, provenance=provenance(samples.dataset, samples.keys,
                                                    len(size), reported))
    if samples.quality is not None:
        fitted.run_quality = samples.quality.to_dict()
    if samples.subsample is not None:
        fitted.provenance["subsample"] = {**samples.subsample, "fitted": len(size)}
    if dropped:
        fitted.provenance["per_size_dropped"] = dropped
    if samples.carry_over is not None and samples.carry_over.found:
        fitted.provenance["carry_over"] = samples.carry_over.to_dict()
    return fitted


def _physical_or_without_sizes(model: RegimeModel, params: dict[str, Any], size: Any, time: Any,
                               where: str) -> tuple[Any, str]:
    """The fitted model if every reader accepts it (kit.model.schema.check_physical, the
    gate of every model read), else the same fit without its per-size layer and why.

    A fit must never write a file its own reader refuses (a busy run's per-size tails once
    did); the layer is the only part fitted from single sizes' few samples, so it goes
    first. A model refused even then is an error naming the data, never a file."""
    from kit.model import RegimeModel
    from kit.model.schema import check_physical

    try:
        check_physical(model, where)
        return model, ""
    except ModelError as err:
        if not params.get("per_size", True):
            raise _not_physical(err, where) from None
        why = err.message
    plain = RegimeModel(**{**params, "per_size": False}).fit(size, time)
    try:
        check_physical(plain, where)
    except ModelError as err:
        raise _not_physical(err, where) from None
    return plain, f"per-size layer left out: with it, {why}"


def _not_physical(err: ModelError, where: str) -> ModelError:
    return ModelError(f"the fitted model is not physical: {err.message}", where=where,
                      hint="look at the series' samples (pt2pt tui); a run with times out "
                      "of any message's range is damaged")


def validate_fit(fitted: ModelFile, samples: SeriesSamples,
                 opts: FitOptions = FitOptions()) -> dict[str, Any]:
    """kit.fit.validate's held-out result for the fitted model, on the rows it was fitted
    on, with the fit's seed (kept beside the model as ``ModelFile.validation``)."""
    from kit.fit.validate import validate_into

    return validate_into(fitted.model, samples.size, samples.time, random_state=opts.seed)


def intervals_of(fitted: ModelFile, samples: SeriesSamples,
                 opts: FitOptions = FitOptions()) -> dict[str, Any]:
    """The bootstrap intervals of the fitted model (kit.model.uncertainty): whole runs
    resampled when there are enough, else blocks in measurement order."""
    from kit.model.uncertainty import bootstrap_intervals

    groups = seq = None
    if not samples.aggregate:
        groups, seq = samples.groups, samples.seq
    return bootstrap_intervals(fitted.model, samples.size, samples.time, groups=groups,
                               seq=seq, random_state=opts.seed)


def fit_series(dataset: str | Path, series: Mapping[str, str] | None,
               opts: FitOptions = FitOptions()) -> FitResult:
    """Read, fit, validate and bootstrap one series: THE entry point of every surface.

    ``series`` selects it (all keys, or enough to pick one; UserError listing the
    candidates otherwise). A validation that cannot run (too few samples per size) is a
    note, not an error; a preview is neither validated nor bootstrapped.
    """
    samples = read_series(dataset, series, opts)
    return fit_read(samples, opts)


def fit_read(samples: SeriesSamples, opts: FitOptions = FitOptions()) -> FitResult:
    """:func:`fit_series` on rows already read with :func:`read_series` (the TUI reads a
    series once and refits it after each edit)."""
    result = FitResult(fit_samples(samples, opts), samples)
    if samples.carry_over is not None and samples.carry_over.found:
        result.notes.append(samples.carry_over.line())
    if samples.subsample is not None:
        result.notes.append(f"fitted on a uniform subsample of {len(samples)} of "
                            f"{samples.subsample['rows']} rows (--max-samples "
                            f"{samples.subsample['max_samples']})")
    if opts.preview:
        return result
    if opts.validate:
        try:
            result.fitted.validation = validate_fit(result.fitted, samples, opts)
        except ModelError as err:
            result.notes.append(f"not validated: {err.message}")
    if opts.intervals:
        result.fitted.intervals = intervals_of(result.fitted, samples, opts)
    return result


def fit_arrays(keys: Mapping[str, str], size: Any, time: Any, opts: FitOptions = FitOptions(),
               *, dataset: str | Path | None = None) -> RegimeModel:
    """The model of samples that are no one dataset series (the cluster model's pooled
    pairs): :func:`fit_read` of :meth:`SeriesSamples.of_arrays`, no validation, no bootstrap.
    ``keys`` name what the samples are (their ``stat`` decides whether they are aggregates)."""
    samples = SeriesSamples.of_arrays(size, time, keys=keys,
                                      dataset=Path(dataset) if dataset is not None else None)
    return fit_read(samples, replace(opts, validate=False, intervals=False)).model


def with_edits(opts: FitOptions, breakpoints: list[float] | None,
               families: list[str | None] | None) -> FitOptions:
    """``opts`` with a user's breakpoints and families (None: the automatic search)."""
    if breakpoints is None:
        return replace(opts, breakpoints=None, families=None)
    return replace(opts, breakpoints=tuple(float(b) for b in breakpoints),
                   families=tuple(families) if families is not None else None)


# --------------------------------------------------------------------------- provenance


def provenance(dataset: str | Path | None, chosen: Mapping[str, str], n_samples: int,
               reported: ReportedNoise | None = None) -> dict[str, Any]:
    """What a model records about its data: dataset, series, rows, and whether they were
    aggregates (then the model's noise is the spread of the tool's statistic, not of
    messages; the messages' noise is what the tool ``reported``, or unknown)."""
    prov: dict[str, Any] = {"series": dict(chosen), "n_samples": int(n_samples)}
    if dataset is not None:
        prov = {"dataset": str(Path(dataset).resolve()), **prov}
    stat = chosen.get("stat", ds.RAW)
    prov["samples"] = "raw" if stat == ds.RAW else "aggregates"
    if chosen.get("op") in OP_QUANTITY:  # time is not one message's duration: say what it is
        prov["quantity"] = OP_QUANTITY[chosen["op"]]
    if stat != ds.RAW:
        prov["statistic"] = stat
        prov["noise"] = aggregate_noise_note(stat, reported)
        if reported is not None:
            prov["reported_noise"] = reported.to_dict()
    return prov


def aggregate_noise_note(stat: str, reported: ReportedNoise | None) -> str:
    """The one line every output of an aggregate fit gives about the messages' noise."""
    if reported is None:
        return ("unknown: fitted to the tool's per-size statistic "
                f"({stat}), not to single messages")
    return (f"fitted to the tool's per-size statistic ({stat}), not to single messages; "
            f"the messages' noise {reported.describe()}")


def read_model_series(fitted: ModelFile, dataset: str | Path | None = None,
                      series: Mapping[str, str] | None = None) -> SeriesSamples:
    """The rows a saved model was fitted on: its provenance's series (or ``series``) in its
    dataset (or ``dataset``), read as the fit read them (run quality's exclusions as the
    file records them, the same subsample). UserError when the dataset is not known."""
    where = dataset or fitted.dataset
    if where is None:
        raise ModelError("the model does not say which dataset it was fitted on",
                         where=fitted.name, hint="give the dataset (--dataset DIR)")
    selector = ds.model_selector(series if series is not None else fitted.series)
    quality = fitted.run_quality
    sub = fitted.provenance.get("subsample")
    opts = FitOptions(aggregates=True, keep_disturbed=not quality.get("excluded", False),
                      max_samples=int(sub["max_samples"]) if isinstance(sub, dict)
                      and sub.get("max_samples") else None)
    keys = ds.resolve_series(where, selector, aggregates=True, where="series")
    return read_series(where, keys, opts)


__all__ = ["FAMILY_CHOICES", "MAX_FIT_SAMPLES", "PREVIEW_SAMPLES", "FitOptions", "FitResult",
           "ModelFile", "SeriesSamples", "aggregate_noise_note", "fit_arrays", "fit_read",
           "fit_samples",
           "fit_series", "intervals_of", "provenance", "read_model_series", "read_series",
           "resolve", "validate_fit", "with_edits"]
