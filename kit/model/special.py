"""The special functions the noise distributions are written in, with or without SciPy.

Reading a model and predicting from it (``pt2pt predict``, ``sample``, ``export``, the
physical check of every model file that is read) evaluates a handful of noise CDFs and
quantiles at a few sizes. ``scipy.special`` costs 0.15-0.3 CPU-s to import, more than all of
that work; ``scipy.stats`` (whose distributions the noises were) 0.6-0.9 s. So
:func:`functions` returns ``scipy.special`` itself whenever it is loaded (every fit loads it:
:func:`use_scipy`), and otherwise :data:`LIGHT`: the same functions from Python's ``math``
and ``statistics`` modules (erf, erfc, the normal quantile of AS 241), element by element.
They agree with SciPy's to a few units in the last place (tests/test_noise_formulas.py
holds them to it). The normal CDF and its log, which a per-size model's quantile maps
evaluate millions of times, run element by element in C (kit/model/_mixture_kernels.c, the
same libm calls as :func:`_ndtr1`, the same values bit for bit); the other functions, and
these where the kernels are not built, hand over to SciPy past :data:`LIGHT_MAX_ELEMENTS`
elements evaluated in a process, as does the incomplete gamma function (gamma noise): there
its import is the cheaper part.
"""

from __future__ import annotations

import math
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kit.model.kernels import KERNELS as _kernels  # ndtr, log_ndtr element by element

#: Elements the light functions evaluated in Python evaluate in a process before they hand
#: over to scipy.special (loading it once): ~0.3-0.5 µs an element in Python against
#: ~0.15-0.3 s for the import (the compiled ndtr and log_ndtr never hand over: ~20 ns).
LIGHT_MAX_ELEMENTS = 200_000
_light_used = [0]


def use_scipy() -> ModuleType:
    """Load scipy.special: from then on :func:`functions` returns it (the fitting engine
    calls this first, so a fit's numbers never depend on which functions ran before)."""
    import scipy.special

    return scipy.special


def functions() -> Any:
    """``scipy.special`` when it is loaded, else :data:`LIGHT` (the same names)."""
    return sys.modules.get("scipy.special") or LIGHT


def _large(x: NDArray) -> bool:
    """Whether to hand over to scipy.special: once the light functions have evaluated
    :data:`LIGHT_MAX_ELEMENTS` elements in this process (counting this call's)."""
    _light_used[0] += x.size
    return _light_used[0] > LIGHT_MAX_ELEMENTS


def _elementwise(fn: Any, x: NDArray) -> NDArray:
    flat = np.fromiter(map(fn, x.ravel().tolist()), dtype=np.float64, count=x.size)
    return flat.reshape(x.shape)


_SQRT1_2 = math.sqrt(0.5)


def _ndtr1(a: float) -> float:
    """Standard normal CDF at ``a``: cephes' ``ndtr`` (which SciPy uses), on libm's erf."""
    if a != a:
        return math.nan
    x = a * _SQRT1_2
    if abs(x) < _SQRT1_2:
        return 0.5 + 0.5 * math.erf(x)
    y = 0.5 * math.erfc(abs(x))
    return 1.0 - y if x > 0 else y


def _compiled(name: str, x: NDArray) -> Any:
    """``name`` (ndtr or log_ndtr) of each element of ``x`` by the compiled kernel."""
    arr = np.asarray(x, dtype=np.float64, order="C")  # (ascontiguousarray: 0-d to 1-d)
    out = np.empty(arr.shape)
    getattr(_kernels, name)(arr.reshape(-1), out.reshape(-1))
    return out if out.ndim else out[()]


def _light_ndtr(x: ArrayLike) -> Any:
    arr = np.asarray(x, dtype=np.float64)
    if _kernels is not None:
        return _compiled("ndtr", arr)
    if _large(arr):
        return use_scipy().ndtr(arr)
    out = _elementwise(_ndtr1, arr)
    return out if out.ndim else out[()]


