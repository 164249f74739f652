"""Noise distributions of time / curve(size), fitted by maximum likelihood.

Communication times are strictly positive and right-skewed, and for small messages the
spread matters more than the median, so each regime gets a distribution of the *ratio*
r = time / curve(size) (median ~ 1). Candidates: lognormal, gamma, Weibull, inverse
Gaussian, log-logistic (scipy ``fisk``) and a Gaussian mixture on ln r (components by BIC,
for multi-modal noise). The winner is the lowest AIC among the families whose p95 and p99
are within 15 % of the data's (from 200 samples on; see :func:`_choose`); every
candidate's AIC is kept so a reader can see how close the runner-up was. The winner's
scale is then pinned so that its median equals the sample median (see
:func:`_anchor_median`); AICs are those of the ML fits.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kit.model import special
from kit.model.kernels import KERNELS as _kernels  # the mixture's EM, Newton terms, log-density
from kit.model.memo import ContentMemo
from kit.model.order_stats import median, quantile
from kit.model.squarem import Step, accelerate

NOISE_FAMILIES: tuple[str, ...] = ("lognormal", "gamma", "weibull", "invgauss", "fisk", "gmm")


def _lognorm_logpdf(x: NDArray, s: float) -> NDArray:
    """scipy's lognorm ``_logpdf`` inside the support (x > 0), the same expression: scipy
    wraps it in an array-API ``apply_where`` that costs more than the arithmetic at the
    thousands of samples a regime's score evaluates (4 % of a 33 k-sample fit)."""
    return np.asarray(-np.log(x)**2 / (2 * s**2) - np.log(s * x * np.sqrt(2 * np.pi)))


def _invgauss_logcdf(x: NDArray, mu: float) -> NDArray:
    sp = special.functions()
    fac = 1 / np.sqrt(x)
    a = sp.log_ndtr(fac * (x / mu - 1))
    b = 2 / mu + sp.log_ndtr(-fac * (x / mu + 1))
    with np.errstate(all="ignore"):
        out = np.asarray(a + np.log1p(np.exp(b - a)))
    # Far in the left tail both terms underflow to -inf (inf - inf): the CDF is 0 there,
    # and a log CDF is never above 0 (a per-size map's tail asked at 1e-17 gave +inf).
    xx = np.asarray(x)
    bad = (np.isnan(out) & ~np.isnan(xx)) | (out > 0)
    if bad.any():
        out = np.where(bad, np.where(xx < mu, -np.inf, 0.0), out)
    return out


@dataclass(frozen=True)
class _Family:
    """One scipy.stats family as the formulas of its private methods (scipy 1.17's
    ``_cdf``, ``_logpdf``, ``_ppf``, ``_rvs`` on the standardised ratio, loc 0), written
    in the functions of :mod:`kit.model.special`: with scipy.special loaded they are
    scipy.stats' values bit for bit (tests/test_noise_formulas.py), and reading a model
    needs neither scipy.stats (0.6-0.9 CPU-s to import) nor scipy.special."""

    shapes: tuple[str, ...]
    cdf: Callable[..., NDArray]
    logpdf: Callable[..., NDArray]
    ppf: Callable[..., NDArray]
    #: draws of the standardised ratio (None: the inverse CDF of uniforms, scipy's default)
    rvs: Callable[..., NDArray] | None = None
    #: support excludes 0 (lognorm, invgauss: scipy's open support mask)
    open_support: bool = False


_FAMILIES: dict[str, _Family] = {
    "lognormal": _Family(
        ("s",), lambda x, s: special.functions().ndtr(np.log(x) / s), _lognorm_logpdf,
        lambda q, s: np.exp(s * special.functions().ndtri(q)),
        lambda rng, size, s: np.exp(s * rng.standard_normal(size)), open_support=True),
    "gamma": _Family(
        ("a",), lambda x, a: special.functions().gammainc(a, x),
        lambda x, a: (special.functions().xlogy(a - 1.0, x) - x
                      - special.functions().gammaln(a)),
        lambda q, a: special.functions().gammaincinv(a, q),
        lambda rng, size, a: rng.standard_gamma(a, size)),
    "weibull": _Family(
        ("c",), lambda x, c: -special.functions().expm1(-pow(x, c)),
        lambda x, c: np.log(c) + special.functions().xlogy(c - 1, x) - pow(x, c),
        lambda q, c: pow(-special.functions().log1p(-q), 1.0 / c)),
    "invgauss": _Family(
        ("mu",), lambda x, mu: np.exp(_invgauss_logcdf(x, mu)),
        lambda x, mu: -0.5 * np.log(2 * np.pi) - 1.5 * np.log(x) - (x / mu - 1)**2 / (2 * x),
        lambda q, mu: _invgauss_ppf_std(q, mu),
        lambda rng, size, mu: rng.wald(mu, 1.0, size=size), open_support=True),
    # fisk is scipy's burr with d = 1: its methods with d = 1.0 (log d = 0 dropped)
    "fisk": _Family(
        ("c",), lambda x, c: (1 + x**(-c))**(-1.0),
        lambda x, c: _fisk_logpdf(x, c),
        lambda q, c: (q**(-1.0 / 1.0) - 1)**(-1.0 / c)),
}


def _fisk_logpdf(x: NDArray, c: float) -> NDArray:
    """scipy's burr ``_logpdf`` with d = 1 (both of its branches; log d = 0 dropped)."""
    sp = special.functions()
    zero = x == 0
    out = np.empty(x.shape)
    out[zero] = np.log(c) + sp.xlogy(c * 1.0 - 1, x[zero]) - (1.0 + 1) * sp.log1p(x[zero]**c)
    rest = ~zero
    out[rest] = np.log(c) + sp.xlogy(-c - 1, x[rest]) - sp.xlog1py(1.0 + 1, x[rest]**(-c))
    return out


def _invgauss_ppf_std(q: NDArray, mu: float) -> NDArray:
    """scipy's invgauss ``_ppf`` (scale 1): Boost's quantile where Boost finds it (the same
    calls as scipy's), NaN where it gives up or without scipy.special (then
    :meth:`Noise._invgauss_ppf` solves those by Newton)."""
    ufuncs = getattr(special.functions(), "_ufuncs", None)  # scipy.special's, not LIGHT
    ppf_boost = getattr(ufuncs, "_invgauss_ppf", None)
    isf_boost = getattr(ufuncs, "_invgauss_isf", None)
    if ppf_boost is None or isf_boost is None:
        return np.full(np.shape(q), np.nan)
    with warnings.catch_warnings(), np.errstate(divide="ignore", over="ignore",
                                                invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # Boost's "unable to locate"
        x = np.asarray(ppf_boost(q, mu, 1.0), dtype=np.float64)
        wrong_tail = q > 0.5  # as scipy: the upper half from the complement
        x[wrong_tail] = isf_boost(1 - q[wrong_tail], mu, 1.0)
    return x


#: Most components the compiled mixture kernels take (MAX_K in _mixture_kernels.c).
_KERNEL_MAX_COMPONENTS = 8

#: Log-densities computed here instead of by the scipy family's ``_logpdf`` (same values).
_LOGPDF: dict[str, Callable[..., NDArray]] = {"lognormal": _lognorm_logpdf}


_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)
_INV_SQRT_2PI = 1.0 / np.sqrt(2 * np.pi)

