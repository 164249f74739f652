"""Two-band regimes: EM on raw samples with a logistic share in ln size.

On Ethernet clusters, small and medium messages fall into a fast and a slow band a few
times apart, and the slow band's share grows with size, so the per-size median jumps
between bands and no single curve + noise describes the data. Here each band is a power
curve in size with Gaussian scatter in ln time, and the slow band's share is
logistic(c0 + c1·ln s); EM fits all of it on (a subsample of) the regime's raw samples.
The mixture is kept only if BIC prefers it to the regime's own curve × noise (whose
noise may itself be a Gaussian mixture on the log ratio, i.e. bands with a size-independent
share) *and* the bands are genuinely separate (Ashman's D > 2, each band >= 3 % of samples,
medians >= 1.5x apart): a heavy tail is the noise model's job, not a second band's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kit.model.kernels import KERNELS as _kernels  # the band E-step's pass over samples
from kit.model.memo import ContentMemo
from kit.model.order_stats import median, quantile
from kit.model.special import expit
from kit.model.squarem import accelerate

MAX_EM_SAMPLES = 8000
#: Samples a *quick* fit's band EM sees (the merge pass's candidates, which decide merges
#: only; the regimes that survive are refitted on MAX_EM_SAMPLES), as many as a noise fit.
MAX_QUICK_EM_SAMPLES = 2500
#: Precision (1 / sd^2) of a zero-mean Gaussian prior on the share's slope in ln size. Where
#: a regime holds a boundary rather than two bands, the likelihood keeps rising as the share
#: sharpens into a step, and EM walks that flat ridge for 90-130 evaluations (c1 at 90-270,
#: the share going 0.1 -> 0.9 within 2-5 % of size) to a fit the coexistence test rejects.
#: An sd of 10 lets the share go 0.1 -> 0.9 within a factor 1.55 of size at one sd, and
#: moves the slopes of genuine bands (|c1| < 5) by less than their standard error.
SLOPE_PRECISION = 1.0 / 10.0**2
MIN_BAND_SHARE = 0.03
MIN_SEPARATION = np.log(1.5)
MIN_ASHMAN_D = 2.0
#: Fewest samples (fraction) at sizes where both bands hold 10-90 %.
MIN_COEXIST = 0.25


@dataclass
class BandFit:
    lines: NDArray  # (2, 2): [intercept, slope] of ln t on ln s, fast band first
    sigmas: NDArray  # (2,)
    weight: NDArray  # [c0, c1]: share of the slow band = expit(c0 + c1 ln s)
    resp: NDArray  # responsibility of the slow band per sample
    loglik: float


def logistic_step(x: NDArray, r: NDArray, c: NDArray, steps: int = 3,
                  n: NDArray | None = None, slope_precision: float = 1e-6) -> NDArray:
    """Newton steps of logistic regression on soft targets r (tiny ridge keeps it finite).

    The 2x2 gradient and Hessian are formed from dot products and solved in closed form:
    the same Newton step as ``np.linalg.solve`` on the stacked design matrix, without
    building it (this runs three times per EM iteration). With ``n`` given, each ``x`` is a
    group of ``n`` samples and ``r`` the sum of their targets: the same step, computed once
    per distinct size instead of once per sample. ``slope_precision`` is that of a Gaussian
    prior on ``c[1]`` (the default is the tiny ridge).
    """
    c = np.asarray(c, dtype=float)
    x2 = x * x
    for _ in range(steps):
        p = expit(c[0] + c[1] * x)
        if n is None:
            e = p - r
            v = p * (1 - p)
        else:
            e = n * p - r
            v = n * p * (1 - p)
        g0 = float(e.sum()) + 1e-6 * c[0]
        g1 = float(np.dot(x, e)) + slope_precision * c[1]
        h00 = float(v.sum()) + 1e-6
        h01 = float(np.dot(v, x))
        h11 = float(np.dot(v, x2)) + slope_precision
        det = h00 * h11 - h01 * h01
        if not (np.isfinite(det) and det > 0):  # let numpy say what is wrong
            step = np.linalg.solve(np.array([[h00, h01], [h01, h11]]), np.array([g0, g1]))
        else:
            step = np.array([(h11 * g0 - h01 * g1) / det, (h00 * g1 - h01 * g0) / det])
        c = c - step
    return c


def _group_line(xu: NDArray, w: NDArray, wy: NDArray) -> NDArray:
    """Weighted line of y on x from per-group sums: ``w`` (weights) and ``wy`` (weighted y)
    at the distinct ``xu`` (with unit weights and ``wy = y``, the plain line of samples)."""
    sw = float(w.sum())
    if sw <= 0 or len(xu) < 2:
        return np.array([float(wy.sum()) / max(sw, 1e-300), 0.0])
    mx, my = float(np.dot(w, xu)) / sw, float(wy.sum()) / sw
    dx = xu - mx
    vxx = float(np.dot(w * dx, dx))
    b = float(np.dot(dx, wy - w * my)) / vxx if vxx > 1e-12 else 0.0
    return np.array([my - b * mx, b])


_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def fit_bands(x: NDArray, y: NDArray, iters: int = 150, kernels: bool = True
              ) -> BandFit | None:
    """EM for two bands; ``x`` = ln size, ``y`` = ln time. None when EM cannot start.

    Everything that depends on the size alone (the share, the band lines, the M-step's
    weighted sums) is computed once per distinct size from per-size sums of the
    responsibilities: repetitions of a size make the per-sample work a few gathers and
    three per-size sums per iteration, the rest scales with the number of sizes. The EM is
    accelerated (:mod:`kit.model.squarem`): ``iters`` bounds the EM evaluations. 60 was
    too few: on taurus's 54 band EMs, 4 stopped at that bound 1.8-41 log-likelihood units
    short of the maximum (which the band/no-band decision compares); none needs 150.
    The per-sample pass of each E-step (responsibilities and their per-size sums) and the
    M-step from the per-size sums run in the compiled kernels where they are built
    (``kernels``), in numpy otherwise.
    """
    if len(x) < 50:
        return None
    # float64 and contiguous: every array derived below is then one the kernels take as is
    x, y = np.ascontiguousarray(x, dtype=float), np.ascontiguousarray(y, dtype=float)
    base = _group_line(x, np.ones_like(x), y)
    e = y - (base[0] + base[1] * x)
    lo, hi = quantile(e, [0.25, 0.85])
    if hi - lo < 1e-9:
        return None
    # y is centred (its sums of squares then keep their precision); intercepts shift back.
    y0 = float(np.mean(y))
    yc = y - y0
    yc2 = yc * yc
    xu, inv, cnt_i = np.unique(x, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    g = len(xu)
    # Per-size values to per-sample and per-sample values to per-size sums: a repeat and
    # a reduceat when the samples come sorted by size (as regimes hand them over), several
    # times cheaper than the general gather and bincount (which checks its indices anew
    # on every call: three bincounts cost more than the rest of an M-step).
    if bool(np.all(inv[1:] >= inv[:-1])):
        starts = np.r_[0, np.cumsum(cnt_i)[:-1]]

        def spread(v: NDArray) -> NDArray:
            return np.repeat(v, cnt_i)

        def per_size(v: NDArray) -> NDArray:
            return np.add.reduceat(v, starts)
    else:
        def spread(v: NDArray) -> NDArray:
            return v[inv]

        def per_size(v: NDArray) -> NDArray:
            return np.bincount(inv, v, minlength=g)
    cnt = cnt_i.astype(float)
    sy = per_size(yc)
    syy = per_size(yc2)
    xm = float(np.mean(x))
    xu_c = xu - xm  # centred for a well-conditioned logistic fit

    kern = _kernels if kernels else None  # the compiled E- and M-step, where built
    inv = np.ascontiguousarray(inv, dtype=np.int64)

    def e_step(th: NDArray) -> tuple[NDArray, float, tuple[NDArray, NDArray, NDArray]]:
        """Responsibilities of the slow band, the log-likelihood at ``th`` and the per-size
        sums of r, r·y and r·y² (centred y)."""
        if kern is not None:  # the lines below and the pass over samples, in C
            beta, gam = np.empty(g), np.empty(g)
            sum_l0, quad = kern.band_size_terms(np.ascontiguousarray(th, dtype=float), xu, xu_c,
                                                cnt, sy, syy, beta, gam)
            r, rs, ry, ryy = np.empty(len(yc)), np.empty(g), np.empty(g), np.empty(g)
            sp = kern.band_e_step(yc, inv, beta, gam, quad, r, rs, ry, ryy)
            return r, sum_l0 + sp, (rs, ry, ryy)
        ls0, ls1 = float(th[4]), float(th[5])
        w1 = np.clip(expit(th[6] + th[7] * xu_c), 1e-12, 1 - 1e-12)
        mu0 = th[0] + th[1] * xu
        mu1 = th[2] + th[3] * xu
        p0, p1 = float(np.exp(-2.0 * ls0)), float(np.exp(-2.0 * ls1))
        a0 = np.log1p(-w1) - ls0 - _HALF_LOG_2PI
        a1 = np.log(w1) - ls1 - _HALF_LOG_2PI
        # l1 - l0 is a quadratic in y whose coefficients depend on the size only; the
        # log-likelihood is sum(l0) (per-size sums) + sum(softplus(l1 - l0)).
        beta = mu1 * p1 - mu0 * p0
        gam = (a1 - a0) - 0.5 * (mu1 * mu1 * p1 - mu0 * mu0 * p0)
        sum_l0 = float(np.dot(cnt, a0)) - 0.5 * p0 * float(
            np.sum(syy - 2.0 * mu0 * sy + mu0 * mu0 * cnt))
        d = (-0.5 * (p1 - p0)) * yc2
        d += spread(beta) * yc
        d += spread(gam)
        # softplus(d) = d - ln expit(d): one log instead of logaddexp's exp and log1p.
        # Below -700 both terms are ~0 (and expit would underflow to 0 near -745).
        np.maximum(d, -700.0, out=d)
        r = expit(d)
        return (r, sum_l0 + float(d.sum()) - float(np.log(r).sum()),
                (per_size(r), per_size(r * yc), per_size(r * yc2)))

    def step(th: NDArray) -> tuple[NDArray, float]:
        _, ll, (rs, ry, ryy) = e_step(th)
        out = np.empty(8)
        prior = 0.5 * SLOPE_PRECISION * float(th[7]) ** 2
        if kern is not None and kern.band_m_step(xu, xu_c, cnt, sy, syy, rs, ry, ryy,
                                                 float(th[6]), float(th[7]), SLOPE_PRECISION,
                                                 out):
            return out, ll - prior
        for k, (w, wy, wyy) in enumerate(((cnt - rs, sy - ry, syy - ryy), (rs, ry, ryy))):
            line = _group_line(xu, w, wy)
            out[2 * k:2 * k + 2] = line
            mu = line[0] + line[1] * xu
            # sum of w·(y - mu)^2 from the per-size sums
            ss = float(np.sum(wyy - 2.0 * mu * wy + mu * mu * w))
            out[4 + k] = np.log(max(float(np.sqrt(max(ss, 0.0) / max(float(w.sum()), 1e-12))),
                                    1e-3))
        out[6:8] = logistic_step(xu_c, rs, th[6:8], n=cnt, slope_precision=SLOPE_PRECISION)
        # EM climbs the posterior: the slope's prior joins the likelihood it monitors.
        return out, ll - prior

    # Parameters: both lines (centred y), ln sigma of each band (an extrapolated step
    # cannot make a sigma negative) and the share's logistic coefficients (centred x).
    ls = np.log(max(float(np.std(e)) / 2, 1e-3))
    theta0 = np.array([base[0] - y0 + lo, base[1], base[0] - y0 + hi, base[1], ls, ls, 0.0, 0.0])
    theta, _ = accelerate(step, theta0, iters, 1e-6 * len(x))
    # The likelihood without the prior: BIC compares it with the single curve's.
    r, ll, _ = e_step(theta)  # the density of y is that of yc: centring shifts, not scales
    lines = theta[:4].reshape(2, 2).copy()
    lines[:, 0] += y0
    sig = np.maximum(np.exp(theta[4:6]), 1e-3)
    c = theta[6:8]
    weight = np.array([c[0] - c[1] * xm, c[1]])
    if lines[0, 0] + lines[0, 1] * xm > lines[1, 0] + lines[1, 1] * xm:  # keep fast band first
        lines, sig, r, weight = lines[::-1].copy(), sig[::-1].copy(), 1 - r, -weight
    return BandFit(lines, sig, weight, r, ll)


def assign_bands(fit: BandFit, x: NDArray, y: NDArray) -> NDArray:
    """Band (0 fast, 1 slow) of every sample by posterior (EM may have run on a subsample)."""
    w1 = np.clip(expit(fit.weight[0] + fit.weight[1] * x), 1e-12, 1 - 1e-12)
    # band by band, not as an (n, 2) array with argmax (a tenth of a fit at 1 M samples);
    # the same values, and argmax's choice: the first band on ties and NaN
    lp = [-0.5 * ((y - (fit.lines[k, 0] + fit.lines[k, 1] * x)) / fit.sigmas[k]) ** 2
          - np.log(fit.sigmas[k]) for k in range(2)]
    lp[0] += np.log1p(-w1)
    lp[1] += np.log(w1)
    return ((lp[1] > lp[0]) | (np.isnan(lp[1]) & ~np.isnan(lp[0]))).astype(np.intp)


#: Band EMs already run on the same samples (see :mod:`kit.model.memo`).
_BAND_FITS = ContentMemo()

#: Log-likelihood of ln time (and its parameter count) under the single-curve alternative.
Baseline = Callable[[NDArray, NDArray], tuple[float, int]]


def _share_design_effect(x: NDArray, resp: NDArray) -> float:
    """Design effect of repeated sizes for the *band share*: 1 + (n̄ − 1)·rho with rho the
    share of the band-membership variance that is between sizes (beyond binomial noise).

    Which band a sample falls in is seen sample by sample, so what repetitions of a size
    share is only the size's own share; a location effect (which dominates the regime
    decisions' design effect) says nothing about that.
    """
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    if len(counts) < 5 or counts.max() < 2:
        return 1.0
    p = np.bincount(inv, resp) / counts
    pbar = float(np.mean(resp))
    within = pbar * (1 - pbar)
    if within <= 0:
        return 1.0
    tau2 = max(0.0, float(np.var(p)) - float(np.mean(within / counts)))
    rho = tau2 / (tau2 + within)
    return 1.0 + (float(np.mean(counts)) - 1.0) * rho


def detect_bands(x: NDArray, y: NDArray, rng: np.random.Generator,
                 baseline: Baseline, deff: float = 1.0,
                 max_samples: int = MAX_EM_SAMPLES) -> BandFit | None:
    """A :class:`BandFit` if the samples hold two genuine bands, else None.

    ``deff`` (>= 1, the design effect of repeated sizes) divides the log-likelihoods and
    the sample count of the BIC: n samples of few sizes are worth n / deff independent ones.
    EM and BIC see at most ``max_samples`` of them (a random subsample).
    """
    if len(x) > max_samples:
        idx = np.sort(rng.choice(len(x), max_samples, replace=False))  # keep size order
        x, y = x[idx], y[idx]
    fit = _BAND_FITS.call(fit_bands, x, y)
    if fit is None:
        return None
    deff = min(max(float(deff), 1.0), _share_design_effect(x, fit.resp))
    n = max(len(x) / deff, 2.0)
    ll1, k1 = baseline(x, y)
    bic1 = -2 * ll1 / deff + k1 * np.log(n)
    bic2 = -2 * fit.loglik / deff + 8 * np.log(n)
    xm = median(x)
    mu = fit.lines[:, 0] + fit.lines[:, 1] * xm
    sep = float(mu[1] - mu[0])
    ashman = np.sqrt(2) * sep / float(np.sqrt(np.sum(fit.sigmas**2)))
    share1 = float(np.mean(fit.resp))
    # Bands coexist: a share that flips from ~0 to ~1 inside the regime is a boundary
    # between two regimes (the segmentation's job), not two bands.
    w1 = expit(fit.weight[0] + fit.weight[1] * x)
    coexist = float(np.mean((w1 > 0.1) & (w1 < 0.9)))
    # The margin (10 in per-sample units) is kept on that scale: 10 / deff in size units.
    ok = (bic2 < bic1 - 10 / deff and sep >= MIN_SEPARATION and ashman > MIN_ASHMAN_D
          and MIN_BAND_SHARE <= share1 <= 1 - MIN_BAND_SHARE and coexist >= MIN_COEXIST)
    return fit if ok else None
