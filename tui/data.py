"""The TUI's only door into ``kit``: dataset reading, fitting, noise, export, comparison.

Screens never import ``kit`` directly. Keeping the engine behind this thin adapter means a
change in kit's API is fixed in one file, and screens deal in small plain values (arrays,
dataclasses) that are cheap to draw and easy to test. Nothing here re-implements the engine:
binning for drawing is the only computation of our own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kit.errors import ModelError, UserError
from kit.schema import SERIES_KEYS

#: Families a user can cycle through for one regime; ``None`` lets the engine choose.
FAMILIES: tuple[str | None, ...] = (None, "constant", "linear", "power")

#: Quantiles drawn as bands under the sample cloud, so tails stay visible after downsampling.
BAND_QUANTILES: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


@dataclass(frozen=True, order=True)
class SeriesKey:
    """One series: values aligned with ``kit.schema.SERIES_KEYS``."""

    values: tuple[str, ...]

    def as_dict(self) -> dict[str, str]:
        return dict(zip(SERIES_KEYS, self.values, strict=True))

    def get(self, name: str) -> str:
        return self.as_dict().get(name, "")

    @property
    def label(self) -> str:
        d = self.as_dict()
        stat = d.get("stat", "raw")
        base = "/".join(d.get(k, "") for k in ("campaign", "tool", "transport", "op"))
        return base if stat in ("raw", "") else f"{base} [{stat}]"


@dataclass(frozen=True)
class SeriesRow:
    """One line of the series browser."""

    key: SeriesKey
    n_samples: int
    size_min: int
    size_max: int
    small_median_s: float | None
    large_bw_Bps: float | None
    mpi: str


@dataclass(frozen=True)
class Samples:
    """All non-warm-up samples of one series, as float arrays (what the model is fitted on)."""

    key: SeriesKey
    size: np.ndarray
    time: np.ndarray

    def __len__(self) -> int:
        return int(self.size.shape[0])


@dataclass(frozen=True)
class Binned:
    """Per size bin: a representative size, quantiles of time, and a few samples to draw."""

    size: np.ndarray  # median size of each bin
    count: np.ndarray
    quantiles: dict[float, np.ndarray]  # BAND_QUANTILES -> time per bin
    points_size: np.ndarray  # downsampled samples (at most per_bin per bin)
    points_time: np.ndarray


@dataclass(frozen=True)
class RegimeView:
    """What the side panel and the plot need to know about one regime."""

    index: int
    size_min: float
    size_max: float
    family: str
    params: dict[str, float]
    noise_family: str
    noise_params: dict[str, float | list[float]]
    n_samples: int | None
    overlap: tuple[float, float] | None  # size window shared with the next regime
    errors: dict[str, float] = field(default_factory=dict)
    bands: list[tuple[str, float]] = field(default_factory=list)  # mixture: (family, share)


@dataclass(frozen=True)
class NoiseCandidate:
    family: str
    aic: float
    fitted: tuple[float, float, float]  # p50, p95, p99 of the fitted density
    empirical: tuple[float, float, float]
    chosen: bool


@dataclass(frozen=True)
class NoiseView:
    """The noise of one regime: samples of time / fitted median and the chosen density."""

    ratio: np.ndarray
    density_x: np.ndarray
    density_y: np.ndarray
    family: str
    candidates: list[NoiseCandidate]


# ---------------------------------------------------------------------------- dataset


def _check_dataset_dir(path: Path) -> None:
    if not path.exists():
        raise UserError(f"'{path}' does not exist", where="dataset",
                        hint="give the directory that 'pt2pt ingest' wrote")
    if not path.is_dir() or not any((path / n).exists() for n in ("samples", "runs.parquet")):
        raise UserError(f"'{path}' is not a pt2pt dataset (no 'samples/' directory in it)",
                        where="dataset",
                        hint="give the directory that 'pt2pt ingest' wrote, or create one with "
                        "'pt2pt ingest FILES -o DIR'")


def series_rows(dataset: str | Path) -> list[SeriesRow]:
    """The browser's table: kit's series table plus the MPI library of each series' runs."""
    from kit import dataset as kds

    path = Path(dataset)
    _check_dataset_dir(path)
    table = kds.series_table(path)
    if table.height == 0:
        raise UserError(f"'{path}' holds no samples", where="dataset",
                        hint="ingest measurements into it with 'pt2pt ingest'")
    mpi = _mpi_by_series(path)
    rows = []
    for rec in table.iter_rows(named=True):
        values = tuple("" if rec.get(k) is None else str(rec.get(k)) for k in SERIES_KEYS)
        key = SeriesKey(values)
        rows.append(SeriesRow(
            key=key,
            n_samples=int(rec.get("n_samples") or 0),
            size_min=int(rec.get("size_min") or 0),
            size_max=int(rec.get("size_max") or 0),
            small_median_s=_float_or_none(rec.get("small_median_s")),
            large_bw_Bps=_float_or_none(rec.get("large_bw_Bps")),
            mpi=mpi.get((key.get("campaign"), key.get("tool"), key.get("transport")), ""),
        ))
    rows.sort(key=lambda r: r.key)
    return rows