#: Samples used for the likelihood fits; more adds time, not accuracy, for 5-parameter shapes.
MAX_NOISE_SAMPLES = 2500


Report = dict[str, dict[str, float]]


def _ln_newton(cdf_and_logpdf: Callable[[NDArray], list[NDArray]], q: NDArray,
               start: NDArray, width: float) -> NDArray:
    """ln r with ``cdf(r) = q``, for each q: Newton on ln r inside a bracket that starts at
    ``start`` +- 10 ``width`` and widens until it holds the root, bisecting where a step
    would leave it; to 1e-13 of ln r (``cdf_and_logpdf(r)`` gives the CDF and log-density)."""
    y = np.asarray(start, dtype=float).copy()
    step = 10 * width + 1e-3
    lo, hi = y - step, y + step
    for _ in range(200):  # widen the bracket (doubling) until F(lo) <= q <= F(hi)
        f_lo = cdf_and_logpdf(np.exp(lo))[0] - q
        f_hi = cdf_and_logpdf(np.exp(hi))[0] - q
        low, high = f_lo > 0, f_hi < 0
        if not (low.any() or high.any()):
            break
        step *= 2
        lo = np.where(low, lo - step, lo)
        hi = np.where(high, hi + step, hi)
    live = np.arange(len(y))
    for _ in range(100):
        r = np.exp(y[live])
        cdf, logpdf = cdf_and_logpdf(r)
        f = cdf - q[live]
        below = f < 0
        lo[live] = np.where(below, y[live], lo[live])
        hi[live] = np.where(below, hi[live], y[live])
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            new = y[live] - f / (np.exp(logpdf) * r)
        inside = np.isfinite(new) & (new > lo[live]) & (new < hi[live])
        new = np.where(inside, new, (lo[live] + hi[live]) / 2)
        done = (np.abs(new - y[live]) <= 1e-13 * np.maximum(1.0, np.abs(y[live]))) | (f == 0)
        y[live] = np.where(f == 0, y[live], new)
        live = live[~done]
        if not len(live):
            break
    return y


class _ReportOnRead:
    """A :class:`Noise`'s ``quantiles``, computed when first read (a descriptor-typed
    dataclass field): the empirical quantiles are those of every ratio, up to millions, and
    most noises a fit makes are candidates that nobody reads (7 % of a 1 M-sample fit)."""

    def __get__(self, obj: Noise | None, owner: type | None = None) -> Report:
        if obj is None:
            return None  # type: ignore[return-value]  # the dataclass default (empty)
        pending = obj.__dict__.pop("_report_pending", None)
        if pending is not None:
            obj.__dict__["_report"] = pending()
        report: Report = obj.__dict__.get("_report", {})
        return report

    def __set__(self, obj: Noise, value: Report | Callable[[], Report] | None) -> None:
        obj.__dict__.pop("_report_pending", None)
        if value is None:
            obj.__dict__["_report"] = {}
        elif callable(value):
            obj.__dict__["_report_pending"] = value
        else:
            obj.__dict__["_report"] = value


#: Level sets up to this size are cached by :meth:`Noise.ppf`, this many per noise.
_PPF_CACHE_LEVELS = 64
_PPF_CACHE_SIZE = 32
#: Levels of :meth:`Noise.ln_ppf_start`'s table, evenly spaced in logit (8e-7 to 1 - 8e-7).
_START_LOGITS = np.linspace(-14.0, 14.0, 1025)


def _start_levels() -> NDArray:
    return _start_levels_of(special.functions() is special.LIGHT)


@cache
def _start_levels_of(light: bool) -> NDArray:
    """The levels, by scipy's expit or the light one (a table per provider: a fit's numbers
    must not depend on whether a model was read in the process before)."""
    del light  # the cache key
    levels = np.asarray(special.functions().expit(_START_LOGITS))
    levels.flags.writeable = False
    return levels


