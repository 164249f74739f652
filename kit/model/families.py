"""The three curve families a regime can follow, and their robust fits.

A regime's curve is the *median* time as a function of size: ``constant`` t = a,
``linear`` t = a + b·s (latency + size / bandwidth) and ``power`` t = a·s^b (slow start).
Fits work on per-size summaries (median time per size, weighted), never on raw samples,
because heavy-tailed noise must not drag the line and because summaries keep the fit cheap
for millions of samples. Residuals are taken in log time so that small and large
messages weigh the same relative error.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from kit.model.kernels import CURVES as _curves  # the linear curve's Huber fit
from kit.model.order_stats import median

FAMILIES: tuple[str, ...] = ("constant", "linear", "power")
N_PARAMS: dict[str, int] = {"constant": 1, "linear": 2, "power": 2}

Array = NDArray[np.float64]


def effective_size(size: NDArray) -> Array:
    """Sizes as floats with 0 evaluated as 1, so that log size and s^b stay finite."""
    return np.maximum(np.asarray(size, dtype=np.float64), 1.0)


def evaluate(family: str, params: dict[str, float], size: NDArray,
             ln_size: NDArray | None = None) -> Array:
    """The family's curve (seconds) at ``size`` (bytes). ``ln_size``: ln of
    ``effective_size(size)``, when the caller keeps it; a power curve is then
    a·exp(b·ln s), equal to a·s^b to rounding at an eighth of the cost (the bootstrap
    evaluates curves at 10^4-10^5 samples per resample)."""
    if family == "power" and ln_size is not None:
        out = np.multiply(ln_size, params["b"], dtype=np.float64)
        np.exp(out, out=out)
        out *= params["a"]
        return out
    s = effective_size(size)
    if family == "constant":
        return np.full_like(s, params["a"])
    if family == "linear":
        return params["a"] + params["b"] * s
    if family == "power":
        return params["a"] * s ** params["b"]
    raise ValueError(f"unknown family {family!r}")


def ln_evaluate(family: str, params: dict[str, float], size: NDArray,
                ln_size: NDArray | None = None) -> Array:
    """ln of the family's curve at ``size``; ``ln_size``: ln of ``effective_size(size)``,
    when the caller keeps it. A power curve is ln a + b ln s and a constant ln a, without a
    power and a log per size (the bootstrap's boundary search evaluates two curves at
    ~10^5 samples per resample)."""
    if family == "power":
        ls = np.log(effective_size(size)) if ln_size is None else ln_size
        out = np.multiply(ls, params["b"], dtype=np.float64)
        out += math.log(params["a"])  # b·ln s + ln a, in place
        return out
    if family == "constant":
        return np.full(len(size), math.log(params["a"]))
    return np.log(evaluate(family, params, size))


def _huber_scale(resid: Array) -> float:
    mad = median(np.abs(resid - median(resid))) * 1.4826
    return max(mad, 1e-3)


def _solve_small(a: Array, b: Array) -> Array:
    """np.linalg.solve for the 1x1 and 2x2 normal equations of the curve fits, in plain
    floats: LAPACK's LU with partial pivoting, the same operations (the same bits on the
    kernels tested), without its ~15 us of call overhead, which was a sixth of the
    bootstrap's curve refits. Raises LinAlgError where LAPACK does (a zero pivot)."""
    if a.shape == (1, 1):
        if a[0, 0] == 0.0:
            raise np.linalg.LinAlgError("singular matrix")
        return np.asarray(b / a[0, 0], dtype=np.float64)
    if a.shape != (2, 2):
        return np.asarray(np.linalg.solve(a, b), dtype=np.float64)
    (a11, a12), (a21, a22) = a.tolist()
    b1, b2 = b.tolist()
    if abs(a21) > abs(a11):
        a11, a12, a21, a22, b1, b2 = a21, a22, a11, a12, b2, b1
    if a11 == 0.0:
        raise np.linalg.LinAlgError("singular matrix")
    lower = a21 * (1.0 / a11)
    u22 = a22 - lower * a12
    if u22 == 0.0:
        raise np.linalg.LinAlgError("singular matrix")
    x2 = (b2 - lower * b1) / u22
    return np.array([(b1 - a12 * x2) / a11, x2])


