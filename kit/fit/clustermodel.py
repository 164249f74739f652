"""One model of many node pairs: the population, and what each pair and node adds to it.

A campaign that measured many node pairs of one machine (``pairs: {all-pairs: N}``) has one
series per pair. Fitted one by one they say nothing about the machine: which pair is odd,
how much pairs differ, what an unmeasured pair will do. :class:`ClusterModel` fits them
together:

1. **Population**: one :class:`kit.model.RegimeModel` (regimes, curves, noise) through the
   kit's one fitting path (:func:`kit.fit.fitting.fit_arrays`), on the pooled samples
   with every pair moved to the typical pair's location, so that its noise is the noise
   *within* a pair; a first pooled fit gives the curve the pairs are placed against.
2. **Per-pair shifts by size band**: per visit (run) of a pair, the median of
   ``ln(time / population median)`` in each band of sizes (one per decade), combined over
   the pair's visits with a pooled between-visit variance, then split into node and link
   effects and shrunk by how much the pair measured (:mod:`kit.fit.hierarchy`).
3. **The three figures** the cluster verdict is about (:mod:`kit.fit.pairmetrics`):
   latency (seconds added at a small size), bandwidth (ln of the effective-bandwidth ratio
   at the largest sizes) and noise level (ln of the tail-width ratio), each decomposed the
   same way; :mod:`kit.analyses.slowlinks` tests them.

Predictions: a *seen* pair's distribution is the population shifted by the pair's shrunk
shift at each size (node effects plus its own link effect); an *unseen* pair between two
measured nodes is the population shifted by the two node effects, with the between-link
spread integrated out; a pair of unseen nodes gets the whole between-pair spread. The spread
is integrated by Gauss-Hermite quadrature over a normal ln shift, like the per-size layer's
unseen sizes.

The estimator follows the scikit-learn contract (parameters stored as given, learned
attributes end in ``_``); ``fit`` takes a :class:`kit.data.pairrows.PairRows`. JSON:
``to_dict``/``from_dict`` (``format: pt2pt-cluster-model``), the population as a
``pt2pt-model`` object inside.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from kit.core.atomicwrite import write_text
from kit.core.errors import ModelError
from kit.core.inputs import read_bytes
from kit.data.pairrows import PairRows, pair_label
from kit.fit.fitting import FitOptions, fit_arrays
from kit.fit.hierarchy import Decomposition, Visits, between_visits, combine_visits, decompose
from kit.fit.pairmetrics import METRICS, Windows, group_quantiles, unit_metrics, windows_for
from kit.model import RegimeModel
from kit.model.io import model_from_dict, model_to_dict

FORMAT = "pt2pt-cluster-model"
FORMAT_VERSION = 1
#: Gauss-Hermite nodes for integrating a seen pair's posterior ln shift out of its CDF.
_GH = np.polynomial.hermite.hermgauss(12)
#: An unseen pair's ln shift: this many equal-weight quantile points per band, each measured
#: pair's posterior widened by eight normal quantiles first; its noise factor: NOISE_POINTS.
SPREAD_POINTS = 32
NOISE_POINTS = 5
_NORMAL_POINTS = np.sqrt(2.0) * np.array(
    [-1.6448536, -1.0364334, -0.6744898, -0.3186394, 0.3186394, 0.6744898, 1.0364334,
     1.6448536]) / np.sqrt(2.0)
#: Size bands of the per-pair shift curve: this many per decade.
BANDS_PER_DECADE = 1
#: Units of each figure (what the decomposition's values mean).
UNITS = {"latency": "seconds added", "bandwidth": "ln asymptotic bandwidth (B/s)",
         "noise": "ln tail-width ratio"}


@dataclass
class Figure:
    """One figure over the pairs: visits combined, then nodes and links."""

    name: str
    visits: Visits
    parts: Decomposition
    #: the typical pair's own value (latency s at ``latency_at``; bandwidth B/s at
    #: ``bandwidth_at``; noise: p95/p50 of time at ``latency_at``)
    population: float

    def to_dict(self) -> dict[str, Any]:
        p, v = self.parts, self.visits
        return {"name": self.name, "units": UNITS.get(self.name, "ln shift"),
                "population": _num(self.population),
                "visits": {"y": _col(v.y), "v": _col(v.v), "n": v.n_visits.tolist(),
                           "sigma2": _num(v.sigma2), "source": v.source},
                "centre": _num(p.centre), "tau2": _num(p.tau2),
                "outlier_share": _num(p.outlier_share), "outlier_tau2": _num(p.outlier_tau2),
                "node": _col(p.node), "node_se": _col(p.node_se),
                "node_estimated": p.node_estimated.tolist(),
                "link": _col(p.link), "link_se": _col(p.link_se),
                "link_shrunk": _col(p.link_shrunk), "link_shrunk_se": _col(p.link_shrunk_se),
                "bulk_prob": _col(p.bulk_prob), "notes": list(p.notes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Figure:
        v = d["visits"]
        visits = Visits(_arr(v["y"]), _arr(v["v"], np.inf), np.asarray(v["n"], dtype=np.int64),
                        float(v["sigma2"] or 0.0), str(v["source"]))
        parts = Decomposition(
            centre=float(d["centre"]) if d["centre"] is not None else math.nan,
            node=_arr(d["node"], 0.0), node_se=_arr(d["node_se"]),
            node_estimated=np.asarray(d["node_estimated"], dtype=bool),
            link=_arr(d["link"]), link_se=_arr(d["link_se"], np.inf),
            link_shrunk=_arr(d["link_shrunk"], 0.0), link_shrunk_se=_arr(d["link_shrunk_se"]),
            bulk_prob=_arr(d["bulk_prob"], 1.0), tau2=float(d["tau2"] or 0.0),
            outlier_share=float(d["outlier_share"] or 0.0),
            outlier_tau2=float(d["outlier_tau2"] or 0.0), notes=list(d.get("notes", [])))
        pop = d.get("population")
        return cls(str(d["name"]), visits, parts, float(pop) if pop is not None else math.nan)


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _col(a: NDArray) -> list[float | None]:
    return [float(x) if math.isfinite(x) else None for x in np.asarray(a, dtype=float)]


def _arr(values: list[float | None], missing: float = math.nan) -> NDArray[np.float64]:
    return np.array([missing if x is None else float(x) for x in values], dtype=np.float64)


class ClusterModel(BaseEstimator):
    """Population + node effects + link effects of a campaign's many node pairs.

    ``fit_samples``: most pooled samples each population fit sees (a per-pair stratified
    subsample above it, so every pair weighs alike). ``population_params``:
    kit.fit.fitting.FitOptions fields of the population fit. ``random_state`` seeds the
    subsample (and the fit).
    """

    def __init__(self, fit_samples: int = 200_000, random_state: int = 0,
                 population_params: Mapping[str, Any] | None = None) -> None:
        self.fit_samples = fit_samples
        self.random_state = random_state
        self.population_params = population_params

    # ------------------------------------------------------------------ fit
    def fit(self, rows: PairRows) -> ClusterModel:
        """Fit the population, the band shifts and the three figures of ``rows``."""
        if len(rows.pairs) < 3:
            raise ModelError(f"{len(rows.pairs)} node pair(s): a cluster model needs at least 3",
                             where="cluster model", hint="measure more node pairs")
        self.nodes_ = list(rows.nodes)
        self.pairs_ = list(rows.pairs)
        self.ends_ = rows.ends
        self.series_ = dict(rows.series)
        self.windows_ = windows_for(rows.size)
        self.n_samples_ = len(rows)
        self.notes_ = list(rows.notes)
        edges = _band_edges(self.windows_)
        self.band_edges_ = edges
        band = _band_of(rows.size, edges)
        sizes, inverse = np.unique(rows.size, return_inverse=True)
        rng = np.random.default_rng(self.random_state)
        keep = _stratified(rows.pair, len(rows.pairs), self.fit_samples, rng)
        first = self._population(rows, rows.time, keep)
        med0 = first.predict(sizes)[inverse]
        r0 = np.log(rows.time) - np.log(med0)
        shift0, centre0 = self._band_shifts(rows, band, r0)
        noise0 = self._figures(rows, med0, first)["noise"]
        kappa = np.exp(np.nan_to_num(noise0.visits.y - noise0.parts.centre))
        # every pair moved to the typical pair, its ln residuals scaled to the typical width:
        # the population's noise is the noise within a typical pair
        own = _interp_bands(rows.size, edges, shift0, rows.pair)
        typical = np.interp(np.log(rows.size), _centres(edges), centre0)
        moved = med0 * np.exp(typical + (r0 - own) / kappa[rows.pair])
        self.population_ = self._population(rows, moved, keep)
        med = self.population_.predict(sizes)[inverse]
        self.bands_ = self._bands(rows, band, np.log(rows.time) - np.log(med))
        self.figures_ = self._figures(rows, med, self.population_)
        return self

    def _population(self, rows: PairRows, time: NDArray, keep: NDArray) -> RegimeModel:
        opts = FitOptions(seed=self.random_state, **dict(self.population_params or {}))
        return fit_arrays(rows.series or {"stat": "raw"}, rows.size[keep], time[keep], opts,
                          dataset=rows.dataset)

    def _units(self, rows: PairRows) -> tuple[NDArray, int, NDArray, str]:
        """(unit of each sample, unit count, pair of each unit, what the units are).

        Units are the runs when some pair has two; else each run's two halves (by seq), so
        that the between-visit variance is estimated at all (a lower bound: it misses what
        changes only between runs)."""
        per_pair = np.bincount(rows.run_pair, minlength=len(rows.pairs))
        if (per_pair >= 2).any():
            return rows.run, len(rows.runs), rows.run_pair, "runs"
        order = np.lexsort((rows.seq, rows.run))
        rank = np.empty(len(rows), dtype=np.int64)
        counts = np.bincount(rows.run, minlength=len(rows.runs))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank[order] = np.arange(len(rows)) - np.repeat(starts, counts)
        half = (rank >= (counts[rows.run] // 2)).astype(np.int64)
        unit = rows.run * 2 + half
        return unit, 2 * len(rows.runs), np.repeat(rows.run_pair, 2), "halves of each run"

    def _combine(self, rows: PairRows, y: NDArray, w: NDArray, unit_pair: NDArray,
                 source: str) -> Visits:
        P = len(rows.pairs)
        sigma2 = between_visits(y, w, unit_pair, P)
        if sigma2 is None:
            sigma2, source = 0.0, "not estimated (no pair has two visits)"
        return combine_visits(y, w, unit_pair, P, sigma2, source)

    def _band_shifts(self, rows: PairRows, band: NDArray, r: NDArray
                     ) -> tuple[NDArray, NDArray]:
        """Per pair and band: measured shifts (pairs x bands) and the typical pair's."""
        figs = self._bands(rows, band, r)
        shift = np.stack([f.visits.y for f in figs], axis=1)
        centre = np.array([f.parts.centre for f in figs])
        centre = np.where(np.isfinite(centre), centre, 0.0)
        # a pair without samples in a band: the typical pair's shift there
        shift = np.where(np.isfinite(shift), shift, centre[None, :])
        return shift, centre

    def _bands(self, rows: PairRows, band: NDArray, r: NDArray) -> list[Figure]:
        unit, n_units, unit_pair, source = self._units(rows)
        n_bands = len(self.band_edges_) - 1
        g = group_quantiles(unit * n_bands + band, r, n_units * n_bands, (0.5,))
        y = g.value[:, 0].reshape(n_units, n_bands)
        w = (g.se[:, 0] ** 2).reshape(n_units, n_bands)
        w = np.where(np.isfinite(y) & np.isfinite(w), np.maximum(w, 1e-12), np.inf)
        out = []
        for b in range(n_bands):
            visits = self._combine(rows, y[:, b], w[:, b], unit_pair, source)
            parts = decompose(visits.y, visits.v, self.ends_, len(self.nodes_))
            out.append(Figure(f"band{b}", visits, parts, math.nan))
        return out

    def _figures(self, rows: PairRows, median: NDArray, population: RegimeModel
                 ) -> dict[str, Figure]:
        unit, n_units, unit_pair, source = self._units(rows)
        um = unit_metrics(unit, n_units, rows.size, rows.time, median, self.windows_)
        out: dict[str, Figure] = {}
        for m in METRICS:
            visits = self._combine(rows, um.y[m], um.w[m], unit_pair, source)
            parts = decompose(visits.y, visits.v, self.ends_, len(self.nodes_))
            out[m] = Figure(m, visits, parts, self._typical(population, m, parts.centre))
        return out

    def _typical(self, population: RegimeModel, figure: str, centre: float) -> float:
        """The typical pair's own value of a figure: the population's, moved by the centre
        of the pairs (the thresholds are fractions of it)."""
        win = self.windows_
        c = centre if math.isfinite(centre) else 0.0
        if figure == "latency":
            return float(population.predict([win.latency_at])[0]) + c
        if figure == "bandwidth":  # ln of the typical pair's asymptotic bandwidth
            return math.exp(centre) if math.isfinite(centre) else math.nan
        q = population.predict_quantiles([max(win.latency_at, 1.0)], [0.5, 0.95])
        return float(q[0, 1] / q[0, 0]) ** math.exp(c)

    # ------------------------------------------------------------ predictions
    def _check(self) -> None:
        if not hasattr(self, "population_"):
            raise ModelError("the cluster model is not fitted", where="ClusterModel",
                             hint="call fit(rows) first")

    def pair_index(self, pair: tuple[str, str] | str) -> int | None:
        """Index of a seen pair (``("n1", "n3")``, ``"n3-n1"`` or ``"n1:n3"``), else None."""
        if isinstance(pair, str):
            a, _, b = pair.replace(":", "-").partition("-")
            pair = (a, b)
        key = tuple(sorted(pair))
        try:
            return self.pairs_.index(key)  # type: ignore[arg-type]
        except ValueError:
            return None

    def _pair_shift(self, k: int) -> tuple[NDArray, NDArray]:
        """(mean, variance) per band of seen pair ``k``'s ln shift (posterior, shrunk)."""
        mean = np.array([f.parts.fitted(self.ends_)[k] + f.parts.link_shrunk[k]
                         for f in self.bands_])
        var = np.array([f.parts.link_shrunk_se[k] ** 2 for f in self.bands_])
        return mean, var

    def _spread_points(self, ends: tuple[int, int] | None) -> NDArray:
        """(bands, K) equal-weight points of an unseen pair's ln shift per band.

        Between two measured nodes: their node effects plus the links' effect distribution;
        else the distribution of all measured pairs' shifts (node and link effects: an
        unseen pair is like a random pair of this machine, slow ones included at their
        share). Each measured value is widened by its posterior variance (eight normal
        quantiles), and K = :data:`SPREAD_POINTS` mid-quantiles are kept.
        """
        z = _NORMAL_POINTS
        levels = (np.arange(SPREAD_POINTS) + 0.5) / SPREAD_POINTS
        out = np.empty((len(self.bands_), SPREAD_POINTS))
        for b, f in enumerate(self.bands_):
            parts = f.parts
            link = np.nan_to_num(parts.link_shrunk)
            lvar = np.nan_to_num(parts.link_shrunk_se, nan=0.0) ** 2
            if ends is not None:
                base = parts.centre + parts.node[ends[0]] + parts.node[ends[1]]
                nvar = float(np.nansum(parts.node_se[list(ends)] ** 2))
                values = base + link[:, None] + np.sqrt(lvar + nvar)[:, None] * z[None, :]
            else:
                mean = parts.fitted(self.ends_) + link
                values = mean[:, None] + np.sqrt(lvar)[:, None] * z[None, :]
            values = values[np.isfinite(values)]
            c = parts.centre if math.isfinite(parts.centre) else 0.0
            out[b] = np.quantile(values, levels) if values.size else c
        return out

    def _noise_points(self, k: int | None) -> NDArray:
        """Factors on the ln residuals: the seen pair's own (shrunk) noise level, or
        :data:`NOISE_POINTS` mid-quantiles of all measured pairs'."""
        fig = self.figures_.get("noise")
        if fig is None:
            return np.ones(1)
        parts = fig.parts
        own = parts.fitted(self.ends_) + parts.link_shrunk - parts.centre
        own = np.nan_to_num(own)
        if k is not None:
            return np.exp(own[k:k + 1])
        levels = (np.arange(NOISE_POINTS) + 0.5) / NOISE_POINTS
        return np.exp(np.quantile(own, levels))

    def _points(self, size: NDArray, pair: tuple[str, str] | str | None
                ) -> tuple[NDArray, NDArray, NDArray]:
        """(shift points (n, K), their weights (K,), noise factors (L,)) for ``pair``."""
        x = _centres(self.band_edges_)
        ls = np.log(np.maximum(size, 1.0))
        k = self.pair_index(pair) if pair is not None else None
        if k is not None:
            mean, var = self._pair_shift(k)
            gx, gw = _GH
            pts = np.stack([np.interp(ls, x, mean + math.sqrt(2.0) * g * np.sqrt(var))
                            for g in gx], axis=1)
            return pts, gw / math.sqrt(math.pi), self._noise_points(k)
        table = self._spread_points(self._ends_of(pair))
        pts = np.stack([np.interp(ls, x, table[:, j]) for j in range(table.shape[1])], axis=1)
        return pts, np.full(table.shape[1], 1.0 / table.shape[1]), self._noise_points(None)

    def shift(self, size: ArrayLike, pair: tuple[str, str] | str | None = None
              ) -> tuple[NDArray, NDArray]:
        """(mean, variance) of the ln shift from the population at each size for ``pair``
        (seen: its shrunk shift; unseen: over the machine's pairs, see :meth:`cdf`)."""
        self._check()
        s = np.atleast_1d(np.asarray(size, dtype=float))
        pts, w, _ = self._points(s, pair)
        mean = pts @ w
        return mean, ((pts - mean[:, None]) ** 2) @ w

    def _ends_of(self, pair: tuple[str, str] | str | None) -> tuple[int, int] | None:
        if pair is None:
            return None
        if isinstance(pair, str):
            a, _, b = pair.replace(":", "-").partition("-")
        else:
            a, b = pair
        fig = self.bands_[0].parts
        try:
            i, j = self.nodes_.index(a), self.nodes_.index(b)
        except ValueError:
            return None
        if not (fig.node_estimated[i] and fig.node_estimated[j]):
            return None
        return i, j

    def cdf(self, size: ArrayLike, time: ArrayLike,
            pair: tuple[str, str] | str | None = None) -> NDArray:
        """Predictive CDF at ``time`` (one per size) for ``pair``.

        ``time = m · exp(shift) · r^kappa`` with ``r`` the population's ratio to its median
        ``m``: a seen pair has its own shift (Gauss-Hermite over its posterior) and noise
        factor ``kappa``; an unseen pair between two measured nodes their node effects and
        the links' spread; any other pair the spread of the machine's pairs, and the pairs'
        noise factors (see :meth:`_spread_points`).
        """
        self._check()
        s = np.atleast_1d(np.asarray(size, dtype=float))
        t = np.atleast_1d(np.asarray(time, dtype=float))
        pts, w, kappa = self._points(s, pair)
        return self._mixture_cdf(s, t, pts, w, kappa, self.population_.predict(s))

    def _mixture_cdf(self, s: NDArray, t: NDArray, pts: NDArray, w: NDArray,
                     kappa: NDArray, m: NDArray) -> NDArray:
        out = np.zeros(len(s))
        base = np.log(np.maximum(t, 1e-300)) - np.log(m)
        for kap in kappa:
            r = (base[:, None] - pts) / kap
            out += self.population_.cdf(s, m[:, None] * np.exp(r)) @ w
        return out / len(kappa)

    def predict_quantiles(self, size: ArrayLike, q: ArrayLike,
                          pair: tuple[str, str] | str | None = None) -> NDArray:
        """(len(size), len(q)) predictive quantiles for ``pair`` (bisection on the CDF, all
        sizes and levels at once)."""
        s = np.atleast_1d(np.asarray(size, dtype=float))
        qs = np.atleast_1d(np.asarray(q, dtype=float))
        pts, w, kappa = self._points(s, pair)
        edge = self.population_.predict_quantiles(s, [0.0005, 0.9995])
        m = self.population_.predict(s)
        kmax = float(np.max(kappa))
        lo = np.log(m) + kmax * np.minimum(np.log(edge[:, 0] / m), 0) + pts.min(axis=1) - 0.1
        hi = np.log(m) + kmax * np.maximum(np.log(edge[:, 1] / m), 0) + pts.max(axis=1) + 0.1
        # one row per (size, level)
        n, L = len(s), len(qs)
        rs, rpts, rm = np.repeat(s, L), np.repeat(pts, L, axis=0), np.repeat(m, L)
        level = np.tile(qs, n)
        a, b = np.repeat(lo, L), np.repeat(hi, L)
        for _ in range(40):
            mid = 0.5 * (a + b)
            below = self._mixture_cdf(rs, np.exp(mid), rpts, w, kappa, rm) < level
            a = np.where(below, mid, a)
            b = np.where(below, b, mid)
        return np.exp(0.5 * (a + b)).reshape(n, L)

    def predict(self, size: ArrayLike, pair: tuple[str, str] | str | None = None) -> NDArray:
        """Median time (s) at each size for ``pair``."""
        return self.predict_quantiles(size, [0.5], pair)[:, 0]

    def sample(self, size: ArrayLike, n: int = 1, random_state: Any = None,
               pair: tuple[str, str] | str | None = None) -> NDArray:
        """(len(size), n) draws for ``pair``: a population draw moved by a drawn shift and
        its ln residual scaled by a drawn noise factor."""
        rng = np.random.default_rng(random_state)
        s = np.atleast_1d(np.asarray(size, dtype=float))
        pts, w, kappa = self._points(s, pair)
        m = self.population_.predict(s)[:, None]
        base = self.population_.sample(s, n, rng)
        pick = rng.choice(len(w), size=(len(s), int(n)), p=w / w.sum())
        kap = kappa[rng.integers(0, len(kappa), size=(len(s), int(n)))]
        shift = np.take_along_axis(pts, pick, axis=1)
        return m * np.exp(shift + kap * np.log(base / m))

    # ------------------------------------------------------------------ JSON
    def to_dict(self, provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._check()
        return {"format": FORMAT, "format_version": FORMAT_VERSION,
                "estimator": {"fit_samples": self.fit_samples,
                              "random_state": self.random_state,
                              "population_params": dict(self.population_params or {})},
                "series": self.series_, "provenance": dict(provenance or {}),
                "n_samples": self.n_samples_, "notes": list(self.notes_),
                "nodes": self.nodes_, "pairs": [list(p) for p in self.pairs_],
                "pair_labels": [pair_label(p) for p in self.pairs_],
                "windows": self.windows_.to_dict(),
                "band_edges": [float(e) for e in self.band_edges_],
                "bands": [f.to_dict() for f in self.bands_],
                "figures": {k: f.to_dict() for k, f in self.figures_.items()},
                "population": model_to_dict(self.population_)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "cluster model") -> ClusterModel:
        if d.get("format") != FORMAT:
            raise ModelError("not a pt2pt cluster model", where=where,
                             hint="write one with 'pt2pt cluster DATASET -o FILE'")
        if int(d.get("format_version", 0)) > FORMAT_VERSION:
            raise ModelError(f"cluster model format {d.get('format_version')} is newer than "
                             "this kit reads", where=where, hint="upgrade pt2pt-kit")
        try:
            est = dict(d.get("estimator") or {})
            model = cls(fit_samples=int(est.get("fit_samples", 200_000)),
                        random_state=int(est.get("random_state", 0)),
                        population_params=est.get("population_params") or None)
            model.population_ = model_from_dict(dict(d["population"]), f"{where}: population")
            model.nodes_ = [str(n) for n in d["nodes"]]
            model.pairs_ = [(str(a), str(b)) for a, b in d["pairs"]]
            index = {n: i for i, n in enumerate(model.nodes_)}
            model.ends_ = np.array([[index[a], index[b]] for a, b in model.pairs_],
                                   dtype=np.int64).reshape(-1, 2)
            model.series_ = {str(k): str(v) for k, v in dict(d.get("series") or {}).items()}
            model.windows_ = Windows.from_dict(dict(d["windows"]))
            model.band_edges_ = np.asarray(d["band_edges"], dtype=float)
            model.bands_ = [Figure.from_dict(b) for b in d["bands"]]
            model.figures_ = {str(k): Figure.from_dict(f) for k, f in dict(d["figures"]).items()}
            model.n_samples_ = int(d.get("n_samples", 0))
            model.notes_ = [str(x) for x in d.get("notes", [])]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ModelError(f"malformed cluster model ({type(exc).__name__}: {exc})",
                             where=where, hint="write it again with 'pt2pt cluster'") from None
        return model


def _band_edges(win: Windows) -> NDArray[np.float64]:
    """Band edges (bytes) covering the sizes: one band per decade, at least one."""
    lo, hi = max(win.size_min, 1.0), max(win.size_max, 1.0)
    n = max(1, math.ceil((math.log10(hi) - math.log10(lo)) * BANDS_PER_DECADE - 1e-9))
    return np.geomspace(lo, hi * (1 + 1e-12), n + 1)


def _centres(edges: NDArray) -> NDArray[np.float64]:
    le = np.log(np.maximum(edges, 1.0))
    return 0.5 * (le[:-1] + le[1:])


def _band_of(size: NDArray, edges: NDArray) -> NDArray[np.int64]:
    return np.clip(np.searchsorted(edges, size, side="right") - 1, 0, len(edges) - 2
                   ).astype(np.int64)


def _interp_bands(size: NDArray, edges: NDArray, table: NDArray, row: NDArray
                  ) -> NDArray[np.float64]:
    """``table[row[i]]`` (a value per band) interpolated in ln size at ``size[i]``."""
    x = _centres(edges)
    if table.shape[1] == 1:
        return table[row, 0].astype(float)
    ls = np.log(np.maximum(size, 1.0))
    pos = np.clip(np.searchsorted(x, ls) - 1, 0, len(x) - 2)
    frac = np.clip((ls - x[pos]) / (x[pos + 1] - x[pos]), 0.0, 1.0)
    return table[row, pos] * (1 - frac) + table[row, pos + 1] * frac


def _stratified(pair: NDArray, n_pairs: int, total: int, rng: np.random.Generator
                ) -> NDArray[np.int64]:
    """Indices of at most ``total`` samples, an equal cap per pair, drawn at random."""
    n = len(pair)
    if n <= total:
        return np.arange(n)
    key = rng.random(n)
    order = np.lexsort((key, pair))
    counts = np.bincount(pair, minlength=n_pairs)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, counts)
    cap = max(1, total // max(n_pairs, 1))
    return np.sort(np.flatnonzero(rank < cap))


#: Largest cluster model file read (a 64-node model is about 1 MB, the population inside).
MAX_FILE_BYTES = 256 << 20


def save_cluster_model(model: ClusterModel, path: str | Path,
                       provenance: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` as JSON, atomically."""
    text = json.dumps(model.to_dict(provenance), indent=1, allow_nan=False)
    return write_text(Path(path), text + "\n")


def is_cluster_model(path: str | Path) -> bool:
    """True when ``path`` is a file whose first bytes name the cluster-model format."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with open(p, "rb") as fh:
            head = fh.read(200)
    except OSError:
        return False
    return FORMAT.encode() in head


def read_cluster_model(path: str | Path) -> ClusterModel:
    """A saved cluster model (ModelError naming the file when it is not one)."""
    p = Path(path)
    data = read_bytes(p, "cluster model", limit=MAX_FILE_BYTES, error=ModelError)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"not a JSON cluster model ({exc})", where=str(p),
                         hint="write one with 'pt2pt cluster DATASET -o FILE'") from None
    if not isinstance(doc, dict):
        raise ModelError("not a cluster model (the JSON is not an object)", where=str(p),
                         hint="write one with 'pt2pt cluster DATASET -o FILE'")
    return ClusterModel.from_dict(doc, where=str(p))