@dataclass
class Noise:
    """A fitted ratio distribution. ``params`` use scipy's names (shape + ``scale``; loc is 0)."""

    family: str
    params: dict[str, Any]
    aic: dict[str, float] = field(default_factory=dict)
    #: p50/p95/p99 {"fitted", "empirical"}; may be set to a function that computes it.
    quantiles: _ReportOnRead = _ReportOnRead()
    n: int = 0
    #: ppf at the few fixed level sets asked again and again (SHAPE_LEVELS, the quantile
    #: solver's brackets): keyed by the parameters and the levels (see :meth:`ppf`).
    _ppf_cache: dict[tuple[Any, ...], NDArray] = field(default_factory=dict, init=False,
                                                       repr=False, compare=False)

    def _family(self) -> tuple[_Family, list[float], float, bool]:
        """The family's formulas, its shape parameters and scale, and whether they are
        valid (scipy's ``_argcheck``: every shape > 0, and scale > 0)."""
        fam = _FAMILIES[self.family]
        args = [float(self.params[k]) for k in fam.shapes]
        scale = float(self.params["scale"])
        return fam, args, scale, scale > 0 and all(a > 0 for a in args)

    def _scipy(self, r: NDArray, *what: str) -> list[NDArray]:
        """scipy's ``cdf``/``logpdf`` of the family at ``r`` (each name in ``what``, in that
        order), the values its public methods compute (the same masks and private
        ``_cdf``/``_logpdf`` formulas on ``r / scale``, :data:`_FAMILIES`), without their
        argument parsing: ~0.1 ms a call, called thousands of times by the quantile solvers
        (a tenth of a per-size fit at 1 M samples); both at once share the parameter check
        and the scaling. Invalid parameters give NaN, as scipy's public methods do."""
        fam, args, scale, valid = self._family()
        r = np.asarray(r, dtype=float)
        x = np.atleast_1d(r / scale if valid else r)  # scipy's (r - loc) / scale, loc 0
        nan = np.isnan(x) | (not valid)
        values = []
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            for w in what:
                if w == "cdf":
                    out = np.zeros(x.shape)
                    out[x >= np.inf] = 1.0
                    inside = (x > 0) & (x < np.inf) & ~nan
                    if inside.any():
                        out[inside] = fam.cdf(x[inside], *args)
                else:
                    out = np.full(x.shape, -np.inf)
                    inside = (((x > 0) & (x < np.inf)) if fam.open_support else (x >= 0)) & ~nan
                    if inside.any():
                        out[inside] = fam.logpdf(x[inside], *args) - np.log(scale)
                out[nan] = np.nan
                values.append(out.reshape(r.shape) if r.ndim else out[0])
        return values

    def _gmm(self) -> tuple[NDArray, NDArray, NDArray]:
        return (np.asarray(self.params["weights"], float), np.asarray(self.params["means"], float),
                np.asarray(self.params["sds"], float))

    def cdf(self, r: NDArray) -> NDArray:
        r = np.asarray(r, dtype=float)
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            with np.errstate(divide="ignore"):
                lr = np.log(np.maximum(r, 0.0))
            z = (lr[..., None] - mu) / sd
            return np.sum(w * special.functions().ndtr(z), axis=-1)
        return self._scipy(r, "cdf")[0]

    def logpdf(self, r: NDArray) -> NDArray:
        r = np.asarray(r, dtype=float)
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            with np.errstate(divide="ignore", invalid="ignore"):
                lr = np.log(r)
                c = np.log(w) - np.log(sd) - _HALF_LOG_2PI
            if _kernels is None or not 1 <= len(mu) <= _KERNEL_MAX_COMPONENTS:
                return _gmm_logpdf_numpy(lr, mu, sd, c)
            out = np.empty(lr.shape)
            _kernels.gmm_logpdf(np.ascontiguousarray(lr).reshape(-1), np.ascontiguousarray(mu),
                                np.ascontiguousarray(sd), np.ascontiguousarray(c),
                                out.reshape(-1))
            return out if out.ndim else out[()]
        return self._scipy(r, "logpdf")[0]

    def cdf_and_log_density(self, r: NDArray) -> tuple[NDArray, NDArray]:
        """The CDF at ``r`` and the density of ln r there (``r * pdf(r)``): what Newton on
        ln time needs. For a mixture in one pass over its components (the per-size layer's
        quantile solver spent most of its time in the two separate calls)."""
        r = np.asarray(r, dtype=float)
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            if (special.functions() is special.LIGHT and _kernels is not None
                    and 1 <= len(mu) <= _KERNEL_MAX_COMPONENTS):
                return self._light_cdf_density(r, w, mu, sd)
            z = (np.log(r)[..., None] - mu) / sd
            cdf = np.sum(w * special.functions().ndtr(z), axis=-1)
            with np.errstate(under="ignore"):
                dens = np.sum((w / sd) * np.exp(-0.5 * (z * z)), axis=-1) * _INV_SQRT_2PI
            return cdf, dens
        cdf, logpdf = self._scipy(r, "cdf", "logpdf")
        with np.errstate(over="ignore", under="ignore"):
            return cdf, np.exp(logpdf) * r

    @staticmethod
    def _light_cdf_density(r: NDArray, w: NDArray, mu: NDArray, sd: NDArray
                           ) -> tuple[NDArray, NDArray]:
        """:meth:`cdf_and_log_density` of a mixture without SciPy, in the compiled kernel:
        the same formulas (and the light ndtr), to rounding; a fit (SciPy's ndtr) never
        comes here, so its numbers do not depend on it."""
        assert _kernels is not None
        with np.errstate(divide="ignore"):
            lr = np.asarray(np.log(r), dtype=np.float64, order="C")
        cdf, dens = np.empty(lr.shape), np.empty(lr.shape)
        _kernels.gmm_cdf_density(lr.reshape(-1), np.ascontiguousarray(mu),
                                 np.ascontiguousarray(sd), np.ascontiguousarray(w),
                                 cdf.reshape(-1), dens.reshape(-1))
        return (cdf, dens) if cdf.ndim else (cdf[()], dens[()])

    def ppf(self, q: NDArray) -> NDArray:
        """Quantiles at levels ``q``. The per-size layer asks each noise for the same few
        level sets once per size it predicts at (drawing at 490 sizes one at a time solved
        the same GMM quantiles 1,200 times): small level sets are kept, by parameters and
        levels, and a copy returned."""
        q = np.asarray(q, dtype=float)
        if q.size > _PPF_CACHE_LEVELS:
            return self._ppf(q)
        return self._kept_ppf(q).copy()

    def ln_ppf_start(self, v: NDArray) -> NDArray:
        """ln ppf at levels ``v``, interpolated in a table of the noise's own ln quantiles
        (kept with the noise): good to ~1e-7 in ln r, a start for the mixture quantile
        solver (:func:`kit.model.predictive.quantiles`), not a quantile to report."""
        with np.errstate(divide="ignore"):
            table = np.log(self._kept_ppf(_start_levels()))
            return np.interp(special.functions().logit(np.asarray(v, dtype=float)),
                             _START_LOGITS, table)

    def _kept_ppf(self, q: NDArray) -> NDArray:
        """ppf at ``q`` from the cache (read-only: callers copy what they hand out)."""
        key = (q.shape, q.tobytes(), self.family,
               *[tuple(np.ravel(v).tolist()) if isinstance(v, (list, tuple, np.ndarray))
                 else v for v in self.params.values()], *self.params)
        try:
            hit = self._ppf_cache.get(key)
        except TypeError:  # a parameter that cannot be a key: computed every time
            return self._ppf(q)
        if hit is None:
            if len(self._ppf_cache) >= _PPF_CACHE_SIZE:
                self._ppf_cache.clear()
            hit = self._ppf_cache[key] = np.asarray(self._ppf(q))
        return hit

    def _ppf(self, q: NDArray) -> NDArray:
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            if _kernels is not None and 1 <= len(mu) <= _KERNEL_MAX_COMPONENTS:  # same, in C
                out = np.empty(q.shape)
                _kernels.gmm_ppf(np.ascontiguousarray(q).reshape(-1), np.ascontiguousarray(mu),
                                 np.ascontiguousarray(sd), np.ascontiguousarray(w),
                                 out.reshape(-1))
                return out if out.ndim else out[()]
            return _gmm_ppf_numpy(q, w, mu, sd)
        if self.family == "invgauss":
            return self._invgauss_ppf(q)
        return self._scipy_ppf(q)

    def _scipy_ppf(self, q: NDArray) -> NDArray:
        """scipy's ``ppf`` of the family at ``q``: the values its public method computes
        (support bounds at 0 and 1, NaN outside, the private ``_ppf`` times the scale in
        between) without freezing the distribution first, which alone costs ~1 ms, a twentieth
        of a 33 k-sample fit (every candidate family is asked its quantiles once). Invalid
        parameters give NaN."""
        fam, args, scale, valid = self._family()
        q = np.asarray(q, dtype=float)
        flat = np.atleast_1d(q)
        out = np.full(flat.shape, np.nan)
        if valid:
            out[flat == 0] = 0.0
            out[flat == 1] = np.inf
            inside = (flat > 0) & (flat < 1)
            if inside.any():
                with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                    out[inside] = fam.ppf(flat[inside], *args) * scale
        return out.reshape(q.shape) if q.ndim else out[0]

    def _invgauss_ppf(self, q: NDArray) -> NDArray:
        """scipy's invgauss ``ppf``: Boost's quantile where Boost finds it (the same calls as
        scipy's ``_ppf``); where Boost gives up, for every level once ``mu`` is below ~0.003
        (noise with a CV under 5.5 %: a quiet link's), scipy falls back to one brentq per
        value, 0.7 ms each (1.5 s of a 200 k-sample validation). There, and everywhere
        while scipy.special is not loaded: Newton on ln r for all values at once, from a
        lognormal start, inside a bracket (:func:`_ln_newton`)."""
        mu, scale = float(self.params["mu"]), float(self.params["scale"])
        q = np.asarray(q, dtype=float)
        if not (mu > 0 and scale > 0):
            return self._scipy_ppf(q)
        flat = np.atleast_1d(q).ravel()
        out = np.full(flat.shape, np.nan)
        out[flat == 0] = 0.0
        out[flat == 1] = np.inf
        inner = (flat > 0) & (flat < 1)
        u = flat[inner]
        x = _invgauss_ppf_std(u, mu)
        lost = np.isnan(x)
        if lost.any():
            sd = math.sqrt(math.log1p(mu))  # the lognormal with invgauss' mean and CV
            start = (math.log(mu * scale) - sd * sd / 2
                     + sd * np.asarray(special.functions().ndtri(u[lost])))
            x[lost] = np.exp(_ln_newton(lambda r: self._scipy(r, "cdf", "logpdf"),
                                        u[lost], start, sd)) / scale
        out[inner] = x * scale
        return out.reshape(q.shape) if q.ndim else out[0]

    def rvs(self, n: int | tuple[int, ...], rng: np.random.Generator) -> NDArray:
        """Draws of the ratio: scipy's ``rvs`` (its private ``_rvs``, or the inverse CDF of
        uniforms where the family has none, times the scale): the same draws from the same
        generator."""
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            k = rng.choice(len(w), size=n, p=w / w.sum())
            return np.exp(rng.normal(mu[k], sd[k]))
        fam, args, scale, valid = self._family()
        if not valid:
            raise ValueError(f"{self.family} noise with invalid parameters {self.params}")
        size = (n,) if isinstance(n, int | np.integer) else tuple(n)
        with np.errstate(all="ignore"):
            std = (fam.rvs(rng, size, *args) if fam.rvs is not None
                   else fam.ppf(rng.uniform(size=size), *args))
            x = np.asarray(std, dtype=float) * scale + 0.0
            bad = ~(np.isfinite(x) & (x > 0))
            if bad.any():  # numpy's wald overflows (0, -inf) for invgauss mu past ~1e150,
                # where the quantiles are still sound: those draws by inverse transform
                x[bad] = self.ppf(rng.uniform(size=int(bad.sum())))
        return x

    def median(self) -> float:
        return float(self.ppf(np.array(0.5)))

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles (``fit --all`` workers) carry the report, not the ratios a
        pending one is computed from; each keeps its own ppf cache."""
        self.quantiles  # noqa: B018 (reading computes a pending report)
        return {**self.__dict__, "_ppf_cache": {}}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": self.params, "aic": self.aic,
                "quantiles": self.quantiles, "n": self.n}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Noise:
        aic = {k: float("inf") if v is None else float(v) for k, v in d.get("aic", {}).items()}
        return cls(family=d["family"], params=dict(d["params"]), aic=aic,
                   quantiles={k: dict(v) for k, v in d.get("quantiles", {}).items()},
                   n=int(d.get("n", 0)))


def _gmm_logpdf_numpy(lr: NDArray, mu: NDArray, sd: NDArray, c: NDArray) -> NDArray:
    """A Gaussian mixture's log-density of r at ``lr`` = ln r, ``c`` = ln w - ln sd - ln
    sqrt(2 pi): the reference the compiled ``gmm_logpdf`` is held to, and its fallback.
    The normal log-density and log-sum-exp are written out: scipy's versions check and
    broadcast their arguments, several times the cost of the arithmetic."""
    z = (lr[..., None] - mu) / sd
    comp = -0.5 * (z * z) + c
    top = np.max(comp, axis=-1)
    with np.errstate(invalid="ignore"):
        out = top + np.log(np.sum(np.exp(comp - top[..., None]), axis=-1))
        return np.asarray(np.where(np.isfinite(top), out, top) - lr)


def _gmm_ppf_numpy(q: NDArray, w: NDArray, mu: NDArray, sd: NDArray) -> NDArray:
    """Quantiles of r at levels ``q`` when ln r is the mixture (w, mu, sd): the reference the
    compiled ``gmm_ppf`` is held to, and its fallback."""
    ndtr = special.functions().ndtr
    lo = np.full(q.shape, float(np.min(mu - 12 * sd)))
    hi = np.full(q.shape, float(np.max(mu + 12 * sd)))
    for _ in range(16):  # bisection on ln r to ~1e-4 of a component's sd ...
        mid = (lo + hi) / 2
        below = np.sum(w * ndtr((mid[..., None] - mu) / sd), axis=-1) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    m = (lo + hi) / 2
    for _ in range(4):  # ... then Newton inside the bracket, to float precision
        z = (m[..., None] - mu) / sd
        f = np.sum(w * ndtr(z), axis=-1) - q
        dens = np.sum(w * np.exp(-0.5 * z * z) / (sd * np.sqrt(2 * np.pi)), axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(dens > 0, f / dens, 0.0)
        m = np.clip(m - step, lo, hi)
    return np.exp(m)


#: EM evaluations before Newton takes over.
_EM_BEFORE_NEWTON = 6
_LN_SD_MIN = float(np.log(1e-4))


def _gmm_newton_terms(x: NDArray, th: NDArray, k: int
                      ) -> tuple[float, NDArray, NDArray]:
    """Log-likelihood, gradient and Hessian of a 1-D Gaussian mixture at ``th``: the
    compiled kernel where it is built, else :func:`_gmm_newton_terms_numpy` (the
    reference, with the formulas). The fit itself calls neither: the compiled Newton loop
    evaluates these terms inside C. This is how the tests reach the kernel's terms, to
    hold them to the reference and to finite differences."""
    if _kernels is None:
        return _gmm_newton_terms_numpy(x, th, k)
    p = 3 * k - 1
    g, h = np.empty(p), np.empty((p, p))
    ll = _kernels.gmm_newton_terms(x, np.ascontiguousarray(th, dtype=float), k, g, h)
    return ll, g, h


def _gmm_newton_terms_numpy(x: NDArray, th: NDArray, k: int
                            ) -> tuple[float, NDArray, NDArray]:
    """Log-likelihood, gradient and Hessian of a 1-D Gaussian mixture at ``th``.

    ``th`` = (alpha_1..alpha_{k-1}, means, ln sds) with weights softmax(0, alpha): the
    weights' one free dimension is pinned, so the Hessian is not singular. The Hessian is
    the observed information: sum over samples of E_r[∇² ln f + s sᵀ] − g_i g_iᵀ, with s
    a component's score and g_i the sample's (the responsibility-weighted s).
    """
    a = np.concatenate([[0.0], th[:k - 1]])
    lw = a - np.logaddexp.reduce(a)
    w = np.exp(lw)
    mu, lsd = th[k - 1:2 * k - 1], th[2 * k - 1:]
    isd = np.exp(-lsd)
    z = (x[None, :] - mu[:, None]) * isd[:, None]
    lp = (lw - lsd - _HALF_LOG_2PI)[:, None] - 0.5 * (z * z)
    mx = lp.max(axis=0)
    e = np.exp(lp - mx)
    tot = e.sum(axis=0)
    r = e / tot
    ll = float(np.log(tot).sum() + mx.sum())
    n_par = 3 * k - 1
    # Everything below is a responsibility-weighted moment of z: sums of r·z^p, p <= 4.
    rz = r * z
    rzz = rz * z
    rz3 = rzz * z
    m0, m1, m2 = r.sum(axis=1), rz.sum(axis=1), rzz.sum(axis=1)
    m3, m4 = rz3.sum(axis=1), (rz3 * z).sum(axis=1)
    big = np.empty((n_par, x.shape[0]))  # per-sample scores: alpha, mu (z/sd), ln sd (z²-1)
    big[:k - 1] = r[1:] - w[1:, None]
    np.multiply(rz, isd[:, None], out=big[k - 1:2 * k - 1])
    np.subtract(rzz, r, out=big[2 * k - 1:])
    g = big.sum(axis=1)
    h = -(big @ big.T)
    ew = np.eye(k)[:, 1:] - w[None, 1:]  # row j: d ln w_j / d alpha
    h[:k - 1, :k - 1] += (ew.T * m0) @ ew - len(x) * (np.diag(w[1:]) - np.outer(w[1:], w[1:]))
    rsmu, rsl = isd * m1, m2 - m0
    im, il = np.arange(k - 1, 2 * k - 1), np.arange(2 * k - 1, 3 * k - 1)
    h[:k - 1, im] += ew.T * rsmu
    h[:k - 1, il] += ew.T * rsl
    h[im, :k - 1] += ew * rsmu[:, None]
    h[il, :k - 1] += ew * rsl[:, None]
    # E_r[s sᵀ + ∇² ln f] per component: mu-mu z²/sd² - 1/sd², mu-lnsd (z³ - z)/sd - 2z/sd,
    # lnsd-lnsd (z² - 1)² - 2z².
    h[im, im] += isd * isd * (m2 - m0)
    cross = isd * (m3 - 3.0 * m1)
    h[im, il] += cross
    h[il, im] += cross
    h[il, il] += m4 - 4.0 * m2 + m0
    return ll, g, h


def _gmm_newton(x: NDArray, th: NDArray, k: int, max_evals: int, kernels: bool = True
                ) -> tuple[NDArray, float, int, bool]:
    """Damped Newton ascent from ``th`` (Newton parametrisation); (theta, ll, evals, ok).

    Where the likelihood is not locally concave (overlapping components sit on a ridge),
    the Hessian's eigenvalues are replaced by their magnitudes (floored): every step is
    then an ascent direction, and the backtracking keeps only steps that gain. ``ok`` is
    False when a step runs into the sd floor (a collapsing component: EM's floor handles
    that). ``kernels``: the same loop in C where it is built (eigenvectors by Jacobi
    rotations instead of LAPACK's), this numpy loop otherwise.
    """
    if kernels and _kernels is not None:
        th = np.array(th, dtype=float)  # updated in place by the kernel: not the caller's
        ll, evals, ok = _kernels.gmm_newton(x, th, k, max_evals, _LN_SD_MIN)
        return th, ll, evals, bool(ok)
    ll, g, h = _gmm_newton_terms_numpy(x, th, k)
    evals = 1
    while evals < max_evals:
        lam, vec = np.linalg.eigh(-h)
        if not np.all(np.isfinite(lam)):
            return th, ll, evals, False
        mag = np.maximum(np.abs(lam), 1e-8 * max(float(np.abs(lam).max()), 1e-300))
        d = vec @ ((vec.T @ g) / mag)
        if float(g @ d) < 1e-7:  # twice the predicted gain: converged
            return th, ll, evals, True
        d *= min(1.0, 1.0 / float(np.abs(d).max()))  # at most 1 in any coordinate
        t = 1.0
        while evals < max_evals and t > 1e-3:
            cand = th + t * d
            if float(cand[2 * k - 1:].min()) >= _LN_SD_MIN:
                ll2, g2, h2 = _gmm_newton_terms_numpy(x, cand, k)
                evals += 1
                if np.isfinite(ll2) and ll2 >= ll:
                    break
            elif t < 0.5:
                return th, ll, evals, False
            t /= 2
        else:
            return th, ll, evals, True  # no step gains: at the optimum to round-off
        th, ll, g, h = cand, ll2, g2, h2
    return th, ll, evals, True


def _gmm_em_numpy(lr: NDArray, k: int) -> tuple[Step, Callable[[NDArray], float]]:
    """The mixture's EM step and log-likelihood in numpy (th = ln weights up to a constant,
    means, ln sds): the reference :func:`_gmm_em_kernel` is held to.

    Arrays are laid out (component, sample): the per-sample max and sum over 2-3 components
    are then row-wise ufuncs and the per-component sums contiguous. Two (k, n) work arrays
    are updated in place: at n ~ 1,000 each step is dominated by per-call overhead, which
    the kernel avoids by doing each step in one pass.
    """
    n = len(lr)
    x = lr[None, :]
    lp = np.empty((k, n))
    tmp = np.empty((k, n))

    def e_step(th: NDArray) -> float:
        """Responsibilities (left in ``lp``) and the log-likelihood at ``th``."""
        lw = th[:k] - np.logaddexp.reduce(th[:k])
        mu, lsd = th[k:2 * k], th[2 * k:]
        isd = np.exp(-lsd)
        np.multiply(x, isd[:, None], out=lp)
        np.subtract(lp, (mu * isd)[:, None], out=lp)
        np.multiply(lp, lp, out=lp)
        np.multiply(lp, -0.5, out=lp)
        np.add(lp, (lw - lsd - _HALF_LOG_2PI)[:, None], out=lp)
        mx = lp.max(axis=0)
        np.subtract(lp, mx, out=lp)
        np.exp(lp, out=lp)
        tot = lp.sum(axis=0)
        np.divide(lp, tot, out=lp)
        return float(np.log(tot).sum() + mx.sum())

    def step(th: NDArray) -> tuple[NDArray, float]:
        ll = e_step(th)
        nk = lp.sum(axis=1) + 1e-12
        mu = (lp @ lr) / nk
        np.subtract(x, mu[:, None], out=tmp)
        np.multiply(tmp, tmp, out=tmp)
        np.multiply(tmp, lp, out=tmp)
        sd = np.maximum(np.sqrt(tmp.sum(axis=1) / nk), 1e-4)
        return np.concatenate([np.log(nk / n), mu, np.log(sd)]), ll

    return step, e_step


def _gmm_em_kernel(lr: NDArray, k: int) -> tuple[Step, Callable[[NDArray], float]]:
    """:func:`_gmm_em_numpy`'s EM step and log-likelihood in the compiled kernel."""
    assert _kernels is not None
    em = _kernels.gmm_em_step

    def step(th: NDArray) -> tuple[NDArray, float]:
        out = np.empty(3 * k)
        return out, em(lr, th, k, out)

    def e_step(th: NDArray) -> float:
        return em(lr, th, k, np.empty(3 * k))

    return step, e_step


