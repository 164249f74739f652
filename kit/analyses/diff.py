"""Did the network change? Two series compared band by band, with simultaneous intervals.

A site asks "is this 5 % real?" after an upgrade, between partitions, or between today and
last month. A model-against-model comparison cannot answer that alone (two fits of the same
data differ a little in their breakpoints), so the comparison is made on the *samples*:

1. A reference curve (A's regime curve) removes the trend with size, so every sample of A
   and of B becomes a log ratio ``ln(t / curve_A(s))``: sizes that do not coincide between
   A and B (log-uniform random plans) are still comparable.
2. Size bands are the regimes of A and B, cut at every breakpoint of either. A break that
   moved gets its own band between its two positions (where one side has already jumped and
   the other not), so a moved break shows as a difference there, or not at all.
3. In each band the change of p05, p50 and p95 is ``exp(Q_B - Q_A) - 1``. Its interval comes
   from a cluster bootstrap (clusters are sizes, or runs when a side has three or more, since
   samples of one size share that size's effect) and is widened for the number of tests
   (Bonferroni), so two samples of the same truth are called "same" with 95 % confidence
   over the whole table, not per line.
4. A change is reported when its simultaneous interval excludes 0 and the estimate is at least
   ``min_effect`` (default 2 %), so a real but negligible difference of 0.3 % on millions of
   samples is not "slower".
5. Per regime of A, the curve parameters (latency, bandwidth, power slope) are refitted on
   per-size medians of A and of B with the same family, with a bootstrap over sizes.
6. The run conditions of both sides (:mod:`kit.measure.conditions`) are read from the runs
   table: when a run of either side was measured on a disturbed node the comparison is
   shown but no change is called (``allow_disturbed`` calls it anyway): a busy node slows
   every size, and "slower by 40 %" would name the network for what the load did.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from kit.core.atomicwrite import save_png
from kit.core.errors import UserError
from kit.figures import sanity
from kit.figures.series import LEGEND
from kit.model.outliers import group_medians
from kit.model.runs import string_codes

if TYPE_CHECKING:
    from kit.figures.series import SeriesFigures
    from kit.fit.fitting import SeriesSamples

STATS: dict[str, float] = {"p05": 0.05, "p50": 0.5, "p95": 0.95}
#: Fewest samples per side in a band for its median to be compared; for p05/p95 more.
MIN_BAND_MEDIAN = 10
MIN_BAND_TAIL = 40
#: Fewest distinct sizes in a regime for its curve parameters to be compared.
MIN_PARAM_SIZES = 4
EXIT_THRESHOLD = 3
#: no verdict: a side was measured on a disturbed node (kit.measure.conditions)
EXIT_WITHHELD = 4
#: Bootstrap replicates x samples held at once (a few int64 arrays of this many cells each).
BOOT_CELLS = 1 << 21

Array = NDArray[np.float64]


# --------------------------------------------------------------------------- inputs
@dataclass
class Side:
    """One side of the comparison: samples (size, time), optional run/seq, optional model."""

    label: str
    size: Array
    time: Array
    run: NDArray[Any] | None = None
    seq: NDArray[Any] | None = None
    model: Any = None  # a fitted RegimeModel when one was given or fitted
    #: the rows as kit.fit.fitting read them (a dataset series or a model's); None: arrays
    samples: SeriesSamples | None = None
    #: latency, bandwidth (and a model file's score, verdict) as every surface shows them;
    #: None: computed from the samples (kit.figures' definitions) when compared
    figures: SeriesFigures | None = None
    #: the conditions of the side's runs (kit.measure.conditions), from the runs table
    conditions: list[Any] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.size)

    @classmethod
    def of(cls, label: str, samples: SeriesSamples, model: Any = None,
           figures: SeriesFigures | None = None,
           conditions: list[Any] | None = None) -> Side:
        """A side made of the rows the fit of a series sees (kit.fit.fitting)."""
        return cls(label, samples.size, samples.time, samples.frame["run_id"].to_numpy(),
                   samples.seq, model=model, samples=samples, figures=figures,
                   conditions=list(conditions or []))

    def shown_figures(self) -> SeriesFigures:
        """kit.figures' figures of this side: its series' (the dataset's stored summary), or
        the same definitions on its samples."""
        from kit.figures.series import SeriesFigures

        if self.figures is not None:
            return self.figures
        return SeriesFigures.of_samples(self.size.tolist(), self.time.tolist())

    def fit_samples(self) -> SeriesSamples:
        from kit.fit.fitting import SeriesSamples

        if self.samples is not None:
            return self.samples
        return SeriesSamples.of_arrays(self.size, self.time, run_id=self.run, seq=self.seq)


def side_conditions(dataset: Path, run_ids: Any) -> list[Any]:
    """The recorded conditions of the runs ``run_ids`` (kit.measure.conditions)."""
    import polars as pl

    from kit.data import dataset as ds
    from kit.measure.conditions import Conditions

    wanted = sorted({str(r) for r in run_ids})
    table = ds.runs(dataset).filter(pl.col("run_id").is_in(wanted))
    return [Conditions.from_row(row) for row in table.iter_rows(named=True)]


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``PATH`` or ``PATH#KEY=V,...`` (a series selector after ``#``)."""
    path, sep, sel = spec.partition("#")
    return Path(path), (sel if sep else None)


def load_side(spec: str, *, series: str | None = None, label: str | None = None) -> Side:
    """A dataset folder (with a selector) or a model file whose provenance names its data.

    Either way the samples are the rows ``pt2pt fit`` fits (kit.fit.fitting.read_series:
    disturbed windows left out as the fit leaves them out), and a dataset's model is the
    one ``pt2pt fit`` writes for it."""
    from kit.data.dataset import parse_selector
    from kit.fit import fitting

    path, sel_text = split_spec(spec)
    name = label or spec
    if not path.exists():
        raise UserError(f"{path} does not exist", where=spec,
                        hint="give a dataset folder (optionally DATASET#KEY=V,...) or a model "
                        "file written by 'pt2pt fit'")
    if path.is_dir():
        selector = parse_selector(sel_text or series, where=spec if sel_text else "--series")
        return dataset_side(path, selector, name)
    from kit.model.io import read_model

    fitted = read_model(path)
    data = fitted.dataset
    if data is None or not isinstance(fitted.provenance.get("series"), dict) \
            or not data.is_dir():
        raise UserError(f"the model's samples are not reachable (its provenance names "
                        f"dataset {fitted.provenance.get('dataset')!r})", where=str(path),
                        hint="diff needs samples for its intervals: give the dataset folder "
                        "instead (DATASET#KEY=V,...) or restore the dataset at that path")
    rows = fitting.read_model_series(fitted)
    return Side.of(name, rows, model=fitted.model,
                   figures=_figures(data, rows.keys, fitted.validation),
                   conditions=side_conditions(data, rows.frame["run_id"].unique()))


def _figures(dataset: Path, keys: dict[str, str],
             validation: dict[str, Any] | None) -> SeriesFigures:
    """The series' figures from the dataset's stored summary (kit.figures)."""
    from kit.data.figures import series_figures

    return series_figures(dataset, keys, validation)


@dataclass
class SeriesPairs:
    """The series of two datasets matched by key: (label, A's selector, B's selector) each,
    and the series found on one side only."""

    pairs: list[tuple[str, dict[str, str], dict[str, str]]]
    only_a: list[str]
    only_b: list[str]


def pair_series(a: Path, b: Path) -> SeriesPairs:
    """Match the raw series of datasets ``a`` and ``b`` by the keys that tell a dataset's
    series apart (tool, transport, op, ... as they vary in either); keys constant on each side
    (the campaign's name, the host pair of a one-pair machine) are what is compared, not
    what is matched."""
    import polars as pl

    from kit.data import dataset as ds

    tables = []
    for path in (a, b):
        table = ds.series_table(ds.require_ingested(path)).filter(
            pl.col("stat").cast(pl.String) == ds.RAW)
        tables.append([{k: str(r[k]) for k in ds.SERIES_KEYS} for r in table.to_dicts()])
    keys = [k for k in ds.SERIES_KEYS
            if any(len({row[k] for row in rows}) > 1 for rows in tables)] or ["op"]

    def key(row: dict[str, str]) -> tuple[str, ...]:
        return tuple(row[k] for k in keys)

    def label(row: dict[str, str]) -> str:
        return ",".join(f"{k}={row[k]}" for k in keys)

    in_a = {key(r): r for r in tables[0]}
    in_b = {key(r): r for r in tables[1]}
    pairs = [(label(in_a[k]), in_a[k], in_b[k]) for k in sorted(in_a) if k in in_b]
    return SeriesPairs(pairs, [label(in_a[k]) for k in sorted(in_a) if k not in in_b],
                       [label(in_b[k]) for k in sorted(in_b) if k not in in_a])


def dataset_side(path: Path, selector: dict[str, str], label: str) -> Side:
    """One series of a dataset folder as a side: the rows ``pt2pt fit`` fits
    (kit.fit.fitting.read_series), its figures and its runs' conditions."""
    from kit.fit import fitting

    keys = fitting.resolve(path, selector)
    rows = fitting.read_series(path, keys)
    return Side.of(label, rows, figures=_figures(path, keys, None),
                   conditions=side_conditions(path, rows.frame["run_id"].unique()))


def halves(side: Side) -> tuple[Side, Side]:
    """Split each run of ``side`` at its median sequence number: first half vs second."""
    if side.seq is None:
        raise UserError("the samples have no sequence numbers", where=side.label,
                        hint="--halves needs a dataset series (seq column)")
    first = np.zeros(side.n, dtype=bool)
    runs = side.run if side.run is not None else np.zeros(side.n, dtype=object)
    for r in np.unique(runs):
        m = runs == r
        first[m] = side.seq[m] <= np.median(side.seq[m])

    def part(mask: NDArray[np.bool_], what: str) -> Side:
        return Side(f"{side.label} ({what} half)", side.size[mask], side.time[mask],
                    None if side.run is None else side.run[mask], side.seq[mask]
                    if side.seq is not None else None, conditions=side.conditions,
                    samples=None if side.samples is None else side.samples.subset(mask))

    return part(first, "first"), part(~first, "second")


# --------------------------------------------------------------------------- results
@dataclass
class BandChange:
    """Change of one statistic (p05/p50/p95 of time / A's curve) in one size band."""

    size_lo: float
    size_hi: float
    stat: str
    n_a: int
    n_b: int
    change: float  # fraction: +0.07 = B slower by 7 %
    ci_lo: float
    ci_hi: float
    significant: bool
    kind: str = "regime"  # or "break window"
    why: str = ""  # why the change is not estimated (its interval is no estimate)


@dataclass
class ParamChange:
    regime: int
    size_lo: float
    size_hi: float
    family: str
    param: str  # latency_s, bandwidth_Bps, exponent, time_s
    a: float
    b: float
    change: float  # relative (exponent: absolute difference)
    ci_lo: float
    ci_hi: float
    significant: bool
    relative: bool = True
    #: why the change is not estimated (kit.figures.sanity: a value or interval physics
    #: forbids); the row is then shown without numbers
    why: str = ""


@dataclass
class BreakChange:
    kind: str  # same | moved | appeared | vanished
    a: float | None
    b: float | None
    confirmed: bool
    note: str = ""


@dataclass
class DiffResult:
    a_label: str
    b_label: str
    n_a: int
    n_b: int
    bands: list[BandChange]
    params: list[ParamChange]
    breaks: list[BreakChange]
    verdict: str
    changed: bool
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: the conditions each side was measured in (kit.measure.conditions.describe), and why
    #: no change is called (a disturbed side), or None
    conditions: dict[str, Any] = field(default_factory=dict)

    @property
    def withheld(self) -> str | None:
        """Why no change was called (a side measured on a disturbed node), or None."""
        why = self.conditions.get("withheld")
        return str(why) if why else None
    #: each side's latency, bandwidth, score, best baseline, verdict (kit.figures' text)
    figures: dict[str, dict[str, str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return clean({"format": "pt2pt-diff", "format_version": 1, "a": self.a_label,
                      "b": self.b_label, "n_a": self.n_a, "n_b": self.n_b,
                      "verdict": self.verdict, "changed": self.changed,
                      "settings": self.settings, "bands": [asdict(b) for b in self.bands],
                      "params": [asdict(p) for p in self.params],
                      "breaks": [asdict(b) for b in self.breaks], "notes": self.notes,
                      "conditions": self.conditions, "figures": self.figures})


# --------------------------------------------------------------------------- machinery
def _fit(side: Side, seed: int) -> Any:
    """A's/B's model: the given one, else ``pt2pt fit``'s (kit.fit.fitting, without
    validation or intervals: only its curve and breaks are used)."""
    from kit.fit.fitting import FitOptions, fit_read

    if side.model is not None:
        return side.model
    opts = FitOptions(seed=seed, validate=False, intervals=False)
    return fit_read(side.fit_samples(), opts).model


def _clusters(side: Side, mask: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Cluster labels for the bootstrap: runs when there are >= 3, else sizes."""
    if side.run is not None:
        inv = string_codes(side.run[mask])[1]
        if len(inv) and int(inv.max()) + 1 >= 3:
            return inv.astype(np.int64)
    _, inv = np.unique(side.size[mask], return_inverse=True)
    return inv.astype(np.int64)


class _Resampler:
    """Cluster-bootstrap replicates (all members of clusters drawn with replacement), as how
    often each sample is drawn: a replicate's quantiles then need no copy of its samples."""

    def __init__(self, labels: NDArray[np.int64]) -> None:
        present = np.bincount(labels) > 0
        self.n = len(labels)
        self.k = int(present.sum())
        # Each sample's cluster among the non-empty ones, in label order.
        self.cluster = (np.cumsum(present) - 1)[labels]
        self.iid = self.k >= 0.9 * self.n

    def multiplicity(self, rng: np.random.Generator) -> NDArray[np.int64]:
        """How often each sample is drawn in one replicate."""
        if self.iid:
            return np.bincount(rng.integers(0, self.n, self.n), minlength=self.n)
        return np.bincount(rng.integers(0, self.k, self.k), minlength=self.k)[self.cluster]


def _multiset_quantiles(xs: Array, counts: NDArray[np.int64], qs: Array) -> Array:
    """``np.quantile`` (its default, linear method) of each row's multiset: ``counts[r, i]``
    copies of ``xs[i]``, with ``xs`` sorted; equal to it bit for bit, without building the
    multisets. The rows are the groups of the bootstrap's order-statistic lookup
    (:func:`kit.model.resampled_bins.order_positions`); the interpolation is numpy's own
    (``_lerp``), where the intervals' ``order_statistics`` rounds differently by an ulp."""
    from kit.model.resampled_bins import order_positions

    n = counts.shape[1]
    total = counts.sum(axis=1)
    i_lo, i_hi, gamma = order_positions(np.cumsum(counts.ravel()), np.cumsum(total) - total,
                                        total, qs)
    lo, hi, gamma = xs[i_lo.T % n], xs[i_hi.T % n], gamma.T
    d = hi - lo
    out = lo + d * gamma
    np.subtract(hi, d * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def _boot_quantile_changes(xa: Array, xb: Array, res_a: _Resampler, res_b: _Resampler,
                           qs: Array, n_boot: int, rng: np.random.Generator) -> Array:
    """(n_boot, len(qs)) replicates of Q_B - Q_A; B's draw before A's in each replicate."""
    order_a, order_b = np.argsort(xa, kind="stable"), np.argsort(xb, kind="stable")
    sa, sb = xa[order_a], xb[order_b]
    chunk = max(1, BOOT_CELLS // max(len(xa), len(xb)))
    reps = np.empty((n_boot, len(qs)))
    for start in range(0, n_boot, chunk):
        rows = range(start, min(n_boot, start + chunk))
        ca = np.empty((len(rows), len(xa)), dtype=np.int64)
        cb = np.empty((len(rows), len(xb)), dtype=np.int64)
        for r in range(len(rows)):
            cb[r] = res_b.multiplicity(rng)[order_b]
            ca[r] = res_a.multiplicity(rng)[order_a]
        reps[rows.start:rows.stop] = (_multiset_quantiles(sb, cb, qs)
                                      - _multiset_quantiles(sa, ca, qs))
    return reps


def _edges(bp_a: list[float], bp_b: list[float], tol: float
           ) -> tuple[list[float], list[BreakChange], set[tuple[float, float]]]:
    """Band edges from both sides' breakpoints, the break matching, and the moved windows."""
    unused = list(bp_b)
    edges: list[float] = []
    breaks: list[BreakChange] = []
    windows: set[tuple[float, float]] = set()
    for a in bp_a:
        best = min(unused, key=lambda b: abs(math.log(b / a)), default=None)
        if best is not None and abs(math.log(best / a)) < math.log(2.0):
            unused.remove(best)
            if abs(math.log(best / a)) <= math.log1p(tol):
                edges.append(a)
                breaks.append(BreakChange("same", a, best, False))
            else:
                lo, hi = sorted((a, best))
                edges += [lo, hi]
                windows.add((lo, hi))
                breaks.append(BreakChange("moved", a, best, False))
        else:
            edges.append(a)
            breaks.append(BreakChange("vanished", a, None, False))
    for b in unused:
        edges.append(b)
        breaks.append(BreakChange("appeared", None, b, False))
    return sorted(set(edges)), breaks, windows


def _quantiles(x: Array, qs: list[float]) -> Array:
    return np.quantile(x, qs) if len(x) else np.full(len(qs), np.nan)


def _per_size_medians(size: Array, time: Array) -> tuple[Array, Array, Array]:
    """Distinct sizes, the median time of each, and their sample counts."""
    uniq, inv, counts = np.unique(size, return_inverse=True, return_counts=True)
    return uniq, group_medians(time, inv, counts), counts.astype(np.float64)


def _param_values(family: str, params: dict[str, float], lo: float = 1.0
                  ) -> dict[str, tuple[float, bool]]:
    """The parameters a reader compares: (value, relative?). A power law a·s^b is compared
    by its time at the regime's smallest size ``lo`` (a itself is the time of a 1-byte
    message, far outside a regime that starts at 64 KiB) and its exponent."""
    if family == "constant":
        return {"latency_s": (params["a"], True)}
    if family == "linear":
        bw = 1.0 / params["b"] if params["b"] > 0 else math.inf
        return {"latency_s": (params["a"], True), "bandwidth_Bps": (bw, True)}
    return {"time_at_lo_s": (params["a"] * max(lo, 1.0) ** params["b"], True),
            "exponent": (params["b"], False)}


def _fit_params(family: str, s: Array, m: Array, w: Array, lo: float = 1.0
                ) -> dict[str, tuple[float, bool]]:
    """Closed-form weighted fit of ``family`` to per-size medians (cheap enough to bootstrap).

    Relative-error least squares as in the engine's starting values: constant is the
    weighted geometric mean, power a regression of ln t on ln s, linear a regression of 1 on
    (1/m, s/m). The engine's robust Huber refinement is left out: medians are robust already
    and the interval must come from hundreds of refits.
    """
    s = np.maximum(s, 1.0)
    if family == "constant":
        return _param_values(family, {"a": float(np.exp(np.average(np.log(m), weights=w)))})
    if family == "power":
        if np.ptp(s) <= 0:
            raise ValueError("one size")
        b, la = np.polyfit(np.log(s), np.log(m), 1, w=np.sqrt(w))
        return _param_values(family, {"a": float(np.exp(la)), "b": float(b)}, lo)
    sw = np.sqrt(w / w.mean())
    design = np.stack([1.0 / m, s / m], axis=1) * sw[:, None]
    coef, *_ = np.linalg.lstsq(design, sw, rcond=None)
    return _param_values(family, {"a": max(float(coef[0]), 1e-15),
                                  "b": max(float(coef[1]), 1e-30)})


# --------------------------------------------------------------------------- the diff
def diff(a: Side, b: Side, *, alpha: float = 0.05, min_effect: float = 0.02,
         n_boot: int = 200, seed: int = 0, break_tol: float = 0.05,
         params: bool = True, reason: str | None = None,
         allow_disturbed: bool = False) -> DiffResult:
    """Compare B with A; see the module docstring for the method."""
    from scipy.stats import norm

    for side in (a, b):
        if side.n < MIN_BAND_MEDIAN:
            raise UserError(f"only {side.n} samples", where=side.label,
                            hint="a comparison needs at least 10 raw samples on each side")
    if not 0 < alpha < 1:
        raise UserError(f"{alpha} is not in (0, 1)", where="--alpha")
    rng = np.random.default_rng(seed)
    model_a, model_b = _fit(a, seed), _fit(b, seed)
    bp_a = [float(x) for x in model_a.breakpoints_]
    bp_b = [float(x) for x in model_b.breakpoints_]
    edges, breaks, windows = _edges(bp_a, bp_b, break_tol)
    lo_all = max(float(a.size.min()), float(b.size.min()))
    hi_all = min(float(a.size.max()), float(b.size.max()))
    notes: list[str] = []
    if lo_all > hi_all:
        raise UserError("A and B have no message sizes in common", where=f"{a.label} / "
                        f"{b.label}", hint="compare series measured over overlapping size ranges")
    for side in (a, b):
        if side.size.min() < lo_all or side.size.max() > hi_all:
            notes.append(f"{side.label}: sizes outside {lo_all:.0f}–{hi_all:.0f} B (measured "
                         "on one side only) are not compared")
    cuts = [e for e in edges if lo_all < e <= hi_all]
    bounds = [lo_all, *cuts, math.nextafter(hi_all, math.inf)]
    ra = np.log(a.time / model_a.curve(a.size))
    rb = np.log(b.time / model_a.curve(b.size))
    qs = list(STATS.values())

    # Point estimates and bootstrap replicates for every band and statistic.
    pending: list[tuple[float, float, str, int, int, float, float, str]] = []
    for lo, hi in itertools.pairwise(bounds):
        ma = (a.size >= lo) & (a.size < hi)
        mb = (b.size >= lo) & (b.size < hi)
        na, nb = int(ma.sum()), int(mb.sum())
        kind = "break window" if (lo, hi) in windows else "regime"
        if min(na, nb) < MIN_BAND_MEDIAN:
            if max(na, nb) > 0:
                notes.append(f"{lo:.0f}–{hi:.0f} B: {na} vs {nb} samples, too few to compare")
            continue
        xa, xb = ra[ma], rb[mb]
        est = _quantiles(xb, qs) - _quantiles(xa, qs)
        res_a, res_b = _Resampler(_clusters(a, ma)), _Resampler(_clusters(b, mb))
        reps = _boot_quantile_changes(xa, xb, res_a, res_b, np.array(qs), n_boot, rng)
        se = reps.std(axis=0, ddof=1)
        for (name, _), e, s in zip(STATS.items(), est, se, strict=True):
            if name != "p50" and min(na, nb) < MIN_BAND_TAIL:
                continue
            pending.append((lo, hi, name, na, nb, float(e), float(s), kind))

    param_rows: list[tuple[int, float, float, str, str, float, float, float, bool]] = []
    if params:
        param_rows = _param_changes(model_a, a, b, n_boot=max(50, n_boot // 4), rng=rng,
                                    lo_all=lo_all, hi_all=hi_all)
    m_tests = max(1, len(pending) + len(param_rows))
    z = float(norm.ppf(1.0 - alpha / (2.0 * m_tests)))

    bands = []
    for lo, hi, name, na, nb, e, s, kind in pending:
        lo_ci, hi_ci = e - z * s, e + z * s
        sig = (lo_ci > 0 or hi_ci < 0) and abs(math.expm1(e)) >= min_effect
        change, c_lo, c_hi = math.expm1(e), math.expm1(lo_ci), math.expm1(hi_ci)
        why = sanity.ratio_interval_problem(change, c_lo, c_hi) or ""
        bands.append(BandChange(lo, hi, name, na, nb, change, c_lo, c_hi,
                                bool(sig) and not why, kind, why))
    pchanges = []
    for k, plo, phi, fam, pname, va, vb, sd, rel in param_rows:
        e = (math.log(vb / va) if rel else vb - va) if va > 0 or not rel else math.nan
        lo_ci, hi_ci = e - z * sd, e + z * sd
        size = abs(math.expm1(e)) if rel else abs(e)
        sig = math.isfinite(e) and (lo_ci > 0 or hi_ci < 0) and size >= min_effect
        if rel:
            e, lo_ci, hi_ci = math.expm1(e), math.expm1(lo_ci), math.expm1(hi_ci)
        why = _param_problem(pname, va, vb, e, lo_ci, hi_ci, rel)
        pchanges.append(ParamChange(k, plo, phi, fam, pname, va, vb, e, lo_ci, hi_ci,
                                    bool(sig) and not why, rel, why))

    _confirm_breaks(breaks, bands)
    verdict, changed = _verdict(bands, pchanges, breaks, min_effect, reason)
    conditions = _conditions(a, b, notes)
    if conditions["withheld"]:
        if allow_disturbed:
            notes.append(f"called although {conditions['withheld']} (--allow-disturbed)")
            conditions["withheld"] = None
        else:
            verdict, changed = (f"no verdict: {conditions['withheld']}; the table below "
                                "shows the load as much as the network. Measure again on a "
                                "quiet node, or call it anyway with --allow-disturbed"), False
    settings = {"alpha": alpha, "min_effect": min_effect, "bootstrap": n_boot, "seed": seed,
                "tests": m_tests, "z": z, "break_tol": break_tol,
                "statistic": "quantiles of time / A's regime curve per size band",
                "correction": "Bonferroni over all tests (family-wise 95 %)",
                "breakpoints_a": bp_a, "breakpoints_b": bp_b}
    figures = {}
    for key, side in (("a", a), ("b", b)):
        shown = side.shown_figures()
        figures[key] = {**shown.cells(), "latency label": shown.latency_label(),
                        "bandwidth label": shown.bandwidth_label()}
    return DiffResult(a.label, b.label, a.n, b.n, bands, pchanges, breaks, verdict, changed,
                      settings, notes, conditions, figures)


def _conditions(a: Side, b: Side, notes: list[str]) -> dict[str, Any]:
    """Each side's conditions in words and why a verdict is withheld (kit.measure.conditions)."""
    from kit.measure.conditions import describe, judge, unrecorded, withheld, worst

    sides = {"A": a.conditions, "B": b.conditions}
    out: dict[str, Any] = {"withheld": withheld(sides)}
    for name, runs in sides.items():
        verdict, why = worst([judge(c) for c in runs]) if runs else ("unknown", "no run")
        shown = sorted({describe(c) for c in runs})
        out[name] = {"verdict": verdict, "why": why, "runs": shown[:3]}
    missing = unrecorded(sides)
    if missing:
        notes.append(f"conditions (load, binding) not recorded for {' and '.join(missing)}: "
                     "a busy node cannot be ruled out")
    return out


def _param_problem(name: str, va: float, vb: float, change: float, lo: float, hi: float,
                   relative: bool) -> str:
    """Why a parameter's change is not estimated (kit.figures.sanity), or ""."""
    check = {"latency_s": sanity.time_problem, "time_at_lo_s": sanity.time_problem,
             "bandwidth_Bps": sanity.bandwidth_problem}.get(name)
    for side, v in (("A", va), ("B", vb)):
        problem = check(v, f"{side}'s {name}") if check is not None else None
        if problem:
            return problem + (" (a flat regime: no per-byte cost to measure)"
                              if name == "bandwidth_Bps" else "")
    if relative:
        return sanity.ratio_interval_problem(change, lo, hi) or ""
    return "" if all(math.isfinite(x) for x in (change, lo, hi)) else "interval not finite"


def _param_changes(model_a: Any, a: Side, b: Side, *, n_boot: int, rng: np.random.Generator,
                   lo_all: float, hi_all: float
                   ) -> list[tuple[int, float, float, str, str, float, float, float, bool]]:
    """Per regime of A: its family refitted to A's and B's per-size medians, bootstrap SE."""
    out = []
    for k, reg in enumerate(model_a.regimes_):
        lo = max(float(reg.size_min), lo_all)
        hi = min(float(reg.size_max), hi_all)
        if k == len(model_a.regimes_) - 1:
            hi = math.nextafter(hi, math.inf)
        tables = []
        for side in (a, b):
            m = (side.size >= lo) & (side.size < hi)
            tables.append(_per_size_medians(side.size[m], side.time[m]))
        if min(len(t[0]) for t in tables) < MIN_PARAM_SIZES:
            continue
        try:
            va = _fit_params(reg.family, *tables[0], lo)
            vb = _fit_params(reg.family, *tables[1], lo)
        except (ValueError, np.linalg.LinAlgError):
            continue
        reps: dict[str, list[float]] = {p: [] for p in va}
        for _ in range(n_boot):
            vals = []
            for s, med, w in tables:
                idx = rng.integers(0, len(s), len(s))
                try:
                    vals.append(_fit_params(reg.family, s[idx], med[idx], w[idx], lo))
                except (ValueError, np.linalg.LinAlgError):
                    vals = []
                    break
            if len(vals) != 2:
                continue
            for p, (x_a, rel) in vals[0].items():
                x_b = vals[1][p][0]
                if rel and x_a > 0 and x_b > 0 and math.isfinite(x_a) and math.isfinite(x_b):
                    reps[p].append(math.log(x_b / x_a))
                elif not rel:
                    reps[p].append(x_b - x_a)
        for p, (x_a, rel) in va.items():
            x_b = vb[p][0]
            if len(reps[p]) < 10 or not (math.isfinite(x_a) and math.isfinite(x_b)):
                continue
            if rel and (x_a <= 0 or x_b <= 0):
                continue
            out.append((k, lo, hi, reg.family, p, x_a, x_b,
                        float(np.std(reps[p], ddof=1)), rel))
    return out


def _confirm_breaks(breaks: list[BreakChange], bands: list[BandChange]) -> None:
    """A break change counts only where the samples around it differ significantly."""
    for br in breaks:
        if br.kind == "same":
            br.confirmed = True
            continue
        if br.kind == "moved":
            assert br.a is not None and br.b is not None
            lo, hi = sorted((br.a, br.b))
            near = [x for x in bands if x.kind == "break window" and x.size_lo == lo
                    and x.size_hi == hi]
        else:
            at = br.a if br.a is not None else br.b
            assert at is not None
            near = [x for x in bands if x.size_lo == at or x.size_hi == at]
        br.confirmed = any(x.significant for x in near)
        if not br.confirmed:
            br.note = ("the fits differ here but the samples around it do not differ "
                       "significantly: not counted")


def human_size(size: float) -> str:
    """1 B, 1.5 KiB, 64 KiB, 1 MiB: what a reader expects in a verdict."""
    for unit, div in (("MiB", 2.0**20), ("KiB", 1024.0)):
        if size >= div:
            v = size / div
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.3g} {unit}"
    return f"{size:.0f} B"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}" if abs(x) < 0.1 else f"{100 * x:.0f}"


def ratio_text(change: float, lo: float, hi: float) -> str:
    """A change B/A - 1 with its interval, as a reader takes it in: percent up to a factor
    2 either way (+7 % [+5, +9]), a ratio beyond (x240 [x120, x480]; x0.17 [x0.1, x0.3]):
    +23,845 % says less than x240, and an interval [-100, +5e30] % hides that it spans a
    factor 1e30."""
    r, rl, rh = 1 + change, 1 + lo, 1 + hi
    if 0.5 < r < 2 and rl > 0.25 and rh < 4:
        return f"{_signed_pct(change)} % [{_signed_pct(lo)}, {_signed_pct(hi)}]"
    return f"x{_ratio(r)} [x{_ratio(rl)}, x{_ratio(rh)}]"


def _signed_pct(x: float) -> str:
    return ("+" if x >= 0 else "") + _pct(x)


def _ratio(r: float) -> str:
    if not math.isfinite(r):
        return "inf"
    return f"{r:.3g}" if r < 1e4 else f"{r:.1e}"


def band_phrase(c: BandChange) -> str:
    word = "slower" if c.change > 0 else "faster"
    where = f"in {human_size(c.size_lo)}–{human_size(c.size_hi)}"
    text = ratio_text(c.change, c.ci_lo, c.ci_hi)
    if text.startswith("x"):
        return f"{c.stat} {word}: B/A {text} {where}"
    return f"{c.stat} {word} by {_pct(abs(c.change))} % [{_pct(c.ci_lo)}, {_pct(c.ci_hi)}] {where}"


def _verdict(bands: list[BandChange], params: list[ParamChange], breaks: list[BreakChange],
             min_effect: float, reason: str | None) -> tuple[str, bool]:
    """One line a reader acts on: the p50 picture first, then breaks, tails, parameters."""
    parts: list[str] = []
    p50 = [c for c in bands if c.stat == "p50"]
    sig50 = [c for c in p50 if c.significant]
    signs = {c.change > 0 for c in sig50}
    if p50 and len(sig50) == len(p50) and len(p50) > 2 and len(signs) == 1:
        word = "slower" if signs.pop() else "faster"
        lo = min(abs(c.change) for c in sig50)
        hi = max(abs(c.change) for c in sig50)
        parts.append(f"p50 {word} in every size band ({human_size(p50[0].size_lo)}–"
                     f"{human_size(p50[-1].size_hi)}), by {_pct(lo)} to {_pct(hi)} %")
    else:
        parts += [band_phrase(c) for c in sorted(sig50, key=lambda c: -abs(c.change))[:3]]
        if len(sig50) > 3:
            parts.append(f"p50 changed in {len(sig50) - 3} more band(s)")
    confirmed = [br for br in breaks if br.confirmed and br.kind != "same"]
    for br in confirmed[:3]:
        if br.kind == "moved":
            assert br.a is not None and br.b is not None
            parts.append(f"break moved from {human_size(br.a)} to {human_size(br.b)} "
                         f"({'+' if br.b > br.a else ''}{_pct(br.b / br.a - 1)} %)")
        elif br.kind == "appeared":
            assert br.b is not None
            parts.append(f"new break at {human_size(br.b)}")
        else:
            assert br.a is not None
            parts.append(f"break at {human_size(br.a)} gone")
    if len(confirmed) > 3:
        parts.append(f"{len(confirmed) - 3} more break change(s)")
    tails = sorted((c for c in bands if c.stat != "p50" and c.significant),
                   key=lambda c: -abs(math.log1p(c.change)))
    # The largest tail changes are named whatever the median did: a p95 240 times slower is
    # the news, not a footnote ("tails changed") under a 5 % median change.
    shown_tails = tails[:2] if not sig50 else tails[:1]
    parts += [band_phrase(c) for c in shown_tails]
    if len(tails) > len(shown_tails):
        parts.append(f"tails (p05/p95) changed in {len(tails) - len(shown_tails)} more "
                     "band(s)")
    shown = 0
    for p in sorted(params, key=lambda p: -abs(p.change)):
        if shown < 2 and p.significant and p.param in ("latency_s", "bandwidth_Bps"):
            name = "latency" if p.param == "latency_s" else "bandwidth"
            parts.append(f"{name} {'higher' if p.change > 0 else 'lower'} by "
                         f"{_pct(abs(p.change))} % [{_pct(p.ci_lo)}, {_pct(p.ci_hi)}] in "
                         f"{human_size(p.size_lo)}–{human_size(p.size_hi)}")
            shown += 1
    if not parts:
        return (f"same: no change of {100 * min_effect:g} % or more in any band or parameter "
                "(95 % family-wise)", False)
    text = "; ".join(parts)
    if reason:
        text += f" ({reason})"
    return text, True


# --------------------------------------------------------------------------- thresholds
_RULE = re.compile(r"^\s*(p05|p50|p95|latency|bandwidth)\s+(slower|faster|higher|lower|changed)"
                   r"\s*>\s*([0-9]*\.?[0-9]+)\s*%?\s*$")


@dataclass
class Threshold:
    stat: str
    direction: str
    pct: float
    text: str


def parse_threshold(text: str) -> Threshold:
    """``'p50 slower > 5%'``, ``'bandwidth lower > 3%'``, ``'p95 changed > 10%'``."""
    m = _RULE.match(text)
    if not m:
        raise UserError(f"cannot read the threshold {text!r}", where="--fail-if",
                        hint="write 'STAT DIRECTION > PCT%' with STAT p05|p50|p95|latency|"
                        "bandwidth and DIRECTION slower|faster|changed (latency/bandwidth: "
                        "higher|lower|changed), e.g. --fail-if 'p50 slower > 5%'")
    stat, direction, pct = m.group(1), m.group(2), float(m.group(3))
    time_dirs = {"slower", "faster", "changed"}
    level_dirs = {"higher", "lower", "changed"}
    if (stat.startswith("p") and direction not in time_dirs) or \
            (not stat.startswith("p") and direction not in level_dirs):
        raise UserError(f"'{direction}' does not go with '{stat}'", where="--fail-if",
                        hint="p05/p50/p95 take slower|faster|changed; latency/bandwidth take "
                        "higher|lower|changed")
    return Threshold(stat, direction, pct, text.strip())


def broken(result: DiffResult, rules: list[Threshold]) -> list[str]:
    """The rules a *significant* change exceeds, each with the change that did it."""
    hits = []
    for rule in rules:
        lim = rule.pct / 100.0
        cands: list[tuple[float, str]] = []
        if rule.stat.startswith("p"):
            cands = [(c.change, band_phrase(c)) for c in result.bands
                     if c.stat == rule.stat and c.significant]
        else:
            key = "latency_s" if rule.stat == "latency" else "bandwidth_Bps"
            cands = [(p.change, f"{rule.stat} {_pct(p.change)} % in regime {p.regime}")
                     for p in result.params if p.param == key and p.significant]
        for change, phrase in cands:
            up = change > lim
            down = change < -lim
            ok = {"slower": up, "higher": up, "faster": down, "lower": down,
                  "changed": up or down}[rule.direction]
            if ok:
                hits.append(f"{rule.text}: {phrase}")
                break
    return hits


# --------------------------------------------------------------------------- output
def summary_lines(result: DiffResult) -> list[str]:
    """The terminal view: the verdict, then the band table and parameter table."""
    s = result.settings
    cond = result.conditions
    out = []
    for key, label, n in (("a", result.a_label, result.n_a), ("b", result.b_label, result.n_b)):
        out.append(f"{key.upper()}: {label} ({n} samples)"
                   + _conditions_text(cond.get(key.upper())))
        f = result.figures.get(key)
        if f:
            out.append(f"   {f['latency label']} {f['latency']}; {f['bandwidth label']} "
                       f"{f['bandwidth']}" + (f"; score {f['score']}, best baseline "
                                              f"{f['best baseline']}" if f["score"] != "–"
                                              else ""))
    out += [f"verdict: {result.verdict}",
           f"method: change of each quantile of time / A's regime curve, B vs A; "
           f"{s['tests']} tests, Bonferroni-corrected 95 % intervals (bootstrap over "
           f"sizes or runs, {s['bootstrap']} resamples); reported when the interval "
           f"excludes 0 and |change| >= {100 * s['min_effect']:g} %",
           "", f"{'size band':<24} {'stat':<5} {'n A':>7} {'n B':>7} "
           f"{'change [95 % interval]':>30}  "]
    if result.figures:
        out.insert(len(out) - 2, f"figures: {LEGEND}")
    for c in result.bands:
        band = f"{human_size(c.size_lo)}–{human_size(c.size_hi)}"
        if c.kind != "regime":
            band += " *"
        flag = ("changed" if not result.withheld else "differs (no verdict)") \
            if c.significant else ""
        change = (f"not estimated ({c.why})" if c.why
                  else f"{ratio_text(c.change, c.ci_lo, c.ci_hi):>30}")
        out.append(f"{band:<24} {c.stat:<5} {c.n_a:>7} {c.n_b:>7} {change}  {flag}")
    if any(c.kind != "regime" for c in result.bands):
        out.append("* between the two positions of a break that moved")
    if result.params:
        out += ["", "per regime of A, its curve refitted to A's and B's per-size medians:",
                f"{'regime':<24} {'parameter':<14} {'A':>11} {'B':>11} "
                f"{'change [95 % interval]':>30}"]
        for p in result.params:
            band = f"{p.regime} {human_size(p.size_lo)}–{human_size(p.size_hi)}"
            if p.why:
                out.append(f"{band:<24} {p.param:<14} not estimated ({p.why})")
                continue
            flag = "changed" if p.significant else ""
            change = (ratio_text(p.change, p.ci_lo, p.ci_hi) if p.relative else
                      f"{p.change:+.3g} [{p.ci_lo:+.3g}, {p.ci_hi:+.3g}]")
            out.append(f"{band:<24} {p.param:<14} {p.a:>11.4g} {p.b:>11.4g} "
                       f"{change:>30}  {flag}")
    moved = [b for b in result.breaks if b.kind != "same"]
    if moved:
        out += ["", "breakpoints (A's fit vs B's fit):"]
        for br in moved:
            where = " → ".join(human_size(x) if x is not None else "none"
                               for x in (br.a, br.b))
            out.append(f"  {br.kind:<9} {where:<24} "
                       f"{'confirmed by the samples' if br.confirmed else br.note}")
    out += [f"note: {n}" for n in result.notes]
    return out


def _conditions_text(side: Mapping[str, Any] | None) -> str:
    if not side:
        return ""
    if side.get("verdict") == "disturbed":
        return f"\n   runs: DISTURBED: {side.get('why')}"
    runs = side.get("runs") or []
    return f"\n   runs: {side.get('verdict')}" + (f" ({runs[0]})" if runs else "")


def plot_diff(result: DiffResult, a: Side, b: Side, path: Path) -> None:
    """Per-size medians of A and B (top), band changes with their intervals (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 7), sharex=True,
                                   gridspec_kw={"height_ratios": [2, 1.3]})
    for side, colour in ((a, "tab:blue"), (b, "tab:orange")):
        s, med, _ = _per_size_medians(side.size, side.time)
        ax1.plot(np.maximum(s, 0.5), med, ".", ms=3, color=colour,
                 label=f"{side.label}: per-size median")
    for bp in result.settings["breakpoints_a"]:
        ax1.axvline(bp, color="tab:blue", lw=0.6, ls=":")
    for bp in result.settings["breakpoints_b"]:
        ax1.axvline(bp, color="tab:orange", lw=0.6, ls="--")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_ylabel("time [s]")
    ax1.legend(fontsize=8)
    offsets = {"p05": 0.96, "p50": 1.0, "p95": 1.04}
    big = any(abs(c.change) > 0.5 for c in result.bands)
    colours = {"p05": "tab:green", "p50": "k", "p95": "tab:red"}
    for c in result.bands:
        x = math.sqrt(max(c.size_lo, 0.5) * max(c.size_hi, 1.0)) * offsets[c.stat]
        if big:  # ratios on a log axis: -83 % and +400 % both readable
            y, lo_y, hi_y = 1 + c.change, 1 + c.ci_lo, 1 + c.ci_hi
        else:
            y, lo_y, hi_y = 100 * c.change, 100 * c.ci_lo, 100 * c.ci_hi
        ax2.errorbar([x], [y], yerr=[[y - lo_y], [hi_y - y]],
                     fmt="o" if c.significant else "x", ms=4, color=colours[c.stat],
                     capsize=2, lw=0.8)
        ax2.hlines(y, max(c.size_lo, 0.5), c.size_hi, color=colours[c.stat], lw=0.6)
    for name, colour in colours.items():
        ax2.plot([], [], "o", color=colour, label=name)
    if big:
        ax2.set_yscale("log")
        ax2.axhline(1, color="grey", lw=0.6)
        ax2.set_ylabel("ratio B / A\n(95 % family-wise)")
    else:
        ax2.axhline(0, color="grey", lw=0.6)
        ax2.set_ylabel("change B vs A [%]\n(95 % family-wise)")
    ax2.set_xlabel("message size [B]")
    ax2.legend(fontsize=8, ncol=3)
    fig.suptitle(result.verdict[:110], fontsize=9)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def render_html(result: DiffResult) -> str:
    """The report page (diff.html beside diff.png): verdict, method, tables, plot."""
    from jinja2 import Environment, FileSystemLoader

    templates = Path(__file__).parent.parent / "templates" / "report"
    env = Environment(loader=FileSystemLoader(str(templates)),
                      autoescape=True)
    return env.get_template("diff.html.j2").render(r=result.as_dict())