def _mpi_by_series(path: Path) -> dict[tuple[str, str, str], str]:
    """MPI library per (campaign, tool, transport), from the runs table; empty if unknown."""
    from kit import dataset as kds

    try:
        runs = kds.runs(path)
    except (UserError, OSError, pl.exceptions.PolarsError):
        return {}
    if runs.height == 0 or "mpi_version" not in runs.columns:
        return {}
    out: dict[tuple[str, str, str], str] = {}
    for rec in runs.iter_rows(named=True):
        k = (str(rec.get("campaign") or ""), str(rec.get("tool") or ""),
             str(rec.get("transport") or ""))
        version = str(rec.get("mpi_version") or "").splitlines()[0:1]
        if version and k not in out:
            out[k] = version[0][:40]
    return out


def _float_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def load_samples(dataset: str | Path, key: SeriesKey,
                 others: list[SeriesKey] | None = None) -> Samples:
    """Every non-warm-up sample of one series (columns ``size`` and ``time`` only).

    ``others`` (all series of the dataset) lets us filter only on the key columns that
    differ between series: comparing strings over millions of rows is most of the load
    time, and a column with one value in the whole dataset selects nothing.
    """
    from kit import dataset as kds

    lf = kds.scan(Path(dataset))
    varying = [i for i in range(len(SERIES_KEYS))
               if others is None or len({k.values[i] for k in others}) > 1]
    for i in varying:
        lf = lf.filter(pl.col(SERIES_KEYS[i]).cast(pl.String) == key.values[i])
    df = (lf.filter(~pl.col("warmup").fill_null(False))
          .filter(pl.col("time").is_finite() & (pl.col("time") > 0))
          .select(pl.col("size").cast(pl.Float64), pl.col("time").cast(pl.Float64))
          .collect())
    if df.height == 0:
        raise UserError(f"series {key.label} has no usable samples (all warm-up or non-positive)",
                        where=str(dataset), hint="pick another series or re-ingest the run")
    return Samples(key, df["size"].to_numpy(), df["time"].to_numpy())


#: Samples the drawing summary is computed from; quantile bands of a larger series are
#: indistinguishable at terminal resolution and cost seconds to compute.
DRAW_MAX_SAMPLES = 1_000_000
#: Samples per drawing bin: enough for stable 1 %/99 % bands (``BIN_COUNT_MAX``), relaxed
#: down to ``BIN_COUNT_MIN`` for small series so they still get ``BIN_TARGET`` bins.
BIN_COUNT_MAX = 100
BIN_COUNT_MIN = 30
BIN_TARGET = 40
#: A series is a grid (drawn per exact size) when it has at most this many distinct sizes
#: and ``GRID_SHARE`` of its samples sit on sizes holding the minimum bin count each.
GRID_MAX_SIZES = 1024
GRID_SHARE = 0.9