def _em_gmm(lr: NDArray, k: int, iters: int = 80, kernels: bool = True
            ) -> tuple[NDArray, NDArray, NDArray, float]:
    """1-D Gaussian mixture by maximum likelihood, started from quantiles (deterministic).

    EM (accelerated, :mod:`kit.model.squarem`) brings the parameters into the basin of a
    maximum; Newton's method with the exact Hessian then converges there in a few steps.
    EM alone creeps where components overlap: stopped when a step gained less than
    1e-5·n, 26 of one taurus fit's 50 mixtures were more than 1 log-likelihood unit short
    of the maximum (worst 53; a component's weight 0.47 where the maximum has 0.09), which
    decides between noise families. ``iters`` bounds EM and Newton evaluations together;
    if a Newton step runs into the sd floor (a component collapsing onto a few samples),
    EM, whose M-step clips at the floor, continues from Newton's last point. ``kernels``:
    the compiled EM step and Newton loop where they are built, numpy otherwise.
    """
    lr = np.ascontiguousarray(lr, dtype=float)
    n = len(lr)
    make = _gmm_em_kernel if kernels and _kernels is not None else _gmm_em_numpy
    step, e_step = make(lr, k)
    mu0 = quantile(lr, (np.arange(k) + 0.5) / k)
    sd0 = max(float(np.std(lr)) / k, 1e-4)
    theta = np.concatenate([np.full(k, -np.log(k)), mu0, np.full(k, np.log(sd0))])
    theta, used = accelerate(step, theta, min(_EM_BEFORE_NEWTON, iters), 1e-5 * n)
    if used < iters:
        lw = theta[:k] - np.logaddexp.reduce(theta[:k])
        start = np.concatenate([lw[1:] - lw[0], theta[k:]])
        with np.errstate(all="ignore"):  # a far trial step may overflow: it is rejected
            polished, _, spent, ok = _gmm_newton(lr, start, k, iters - used, kernels)
        used += spent
        theta = np.concatenate([[0.0], polished[:k - 1], polished[k - 1:]])
        if not ok and used < iters:  # a component collapsing: EM's sd floor takes over
            theta, _ = accelerate(step, theta, iters - used, 1e-5 * n)
    ll = e_step(theta)
    w = np.exp(theta[:k] - np.logaddexp.reduce(theta[:k]))
    return w, theta[k:2 * k].copy(), np.maximum(np.exp(theta[2 * k:]), 1e-4), ll


