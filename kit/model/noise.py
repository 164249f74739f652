"""Noise distributions of time / curve(size), fitted by maximum likelihood.

Communication times are strictly positive and right-skewed, and for small messages the
spread matters more than the median, so each regime gets a distribution of the *ratio*
r = time / curve(size) (median ~ 1). Candidates: lognormal, gamma, Weibull, inverse
Gaussian, log-logistic (scipy ``fisk``) and a Gaussian mixture on ln r (components by BIC,
for multi-modal noise). The winner is the lowest AIC; every candidate's AIC is kept so a
reader can see how close the runner-up was. The winner's scale is then pinned so that its
median equals the sample median (see :func:`_anchor_median`); AICs are those of the ML fits.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.special import logsumexp, ndtr

NOISE_FAMILIES: tuple[str, ...] = ("lognormal", "gamma", "weibull", "invgauss", "fisk", "gmm")

_SCIPY = {
    "lognormal": (stats.lognorm, ("s",)),
    "gamma": (stats.gamma, ("a",)),
    "weibull": (stats.weibull_min, ("c",)),
    "invgauss": (stats.invgauss, ("mu",)),
    "fisk": (stats.fisk, ("c",)),
}

#: Samples used for the likelihood fits; more adds time, not accuracy, for 5-parameter shapes.
MAX_NOISE_SAMPLES = 2500


@dataclass
class Noise:
    """A fitted ratio distribution. ``params`` use scipy's names (shape + ``scale``; loc is 0)."""

    family: str
    params: dict[str, Any]
    aic: dict[str, float] = field(default_factory=dict)
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)
    n: int = 0

    def _frozen(self) -> Any:
        dist, shapes = _SCIPY[self.family]
        return dist(*[self.params[k] for k in shapes], loc=0.0, scale=self.params["scale"])

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
            return np.sum(w * ndtr(z), axis=-1)
        return self._frozen().cdf(r)

    def logpdf(self, r: NDArray) -> NDArray:
        r = np.asarray(r, dtype=float)
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            lr = np.log(r)
            comp = stats.norm.logpdf(lr[..., None], mu, sd) + np.log(w)
            return logsumexp(comp, axis=-1) - lr
        return self._frozen().logpdf(r)

    def ppf(self, q: NDArray) -> NDArray:
        q = np.asarray(q, dtype=float)
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            lo = np.full(q.shape, float(np.min(mu - 12 * sd)))
            hi = np.full(q.shape, float(np.max(mu + 12 * sd)))
            for _ in range(60):  # bisection on ln r: monotone, vectorised, exact enough
                mid = (lo + hi) / 2
                below = np.sum(w * ndtr((mid[..., None] - mu) / sd), axis=-1) < q
                lo = np.where(below, mid, lo)
                hi = np.where(below, hi, mid)
            return np.exp((lo + hi) / 2)
        return self._frozen().ppf(q)

    def rvs(self, n: int | tuple[int, ...], rng: np.random.Generator) -> NDArray:
        if self.family == "gmm":
            w, mu, sd = self._gmm()
            k = rng.choice(len(w), size=n, p=w / w.sum())
            return np.exp(rng.normal(mu[k], sd[k]))
        return self._frozen().rvs(size=n, random_state=rng)

    def median(self) -> float:
        return float(self.ppf(np.array(0.5)))

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": self.params, "aic": self.aic,
                "quantiles": self.quantiles, "n": self.n}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Noise:
        aic = {k: float("inf") if v is None else float(v) for k, v in d.get("aic", {}).items()}
        return cls(family=d["family"], params=dict(d["params"]), aic=aic,
                   quantiles={k: dict(v) for k, v in d.get("quantiles", {}).items()},
                   n=int(d.get("n", 0)))