def _huber_regression(design: Array, y: Array, sw: Array, f_scale: float, p0: Array,
                      max_iter: int = 100) -> Array:
    """Huber regression of ``y`` on ``design`` (residuals scaled by ``sw``, threshold
    ``f_scale``): scipy's ``least_squares(loss="huber")`` on a linear model.

    Newton's method on the loss's own pieces: the residuals inside the threshold count as
    squares, the others as straight lines of slope ``f_scale``, and the step solves that
    piecewise-quadratic problem for the current split. When the split is the same at the
    answer, the answer is the exact minimum (the gradient there is zero): one or two solves
    for 261 of 284 bootstrap refits, where IRLS took a median of eight, each as costly
    (IRLS's weights ``f_scale/|r|`` converge linearly). A step that raises the loss (the
    split moved far) or a split without an invertible curvature (too few residuals inside)
    hands over to IRLS from the best point so far.
    """
    p = np.asarray(p0, dtype=float)
    a = design * sw[:, None]
    b = y * sw
    r = a @ p - b
    cost = None  # the loss at p, needed only once a step changes the split
    for _ in range(max_iter):
        inside = np.abs(r) <= f_scale
        if np.count_nonzero(inside) < a.shape[1]:
            # fewer squares than parameters: the curvature is singular, and LU in floats
            # may not see it (a "solution" 10^12 away that keeps the split)
            break
        slope = np.where(inside, 0.0, np.copysign(f_scale, r))  # outside: the line's slope
        a_in = a * inside[:, None]
        try:
            new = _solve_small(a_in.T @ a, a_in.T @ b - a.T @ slope)
        except np.linalg.LinAlgError:
            break
        r_new = a @ new - b
        inside_new = np.abs(r_new) <= f_scale
        if np.array_equal(inside_new, inside) and np.array_equal(
                np.where(inside_new, 0.0, np.copysign(f_scale, r_new)), slope):
            return np.asarray(new, dtype=float)  # the same split: its minimum is the answer
        if cost is None:
            cost = _huber_cost(r, f_scale)
        cost_new = _huber_cost(r_new, f_scale)
        if not cost_new <= cost:
            break
        p, r, cost = new, r_new, cost_new
    return _huber_irls(design, y, sw, f_scale, p, max_iter)


def _huber_irls(design: Array, y: Array, sw: Array, f_scale: float, p0: Array,
                max_iter: int = 100) -> Array:
    """:func:`_huber_regression` by iteratively reweighted least squares: slower (linear
    convergence), but every step lowers the loss. Converged when the parameters move by
    less than 1e-10 (scipy's own tolerances are 1e-8)."""
    p = np.asarray(p0, dtype=float)
    a = design * sw[:, None]
    b = y * sw
    for _ in range(max_iter):
        r = np.abs(a @ p - b)
        wt = np.sqrt(np.where(r <= f_scale, 1.0, f_scale / np.maximum(r, 1e-300)))
        aw = a * (wt * wt)[:, None]
        new: Array
        try:  # normal equations of 1-2 parameters: no SVD needed
            new = _solve_small(aw.T @ a, aw.T @ b)
        except np.linalg.LinAlgError:
            new = np.asarray(np.linalg.lstsq(a * wt[:, None], b * wt, rcond=None)[0],
                             dtype=np.float64)
        if np.all(np.abs(new - p) <= 1e-10 * (1.0 + np.abs(p))):
            return np.asarray(new, dtype=float)
        p = new
    return p


def _weighted_line(x: Array, y: Array, w: Array) -> tuple[float, float]:
    """Slope and intercept of the weighted least-squares line (``np.polyfit(x, y, 1,
    w=sqrt(w))`` to rounding), from centred sums: polyfit's scaled SVD was a fifth of the
    bootstrap's power-curve refits, which use it only for a start and the Huber scale."""
    total = float(w.sum())
    xm, ym = float(w @ x) / total, float(w @ y) / total
    dx = x - xm
    slope = float((w * dx) @ (y - ym)) / float((w * dx) @ dx)
    return slope, ym - slope * xm


def _huber_cost(r: Array, f_scale: float) -> float:
    """scipy's Huber cost 0.5·c²·sum(rho((r/c)²)), rho(z) = z (z <= 1) or 2·sqrt(z) - 1."""
    a = np.abs(r)
    return float(np.sum(np.where(a <= f_scale, 0.5 * r * r, f_scale * a - 0.5 * f_scale**2)))


#: Lower bounds of the scaled linear parameters (latency > 0, bandwidth term >= 0).
_LINEAR_LO = np.array([1e-12, 0.0])