#: Terms of the asymptotic series of log ndtr(z) for z below -30 (relative error < 1e-17).
_LOG_NDTR_TERMS = 8
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _log_ndtr1(a: float) -> float:
    if a != a:
        return math.nan
    if a > 0.0:  # ndtr(a) = 1 - ndtr(-a): log1p keeps the small upper tail's digits
        return math.log1p(-_ndtr1(-a))
    if a > -30.0:
        return math.log(_ndtr1(a))
    # log ndtr(a) = -a²/2 - log(-a) - log sqrt(2 pi) + log(1 + sum (-1)^k (2k-1)!! / a^2k)
    inv = 1.0 / (a * a)
    term, total = 1.0, 1.0
    for k in range(1, _LOG_NDTR_TERMS + 1):
        term *= -(2 * k - 1) * inv
        total += term
    return -0.5 * a * a - math.log(-a) - _HALF_LOG_2PI + math.log(total)


def _light_log_ndtr(x: ArrayLike) -> Any:
    arr = np.asarray(x, dtype=np.float64)
    if _kernels is not None:
        return _compiled("log_ndtr", arr)
    if _large(arr):
        return use_scipy().log_ndtr(arr)
    out = _elementwise(_log_ndtr1, arr)
    return out if out.ndim else out[()]


def _light_ndtri(q: ArrayLike) -> Any:
    arr = np.asarray(q, dtype=np.float64)
    if _large(arr):
        return use_scipy().ndtri(arr)
    from statistics import NormalDist  # here: ~15 ms, and most reads never ask

    inv_cdf = NormalDist().inv_cdf

    def one(p: float) -> float:
        if not 0.0 < p < 1.0:
            return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
        return inv_cdf(p)

    out = _elementwise(one, arr)
    return out if out.ndim else out[()]


def _light_expit(x: ArrayLike) -> Any:
    """1 / (1 + exp(-x)), SciPy's formula for doubles (the same values, bit for bit)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def _light_logit(p: ArrayLike) -> Any:
    """log(p / (1 - p)); between 0.3 and 0.65 from log1p, where that formula loses digits
    (SciPy's two branches, the same values)."""
    x = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = 2.0 * (x - 0.5)
        out = np.where((x < 0.3) | (x > 0.65), np.log(x / (1.0 - x)),
                       np.log1p(s) - np.log1p(-s))
    return out if out.ndim else out[()]


def _light_xlogy(a: ArrayLike, x: ArrayLike) -> Any:
    """a * log(x), 0 where a is 0 (and x is not NaN)."""
    aa, xx = np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((aa == 0) & ~np.isnan(xx), 0.0, aa * np.log(xx))


def _light_xlog1py(a: ArrayLike, x: ArrayLike) -> Any:
    """a * log1p(x), 0 where a is 0 (and x is not NaN)."""
    aa, xx = np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((aa == 0) & ~np.isnan(xx), 0.0, aa * np.log1p(xx))


def _light_gammaln(a: ArrayLike) -> Any:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 0:
        return math.lgamma(float(arr)) if np.isfinite(arr) and arr > 0 else \
            use_scipy().gammaln(arr)
    return use_scipy().gammaln(arr)


def _scipy_only(name: str) -> Any:
    def call(*args: Any) -> Any:
        return getattr(use_scipy(), name)(*args)
    call.__name__ = name
    return call


#: The light namespace: what :func:`functions` gives while scipy.special is not loaded.
#: ``_invgauss_ppf`` / ``_invgauss_isf`` (Boost's, through SciPy) are absent on purpose:
#: without them the inverse-Gaussian quantile is found by Newton on its CDF.
LIGHT = SimpleNamespace(
    ndtr=_light_ndtr, ndtri=_light_ndtri, log_ndtr=_light_log_ndtr, expit=_light_expit,
    logit=_light_logit, xlogy=_light_xlogy, xlog1py=_light_xlog1py, expm1=np.expm1,
    log1p=np.log1p, gammaln=_light_gammaln, gammainc=_scipy_only("gammainc"),
    gammaincinv=_scipy_only("gammaincinv"),
)


def expit(x: ArrayLike) -> Any:
    """The logistic function of :func:`functions` (scipy's once it is loaded)."""
    return functions().expit(x)


def logit(p: ArrayLike) -> Any:
    """The log-odds of :func:`functions` (scipy's once it is loaded)."""
    return functions().logit(p)


__all__ = ["LIGHT", "LIGHT_MAX_ELEMENTS", "expit", "functions", "logit", "use_scipy"]