def min_bin_count(n: int) -> int:
    """The fewest samples a drawing bin of an ``n``-sample series holds."""
    return min(max(n // BIN_TARGET, BIN_COUNT_MIN), BIN_COUNT_MAX)


def _grid_bins(size: np.ndarray, min_count: int) -> np.ndarray | None:
    """Bin = exact size, if the series is a grid (many samples per size); else ``None``.

    A subsample decides cheaply for the common dense case: if a few thousand samples
    already hold more distinct sizes than a grid may, the whole series does too.
    """
    probe = size[:: max(size.size // 20_000, 1)]
    if pl.Series(probe).n_unique() > GRID_MAX_SIZES:
        return None
    sizes = np.sort(pl.Series(size).unique().to_numpy())
    if sizes.size > GRID_MAX_SIZES:
        return None
    index = np.searchsorted(sizes, size)
    counts = np.bincount(index, minlength=sizes.size)
    if counts[counts >= min_count].sum() < GRID_SHARE * size.size:
        return None
    return index.astype(np.int32)


def _log_base(size: np.ndarray, bins_per_octave: int) -> np.ndarray:
    """Quarter-octave (by default) bin of each sample, numbered from 0.

    float32 is plenty for a bin index and its log2 is several times faster than float64's:
    this runs on up to ``DRAW_MAX_SAMPLES`` samples every time a series opens.
    """
    t = size.astype(np.float32)
    np.maximum(t, 1.0, out=t)
    np.log2(t, out=t)
    t *= bins_per_octave
    base = np.floor(t, out=t).astype(np.int32)
    base -= base.min()
    return base


def _merge_lut(counts: np.ndarray, bins_per_octave: int, min_count: int) -> np.ndarray:
    """Merged bin id per base bin: neighbours joined until each holds ``min_count`` samples.

    Merging never crosses more than an octave without samples, so sizes far apart (8 B and
    1 MiB) never share a bin; an island of fewer samples than ``min_count`` is one bin.
    """
    nonempty = np.flatnonzero(counts)
    islands = np.split(nonempty, np.flatnonzero(np.diff(nonempty) > bins_per_octave + 1) + 1)
    lut = np.zeros(counts.size, dtype=np.int32)
    group = 0  # next free bin id
    for island in islands:
        first, filled = group, 0
        for i in island.tolist():
            lut[i] = group
            filled += int(counts[i])
            if filled >= min_count:
                group, filled = group + 1, 0
        if filled and group > first:  # an under-filled tail joins the island's last bin
            lut[island[lut[island] == group]] = group - 1
        elif filled:  # the whole island is smaller than one bin
            group += 1
    return lut


def _bin_ids(size: np.ndarray, bins_per_octave: int, min_count: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """(narrow, merged) drawing bin of each sample; the same array when nothing merges.

    A grid series gets its exact sizes in both; otherwise narrow bins are log-size bins
    and merged ones join them until each holds ``min_count`` samples.
    """
    if size.size == 0:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty
    grid = _grid_bins(size, min_count)
    if grid is not None:
        return grid, grid
    base = _log_base(size, bins_per_octave)
    counts = np.bincount(base)
    lut = _merge_lut(counts, bins_per_octave, min_count)
    if int(lut.max()) + 1 == np.count_nonzero(counts):  # every bin already holds enough
        return base, base
    return base, lut[base]


def _summarise(size: np.ndarray, time: np.ndarray, bins: np.ndarray, per_bin: int) -> Binned:
    df = pl.DataFrame({"size": size, "time": time, "bin": bins}).lazy()
    stats = (df.group_by("bin")
             .agg(pl.col("size").median().alias("size"), pl.len().alias("count"),
                  *[pl.col("time").quantile(q, interpolation="linear").alias(f"q{q}")
                    for q in BAND_QUANTILES])
             .sort("bin"))
    points = (df.with_columns(pos=pl.int_range(pl.len()).over("bin"),
                              cnt=pl.len().over("bin"))
              .filter(pl.col("pos") % (pl.col("cnt") // per_bin).clip(1) == 0)
              .select("size", "time"))
    st, pts = pl.collect_all([stats, points])
    return Binned(
        size=st["size"].to_numpy(),
        count=st["count"].to_numpy(),
        quantiles={q: st[f"q{q}"].to_numpy() for q in BAND_QUANTILES},
        points_size=pts["size"].to_numpy(),
        points_time=pts["time"].to_numpy(),
    )


def _drawn(samples: Samples) -> tuple[np.ndarray, np.ndarray]:
    """Every k-th sample, copied once into contiguous arrays (Polars then needs no copy)."""
    step = max(len(samples) // DRAW_MAX_SAMPLES, 1)
    return np.ascontiguousarray(samples.size[::step]), np.ascontiguousarray(samples.time[::step])


def bin_samples(samples: Samples, *, bins_per_octave: int = 4, per_bin: int = 160,
                min_count: int | None = None, merge: bool = True) -> Binned:
    """Quantiles of time per size bin and an evenly spread subset of samples per bin.

    Drawing millions of points is pointless on a 200-dot-wide canvas; quantile bands per
    bin keep the tails visible that a subsample would hide. A grid series (many samples
    per exact size) gets one bin per size. Otherwise bins are ``1/bins_per_octave`` of an
    octave and, with ``merge`` (the raw view), merged with their neighbours until each
    holds ``min_count`` samples (default :func:`min_bin_count`): a sparse log-uniform
    series has a handful of samples per size, and 1 %/99 % bands through so few jump from
    bin to bin. Without ``merge`` (per-bin medians, compare) bins stay narrow, so a step
    between regimes stays sharp. The subset takes every k-th sample of a bin in run order
    (sizes are shuffled in time, so this spreads over the run) which is deterministic, so
    snapshots are too.
    """
    size, time = _drawn(samples)
    wanted = min_bin_count(size.size) if min_count is None else max(int(min_count), 1)
    narrow, merged = _bin_ids(size, bins_per_octave, wanted)
    return _summarise(size, time, merged if merge else narrow, per_bin)


def draw_summaries(samples: Samples) -> tuple[Binned, Binned]:
    """(raw view, median view) summaries; one computation when merging changes nothing.

    Dense series (where open time matters) already hold enough samples per log bin, so
    they pay for one summary; only sparse, hence small, series are summarised twice.
    """
    size, time = _drawn(samples)
    narrow, merged = _bin_ids(size, 4, min_bin_count(size.size))
    median = _summarise(size, time, narrow, 160)
    return (median if merged is narrow else _summarise(size, time, merged, 160)), median


# ---------------------------------------------------------------------------- model


#: Above this many samples an edit is first answered by a quick preview fit.
PREVIEW_MIN_SAMPLES = 150_000
#: Samples the preview is fitted on (every k-th in run order; sizes are shuffled in time).
PREVIEW_SAMPLES = 100_000


def fit(samples: Samples, breakpoints: list[float] | None = None,
        families: list[str | None] | None = None, *, preview: bool = False) -> Any:
    """Fit kit's RegimeModel, with the user's breakpoints/families when given.

    Fixed seed: the same edit gives the same model, which is what the user expects
    when toggling back and forth (and what snapshot tests need). ``preview`` fits a
    deterministic subsample without mixtures, overlaps or the noise-family search: an
    answer within a second on large series, replaced by the full fit when it is done.
    """
    from kit.model import RegimeModel

    kwargs: dict[str, Any] = {"random_state": 0}
    if breakpoints is not None:
        kwargs["breakpoints"] = [float(b) for b in breakpoints]
        kwargs["families"] = list(families) if families is not None else None
    size, time = samples.size, samples.time
    if preview:
        step = max(len(samples) // PREVIEW_SAMPLES, 1)
        size, time = size[::step], time[::step]
        # The engine's documented default support, max(20, 1 %) of the *full* series,
        # scaled to the subsample: the preview refuses the edits the full fit refuses.
        full_support = max(20, math.ceil(0.01 * len(samples)))
        kwargs.update(mixture=False, overlap=False, noise=False,
                      min_support=max(1, math.ceil(full_support / step)))
    try:
        return RegimeModel(**kwargs).fit(size, time)
    except UserError:
        raise
    except (ValueError, RuntimeError, np.linalg.LinAlgError, FloatingPointError) as exc:
        raise ModelError(f"fitting {samples.key.label} failed: {exc}", where="fit",
                         hint="move or delete breakpoints so each regime holds enough "
                         "distinct sizes, or press R for an automatic fit") from exc


def breakpoints_of(model: Any) -> list[float]:
    return [float(b) for b in getattr(model, "breakpoints_", []) or []]


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "to_dict"):
        return dict(obj.to_dict())
    if hasattr(obj, "__dataclass_fields__"):
        return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    return dict(vars(obj))


def _numbers(d: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in _as_dict(d).items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[str(k)] = float(v)
    return out


def _numbers_or_lists(d: Any) -> dict[str, float | list[float]]:
    """Like :func:`_numbers`, keeping numeric lists (a Gaussian mixture's weights, means)."""
    out: dict[str, float | list[float]] = dict(_numbers(d))
    for k, v in _as_dict(d).items():
        if isinstance(v, list | tuple) and all(isinstance(x, int | float) for x in v):
            out[str(k)] = [float(x) for x in v]
    return out


def _components(regime: dict[str, Any]) -> list[Any]:
    """A mixture regime's bands: under ``mixture.components`` in kit's JSON layout."""
    mixture = _as_dict(regime.get("mixture"))
    return list(mixture.get("components") or regime.get("components") or [])


def regimes(model: Any) -> list[RegimeView]:
    """The model's regimes as plain values for drawing."""
    views = []
    for i, reg in enumerate(getattr(model, "regimes_", []) or []):
        d = _as_dict(reg)
        noise = _as_dict(d.get("noise"))
        overlap = _as_dict(d.get("overlap"))
        window: tuple[float, float] | None = None
        if overlap.get("size_lo") is not None and overlap.get("size_hi") is not None:
            window = (float(overlap["size_lo"]), float(overlap["size_hi"]))
        views.append(RegimeView(
            index=i,
            size_min=float(d.get("size_min", 0.0)),
            size_max=float(d.get("size_max", math.inf)),
            family=str(d.get("family", "?")),
            params=_numbers(d.get("params")),
            noise_family=str(noise.get("family", "?")),
            noise_params=_numbers_or_lists(noise.get("params")),
            n_samples=int(d["n_samples"]) if d.get("n_samples") is not None else None,
            overlap=window,
            errors=_regime_errors(model, i),
            bands=[(str(c.get("family", "?")), float(c.get("share", 0.0)))
                   for c in map(_as_dict, _components(d))],
        ))
    return views


def _regime_errors(model: Any, index: int) -> dict[str, float]:
    """Validation numbers of one regime, if ``kit.validate`` filled ``validation_`` for it."""
    validation = getattr(model, "validation_", None) or {}
    per_regime = validation.get("regimes") if isinstance(validation, dict) else None
    if isinstance(per_regime, list) and index < len(per_regime):
        numbers = _numbers(per_regime[index])
        return {k: v for k, v in numbers.items() if k not in ("size_min", "size_max")}
    return {}


def validate(model: Any, samples: Samples) -> None:
    """Held-out validation by kit.validate, stored in ``model.validation_`` (per regime too).

    It refits a copy on a training split, so it costs about one more fit: the series view
    runs it in the background once the user stops editing.
    """
    from kit.validate import validate_into

    validate_into(model, samples.size, samples.time, random_state=0)


def curve(model: Any, size_lo: float, size_hi: float, n: int = 240) -> tuple[np.ndarray, ...]:
    """The fitted median and 5/95 % quantiles on a log grid, for drawing."""
    grid = np.geomspace(max(size_lo, 1.0), max(size_hi, 2.0), n)
    median = np.asarray(model.predict(grid), dtype=float)
    try:
        q = np.asarray(model.predict_quantiles(grid, [0.05, 0.95]), dtype=float)
        lo, hi = (q[:, 0], q[:, 1]) if q.shape == (n, 2) else (q[0], q[1])
    except (AttributeError, NotImplementedError, ValueError):
        lo = hi = np.full(n, np.nan)
    return grid, median, lo, hi


def load_model(path: str | Path) -> Any:
    from kit.model.io import load_model as _load

    return _load(Path(path))


@dataclass(frozen=True)
class ModelFile:
    """A model given on the command line and the series its provenance names (or ``None``)."""

    path: Path
    model: Any
    series: dict[str, str] | None

    @property
    def name(self) -> str:
        return self.path.name


def model_files(paths: Sequence[str | Path]) -> tuple[list[Path], list[UserError]]:
    """The model JSON files named by ``paths``: files as given, directories expanded.

    A directory stands for its ``*.json`` files (sorted, hidden ones skipped: ``pt2pt demo``
    keeps a hidden fingerprint beside its models), so ``--models DIR`` needs no shell glob.
    """
    files: list[Path] = []
    errors: list[UserError] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json")
                           if p.is_file() and not p.name.startswith("."))
            if not found:
                errors.append(UserError("no model files (*.json) in this directory",
                                        where=str(path), hint="give the folder that "
                                        "'pt2pt demo' or 'pt2pt fit -o' wrote models into"))
            files.extend(found)
        else:
            files.append(path)
    return files, errors


def load_models(paths: Sequence[str | Path]) -> tuple[list[ModelFile], list[UserError]]:
    """Load every model file; a bad file becomes an error naming it, the others still load."""
    loaded: list[ModelFile] = []
    files, errors = model_files(paths)
    for path in files:
        try:
            model = load_model(path)
        except UserError as err:
            if not err.where or str(path) not in err.where:
                err = UserError(err.message, where=str(path), hint=err.hint)
            errors.append(err)
            continue
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            errors.append(UserError(f"cannot load the model ({type(exc).__name__}: {exc})",
                                    where=str(path), hint="give a model JSON written by "
                                    "'pt2pt fit' or by this explorer's export"))
            continue
        loaded.append(ModelFile(path, model, model_series(model)))
    return loaded, errors


def _describe_series(series: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in series.items())


def match_models(models: Sequence[ModelFile], rows: Sequence[SeriesRow]
                 ) -> tuple[dict[SeriesKey, ModelFile], list[ModelFile], list[str]]:
    """Pair each model with the one series of ``rows`` its provenance names.

    Returns (model per series, models that name no series, messages for the user). Models
    written by ``pt2pt fit`` name campaign/tool/transport/op and are fitted on raw samples,
    so a missing ``stat`` means ``raw``. A model matching no series, or several, is reported
    and left out; when two files name the same series the later one wins, with a message.
    """
    by_key: dict[SeriesKey, ModelFile] = {}
    unnamed: list[ModelFile] = []
    messages: list[str] = []
    for mf in models:
        if mf.series is None:
            unnamed.append(mf)
            continue
        wanted = {k: v for k, v in mf.series.items() if k in SERIES_KEYS}
        if "stat" not in wanted:
            wanted["stat"] = "raw"
        found = [r.key for r in rows
                 if all(r.key.get(k) == v for k, v in wanted.items())]
        if not found:
            messages.append(f"{mf.name}: its series ({_describe_series(mf.series)}) is not in "
                            "this dataset, so the model is not shown")
        elif len(found) > 1:
            messages.append(f"{mf.name}: its provenance names {len(found)} series of this "
                            f"dataset ({_describe_series(mf.series)}), so the model is not shown")
        else:
            if found[0] in by_key:
                messages.append(f"{mf.name} and {by_key[found[0]].name} are both for "
                                f"{found[0].label}: showing {mf.name}")
            by_key[found[0]] = mf
    return by_key, unnamed, messages


def model_dataset(model: Any) -> Path | None:
    """The dataset a saved model names in its provenance, if it still exists."""
    prov = getattr(model, "provenance_", None) or getattr(model, "provenance", None)
    path = _as_dict(prov).get("dataset") if prov else None
    return Path(path) if isinstance(path, str) and Path(path).is_dir() else None


def model_series(model: Any) -> dict[str, str] | None:
    """The series a saved model says it was fitted on (from its provenance), if any."""
    prov = getattr(model, "provenance_", None) or getattr(model, "provenance", None)
    series = _as_dict(prov).get("series") if prov else None
    return {str(k): str(v) for k, v in series.items()} if isinstance(series, dict) else None


# ---------------------------------------------------------------------------- export


def save_model(model: Any, path: str | Path, dataset: str | Path | None, key: SeriesKey) -> Path:
    from kit.model.io import save_model as _save

    out = Path(path)
    _save(model, out, provenance={"dataset": str(Path(dataset).resolve()) if dataset else None,
                                  "series": key.as_dict(), "source": "pt2pt tui"})
    return out


def export_simgrid(model: Any, directory: str | Path) -> list[Path]:
    """SimGrid/SMPI configuration files (kit writes several) into ``directory``."""
    from kit.export.simgrid import export_simgrid as _export

    return _export(model).write(Path(directory))


SIMGRID_FILES = ("smpi-config.txt", "smpi-config.xml", "simgrid-noise.json")


# ---------------------------------------------------------------------------- noise


def noise_view(model: Any, samples: Samples, index: int) -> NoiseView:
    """Ratios time / curve of the regime's samples, its density, and every candidate family.

    The model keeps only the AIC of the losing noise families; their fitted quantiles are
    recomputed here with kit's own ``fit_noise`` restricted to that family, so the table
    compares like with like.
    """
    from kit.model.noise import fit_noise

    reg = model.regimes_[index]
    size = samples.size
    in_regime = np.asarray(model.regime_index(size)) == index
    mask = getattr(model, "outlier_mask_", None)
    if mask is not None and len(mask) == len(size):
        in_regime &= ~np.asarray(mask, dtype=bool)
    s, t = size[in_regime], samples.time[in_regime]
    if s.size == 0:
        raise ModelError(f"regime {index} of {samples.key.label} holds no samples",
                         where="noise view", hint="move its breakpoints apart and refit")
    ratio = t / np.asarray(reg.curve(s), dtype=float)
    noise = reg.noise
    hi = float(np.quantile(ratio, 0.995))
    grid = np.linspace(max(float(ratio.min()), 1e-9), hi, 400)
    density = np.exp(np.asarray(noise.logpdf(grid), dtype=float))
    candidates = []
    rng_seed = 0
    for fam, aic in sorted(noise.aic.items(), key=lambda kv: kv[1]):
        if fam == noise.family and noise.quantiles:
            report = noise.quantiles
        else:
            report = fit_noise(ratio, np.random.default_rng(rng_seed), (fam,)).quantiles
        candidates.append(NoiseCandidate(
            family=fam, aic=float(aic),
            fitted=tuple(float(report[p]["fitted"]) for p in ("p50", "p95", "p99")),  # type: ignore[arg-type]
            empirical=tuple(float(report[p]["empirical"]) for p in ("p50", "p95", "p99")),  # type: ignore[arg-type]
            chosen=fam == noise.family))
    return NoiseView(ratio=ratio, density_x=grid, density_y=density, family=noise.family,
                     candidates=candidates)


# ---------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class BestRow:
    """One size bin of the best-within-X % table; series by their index in the input."""

    size_lo: float
    size_hi: float
    best: int
    best_median: float
    within: tuple[int, ...]


@dataclass(frozen=True)
class Share:
    """In how many contested bins a series was within X % of the best."""

    index: int
    n_bins: int
    n_within: int


def best_within(series: list[Samples], tolerance_pct: float
                ) -> tuple[list[BestRow], list[Share]]:
    """kit.compare over the given series, labelled A, B, ... in input order.

    ``kit.compare.compare`` groups by one column; the series here may differ in any key
    (transport, tool, campaign...), so each gets its letter in the ``campaign`` column and
    the comparison runs by campaign.
    """
    from kit.compare import compare

    letters = [chr(65 + i) for i in range(len(series))]
    frame = pl.concat([pl.DataFrame({"campaign": letter, "size": s.size, "time": s.time,
                                     "stat": "raw", "warmup": False})
                       for letter, s in zip(letters, series, strict=True)])
    result = compare(frame, by="campaign", within=float(tolerance_pct))
    rows = []
    for rec in result.bins.iter_rows(named=True):
        medians = [rec.get(letter) for letter in letters]
        present = [(m, i) for i, m in enumerate(medians) if m is not None and math.isfinite(m)]
        if not present:
            continue
        best_median, best = min(present)
        within = tuple(letters.index(n.strip()) for n in str(rec["within"]).split(",")
                       if n.strip() in letters)
        rows.append(BestRow(float(rec["size_lo"]), float(rec["size_hi"]), best,
                            float(best_median), within))
    shares = [Share(letters.index(r["series"]), int(r["n_bins"]), int(r["n_within"]))
              for r in result.shares.iter_rows(named=True) if r["series"] in letters]
    return rows, shares