def _huber_linear(s: Array, y: Array, sw: Array, f_scale: float, p0: Array,
                  scale_a: float, scale_b: float, max_iter: int = 100) -> Array:
    """Huber fit of ln(a·scale_a + b·scale_b·s) to ``y`` with a >= 1e-12, b >= 0: the
    compiled loop (``_curve_kernels.c``, the same steps as :func:`_huber_linear_numpy`,
    without a dozen numpy calls per step on ~60 values), else that reference."""
    if _curves is None:
        return _huber_linear_numpy(s, y, sw, f_scale, p0, scale_a, scale_b, max_iter)
    s, y, sw = (np.ascontiguousarray(v, dtype=np.float64) for v in (s, y, sw))
    p0 = np.asarray(p0, dtype=np.float64)
    a, b, _ = _curves.huber_linear(s, y, sw, float(f_scale), float(p0[0]), float(p0[1]),
                                   float(scale_a), float(scale_b), int(max_iter))
    return np.array([a, b])


def _linear_resid(s: Array, y: Array, sw: Array, scale_a: float, scale_b: float
                  ) -> Callable[[Array], tuple[Array, Array]]:
    """q -> (sw·(ln f - y), f), f = q0·scale_a + q1·scale_b·s: the linear fit's residuals."""
    def resid(q: Array) -> tuple[Array, Array]:
        f = q[0] * scale_a + q[1] * scale_b * s
        return sw * (np.log(f) - y), f
    return resid


def _huber_linear_numpy(s: Array, y: Array, sw: Array, f_scale: float, p0: Array,
                        scale_a: float, scale_b: float, max_iter: int = 100) -> Array:
    """Huber fit of ln(a·scale_a + b·scale_b·s) to ``y`` with a >= 1e-12, b >= 0.

    Gauss-Newton with a halving line search and the bounds as an active set: the problem
    scipy's bounded ``least_squares(loss="huber")`` solves, without its trust-region
    machinery (~6 ms a call, the slowest curve fit). The curvature is the Huber loss's own
    (only residuals inside ``f_scale`` bend it). The IRLS weights ``f_scale/|r|`` on the
    others shorten every step and made convergence linear (a median of 11 and up to 43
    steps from the bootstrap's starts, against 3-4 now); their step is still taken where
    the Newton step had to be shortened (a bound, a change of which residuals are inside)
    and goes lower.
    """
    p = np.maximum(np.asarray(p0, dtype=float), _LINEAR_LO)
    resid = _linear_resid(s, y, sw, scale_a, scale_b)
    r, f = resid(p)
    cost = _huber_cost(r, f_scale)
    # residuals of 1e-14 in ln time (a fit exact to double precision) promise nothing more
    exact = _EXACT * len(s)
    stalled = False
    for _ in range(max_iter):
        jac = np.stack([scale_a / f, scale_b * s / f], axis=1) * sw[:, None]
        ar = np.abs(r)
        inside = ar <= f_scale
        wt = np.where(inside, 1.0, f_scale / np.maximum(ar, 1e-300))
        grad = jac.T @ (wt * r)
        if stalled:  # see _restart
            restart = _restart(p, grad, (jac * jac * wt[:, None]).sum(axis=0), cost,
                               lambda q: _huber_cost(resid(q)[0], f_scale))
            if restart is None:
                return p
            p, cost = restart
            r, f = resid(p)
            stalled = False
            continue
        free = ~((p <= _LINEAR_LO + 1e-15) & (grad > 0))  # at a bound, pushed outwards
        if not free.any():
            break
        jf = jac[:, free]
        steps: list[tuple[Array, float, float, float]] = []
        promised = -1.0  # no direction at all (a curvature without an inverse)
        for curv in (inside.astype(np.float64), wt):
            try:
                d_free = _solve_small(jf.T @ (jf * curv[:, None]), -grad[free])
            except np.linalg.LinAlgError:
                continue
            d = np.zeros(2)
            d[free] = d_free
            # What the full step promises: the Newton step's promise is the larger (its
            # curvature is the smaller), so when it is down to rounding, the fit is done;
            # the parameters may still drift along a flat valley, by steps that the
            # halving line search can only take by luck.
            promise = -float(grad @ d)
            if abs(promise) <= _ROUNDING * cost + exact and not steps:
                return p
            if not promise > 0:  # uphill: a near-singular curvature's rounding
                continue
            promised = max(promised, promise)
            step = _descend(p, d, cost, grad, lambda q: _huber_cost(resid(q)[0], f_scale))
            if step is not None:
                steps.append((*step, promise))
                if step[2] == 1.0:  # a full step: the quadratic model held
                    break
        if not steps:  # no direction lowers the cost
            if 0 <= promised <= _STALLED * cost + exact:
                return p  # converged: nothing left to gain but rounding
            stalled = True  # or no direction at all: the next iteration restarts
            continue
        trial, cost_new, t, promise = min(steps, key=lambda st: st[1])
        r_new, f_new = resid(trial)
        moved = np.abs(trial - p)
        # a step cut short by a bound moves little but is not convergence: the parameter
        # on the bound leaves the active set and the others move on
        bound = _hit_bound(p, trial)
        p, r, f, cost = trial, r_new, f_new, cost_new
        if not bound and np.all(moved <= 1e-10 * (1.0 + np.abs(p))):
            if t < 1.0 and promise > _STALLED * cost + exact:
                # Stalled, not converged: every direction's step had to shrink to almost
                # nothing (a parameter next to its bound heads for it, and the other's
                # share of the step is wrong without it). Rare (series of a few sizes, a
                # latency near zero): the next iteration restarts (_restart).
                stalled = True
                continue
            break
    return p