def _em_gmm(lr: NDArray, k: int, iters: int = 80) -> tuple[NDArray, NDArray, NDArray, float]:
    """1-D Gaussian mixture by EM, started from quantiles (deterministic, no sklearn overhead)."""
    mu = np.quantile(lr, (np.arange(k) + 0.5) / k)
    sd = np.full(k, max(float(np.std(lr)) / k, 1e-4))
    w = np.full(k, 1.0 / k)
    ll_old = -np.inf
    ll = -np.inf
    x = lr[:, None]
    for _ in range(iters):
        lp = -0.5 * ((x - mu) / sd) ** 2 + (np.log(w) - np.log(sd) - 0.5 * np.log(2 * np.pi))
        mx = lp.max(axis=1, keepdims=True)
        p = np.exp(lp - mx)
        tot = p.sum(axis=1, keepdims=True)
        ll = float(np.sum(np.log(tot) + mx))
        resp = p / tot
        nk = resp.sum(axis=0) + 1e-12
        w = nk / len(lr)
        mu = (resp * x).sum(axis=0) / nk
        sd = np.maximum(np.sqrt((resp * (x - mu) ** 2).sum(axis=0) / nk), 1e-4)
        if ll - ll_old < 1e-5 * len(lr):
            break
        ll_old = ll
    return w, mu, sd, ll


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


def fit_noise(ratio: NDArray, rng: np.random.Generator,
              families: tuple[str, ...] = NOISE_FAMILIES) -> Noise:
    """Fit every candidate family to ``ratio`` (> 0) by ML and keep the lowest AIC."""
    r = np.asarray(ratio, dtype=float)
    r = r[np.isfinite(r) & (r > 0)]
    n_all = len(r)
    if n_all > MAX_NOISE_SAMPLES:
        r = rng.choice(r, MAX_NOISE_SAMPLES, replace=False)
    if len(r) < 3 or np.ptp(np.log(r)) < 1e-9:
        # Too few or identical samples: a near-degenerate lognormal keeps sampling defined.
        med = float(np.median(r)) if len(r) else 1.0
        sd = float(np.std(np.log(r))) if len(r) > 1 else 0.0
        noise = Noise("lognormal", {"s": max(sd, 1e-6), "scale": med}, {}, {}, n_all)
        noise.quantiles = _quantile_report(noise, r)
        return noise
    fits: dict[str, tuple[float, dict[str, Any]]] = {}
    for fam in families:
        try:
            if fam == "gmm":
                # EM is the slowest candidate; half the samples pin 2-3 components well.
                sub = r[: MAX_NOISE_SAMPLES // 2]
                gmm = _fit_gmm(np.log(sub))
                if gmm is None:
                    continue
                params, _, k = gmm
                ll = float(np.sum(Noise("gmm", params).logpdf(r)))
            else:
                dist, shapes = _SCIPY[fam]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fitted = dist.fit(r, floc=0.0)
                params = dict(zip(shapes, map(float, fitted[:-2]), strict=True))
                params["scale"] = float(fitted[-1])
                ll = float(np.sum(dist.logpdf(r, *fitted)))
                k = len(shapes) + 1
        except (ValueError, RuntimeError, FloatingPointError):
            continue
        if np.isfinite(ll):
            fits[fam] = (2 * k - 2 * ll, params)
    if not fits:
        fits["lognormal"] = (np.inf, {"s": float(np.std(np.log(r))), "scale": float(np.median(r))})
    best = min(fits, key=lambda f: fits[f][0])
    noise = Noise(best, fits[best][1], {f: float(v[0]) for f, v in fits.items()}, {}, n_all)
    _anchor_median(noise, float(np.median(r)))
    noise.quantiles = _quantile_report(noise, r)
    return noise


def _anchor_median(noise: Noise, target: float) -> None:
    """Rescale so the fitted median equals the empirical one.

    The ML fit matches the shape; a misfit of a few percent at the median would show up as
    a few percent error in every predicted median, the number users read first, so the
    scale (a shift of ln r for the Gaussian mixture) is pinned to the sample median.
    """
    factor = target / noise.median()
    if not np.isfinite(factor) or factor <= 0:
        return
    if noise.family == "gmm":
        noise.params["means"] = [m + float(np.log(factor)) for m in noise.params["means"]]
    else:
        noise.params["scale"] = noise.params["scale"] * factor


def _quantile_report(noise: Noise, r: NDArray) -> dict[str, dict[str, float]]:
    """Fitted vs empirical p50/p95/p99 of the ratio: the tail check a reader wants first."""
    out = {}
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        emp = float(np.quantile(r, q)) if len(r) else float("nan")
        out[name] = {"fitted": float(noise.ppf(np.array(q))), "empirical": emp}
    return out