def _fit_gmm(lr: NDArray, max_k: int = 3) -> tuple[dict, float, int] | None:
    """Gaussian mixture (2-3 components) on ln r by BIC; returns params, loglik(r), n params.

    None below 20 samples: too few to tell two components from one.
    """
    best: tuple[float, dict, float, int] | None = None
    for k in range(2, max_k + 1):  # one component is the lognormal candidate
        if len(lr) < 10 * k:
            break
        w, mu, sd, ll = _em_gmm(lr, k)
        n_par = 3 * k - 1
        bic = -2 * ll + n_par * np.log(len(lr))
        params = {"weights": [float(v) for v in w], "means": [float(v) for v in mu],
                  "sds": [float(v) for v in sd]}
        if best is None or bic < best[0]:
            best = (bic, params, ll - float(np.sum(lr)), n_par)
    return None if best is None else (best[1], best[2], best[3])


def _gumbel_min_fit(y: NDArray) -> tuple[float, float]:
    """ML (location, scale) of a minimum-Gumbel law (scipy's ``gumbel_l``) for ``y``.

    The scale solves beta + mean(y) - sum(w·y) = 0 with w = softmax(y / beta) (the
    location is then beta·ln(mean(exp(y / beta)))); Newton on beta, whose derivative is
    1 + var_w(y) / beta², converges in a few steps from the moment estimate.
    """
    ybar = float(np.mean(y))
    beta = max(float(np.std(y)) * np.sqrt(6.0) / np.pi, 1e-12)
    ymax = float(np.max(y))
    for _ in range(100):
        e = np.exp((y - ymax) / beta)
        w = e / e.sum()
        m1 = float(np.dot(w, y))
        var = max(float(np.dot(w, (y - m1) ** 2)), 0.0)
        g = beta + ybar - m1
        new = beta - g / (1.0 + var / (beta * beta))
        if new <= 0:
            new = beta / 2
        done = abs(new - beta) <= 1e-12 * beta
        beta = new
        if done:
            break
    e = np.exp((y - ymax) / beta)
    return ymax + beta * float(np.log(np.mean(e))), beta


