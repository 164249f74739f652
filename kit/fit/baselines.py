"""Single-line baselines that the regime model is judged against.

Validation only means something next to what people already draw, fitted the way they
fit it. Three baselines, each ``alpha + size / beta`` (the Hockney form):

``hockney``
    least squares on the per-size *means* (sizes grouped into narrow log cells when they
    rarely repeat): what a calibration script or a student report does with averaged
    benchmark output. Absolute residuals, so large messages dominate the fit.
``hockney_robust``
    the same line fitted to the per-size *medians* by least squares on the *relative*
    error: a few preempted samples cannot move a median, and every size weighs alike, so
    the intercept is the small-message latency a reader expects.
``peak``
    the best latency and the best bandwidth ever observed: the data-sheet bound.

``hockney_raw`` (least squares on every raw sample) is kept for reference only: a handful
of preempted samples pull its intercept far above the data's own median, so it is a
strawman and never a default comparison. :data:`DEFAULT_BASELINES` lists the honest ones;
:data:`LABELS` says in one line what each is (tables print it).

All are scikit-learn style estimators with the same ``predict`` / ``predict_quantiles`` /
``sample`` interface as :class:`kit.model.RegimeModel`, so :mod:`kit.fit.validate` and the
report can score them with the same code.

A line alone has no spread, so each baseline carries the pooled empirical distribution of
the ratio ``time / line(size)`` over its training samples (multiplicative noise, the same
form the regime model uses per regime). That gives the baselines a fair predictive
distribution: they lose on shape, not because they were denied noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kit.core.errors import ModelError
from kit.core.lsq import nnls2
from kit.model.params import Params
from kit.model.runs import run_ids, stable_order

#: How many quantiles of the pooled noise ratio a baseline keeps (enough for smooth tails).
_N_RATIO_QUANTILES = 1001


def _as_xy(size: ArrayLike, time: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x = np.asarray(size, dtype=np.float64).ravel()
    y = np.asarray(time, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ModelError(f"size and time differ in length ({x.size} vs {y.size})",
                         hint="pass one time per size")
    ok = np.isfinite(x) & np.isfinite(y) & (x >= 0) & (y > 0)
    if not ok.any():
        raise ModelError("no usable samples (need finite sizes >= 0 and times > 0)",
                         hint="check the series selection and the time column")
    return x[ok], y[ok]


class _LineBaseline(Params):
    """``alpha + size / beta`` with pooled multiplicative noise; subclasses pick the line."""

    alpha_: float
    beta_: float
    ratio_quantiles_: NDArray[np.float64]
    floor_: float

    def _fit_line(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
        raise NotImplementedError

    def fit(self, size: ArrayLike, time: ArrayLike) -> _LineBaseline:
        """Fit the line, then the noise as empirical quantiles of ``time / line``."""
        x, y = _as_xy(size, time)
        alpha, beta = self._fit_line(x, y)
        self.alpha_ = float(alpha)
        self.beta_ = float(beta)
        # A line through the origin (alpha = 0) would predict 0 s for size 0 and make the
        # ratio undefined; the fastest training sample is a physical lower bound instead.
        self.floor_ = float(y.min())
        ratio = y / self._line(x)
        # Normalised to median 1: the baseline's median *is* its line, as in every
        # calibration that reports alpha and beta; the noise only spreads around it.
        ratio = ratio / np.median(ratio)
        probs = np.linspace(0.0, 1.0, _N_RATIO_QUANTILES)
        # (of the sorted ratios: the same values, a third of the time of 1001 partitions)
        self.ratio_quantiles_ = np.quantile(np.sort(ratio), probs)
        return self

    def _line(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        per_byte = 0.0 if not np.isfinite(self.beta_) or self.beta_ <= 0 else 1.0 / self.beta_
        return np.maximum(self.alpha_ + x * per_byte, self.floor_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "ratio_quantiles_"):
            raise ModelError(f"{type(self).__name__} is not fitted", hint="call fit() first")

    def predict(self, size: ArrayLike) -> NDArray[np.float64]:
        """Median time in seconds (line times the median noise ratio)."""
        return self.predict_quantiles(size, 0.5)

    def predict_quantiles(self, size: ArrayLike, q: float | ArrayLike) -> NDArray[np.float64]:
        """Quantiles ``q`` per size: ``(n_sizes,)``, or ``(n_sizes, n_q)`` for a list of q."""
        self._check_fitted()
        x = np.asarray(size, dtype=np.float64)
        qs = np.asarray(q, dtype=np.float64)
        probs = np.linspace(0.0, 1.0, self.ratio_quantiles_.size)
        r = np.interp(np.atleast_1d(qs).ravel(), probs, self.ratio_quantiles_)
        out = self._line(np.atleast_1d(x).ravel())[:, None] * r[None, :]
        if qs.ndim == 0:
            out = out[:, 0]
        return out[0] if x.ndim == 0 else out

    def sample(self, size: ArrayLike, n: int = 1,
               random_state: int | np.random.Generator | None = None) -> NDArray[np.float64]:
        """``n`` draws per size; shape ``(n_sizes, n)``, or ``(n,)`` for a scalar size."""
        self._check_fitted()
        rng = np.random.default_rng(random_state)
        x = np.asarray(size, dtype=np.float64)
        x1 = np.atleast_1d(x).ravel()
        u = rng.random((x1.size, n))
        probs = np.linspace(0.0, 1.0, self.ratio_quantiles_.size)
        out = self._line(x1)[:, None] * np.interp(u, probs, self.ratio_quantiles_)
        return out[0] if x.ndim == 0 else out

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers for reports and the validation record."""
        self._check_fitted()
        return {"kind": self.kind, "alpha_s": self.alpha_, "beta_Bps": self.beta_}

    kind = "line"


