"""Single-line baselines that the regime model is judged against.

Validation only means something next to what people already use: the Hockney model
(``alpha + size / beta`` fitted by least squares) and the "peak" model (the best latency
and the best bandwidth ever observed). Both are scikit-learn style estimators with the same
``predict`` / ``predict_quantiles`` / ``sample`` interface as :class:`kit.model.RegimeModel`,
so :mod:`kit.validate` and the report can score all three with the same code.

A line alone has no spread, so each baseline carries the pooled empirical distribution of
the ratio ``time / line(size)`` over its training samples (multiplicative noise, the same
form the regime model uses per regime). That gives the baselines a fair predictive
distribution: they lose on shape, not because they were denied noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import nnls
from sklearn.base import BaseEstimator

from kit.errors import ModelError

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


class _LineBaseline(BaseEstimator):  # type: ignore[misc]
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
        self.ratio_quantiles_ = np.quantile(ratio, probs)
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


class HockneyModel(_LineBaseline):
    """Hockney: ``alpha + size / beta`` by least squares on the raw samples.

    The fit is non-negative least squares (alpha >= 0 and 1/beta >= 0), because a negative
    start-up time or bandwidth has no meaning and plain OLS on heavy-tailed data can produce
    one; otherwise it is the textbook fit every calibration script does.
    """

    kind = "hockney"

    def _fit_line(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
        # Scale the size column so NNLS is well conditioned (sizes span 1 B .. GiB).
        scale = max(float(x.max()), 1.0)
        design = np.column_stack([np.ones_like(x), x / scale])
        (alpha, per_scaled), _ = nnls(design, y)
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


BASELINES: dict[str, type[_LineBaseline]] = {"hockney": HockneyModel, "peak": PeakModel}