def _logistic_fit(y: NDArray) -> tuple[float, float]:
    """ML (location, scale) of a logistic law for ``y``: 2-D Newton on the score equations
    sum(tanh(z/2)) = 0 and sum(z·tanh(z/2)) = n, z = (y - loc) / scale."""
    n = len(y)
    mu = float(np.median(y))
    s = max(float(np.std(y)) * np.sqrt(3.0) / np.pi, 1e-12)
    for _ in range(100):
        z = (y - mu) / s
        t = np.tanh(z / 2)
        d = 0.5 * (1 - t * t)
        f1, f2 = float(t.sum()), float(np.dot(z, t)) - n
        a = d.sum()
        b = float(np.dot(d, z))
        u = t + z * d
        c = float(u.sum())
        e = float(np.dot(u, z))
        # Jacobian of (f1, f2) in (mu, s): -[[a, b], [c, e]] / s
        det = a * e - b * c
        if not np.isfinite(det) or det == 0:
            break
        dmu = s * (e * f1 - b * f2) / det
        ds = s * (a * f2 - c * f1) / det
        step = 1.0
        while s + step * ds <= 0:
            step /= 2
        mu, s_new = mu + step * dmu, s + step * ds
        done = abs(step * dmu) <= 1e-12 * s and abs(s_new - s) <= 1e-12 * s
        s = s_new
        if done:
            break
    return mu, s