class HockneyRawModel(_LineBaseline):
    """Hockney by least squares on the raw samples: reference only, not a default baseline.

    The fit is non-negative least squares (alpha >= 0 and 1/beta >= 0). On heavy-tailed
    data the large messages' absolute residuals and a few preempted samples decide the
    intercept, which then misses small-message medians by orders of magnitude.
    """

    kind = "hockney_raw"

    def _fit_line(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
        return _nnls_line(x, y)


class HockneyModel(_LineBaseline):
    """Hockney by least squares on per-size means, as calibration scripts and reports do it.

    Sizes are grouped as :func:`size_groups` does (exact sizes when they repeat, else
    narrow log cells); each group gives one point (its mean size, its mean time) and the
    line is non-negative least squares through those points, all points weighing alike.
    """

    kind = "hockney"

    def _fit_line(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
        gx, gy = group_summary(x, y, "mean")
        return _nnls_line(gx, gy)


class RobustHockneyModel(_LineBaseline):
    """Hockney on per-size medians by least squares on the relative error.

    Medians ignore the preempted tail; dividing every row by its median makes each size
    weigh by its relative error, so a 1 µs latency is not traded against a 1 ms transfer.
    """

    kind = "hockney_robust"

    def _fit_line(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
        gx, gy = group_summary(x, y, "median")
        return _nnls_line(gx, gy, relative=True)


def size_groups(x: NDArray[np.float64], *, min_per_group: int = 3,
                groups_per_decade: int = 12) -> NDArray[np.int64]:
    """Group id per sample: exact sizes when most repeat, else log cells (12 per decade)."""
    uniq, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    if uniq.size and np.median(counts) >= min_per_group:
        return inverse.ravel().astype(np.int64)
    # a log cell is a run of consecutive distinct sizes: no second sort
    key = np.where(uniq > 0, np.floor(np.log10(np.maximum(uniq, 1.0)) * groups_per_decade),
                   -1.0)
    return run_ids(key)[inverse.ravel()].astype(np.int64)


def group_summary(x: NDArray[np.float64], y: NDArray[np.float64],
                  stat: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(mean size, mean time) or (median size, median time) per size group.

    Means pair with means so that a line through a log cell's samples goes through its
    (mean size, mean time) point exactly.
    """
    g = size_groups(x)
    order = stable_order(g)
    bounds = np.flatnonzero(np.diff(g[order])) + 1
    gx, gy = [], []
    for idx in np.split(order, bounds):
        if stat == "mean":
            gx.append(float(np.mean(x[idx])))
            gy.append(float(np.mean(y[idx])))
        else:
            gx.append(float(np.median(x[idx])))
            gy.append(float(np.median(y[idx])))
    return np.asarray(gx), np.asarray(gy)


def _nnls_line(x: NDArray[np.float64], y: NDArray[np.float64],
               relative: bool = False) -> tuple[float, float]:
    """Non-negative least squares ``y ~ alpha + x / beta`` (optionally on relative error)."""
    # Scale the size column so NNLS is well conditioned (sizes span 1 B .. GiB).
    scale = max(float(x.max()), 1.0)
    design = np.column_stack([np.ones_like(x), x / scale])
    target = y
    if relative:
        design = design / y[:, None]
        target = np.ones_like(y)
    (alpha, per_scaled), _ = nnls2(design, target)
    per_byte = per_scaled / scale
    beta = 1.0 / per_byte if per_byte > 0 else float("inf")
    return float(alpha), float(beta)


class PeakModel(_LineBaseline):
    """Peak: the smallest observed time plus ``size / max observed bandwidth``.

    This is what "the network has latency L and bandwidth B" from a data sheet or from the
    best run amounts to: an optimistic bound, never reached on average.
    """

    kind = "peak"

    def _fit_line(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
        alpha = float(y.min())
        pos = x > 0
        beta = float((x[pos] / y[pos]).max()) if pos.any() else float("inf")
        return alpha, beta


BASELINES: dict[str, type[_LineBaseline]] = {
    "hockney": HockneyModel, "hockney_robust": RobustHockneyModel, "peak": PeakModel,
    "hockney_raw": HockneyRawModel}

#: The baselines validation scores by default (``hockney_raw`` is a strawman: opt-in only).
DEFAULT_BASELINES: tuple[str, ...] = ("hockney", "hockney_robust", "peak")

#: One line per baseline, printed next to its numbers.
LABELS: dict[str, str] = {
    "hockney": "Hockney, least squares on per-size means",
    "hockney_robust": "robust Hockney, relative least squares on per-size medians",
    "peak": "peak: best latency + size / best bandwidth",
    "hockney_raw": "Hockney, least squares on raw samples (strawman)",
}

