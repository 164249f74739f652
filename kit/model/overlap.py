"""Overlap of two neighbouring regimes near their boundary.

Around a protocol switch some messages of the same size still follow the old regime and
some already the new one. With both regimes' densities fixed (curves extrapolated, noise
as fitted), EM on the raw samples near the boundary estimates a logistic share of the
right regime in ln size; the window where that share is between 2 % and 98 % is the
overlap. If the two regimes are indistinguishable at the boundary (a continuous curve),
the share is not identifiable and the boundary stays sharp.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kit.model.mixture import logistic_step
from kit.model.regime import Overlap, Regime
from kit.model.special import expit, logit

#: How far (factor in size) on each side of the boundary samples are used.
WINDOW_FACTOR = 4.0
#: The window is where the next regime's share lies in [EDGE, 1 - EDGE].
EDGE = 0.02
#: Samples for the EM; two logistic parameters need far fewer.
MAX_OVERLAP_SAMPLES = 20000
#: Fewest samples inside a window for it to count as an overlap.
MIN_WINDOW_SAMPLES = 20
#: Distance between the regimes' curves at the boundary, in noise widths, below which the
#: share of each cannot be told apart.
MIN_SEPARATION = 3.0


def _width(reg: Regime) -> float:
    """Half the 16-84 % spread of ln ratio: a robust noise sigma (bands: the widest)."""
    noises = [c.noise for c in reg.components] or [reg.noise]
    q = np.array([0.16, 0.84])
    return max(float(np.diff(np.log(np.asarray(n.ppf(q), dtype=float)))[0]) / 2 for n in noises)


def _separation(left: Regime, right: Regime, boundary: float) -> float:
    b = np.array([boundary])
    gap = abs(float(np.log(right.curve(b)[0] / left.curve(b)[0])))
    return gap / max(_width(left), _width(right), 1e-6)


def fit_overlap(left: Regime, right: Regime, boundary: float, size: NDArray,
                time: NDArray, iters: int = 40) -> Overlap | None:
    """Overlap of ``left`` and ``right`` from samples (``size``, ``time``) near ``boundary``."""
    # Identifiable only if the two regimes differ at the boundary by several noise widths.
    if _separation(left, right, boundary) < MIN_SEPARATION:
        return None
    lo = max(boundary / WINDOW_FACTOR, left.size_min)
    hi = min(boundary * WINDOW_FACTOR, right.size_max)
    sel = (size >= lo) & (size <= hi)
    if sel.sum() < 20:
        return None
    s, t = size[sel], time[sel]
    if len(s) > MAX_OVERLAP_SAMPLES:
        keep = np.sort(np.random.default_rng(0).choice(len(s), MAX_OVERLAP_SAMPLES, replace=False))
        s, t = s[keep], t[keep]
    x = np.log(np.maximum(s, 1.0))
    lp_l, lp_r = left.logpdf(s, t), right.logpdf(s, t)
    ok = np.isfinite(lp_l) | np.isfinite(lp_r)
    s, t, x, lp_l, lp_r = s[ok], t[ok], x[ok], lp_l[ok], lp_r[ok]
    x0 = np.log(max(boundary, 1.0))
    # The share depends on the size only: it and the logistic step are computed once per
    # distinct size, from per-size sums of the responsibilities.
    xu, inv, cnt = np.unique(x - x0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    n_u = cnt.astype(float)
    dl = lp_r - lp_l
    c = np.array([0.0, 8.0])
    r = np.zeros_like(x)
    for _ in range(iters):
        w = np.clip(expit(c[0] + c[1] * xu), 1e-12, 1 - 1e-12)
        with np.errstate(invalid="ignore"):
            r = expit(logit(w)[inv] + dl)
        r = np.nan_to_num(r, nan=0.5)
        c_new = logistic_step(xu, np.bincount(inv, r, minlength=len(xu)), c, steps=2, n=n_u)
        if np.allclose(c_new, c, atol=1e-6):
            c = c_new
            break
        c = c_new
    if c[1] <= 0:  # the next regime's share must grow with size
        return None
    own = np.exp(lp_r - np.logaddexp(lp_l, lp_r))
    center_x = x0 - c[0] / c[1]
    half = float(logit(1 - EDGE)) / c[1]
    w_lo, w_hi = float(np.exp(center_x - half)), float(np.exp(center_x + half))
    w_lo, w_hi = max(w_lo, left.size_min), min(w_hi, right.size_max)
    inside = (s >= w_lo) & (s <= w_hi)
    # A sharp switch also yields a (steep) logistic; only samples on the "wrong" side of the
    # centre, clearly following the other regime, show a real overlap.
    xs = np.log(np.maximum(s, 1.0))
    wrong = int(np.sum(inside & (xs < center_x) & (own > 0.9))
                + np.sum(inside & (xs > center_x) & (own < 0.1)))
    if (int(inside.sum()) < MIN_WINDOW_SAMPLES or len(np.unique(s[inside])) < 2
            or wrong < max(5, 0.02 * int(inside.sum()))):
        return None
    n_in = int(inside.sum())
    share_r = float(np.mean(r[inside]))
    return Overlap(size_lo=w_lo, size_hi=w_hi, center=float(np.exp(center_x)), slope=float(c[1]),
                   share_left=1.0 - share_r, share_right=share_r, n_samples=n_in)