#: Families whose ln r follows a two-parameter location-scale law with a direct ML fit:
#: Weibull (ln r is a minimum Gumbel with location ln scale and scale 1/c) and
#: log-logistic (ln r is logistic). The maximum-likelihood estimate is the same in either
#: parametrisation (the Jacobian of ln does not depend on the parameters); Newton on the
#: score equations takes 0.35-0.5 ms at 2,500 samples where scipy's ``fit`` of the same
#: laws takes 1.1-1.5 ms (and the generic Nelder-Mead on r 15-40 ms), same optimum.
_LOG_LOCATION_SCALE = {"weibull": _gumbel_min_fit, "fisk": _logistic_fit}


def _brentq(f: Callable[[float], float], xa: float, xb: float, xtol: float = 2e-12,
            rtol: float = 4 * 2.220446049250313e-16, maxiter: int = 100) -> float:
    """scipy.optimize.brentq (its C loop, step for step, with its default tolerances and
    ``disp=False``): the root scipy's gamma ``fit`` returns, without importing
    scipy.optimize (~0.3 CPU-s) for one call. ValueError without a sign change, as scipy."""
    xpre, xcur = float(xa), float(xb)
    xblk = fblk = spre = scur = 0.0
    fpre, fcur = float(f(xpre)), float(f(xcur))
    if math.isnan(fpre) or math.isnan(fcur):
        raise ValueError("the function value is NaN")
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # interpolate
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # extrapolate
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry  # good short step
            else:
                spre = scur = sbis
        else:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = float(f(xcur))
        if math.isnan(fcur):
            raise ValueError("the function value is NaN")
    return xcur


def _gamma_fit(r: NDArray) -> tuple[float, ...]:
    """scipy's ``gamma.fit(r, floc=0)``: the shape solves ln a - digamma(a) = ln mean(r) -
    mean(ln r) (brentq inside +-40 % of the closed-form estimate), the scale is mean / a."""
    digamma = special.use_scipy().digamma
    if not np.isfinite(r).all():
        raise ValueError("The data contains non-finite values.")
    if np.any(r <= 0):
        raise ValueError("gamma data must be > 0")
    xbar = r.mean()
    s = np.log(xbar) - np.log(r).mean()
    aest = (3 - s + np.sqrt((s - 3)**2 + 24 * s)) / (12 * s)
    a = _brentq(lambda a: np.log(a) - digamma(a) - s, aest * (1 - 0.4), aest * (1 + 0.4))
    return (a, 0.0, xbar / a)


def _lognormal_fit(r: NDArray) -> tuple[float, ...] | None:
    """scipy's ``lognorm.fit(r, floc=0)``: the closed form (None where scipy would fall back
    to its generic optimiser: a zero shape)."""
    lndata = np.log(r - 0.0)
    scale = np.exp(lndata.mean())
    shape = np.sqrt(np.mean((lndata - np.log(scale))**2))
    return (shape, 0.0, scale) if shape > 0 and scale > 0 else None


def _invgauss_fit(r: NDArray) -> tuple[float, ...]:
    """scipy's ``invgauss.fit(r, floc=0)``: the closed form (Evans, Hastings and Peacock)."""
    data = r - 0.0
    fshape_n = np.mean(data)
    fscale = len(data) / (np.sum(data ** -1 - fshape_n ** -1))
    return (fshape_n / fscale, 0.0, fscale)


def _ml_fit(fam: str, r: NDArray) -> tuple[float, ...]:
    """scipy's ``dist.fit(r, floc=0)`` result tuple (shape, loc, scale) for ``fam``: its
    closed forms and root search written out (scipy.stats costs 0.6-0.9 CPU-s to import),
    scipy.stats itself only where scipy falls back to its generic optimiser."""
    found: tuple[float, ...] | None = None
    log_fit = _LOG_LOCATION_SCALE.get(fam)
    if log_fit is not None:
        with np.errstate(all="ignore"):
            loc, scale = log_fit(np.log(r))
        if np.isfinite(loc) and np.isfinite(scale) and scale > 0:
            return (1.0 / float(scale), 0.0, float(np.exp(loc)))
    elif fam == "gamma":
        found = _gamma_fit(r)
    elif fam == "lognormal":
        found = _lognormal_fit(r)
    elif fam == "invgauss":
        found = _invgauss_fit(r)
    if found is not None:
        return found
    from scipy import stats

    dist = {"lognormal": stats.lognorm, "weibull": stats.weibull_min, "fisk": stats.fisk}[fam]
    return tuple(dist.fit(r, floc=0.0))


#: Mixture EMs already run on the same ratios (see :mod:`kit.model.memo`).
_GMM_FITS = ContentMemo()