# _LINEAR_LO and these three are also in _curve_kernels.c: change them in both.
#: A cost change this small relative to the cost is the rounding of its sum.
_ROUNDING = 1e-14
#: A fit that cannot step although its step promises more than this (relative to the cost)
#: has stalled, not converged.
_STALLED = 1e-12
#: Cost per residual of a fit exact to double precision (residuals of 1e-14 in ln time).
_EXACT = 1e-28
_EPS = float(np.finfo(float).eps)


def _descend(p: Array, d: Array, cost: float, grad: Array, cost_of: Callable[[Array], float]
             ) -> tuple[Array, float, float] | None:
    """The first of p + d, p + d/2, .. (clipped to the bounds) that lowers the cost by at
    least 1e-4 of what the gradient promises (Armijo; changes within rounding pass), then
    halved again while that is lower; with its cost and step fraction. None when no step
    down to d/2^40 does."""
    t = 1.0
    slack = 8 * _EPS * abs(cost)
    while t >= 1e-12:
        trial = np.maximum(p + t * d, _LINEAR_LO)
        c = cost_of(trial)
        if np.isfinite(c) and c <= cost + min(1e-4 * float(grad @ (trial - p)), 0.0) + slack:
            # Past a kink of the loss (a residual crossing f_scale) the step overshoots:
            # full Newton steps hopped from side to side of it for 100 iterations, each
            # lowering the cost by a hair. Half the step, while that is lower.
            while t >= 1e-12:
                half = np.maximum(p + t / 2 * d, _LINEAR_LO)
                c_half = cost_of(half)
                if not c_half < c - slack:
                    break
                trial, c, t = half, c_half, t / 2
            return trial, c, t
        t *= 0.5
    return None


def _restart(p: Array, grad: Array, diag: Array, cost: float,
             cost_of: Callable[[Array], float]) -> tuple[Array, float] | None:
    """Where a stalled fit goes on from: ``p`` with the first parameter that the gradient
    pushes towards its bound put on it, where that lowers the cost; else the steepest descent
    step scaled by the curvature's diagonal ``diag`` (halved until it lowers the cost).
    None where neither lowers it: nothing left to gain.

    A fit stalls next to a bound (a latency near zero: the Newton step heads for the bound
    and the other parameter's share of it is wrong once the step is clipped there), and
    where no curvature has an inverse (every median at one size)."""
    for j in range(2):
        if p[j] > _LINEAR_LO[j] and grad[j] > 0:
            q = p.copy()
            q[j] = _LINEAR_LO[j]
            c = cost_of(q)
            if c < cost:
                return q, c
    d = np.where(diag > 0, -grad / np.where(diag > 0, diag, 1.0), 0.0)
    step = _descend(p, d, cost, grad, cost_of)
    if step is None or not step[1] < cost:
        return None
    return step[0], step[1]


def _hit_bound(p: Array, trial: Array) -> bool:
    """Whether the step to ``trial`` put a parameter on its bound that was not on it."""
    return bool(np.any((trial <= _LINEAR_LO) & (p > _LINEAR_LO)))


