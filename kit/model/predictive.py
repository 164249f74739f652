"""The model's predictive distribution at a size: regimes, overlaps and bands combined.

At size s the distribution is Σ_terms weight(s) · scale(s) · ratio, where the terms come
from the regime s falls in (one, or one per band) and, inside an overlap window, from both
neighbouring regimes weighted by the logistic share. Quantiles are exact (scale · noise
ppf) where a size has a single term, and found by root finding on the mixture CDF otherwise.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kit.model.families import evaluate
from kit.model.noise import Noise
from kit.model.persize import PerSize, adjusted_shares, gauss_hermite
from kit.model.regime import Regime

Term = tuple[NDArray, NDArray, Noise]


def regime_weights(regimes: list[Regime], breakpoints: list[float], size: NDArray) -> NDArray:
    """(len(size), n_regimes) probability that a sample of that size follows each regime."""
    s = np.asarray(size, dtype=float)
    idx = np.searchsorted(np.asarray(breakpoints, dtype=float), s, side="right")
    W = np.zeros((len(s), len(regimes)))
    W[np.arange(len(s)), idx] = 1.0
    for b, reg in enumerate(regimes[:-1]):
        ov = reg.overlap
        if ov is None:
            continue
        inside = (s >= ov.size_lo) & (s <= ov.size_hi)
        if inside.any():
            w = ov.weight(s[inside])
            W[inside] = 0.0
            W[inside, b] = 1.0 - w
            W[inside, b + 1] = w
    return W


def terms(regimes: list[Regime], breakpoints: list[float], size: NDArray,
          per_size: PerSize | None = None, spread: bool = True) -> list[Term]:
    """Terms at each size; with ``per_size``, the population of sizes: the kernel mean of
    neighbouring sizes' location effects, the rest integrated out (N(0, tau²); not with
    ``spread=False``: one size at that location). A stored size's own distribution is a
    map on top of these (the estimator's ``_shaped``); only a format-1 layer
    (``per_size.version`` 1) also gives stored sizes their own location shift and band
    share here."""
    W = regime_weights(regimes, breakpoints, size)
    if per_size is None or not per_size.estimated:
        out: list[Term] = []
        for k, reg in enumerate(regimes):
            if not W[:, k].any():
                continue
            for w, scale, noise in reg.terms(size):
                out.append((W[:, k] * w, scale, noise))
        return [t for t in out if t[0].any()]
    idx = (per_size.lookup(size) if per_size.version < 2
           else np.full(len(size), -1, dtype=np.int64))
    stored = idx >= 0

    def at(values: NDArray, default: float) -> NDArray:
        if len(values) == 0:
            return np.full(len(size), default)
        return np.where(stored, values[np.maximum(idx, 0)], default)

    locs = [at(per_size.loc, 0.0), np.nan_to_num(at(per_size.loc_slow, 0.0))]
    share = at(per_size.share, np.nan)
    nodes, qw = gauss_hermite()
    centre = int(np.argmax(qw))
    out = []
    pop_base = {c["regime"] for c in per_size.components if c.get("shape_base") == "population"}
    for k, reg in enumerate(regimes):
        if not W[:, k].any():
            continue
        shares = adjusted_shares(reg, size, share)
        if reg.is_mixture:
            base = [(shares[:, j], evaluate(c.family, c.params, size), c.noise, j)
                    for j, c in enumerate(reg.components)]
        else:
            base = [(np.ones(len(size)), reg.curve(size), reg.noise, 0)]
        unseen = [per_size.unseen(k, b, size) if not stored.all()
                  else (np.zeros(len(size)), 0.0) for b in (0, 1)]
        taus = (unseen[0][1], unseen[1][1])
        integrate = spread and max(taus) > 0 and not stored.all()
        for j in range(len(nodes)) if integrate else [centre]:
            qwt = np.where(stored, float(j == centre), qw[j]) if integrate else 1.0
            for w, scale, noise, band in base:
                own = 0.0 if k in pop_base else locs[band]
                sh = np.where(stored, own, unseen[band][0] + nodes[j] * taus[band])
                out.append((W[:, k] * w * qwt, scale * np.exp(sh), noise))
    return [t for t in out if t[0].any()]


def cdf(tlist: list[Term], time: NDArray) -> NDArray:
    """Mixture CDF; ``time`` is (n,) or (n, m) against n sizes. Each term is evaluated only
    at the sizes where its weight is not zero (a per-size model's terms, one per Gauss-Hermite
    node, band and regime, cover few sizes each)."""
    t = np.asarray(time, dtype=float)
    acc = np.zeros(t.shape)
    for w, scale, noise in tlist:
        rows = np.flatnonzero(w > 0)
        if not len(rows):
            continue
        ww = w[rows] if t.ndim == 1 else w[rows, None]
        sc = scale[rows] if t.ndim == 1 else scale[rows, None]
        acc[rows] = acc[rows] + ww * noise.cdf(t[rows] / sc)
    return acc


def quantiles(tlist: list[Term], n: int, q: NDArray) -> NDArray:
    """(n, len(q)) quantiles of the mixture."""
    q = np.asarray(q, dtype=float)
    out = np.empty((n, len(q)))
    n_terms = np.sum([t[0] > 0 for t in tlist], axis=0) if tlist else np.zeros(n)
    single = n_terms == 1
    for w, scale, noise in tlist:
        m = single & (w > 0)
        if m.any():
            out[m] = scale[m, None] * noise.ppf(q)[None, :]
    multi = ~single
    if multi.any():
        sub = [(w[multi], scale[multi], noise) for w, scale, noise in tlist]
        out[multi] = np.exp(_mixture_lnq(sub, q))
    return out


#: Root-finding tolerance on ln time (relative 1e-10 on time) and the safety cap on steps.
_LNQ_TOL = 1e-10
_LNQ_MAX_STEPS = 100
#: A CDF this close to q is as close as float sums of several terms get.
_CDF_TOL = 1e-13
#: Outside a bracket a step below the tolerance settles a pair only this close to its level:
#: far from the root, a very steep term can make a step tiny.
_NEAR_CDF = 1e-8


def _cdf_and_slope(tlist: list[Term], x: NDArray, rows: NDArray, slope: bool = True
                   ) -> tuple[NDArray, NDArray]:
    """Mixture CDF at times exp(x) of sizes ``rows`` (1-D, paired) and (``slope``) its
    derivative in x; each term is evaluated only where its weight is not zero."""
    F = np.zeros(x.shape)
    dF = np.zeros(x.shape)
    for w, scale, noise in tlist:
        wr = w[rows]
        nz = np.flatnonzero(wr > 0)
        if not len(nz):
            continue
        r = np.exp(x[nz] - np.log(scale[rows[nz]]))
        if slope:
            cdf, dens = noise.cdf_and_log_density(r)
            F[nz] += wr[nz] * cdf
            dF[nz] += wr[nz] * dens
        else:
            F[nz] += wr[nz] * noise.cdf(r)
    return F, dF


def _mixture_lnq(tlist: list[Term], q: NDArray) -> NDArray:
    """ln quantiles of a mixture at several sizes, (n, len(q)): Newton on ln time from where
    the terms' masses put each quantile (:func:`_mass_start`), then, for the pairs two such
    steps do not settle, Newton inside a bracket (:func:`_bracketed`).

    Why not plain bisection: it needs ~50 CDF evaluations per quantile, and at 10^5 stored
    sizes x 27 levels those dominated a per-size fit (18 of 26 CPU-s at 1 M samples). Why
    the bracket only afterwards: where bands are apart the mass start is within ~1e-7 and
    two Newton steps settle it, so evaluating the bracket's ends first (two more CDFs per
    pair) was a third of the work. A pair is settled by the bracketed loop's own tests (the
    CDF within 1e-13 of the level, or a step below the tolerance, here only with the CDF
    within 1e-8); a step that leaves every term's 1e-9..1-1e-9 range hands the pair to
    the bracket.
    """
    n = len(tlist[0][0])
    lo_w, hi_w = np.full(n, np.inf), np.full(n, -np.inf)
    ends = np.log(np.array([1e-9, 1 - 1e-9]))
    for w, scale, noise in tlist:
        m = w > 0
        ls = np.log(scale[m])
        e = np.log(noise.ppf(np.exp(ends)))
        lo_w[m] = np.minimum(lo_w[m], ls + e[0])
        hi_w[m] = np.maximum(hi_w[m], ls + e[1])
    # one entry per (size, level) pair from here on
    row = np.repeat(np.arange(n), len(q))
    level = np.tile(np.arange(len(q)), n)
    qq = q[level]
    lw, hw = lo_w[row], hi_w[row]
    start = _mass_start(tlist, q).ravel()
    x = np.full(len(qq), np.nan)
    todo = np.flatnonzero(np.isfinite(start) & (start > lw) & (start < hw))
    xs = start[todo]
    for _ in range(2):
        F, dF = _cdf_and_slope(tlist, xs, row[todo])
        fx = F - qq[todo]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            nxt = xs - fx / dF
        hit = np.abs(fx) <= _CDF_TOL
        close = (~hit & (np.abs(fx) <= _NEAR_CDF)
                 & (np.abs(nxt - xs) <= _LNQ_TOL * np.maximum(1.0, np.abs(xs))))
        x[todo[hit]] = xs[hit]
        x[todo[close]] = nxt[close]
        go = ~(hit | close) & np.isfinite(nxt) & (nxt > lw[todo]) & (nxt < hw[todo])
        todo, xs = todo[go], nxt[go]
        start[todo] = xs
    rest = np.flatnonzero(np.isnan(x))
    if len(rest):
        x[rest] = _bracketed(tlist, q, row[rest], level[rest], (lw[rest], hw[rest]),
                             start[rest])
    return x.reshape(n, len(q))


def _bracketed(tlist: list[Term], q: NDArray, row: NDArray, level: NDArray,
               wide_ends: tuple[NDArray, NDArray], start: NDArray) -> NDArray:
    """ln quantiles at levels ``q[level]`` of sizes ``row`` (paired): Newton inside a
    bracket, bisecting whenever a step would leave it.

    The mixture's q-quantile lies between its terms' own q-quantiles (each term's CDF is at
    least q above the largest of them and at most q below the smallest): the tight
    bracket. Where weights do not sum to one (so that bracket may miss) the wide bracket
    of every term's 1e-9..1-1e-9 quantiles (``wide_ends``) is used instead. Newton starts
    at ``start`` where that lies inside, else at the bracket's linear interpolation.
    Converged pairs drop out of the loop.
    """
    qq = q[level]
    lt, ht = np.full(len(row), np.inf), np.full(len(row), -np.inf)
    for w, scale, noise in tlist:
        m = w[row] > 0
        at_q = np.log(scale[row[m]]) + np.log(noise.ppf(q))[level[m]]
        lt[m] = np.minimum(lt[m], at_q)
        ht[m] = np.maximum(ht[m], at_q)
    f_lo = _cdf_and_slope(tlist, lt, row, slope=False)[0] - qq
    f_hi = _cdf_and_slope(tlist, ht, row, slope=False)[0] - qq
    tight = (f_lo <= 0) & (f_hi >= 0)
    lo, hi = np.where(tight, lt, wide_ends[0]), np.where(tight, ht, wide_ends[1])
    wide = np.flatnonzero(~tight)
    if len(wide):
        f_lo[wide] = _cdf_and_slope(tlist, lo[wide], row[wide], slope=False)[0] - qq[wide]
        f_hi[wide] = _cdf_and_slope(tlist, hi[wide], row[wide], slope=False)[0] - qq[wide]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
    x = np.where(np.isfinite(x) & (x >= lo) & (x <= hi), x, (lo + hi) / 2)
    x = np.where(np.isfinite(start) & (start > lo) & (start < hi), start, x)
    live = np.flatnonzero((f_lo != 0) & (f_hi != 0) & (hi - lo > _LNQ_TOL))
    x[f_lo == 0] = lo[f_lo == 0]
    # Length of each pair's step before last (rtsafe): a Newton step must at least halve it,
    # or Newton can cycle between two points inside the bracket (a steep narrow component
    # next to a flat one did, at 0.355 of graphene's smallest sizes: 4.0e-5 <-> 3.0e-5 s).
    dx_old = hi - lo
    for _ in range(_LNQ_MAX_STEPS):
        if not len(live):
            break
        xr, a, b = x[live], lo[live], hi[live]
        F, dF = _cdf_and_slope(tlist, xr, row[live])
        fx = F - qq[live]
        a = np.where(fx < 0, xr, a)
        b = np.where(fx > 0, xr, b)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = xr - fx / dF
        # the Newton step where it stays strictly inside the bracket and at least halves
        # the step before last, else the midpoint
        newton = (np.isfinite(step) & (step > a) & (step < b)
                  & (2 * np.abs(step - xr) <= dx_old[live]))
        nxt = np.where(newton, step, (a + b) / 2)
        dx_old[live] = np.abs(nxt - xr)
        tol = _LNQ_TOL * np.maximum(1.0, np.abs(xr))
        conv = (np.abs(fx) <= _CDF_TOL) | (b - a <= tol)
        x[live] = np.where(conv, xr, nxt)
        lo[live], hi[live] = a, b
        live = live[~(conv | (np.abs(nxt - xr) <= tol))]
    return x


def _mass_start(tlist: list[Term], q: NDArray) -> NDArray:
    """(n, len(q)) guesses of the mixture's ln quantiles from its terms' masses: the terms in
    the order of their medians, level q falls in the term whose cumulative weight spans it,
    and the guess is that term's own quantile at q's place inside its weight.

    Why: where bands are apart (a fast and a slow band, each a few percent wide, an ln unit
    apart) this is the quantile to ~1e-7 (the other bands put almost no mass there), so
    Newton needs two steps; from the bracket's interpolation (the bracket spans both bands)
    it needed 6-8 (0.65 s of a 1 M-sample per-size fit). Where terms overlap it is a start
    like any other: the solver's bracket and safeguards make the roots."""
    n = len(tlist[0][0])
    W = np.stack([w for w, _, _ in tlist], axis=1)
    with np.errstate(divide="ignore"):
        med = np.stack([np.where(w > 0, np.log(scale) + np.log(noise.median()), np.inf)
                        for w, scale, noise in tlist], axis=1)
    order = np.argsort(med, axis=1, kind="stable")
    cum = np.cumsum(np.take_along_axis(W, order, axis=1), axis=1)
    last = np.maximum(np.sum(W > 0, axis=1) - 1, 0)[:, None]
    k = np.minimum(_term_index(cum, q[None, :]), last)
    before = np.where(k > 0, np.take_along_axis(cum, np.maximum(k - 1, 0), axis=1), 0.0)
    term = np.take_along_axis(order, k, axis=1)
    out = np.full((n, len(q)), np.nan)
    for j, (w, scale, noise) in enumerate(tlist):
        rows, cols = np.nonzero(term == j)
        if not len(rows):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.clip((q[cols] - before[rows, cols]) / w[rows], 1e-6, 1 - 1e-6)
            out[rows, cols] = np.log(scale[rows]) + noise.ln_ppf_start(v)
    return out


def _term_index(cum: NDArray, u: NDArray) -> NDArray:
    """The term each ``u`` falls in: how many of the running weights ``cum`` (a row per size,
    a column per term; the last column not counted) it exceeds. ``u`` has a row per size, or
    one row for every size."""
    out = np.zeros(np.broadcast_shapes(u.shape, (len(cum), 1)), dtype=np.int64)
    for k in range(cum.shape[1] - 1):
        out += u > cum[:, k:k + 1]
    return out


def sample(tlist: list[Term], n_sizes: int, n: int, rng: np.random.Generator) -> NDArray:
    """(n_sizes, n) draws: pick a term per draw by weight, then scale · ratio."""
    out = np.empty((n_sizes, n))
    if not tlist:
        return out
    W = np.stack([t[0] for t in tlist], axis=1)
    cum = np.cumsum(W / W.sum(axis=1, keepdims=True), axis=1)
    pick = _term_index(cum, rng.random((n_sizes, n)))
    for k, (_, scale, noise) in enumerate(tlist):
        m = pick == k
        cnt = int(m.sum())
        if cnt:
            rows = np.nonzero(m)[0]
            out[m] = scale[rows] * noise.rvs(cnt, rng)
    return out