def fit_noise(ratio: NDArray, rng: np.random.Generator,
              families: tuple[str, ...] = NOISE_FAMILIES) -> Noise:
    """Fit every candidate family to ``ratio`` (> 0) by ML and keep the lowest AIC."""
    special.use_scipy()  # a fit computes with scipy.special's functions, always
    r = np.asarray(ratio, dtype=float)
    r = r[np.isfinite(r) & (r > 0)]
    n_all = len(r)
    # The families are fitted to a subsample; the empirical quantiles reported are those
    # of every ratio (the bootstrap's intervals are on these, at the spread of all n).
    r_all = r
    if n_all > MAX_NOISE_SAMPLES:
        r = rng.choice(r, MAX_NOISE_SAMPLES, replace=False)
    if len(r) < 3 or np.ptp(np.log(r)) < 1e-9:
        # Too few or identical samples: a near-degenerate lognormal keeps sampling defined.
        med = float(np.median(r)) if len(r) else 1.0
        sd = float(np.std(np.log(r))) if len(r) > 1 else 0.0
        noise = Noise("lognormal", {"s": max(sd, 1e-6), "scale": med}, {}, {}, n_all)
        noise.quantiles = _quantile_report(
            r_all, np.asarray(noise.ppf(_REPORT_LEVELS), dtype=float).reshape(-1))
        return noise
    fits: dict[str, tuple[float, dict[str, Any]]] = {}
    for fam in families:
        try:
            if fam == "gmm":
                # EM is the slowest candidate; half the samples pin 2-3 components well.
                sub = r[: MAX_NOISE_SAMPLES // 2]
                lr = np.log(sub)
                gmm = _GMM_FITS.call(_fit_gmm, lr)
                if gmm is None:
                    continue
                params, _, k = gmm
                ll = float(np.sum(Noise("gmm", params).logpdf(r)))
            else:
                shapes = _FAMILIES[fam].shapes
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fitted = _ml_fit(fam, r)
                params = dict(zip(shapes, map(float, fitted[:-2]), strict=True))
                params["scale"] = float(fitted[-1])
                # loc is 0: the values of dist.logpdf(r, *fitted), without its argument parsing
                ll = float(np.sum(Noise(fam, params)._scipy(r, "logpdf")[0]))
                k = len(shapes) + 1
        except (ValueError, RuntimeError, FloatingPointError):
            continue
        if np.isfinite(ll):
            fits[fam] = (2 * k - 2 * ll, params)
    if not fits:
        fits["lognormal"] = (np.inf, {"s": float(np.std(np.log(r))), "scale": float(np.median(r))})
    fits = _physical(fits)
    best = _choose(fits, r)
    noise = Noise(best, fits[best][1], {f: float(v[0]) for f, v in fits.items()}, {}, n_all)
    # One quantile call serves the anchoring and the report: anchoring scales every
    # quantile by the same factor.
    q = np.asarray(noise.ppf(_REPORT_LEVELS), dtype=float).reshape(-1)
    # Anchored to the median of every ratio: a subsample's would be 0.25 % off at 2,500
    # (sigma 0.1), and the per-size layer passes that error on to the within-size noise.
    factor = _anchor_median(noise, median(r_all, overwrite_input=r_all is not r), float(q[0]))
    noise.quantiles = partial(_quantile_report, r_all, q * factor)
    return noise


def _physical(fits: dict[str, tuple[float, dict[str, Any]]]
              ) -> dict[str, tuple[float, dict[str, Any]]]:
    """The candidates every model reader accepts (kit.model.schema.noise_ratios, anchored
    to the median as the fit will be), or all of them when none is.

    A bimodal sample (a 5 us body, 30 % scheduler hiccups 2,000x slower) made a Weibull
    of shape ~0.1 win on AIC, with p0.1 at 3e-11 of its median: a model then refused by
    its own reader."""
    from kit.model.schema import noise_ratios

    ok = {fam: fit for fam, fit in fits.items()
          if noise_ratios(Noise(fam, fit[1]), anchored=True)[1]}
    return ok or fits


#: Samples from which the tails (p95, p99) also decide the family.
MIN_TAIL_SAMPLES = 200
#: Largest relative error of the fitted p95 and p99 (after median anchoring) accepted.
TAIL_TOLERANCE = 0.15


def _choose(fits: dict[str, tuple[float, dict[str, Any]]], r: NDArray) -> str:
    """Lowest AIC, but with enough samples only among families whose p95 and p99 are right.

    AIC is dominated by the body of the distribution: with a few percent of slow samples a
    family can win on AIC and put the p95 at a fifth of the data's, which is what a
    simulation then gets wrong. From ``MIN_TAIL_SAMPLES`` on, the lowest-AIC family whose
    anchored p95 and p99 are within ``TAIL_TOLERANCE`` of the empirical ones is chosen;
    if none is, the one with the smallest tail error.
    """
    by_aic = sorted(fits, key=lambda f: fits[f][0])
    if len(r) < MIN_TAIL_SAMPLES or len(by_aic) == 1:
        return by_aic[0]
    emp = quantile(r, [0.95, 0.99])
    med = median(r)
    errors: dict[str, float] = {}
    for fam in by_aic:
        cand = Noise(fam, dict(fits[fam][1]))
        try:
            # Anchoring scales every quantile by the same factor (every family's ratio
            # scales with its scale, the mixture's ln r shifts): one ppf call serves both.
            q = np.asarray(cand.ppf(np.array([0.5, 0.95, 0.99])), dtype=float)
        except (ValueError, FloatingPointError):
            continue
        fitted = q[1:] * _anchor_factor(med, float(q[0]))
        err = float(np.max(np.abs(fitted - emp) / emp))
        errors[fam] = err if np.isfinite(err) else np.inf
        if errors[fam] <= TAIL_TOLERANCE:
            return fam
    return min(errors, key=lambda f: errors[f]) if errors else by_aic[0]


def _anchor_factor(target: float, median: float) -> float:
    """The factor that moves a fitted ``median`` onto ``target`` (1 where it is undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = target / median
    return float(factor) if np.isfinite(factor) and factor > 0 else 1.0


def _anchor_median(noise: Noise, target: float, median: float | None = None) -> float:
    """Rescale so the fitted median equals the empirical one; returns the factor applied.

    The ML fit matches the shape; a misfit of a few percent at the median would show up as
    a few percent error in every predicted median, the number users read first, so the
    scale (a shift of ln r for the Gaussian mixture) is pinned to the sample median.
    ``median``: the fitted median, when the caller has it already.
    """
    factor = _anchor_factor(target, noise.median() if median is None else median)
    if factor == 1.0:
        return 1.0
    if noise.family == "gmm":
        noise.params["means"] = [m + float(np.log(factor)) for m in noise.params["means"]]
    else:
        noise.params["scale"] = noise.params["scale"] * factor
    return float(factor)


#: The levels of a noise's quantile report (p50, p95, p99).
_REPORT_LEVELS = np.array([0.5, 0.95, 0.99])


def _quantile_report(r: NDArray, fitted: NDArray) -> dict[str, dict[str, float]]:
    """Fitted vs empirical p50/p95/p99 of the ratio: the tail check a reader wants first.
    ``fitted``: the noise's quantiles at those levels. Takes no noise: a pending report
    (see :class:`_ReportOnRead`) must not keep its noise alive in a reference cycle."""
    emp = quantile(r, _REPORT_LEVELS) if len(r) else np.full(3, np.nan)
    return {name: {"fitted": float(f), "empirical": float(e)}
            for name, f, e in zip(("p50", "p95", "p99"), fitted, emp, strict=True)}