def fit_family(family: str, s: Array, m: Array, w: Array,
               start: dict[str, float] | None = None) -> tuple[dict[str, float], float]:
    """Robust weighted fit of ``family`` to medians ``m`` at sizes ``s``.

    Returns the parameters and the weighted sum of squared log residuals (for AIC).
    A Huber loss on log residuals keeps a few odd sizes (e.g. a size that fell in a
    slow band) from pulling the curve. Linear keeps a, b >= 0: negative latency or
    bandwidth has no physical meaning and would make the curve cross zero.
    ``start``: parameters near the answer (the bootstrap's fit of the full data) to start
    the iterations from; the loss, and so the answer, stays the same.
    """
    s = effective_size(s)
    y = np.log(m)
    sw = np.sqrt(w / w.mean())
    if family == "constant":
        # Huber location of log medians, the same loss as the other families so that their
        # AICs compare like with like.
        y0 = float(np.average(y, weights=w))
        f_scale = _huber_scale(y - y0)
        one = np.ones((len(y), 1))
        p0 = np.array([np.log(start["a"]) if start else y0])
        params = {"a": float(np.exp(_huber_regression(one, y, sw, f_scale, p0)[0]))}
    elif family == "power":
        x = np.log(s)
        b0, la0 = _weighted_line(x, y, sw * sw) if np.ptp(x) > 0 else (0.0, float(np.mean(y)))
        f_scale = _huber_scale(y - (la0 + b0 * x))
        design = np.stack([np.ones_like(x), x], axis=1)
        p0 = np.array([np.log(start["a"]), start["b"]] if start else [la0, b0])
        p = _huber_regression(design, y, sw, f_scale, p0)
        params = {"a": float(np.exp(p[0])), "b": float(p[1])}
    elif family == "linear":
        # Start from weighted least squares on relative error (closed form), then Huber.
        u, v = 1.0 / m, s / m
        A = np.stack([u, v], axis=1) * sw[:, None]
        coef, *_ = np.linalg.lstsq(A, sw, rcond=None)
        a0 = max(float(coef[0]), 1e-12)
        b0 = max(float(coef[1]), 0.0)
        scale_a = median(m)
        scale_b = scale_a / median(s)

        f_scale = _huber_scale(np.log(a0 + b0 * s) - y)
        a1, b1 = (start["a"], start["b"]) if start else (a0, b0)
        p = _huber_linear(s, y, sw, f_scale, np.array([a1 / scale_a, b1 / scale_b]),
                          scale_a, scale_b)
        params = {"a": float(p[0] * scale_a), "b": float(p[1] * scale_b)}
    else:
        raise ValueError(f"unknown family {family!r}")
    resid = np.log(evaluate(family, params, s)) - y
    return params, float(np.sum(w * resid**2))


def aic_from_rss(rss: float, wsum: float, n_bins: int, k: int) -> float:
    """Gaussian AIC of log residuals with the variance estimated from the fit."""
    rss = max(rss, 1e-300)
    return n_bins * float(np.log(rss / wsum)) + 2 * k


def segment_costs(x: Array, y: Array, w: Array, family: str) -> Array:
    """Weighted RSS of ``family`` on every bin range [i, j) (i < j), in O(B²) via prefix sums.

    Closed forms make an exact dynamic programme over all boundaries affordable:
    constant is a weighted mean of log time, power a weighted regression of log time on
    log size, linear a regression of 1 on (1/m, s/m) (relative error ~ log error).
    Entries with too few bins for the family are +inf.
    """
    B = len(x)

    def pref(a: Array) -> Array:
        return np.concatenate([[0.0], np.cumsum(a)])

    def span(p: Array) -> Array:
        return p[None, :] - p[:, None]  # [i, j] = sum over bins i..j-1

    Sw = span(pref(w))
    with np.errstate(divide="ignore", invalid="ignore"):
        if family == "constant":
            Sy, Syy = span(pref(w * y)), span(pref(w * y * y))
            rss = Syy - Sy**2 / Sw
            min_bins = 1
        elif family == "power":
            Sx, Sy = span(pref(w * x)), span(pref(w * y))
            Sxx, Sxy, Syy = span(pref(w * x * x)), span(pref(w * x * y)), span(pref(w * y * y))
            vxx = Sxx - Sx**2 / Sw
            vxy = Sxy - Sx * Sy / Sw
            vyy = Syy - Sy**2 / Sw
            rss = vyy - np.where(vxx > 1e-12, vxy**2 / vxx, 0.0)
            min_bins = 3
        elif family == "linear":
            m = np.exp(y)
            s = np.exp(x)
            u, v = 1.0 / m, s / m
            # Unit-scale the regressors: raw sums reach 1e36 and the determinant would cancel.
            u, v = u / np.sqrt(np.mean(u * u)), v / np.sqrt(np.mean(v * v))
            Suu, Suv, Svv = span(pref(w * u * u)), span(pref(w * u * v)), span(pref(w * v * v))
            Su, Sv = span(pref(w * u)), span(pref(w * v))
            det = Suu * Svv - Suv**2
            quad = (Su**2 * Svv - 2 * Su * Sv * Suv + Sv**2 * Suu) / det
            rss = np.where(np.abs(det) > 1e-300, Sw - quad, np.inf)
            min_bins = 3
        else:
            raise ValueError(f"unknown family {family!r}")
    idx = np.arange(B + 1)
    nb = idx[None, :] - idx[:, None]
    rss = np.where((nb >= min_bins) & np.isfinite(rss), np.maximum(rss, 0.0), np.inf)
    return rss
