"""Per-size effects on top of the regime curves, shrunk by empirical Bayes.

On real clusters each exact message size has its own behaviour: its median sits a little
above or below the regime's curve, and on Ethernet the share of the slow band is a property
of the size (reproducible between runs, not smooth in size). A smooth curve cannot carry
that, and a lookup table cannot say anything about a size it has not seen. This layer does
both, as a random-effects model per regime:

- location: ``d_z`` = ln(median at size z) − ln(the regime's median at z) (band-relative in
  a two-band regime), sampling variance ``v_z = (π/2)·σ²/n_z`` (σ² the regime's pooled
  within-size variance of ln time), and a between-size variance ``τ²`` (method of moments:
  robust variance of the ``d_z`` less the typical ``v_z``). Each size's effect is shrunk:
  ``loc_z = B_z·d_z`` with ``B_z = τ²/(τ² + v_z)``: a size seen 3 times barely moves, one
  seen 60 times with a consistent deviation moves (almost) fully;
- band share (two-band regimes): the size's slow-band share by EM with the bands fixed,
  sampling variance ``w(1−w)/n_z``, variance component ``τ²_share``, shrunk the same way.

Once the per-size effects are known the regime's noise is refitted on the *within-size*
ratios (the pooled noise also held the between-size scatter, so bands were too wide). At a
stored size the prediction uses the size's own location and share; at any other size the
location effect is integrated out (Gauss–Hermite over N(0, τ²)) and the share is the
regime's curve, so the population distribution is as wide as sizes really differ.
Designs with one sample per size give nothing to separate the two variances from: the
layer then says so (``estimated = False`` with the reason) and changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kit.model.families import evaluate
from kit.model.noise import fit_noise
from kit.model.regime import Regime
from kit.model.runs import runs_of, sort_within_runs
from kit.model.segmentation import robust_tau2

#: Fewest samples of one size for it to get an adjustment of its own.
MIN_REPEATS = 2
#: Fewest repeated sizes (in the model, and per regime) to estimate a variance component.
MIN_SIZES = 5
#: Gauss–Hermite nodes to integrate the location effect out at unseen sizes.
GH_NODES = 5
#: Fewest samples to refit a noise distribution on within-size ratios.
MIN_NOISE_REFIT = 30
#: EM rounds for per-size band shares (bands fixed: converges in a few).
SHARE_ROUNDS = 8
#: Quantile levels at which a stored size's predictive distribution gets its own shape.
SHAPE_LEVELS = np.array([0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98])
#: Below this many samples a size's median is the mean of its samples (two), which one stall
#: moves by orders of magnitude: the sampling variance of its shape quantiles is simulated
#: from the regime's within-size distribution instead of taken from the asymptotic normal
#: law, and such sizes do not enter the plain-mean estimate of the shape's variance
#: component. From 3 samples up the median ignores one wild sample, and the usual
#: estimates hold (on the reference runs with 7 samples per size, simulating there too
#: made the per-size median error worse: 1.02 -> 1.18x the lookup floor on graphene).
#: The location layer keeps its normal-law variance: simulating it for two-sample sizes
#: lost the 30 % slow mode of test_bimodal_noise_chosen_and_reproduced.
MEAN_LIKE_N = 3
#: Simulated samples per count for that variance (a fixed generator: fits stay reproducible
#: and the fit's own random stream is untouched).
SMALL_N_DRAWS = 4000


#: ln times of one size: draw(rng, shape).
Draw = Callable[["np.random.Generator", tuple[int, int]], NDArray]  # (a string: reading
#: a model must not import numpy.random, ~15 ms)


def small_n_variance(draw_ln: Draw, counts: NDArray, levels: NDArray) -> NDArray:
    """Variance of a size's ln predictive quantiles at ``levels``, for samples of each
    count, simulated with ``draw_ln(rng, shape)`` (ln times of one size).

    Why: with two samples the median is their mean, so one stall among them moves it by
    orders of magnitude, and the asymptotic variance (normal law of a sample quantile, from
    the density at the quantile) calls that a precise measurement; the shrinkage then lets
    the stall through as "a property of the size". Simulated from the within-size
    distribution with its heavy tail, the variance is as large as the tail makes it.
    Returns (len(counts), len(levels)).
    """
    rng = np.random.default_rng(20261126)
    out = np.full((len(counts), len(levels)), np.nan)
    for i, n in enumerate(counts):
        x = np.sort(draw_ln(rng, (SMALL_N_DRAWS, int(n))), axis=1)
        for k, u in enumerate(levels):  # as predictive_quantiles: order statistic u(n+1)
            lo, hi, f = order_position(u, np.array([int(n)]))
            out[i, k] = np.var(x[:, lo[0]] * (1 - f[0]) + x[:, hi[0]] * f[0])
    return out


def _within_size_draw(reg: Regime, at: float) -> Draw:
    """ln times of one size ``at`` of a regime without between-size spread: the regime's
    noise (refitted on within-size ratios), or in a two-band regime its bands at their
    share."""
    def draw(rng: np.random.Generator, shape: tuple[int, int]) -> NDArray:
        if not reg.is_mixture:
            return np.log(reg.noise.rvs(shape, rng))
        ln = [np.log(evaluate(c.family, c.params, np.array([at]))[0] * c.noise.rvs(shape, rng))
              for c in reg.components]
        slow = rng.random(shape) < reg.component_shares(np.array([at]))[0, 1]
        return np.where(slow, ln[1], ln[0])
    return draw


@dataclass
class PerSize:
    """Per-size adjustments (stored sizes) and the variance components (per regime)."""

    estimated: bool
    reason: str = ""
    sizes: NDArray = field(default_factory=lambda: np.zeros(0))
    n: NDArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loc: NDArray = field(default_factory=lambda: np.zeros(0))  # ln shift at that size
    share: NDArray = field(default_factory=lambda: np.zeros(0))  # slow-band share or NaN
    #: per regime: regime, size_min, size_max, n_sizes, tau_loc, sigma_within, tau_share,
    #: shrink_median (median B over its sizes), estimated (bool), reason
    components: list[dict[str, Any]] = field(default_factory=list)
    loc_slow: NDArray = field(default_factory=lambda: np.zeros(0))  # slow band's, or NaN
    #: (len(sizes), len(SHAPE_LEVELS)) ln shift of the predictive quantile at each level
    #: (empty: no shape adjustment), on top of the location and share adjustments.
    shape: NDArray = field(default_factory=lambda: np.zeros((0, len(SHAPE_LEVELS))))
    #: False in a view that predicts every size as one never measured (the stored sizes
    #: still inform the kernel mean of their neighbours): not serialised.
    own: bool = True

    def has_shape(self) -> bool:
        return (self.estimated and self.own and len(self.sizes) > 0
                and self.shape.shape[0] == len(self.sizes))

    def warp_map(self, idx: NDArray, base_knots: NDArray, z: NDArray,
                 inverse: bool = False) -> NDArray:
        """The stored sizes' monotone map of ln time, base -> own (``inverse``: own -> base).

        ``base_knots`` (len(idx), len(SHAPE_LEVELS)) are the base distribution's ln quantiles
        at SHAPE_LEVELS; the map is piecewise linear in ln time through (base knot, base knot
        + shift) and a plain shift beyond the end knots, so between levels a size keeps the
        base's shape, and quantiles, CDF and draws are one distribution. ``z`` is
        (len(idx),) or (len(idx), m).
        """
        x = np.asarray(base_knots, dtype=float)
        y = np.maximum.accumulate(x + self.shape[idx], axis=1)
        if inverse:
            x, y = y, x
        zz = np.asarray(z, dtype=float)
        flat = zz.reshape(len(x), -1)
        if len(x) > 1 and not np.isnan(x).any() and not np.any(np.diff(x, axis=1) < 0):
            out = _interp_rows(flat, x, y)
        else:  # a row at a time, as np.interp does it (unordered knots: its own answer)
            out = np.empty_like(flat)
            for r in range(len(x)):
                out[r] = np.interp(flat[r], x[r], y[r])
        lo, hi = flat < x[:, :1], flat > x[:, -1:]
        out[lo] = (y[:, :1] + (flat - x[:, :1]))[lo]
        out[hi] = (y[:, -1:] + (flat - x[:, -1:]))[hi]
        return out.reshape(zz.shape)

    def lookup(self, size: NDArray) -> NDArray:
        """Index into ``sizes`` of each size, -1 where not stored."""
        s = np.asarray(size, dtype=float)
        if not self.estimated or not self.own or len(self.sizes) == 0:
            return np.full(len(s), -1, dtype=np.int64)
        i = np.clip(np.searchsorted(self.sizes, s), 0, len(self.sizes) - 1)
        return np.where(self.sizes[i] == s, i, -1).astype(np.int64)

    def tau(self, k: int, band: int = 0) -> float:
        """Location variance component (SD of ln) of regime k (band 1: the slow band)."""
        key = "tau_loc_slow" if band == 1 else "tau_loc"
        for c in self.components:
            if c["regime"] == k and c.get(key) is not None:
                return float(c[key])
        return 0.0

    def unseen(self, k: int, band: int, size: NDArray) -> tuple[NDArray, float]:
        """(ln shift, remaining SD) of regime k's band at sizes without their own effect:
        the kernel mean of neighbouring sizes' effects and what it leaves unexplained."""
        key = "tau_loc_slow" if band == 1 else "tau_loc"
        comp = next((c for c in self.components if c["regime"] == k), None)
        if comp is None or comp.get(key) is None:
            return np.zeros(len(size)), 0.0
        h = comp.get(key + "_h")
        tau_u = float(comp.get(key + "_unseen", comp[key]))
        if not h or len(self.sizes) == 0:
            return np.zeros(len(size)), float(comp[key])
        eff = self.loc_slow if band == 1 else self.loc
        # model files from before kernel_min_n used every stored size
        mine = ((self.sizes >= comp["size_min"]) & (self.sizes <= comp["size_max"])
                & np.isfinite(eff) & (self.n >= comp.get("kernel_min_n", 0)))
        if not mine.any():
            return np.zeros(len(size)), float(comp[key])
        x = np.log(np.maximum(self.sizes[mine], 1.0))
        at = np.log(np.maximum(np.asarray(size, dtype=float), 1.0))
        return kernel_mean(at, x, eff[mine], float(h)), tau_u

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimated": self.estimated, "reason": self.reason,
            "method": ("random effects per regime: ln-median location and slow-band share "
                       "per size, variance components by the method of moments, "
                       "shrinkage B = tau^2 / (tau^2 + sampling variance)"),
            "min_repeats": MIN_REPEATS,
            "variance_components": self.components,
            # tolist(): the same Python numbers as float()/int() of each element, without
            # a Python call per element (65,000 stored sizes x 14 columns)
            "sizes": _floats(self.sizes), "n": np.asarray(self.n).astype(np.int64).tolist(),
            "loc": _floats(self.loc),
            "loc_slow": _finite_or_none(self.loc_slow),
            "share": _finite_or_none(self.share),
            **({"shape_levels": _floats(SHAPE_LEVELS),
                "shape": np.asarray(self.shape, dtype=np.float64).tolist()}
               if self.has_shape() else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PerSize:
        def opt(key: str) -> NDArray:
            return np.asarray([np.nan if v is None else float(v) for v in d.get(key, [])],
                              dtype=float)

        shape = np.zeros((0, len(SHAPE_LEVELS)))
        if d.get("shape") and list(d.get("shape_levels", [])) == list(SHAPE_LEVELS):
            shape = np.asarray(d["shape"], dtype=float).reshape(-1, len(SHAPE_LEVELS))
        return cls(bool(d["estimated"]), str(d.get("reason", "")),
                   np.asarray(d.get("sizes", []), dtype=float),
                   np.asarray(d.get("n", []), dtype=np.int64),
                   np.asarray(d.get("loc", []), dtype=float), opt("share"),
                   [dict(c) for c in d.get("variance_components", [])], opt("loc_slow"),
                   shape)

    def describe(self) -> list[str]:
        """Plain-language lines for the fit summary."""
        if not self.estimated:
            return [f"per-size effects: not estimated ({self.reason})"]
        out = []
        for c in self.components:
            rng = f"{_fmt_size(c['size_min'])}–{_fmt_size(c['size_max'])}"
            if not c.get("estimated"):
                out.append(f"sizes in {rng}: per-size effects not estimated ({c['reason']})")
                continue
            if c.get("tau_loc_slow") is not None:
                line = (f"sizes in {rng} ({c['n_sizes']} repeated sizes) differ in their "
                        f"fast-band time by ±{np.expm1(c['tau_loc']):.1%} and slow-band time "
                        f"by ±{np.expm1(c['tau_loc_slow']):.1%} (SD) beyond sampling noise")
            else:
                line = (f"sizes in {rng} ({c['n_sizes']} repeated sizes) differ in their "
                        f"median time by ±{np.expm1(c['tau_loc']):.1%} (SD) beyond sampling "
                        "noise")
            if c.get("tau_share") is not None:
                line += (f", and in their slow-band share by ±{c['tau_share']:.2f} (SD, share "
                         "0-1)")
            if "shrink_median" in c:
                line += (f"; a size seen {int(c['n_median'])} times keeps "
                         f"{c['shrink_median']:.0%} of its own deviation")
            if c.get("tau_shape"):
                ts = dict(zip(SHAPE_LEVELS, c["tau_shape"], strict=False))
                tails = [f"in {name} by ±{np.expm1(ts[u]):.1%}" for name, u in
                         (("p05", 0.05), ("p95", 0.95)) if ts.get(u) is not None]
                line += ("; beyond that, they differ " + " and ".join(tails) + " (SD)" if tails else
                         "; their tails cannot be told apart with so few repetitions (the "
                         "regime's tails, calibrated on its pooled samples, are used)")
            out.append(line)
        return out


def _floats(values: NDArray) -> list[float]:
    return list(np.asarray(values, dtype=np.float64).ravel().tolist())


def _finite_or_none(values: NDArray) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in _floats(values)]


def _interp_rows(z: NDArray, x: NDArray, y: NDArray) -> NDArray:
    """``np.interp(z[r], x[r], y[r])`` for every row r at once, the same values: numpy's
    segment (the last knot at or below the value), its arithmetic and its special cases.
    One call per row was ~3 us each, 0.2 s of drawing from a model at 65,000 stored sizes.
    ``x`` ascending in each row, without NaN."""
    n_knots = x.shape[1]
    j = np.zeros(z.shape, dtype=np.int64)
    for k in range(n_knots):  # knots at or below each value, minus one
        j += x[:, k:k + 1] <= z
    j -= 1
    rows = np.arange(len(x))[:, None]
    jj = np.clip(j, 0, n_knots - 2)
    x0, x1, y0, y1 = x[rows, jj], x[rows, jj + 1], y[rows, jj], y[rows, jj + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (y1 - y0) / (x1 - x0)
        out = slope * (z - x0) + y0
        again = np.isnan(out)  # "if we get nan in one direction, try the other"
        if again.any():
            out[again] = (slope * (z - x1) + y1)[again]
            flat = again & np.isnan(out) & (y0 == y1)
            out[flat] = y0[flat]
    on_knot = x0 == z
    out[on_knot] = y0[on_knot]
    out[j < 0] = np.broadcast_to(y[:, :1], z.shape)[j < 0]
    last = j >= n_knots - 1
    out[last] = np.broadcast_to(y[:, -1:], z.shape)[last]
    nan = np.isnan(z)
    out[nan] = z[nan]
    return out


def _fmt_size(b: float) -> str:
    for unit, f in (("MiB", 2**20), ("KiB", 2**10)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def _shrink(d: NDArray, v: NDArray, tau2: float) -> NDArray:
    if tau2 <= 0:
        return np.zeros_like(d)
    return tau2 / (tau2 + v)


def _robust_tau2(d: NDArray, v: NDArray) -> float:
    """Between-size variance of effects ``d`` (centred on 0) beyond sampling variance ``v``."""
    if len(d) < MIN_SIZES:
        return 0.0
    return robust_tau2(d, v)


def estimate(regimes: list[Regime], breakpoints: list[float], si: NDArray, ti: NDArray,
             pop_median: Any, rng: np.random.Generator,
             noise_fams: tuple[str, ...]) -> PerSize:
    """Per-size layer from inlier samples (``si`` sorted); refits regime noises in place.

    ``pop_median(sizes)`` is the model's median without per-size effects (overlaps included).
    """
    sizes, counts = np.unique(si, return_counts=True)
    rep = counts >= MIN_REPEATS
    if rep.sum() < MIN_SIZES:
        why = ("no size has repeated samples" if not rep.any() else
               f"only {int(rep.sum())} sizes have repeated samples (needs {MIN_SIZES})")
        return PerSize(False, why + ": the per-size variance component cannot be separated "
                       "from sampling noise; re-measure some sizes (e.g. the probe's "
                       "--repeat-fraction)")
    gid = np.repeat(np.arange(len(sizes)), counts)
    reg_of_size = np.searchsorted(np.asarray(breakpoints, dtype=float), sizes, side="right")
    in_overlap = np.zeros(len(sizes), dtype=bool)
    for reg in regimes:
        if reg.overlap is not None:
            in_overlap |= (sizes >= reg.overlap.size_lo) & (sizes <= reg.overlap.size_hi)
    share_hat = np.full(len(sizes), np.nan)
    share_pop = np.full(len(sizes), np.nan)
    band_of = np.zeros(len(si), dtype=np.int64)  # 0: fast band or ordinary regime, 1: slow
    # Residual of each sample against its reference: population median, or band median.
    # The population median only where no band median replaces it below (outside a
    # mixture regime, or inside an overlap): it is a root of the mixture's CDF at each
    # size, and a log-uniform run has ~10^5 sizes in its mixture regimes.
    banded = np.zeros(len(sizes), dtype=bool)
    for k, reg in enumerate(regimes):
        if reg.is_mixture:
            banded |= (reg_of_size == k) & ~in_overlap
    ln_pop = np.zeros(len(sizes))
    if not banded.all():
        ln_pop[~banded] = np.log(pop_median(sizes[~banded]))
    resid = np.log(ti) - ln_pop[gid]
    for k, reg in enumerate(regimes):
        if not reg.is_mixture:
            continue
        ms = (reg_of_size == k) & ~in_overlap
        m = ms[gid]
        if not m.any():
            continue
        s_k, t_k, g_k = si[m], ti[m], gid[m]
        band_ln = np.stack([np.log(evaluate(c.family, c.params, s_k) * c.noise.median())
                            for c in reg.components], axis=1)
        lp = np.stack([_band_logpdf(reg, j, s_k, t_k) for j in range(2)], axis=1)
        w_pop = reg.component_shares(sizes[ms])[:, 1]
        share_pop[ms] = w_pop
        # Per-size slow-band share by EM with the bands fixed.
        local = np.searchsorted(np.flatnonzero(ms), g_k)
        n_loc = np.bincount(local, minlength=int(ms.sum()))
        p = w_pop.copy()
        r = np.zeros(len(t_k))
        for _ in range(SHARE_ROUNDS):
            pi = np.clip(p[local], 1e-6, 1 - 1e-6)
            a, b = np.log1p(-pi) + lp[:, 0], np.log(pi) + lp[:, 1]
            r = np.exp(b - np.logaddexp(a, b))
            p = np.bincount(local, r, minlength=int(ms.sum())) / n_loc
        share_hat[ms] = p
        band = (r > 0.5).astype(np.int64)
        band_of[m] = band
        resid[m] = np.log(t_k) - band_ln[np.arange(len(t_k)), band]
    # Per size and band: median residual (the location effect), MAD spread, count.
    med, mad, cnt = _group_stats(gid * 2 + band_of, resid, 2 * len(sizes))
    d, sd, nb = med.reshape(-1, 2), mad.reshape(-1, 2), cnt.reshape(-1, 2)

    loc = np.full((len(sizes), 2), np.nan)
    share = np.full(len(sizes), np.nan)
    components: list[dict[str, Any]] = []
    for k, reg in enumerate(regimes):
        in_k = reg_of_size == k
        ms = in_k & rep
        base: dict[str, Any] = {"regime": k, "size_min": float(reg.size_min),
                                "size_max": float(reg.size_max), "n_sizes": int(ms.sum()),
                                "tau_loc": None, "tau_loc_slow": None, "sigma_within": None,
                                "tau_share": None}
        if ms.sum() < MIN_SIZES:
            components.append({**base, "estimated": False,
                               "reason": f"{int(ms.sum())} repeated sizes (needs {MIN_SIZES})"})
            continue
        comp: dict[str, Any] = {**base, "estimated": True, "reason": "",
                                "n_median": float(np.median(counts[ms]))}
        for j, key in ((0, "tau_loc"), (1, "tau_loc_slow")):
            mj = in_k & (nb[:, j] >= MIN_REPEATS)
            if j == 1 and not reg.is_mixture:
                continue
            if mj.sum() < MIN_SIZES:
                comp[key] = 0.0
                continue
            # Sampling variance of a median: (pi/2) sigma^2 / n, sigma from the pooled MAD
            # (robust to the other band and to wild repetitions).
            sig2 = float(np.median(sd[mj, j] ** 2))
            v = (np.pi / 2) * sig2 / nb[mj, j]
            tau2 = _robust_tau2(d[mj, j], v)
            B = _shrink(d[mj, j], v, tau2)
            loc[mj, j] = B * d[mj, j]
            comp[key] = float(np.sqrt(tau2))
            # Sizes near each other often share part of their effect (TCP window steps):
            # a kernel mean of the neighbours' effects predicts an unseen size's, with a
            # bandwidth chosen by leave-one-size-out error (none if it does not help).
            # Not from sizes seen twice: their median is a mean, one stall there would move
            # the unseen neighbours too (MEAN_LIKE_N; their own shift is shrunk as usual).
            kern = counts[mj] >= MEAN_LIKE_N
            h, t2u = _choose_bandwidth(np.log(np.maximum(sizes[mj][kern], 1.0)),
                                       d[mj, j][kern], loc[mj, j][kern], v[kern], tau2)
            comp[key + "_h"] = h
            comp["kernel_min_n"] = MEAN_LIKE_N
            comp[key + "_unseen"] = float(np.sqrt(t2u))
            if j == 0:
                comp["sigma_within"] = float(np.sqrt(sig2))
                comp["shrink_median"] = float(np.median(B))
            else:
                comp["sigma_within_slow"] = float(np.sqrt(sig2))
        if reg.is_mixture:
            mm = ms & np.isfinite(share_hat)
            if mm.sum() >= MIN_SIZES:
                w = share_pop[mm]
                vs = np.maximum(w * (1 - w), 1e-4) / counts[mm]
                dev = share_hat[mm] - w
                t2s = max(0.0, float(np.mean(dev**2 - vs)))
                Bs = _shrink(dev, vs, t2s)
                share[mm] = np.clip(w + Bs * dev, 0.0, 1.0)
                comp["tau_share"] = float(np.sqrt(t2s))
                comp["shrink_share_median"] = float(np.median(Bs))
        components.append(comp)

    loc0 = np.nan_to_num(loc[:, 0])
    keep = rep
    _refit_noise(regimes, reg_of_size, in_overlap, gid, si, ti, np.nan_to_num(loc), band_of,
                 rng, noise_fams)
    return PerSize(True, "", sizes[keep], counts[keep], loc0[keep], share[keep], components,
                   loc[keep, 1])


#: Candidate kernel bandwidths (SD in ln size) for effects at unseen sizes.
BANDWIDTHS = (0.02, 0.05, 0.1, 0.2, 0.4)


#: pairs (query x stored size) above which the kernel sums are taken on a grid: a log-uniform
#: probe run has ~10^5-10^6 distinct sizes, and the exact sums cost minutes there. From
#: ~2,000 sizes on the grid costs a hundredth of the exact sums (3,400 sizes: 0.2 s of a 1 M
#: fit's bandwidth choice against 2 ms) and differs from them by ~5e-4 of the effects' SD,
#: a fiftieth of a size effect's own sampling error there.
EXACT_KERNEL_PAIRS = 2 ** 22
#: grid step of the binned kernel sums, in bandwidths (error ~ step^2: well below 1e-3)
GRID_STEP = 0.05


#: Exact kernel sums leave out neighbours beyond this many bandwidths: their weight,
#: exp(-32) ~ 1e-14 of a neighbour at the same size, is below the sums' round-off.
KERNEL_REACH = 8.0


def kernel_mean(x_at: NDArray, x: NDArray, eff: NDArray, h: float,
                exclude_self: bool = False) -> NDArray:
    """Gaussian-kernel mean of ``eff`` (at ln sizes ``x``) at ``x_at``, with one pseudo
    neighbour of effect 0 (few or far neighbours give little).

    With ``x`` sorted (stored sizes are), each block of queries sums over the neighbours
    within KERNEL_REACH bandwidths only: choosing among the five bandwidths for 4,000
    sizes then takes a third of the time (the same means to 3e-13), and the exact sums were
    1.3 s of a 1 M-sample fit.
    ``exclude_self``: ``x_at`` is ``x``, and each point's own weight is left out.
    """
    if len(x_at) * len(x) > EXACT_KERNEL_PAIRS:
        return _binned_kernel_mean(x_at, x, eff, h, exclude_self)
    out = np.empty(len(x_at))
    banded = len(x) > 1 and bool(np.all(x[1:] >= x[:-1]))
    block = 256 if banded else 2048
    for a in range(0, len(x_at), block):
        q = x_at[a:a + block]
        lo, hi = 0, len(x)
        if banded:
            lo = int(np.searchsorted(x, float(q.min()) - KERNEL_REACH * h, side="left"))
            hi = int(np.searchsorted(x, float(q.max()) + KERNEL_REACH * h, side="right"))
        z = (q[:, None] - x[None, lo:hi]) / h
        w = np.exp(-0.5 * z * z)
        if exclude_self:
            rows = np.arange(len(q))
            w[rows, a + rows - lo] = 0.0
        out[a:a + len(q)] = (w @ eff[lo:hi]) / (w.sum(axis=1) + 1.0)
    return out


def _binned_kernel_mean(x_at: NDArray, x: NDArray, eff: NDArray, h: float,
                        exclude_self: bool) -> NDArray:
    """kernel_mean by linear binning on a grid of step GRID_STEP * h, a convolution with the
    kernel truncated at 6 h, and linear interpolation back (the standard binned kernel
    smoother): O(n + grid) instead of O(n^2)."""
    x = np.asarray(x, dtype=float)
    x_at = np.asarray(x_at, dtype=float)
    eff = np.asarray(eff, dtype=float)
    step = GRID_STEP * h
    lo = min(float(x.min()), float(x_at.min()))
    hi = max(float(x.max()), float(x_at.max()))
    grid_n = int(np.ceil((hi - lo) / step)) + 2
    pos = (x - lo) / step
    left = np.floor(pos).astype(np.int64)
    frac = pos - left
    mass = np.bincount(left, 1.0 - frac, grid_n) + np.bincount(left + 1, frac, grid_n)
    weighted = (np.bincount(left, (1.0 - frac) * eff, grid_n)
                + np.bincount(left + 1, frac * eff, grid_n))
    half = int(np.ceil(6.0 / GRID_STEP))
    z = np.arange(-half, half + 1) * GRID_STEP
    kern = np.exp(-0.5 * z * z)
    w_sum = np.convolve(mass, kern)[half:half + grid_n]
    e_sum = np.convolve(weighted, kern)[half:half + grid_n]
    nodes = lo + step * np.arange(grid_n)
    w_at = np.interp(x_at, nodes, w_sum)
    e_at = np.interp(x_at, nodes, e_sum)
    if exclude_self:  # x_at is x: take each point's own weight (1) and effect out
        w_at = np.maximum(w_at - 1.0, 0.0)
        e_at = e_at - eff
    return e_at / (w_at + 1.0)


def _choose_bandwidth(x: NDArray, d: NDArray, loc: NDArray, v: NDArray,
                      tau2: float) -> tuple[float | None, float]:
    """(bandwidth or None, residual between-size variance at an unseen size)."""
    if tau2 <= 0 or len(x) < MIN_SIZES:
        return None, tau2
    best_h, best_err = None, float(np.mean(np.abs(d)))
    for h in BANDWIDTHS:
        err = float(np.mean(np.abs(d - kernel_mean(x, x, loc, h, exclude_self=True))))
        if err < best_err:
            best_h, best_err = h, err
    if best_h is None:
        return None, tau2
    resid = d - kernel_mean(x, x, loc, best_h, exclude_self=True)
    return best_h, min(tau2, robust_tau2(resid - float(np.median(resid)), v))


def _group_stats(key: NDArray, val: NDArray, n_groups: int) -> tuple[NDArray, NDArray, NDArray]:
    """Per-group median, MAD-sd (1.4826 · median |x − median|) and count (NaN when empty)."""
    med = np.full(n_groups, np.nan)
    mad = np.full(n_groups, np.nan)
    cnt = np.bincount(key, minlength=n_groups)
    if len(key) == 0:
        return med, mad, cnt
    order, starts, counts = runs_of(key)
    g = key[order][starts]
    a, b = starts + (counts - 1) // 2, starts + counts // 2
    vs = sort_within_runs(val[order], starts, counts)
    med[g] = (vs[a] + vs[b]) / 2
    dev = sort_within_runs(np.abs(val - med[key])[order], starts, counts)
    mad[g] = 1.4826 * ((dev[a] + dev[b]) / 2)
    return med, mad, cnt


def _band_logpdf(reg: Regime, j: int, s: NDArray, t: NDArray) -> NDArray:
    c = reg.components[j]
    scale = evaluate(c.family, c.params, s)
    with np.errstate(divide="ignore"):
        return c.noise.logpdf(t / scale) - np.log(scale)


def _refit_noise(regimes: list[Regime], reg_of_size: NDArray, in_overlap: NDArray,
                 gid: NDArray, si: NDArray, ti: NDArray, loc: NDArray, band_of: NDArray,
                 rng: np.random.Generator, noise_fams: tuple[str, ...]) -> None:
    """Noise on within-size ratios (each size's location removed), in place."""
    shift = np.exp(loc[gid, band_of])
    for k, reg in enumerate(regimes):
        m = (reg_of_size == k)[gid] & ~in_overlap[gid]
        if not np.any(shift[m] != 1.0):
            continue  # no per-size effect here: the pooled noise is the within-size noise
        if m.sum() < MIN_NOISE_REFIT:
            continue
        s_k, t_k = si[m], ti[m] / shift[m]
        if not reg.is_mixture:
            reg.noise = fit_noise(t_k / reg.curve(s_k), rng, noise_fams)
            continue
        band = band_of[m]
        for j, c in enumerate(reg.components):
            mine = band == j
            if mine.sum() >= MIN_NOISE_REFIT:
                c.noise = fit_noise(t_k[mine] / evaluate(c.family, c.params, s_k[mine]), rng,
                                    noise_fams)


@cache
def gauss_hermite() -> tuple[NDArray, NDArray]:
    """Nodes (in SDs) and weights (sum 1) for E[f(Z)], Z ~ N(0, 1); read-only, computed
    once (an eigenvalue problem, a tenth of drawing from a model at one size)."""
    x, w = np.polynomial.hermite.hermgauss(GH_NODES)
    nodes, weights = np.sqrt(2.0) * x, w / np.sqrt(np.pi)
    nodes.setflags(write=False)
    weights.setflags(write=False)
    return nodes, weights


def adjusted_shares(reg: Regime, size: NDArray, share: NDArray) -> NDArray:
    """Band shares of ``reg`` at ``size``, with a stored per-size slow share where finite."""
    base = reg.component_shares(size)
    if not reg.is_mixture:
        return base
    ok = np.isfinite(share)
    if ok.any():
        base = base.copy()
        base[ok, 1] = share[ok]
        base[ok, 0] = 1.0 - share[ok]
    return base



def estimate_shape(ps: PerSize, regimes: list[Regime], si: NDArray, ti: NDArray,
                   base_lnq: Any) -> None:
    """Per-size shape: a shrunk ln shift of each stored size's quantiles (in place).

    One location shift per band and a band share do not carry everything a size does:
    on Ethernet a size's slow band has its own spread, and where the regime's bands are a
    noise mixture (no size-dependent share) a size differs in how much of its mass sits in
    the tail, not where its floor is. The general random effect is on the whole quantile
    function: at each level u of SHAPE_LEVELS the size's empirical ln quantile minus the
    model's (after the location/share adjustments), ``d_z(u)``, with sampling variance
    ``u(1-u)/n_z · (d ln Q / du)²`` (the asymptotic variance of a sample quantile, with the
    density from the model: where the model puts a gap between bands the sample quantile is
    uncertain and barely moves). Per regime and level, the shifts are the regime's median
    offset ``m(u)`` plus ``B_z(u)·(d_z(u) − m(u))``, ``B = τ²(u)/(τ²(u) + v)`` with τ² by the
    same robust method of moments as the location. A level is used for a size only when
    at least one of its samples is expected beyond it (``(n+1)·min(u, 1−u) ≥ 1``); otherwise
    the size gets the regime's offset only. The size's quantiles are *predictive* ones (order
    statistic u·(n+1), see :func:`predictive_quantiles`): the band is for a new sample.
    ``base_lnq(sizes, q)`` is the model's ln quantiles.
    """
    if not ps.estimated or len(ps.sizes) == 0:
        return
    # In a regime without bands a size's median moves mostly with how much of its mass
    # sits in the noise's tail (or its second mode), not with its floor: shifting the whole
    # distribution by the median's deviation would move the floor too. There the shape is
    # taken around the population distribution and replaces the location shift at stored
    # sizes (the location effects still serve unseen sizes).
    for c in ps.components:
        if c.get("estimated") and not regimes[c["regime"]].is_mixture:
            c["shape_base"] = "population"
    lv = SHAPE_LEVELS
    sizes_all, starts = np.unique(si, return_index=True)
    gid = np.repeat(np.arange(len(sizes_all)), np.diff(np.r_[starts, len(si)]))
    pos = np.searchsorted(sizes_all, ps.sizes)
    n = ps.n.astype(float)
    store_of = np.full(len(sizes_all), -1, dtype=np.int64)
    store_of[pos] = np.arange(len(pos))
    store_of = store_of[gid]  # stored-size index of each sample (-1: not stored)
    held = store_of >= 0  # the stored sizes' samples (in size order, so their ids ascend)
    held_store, held_lt = store_of[held], np.log(ti[held])
    emp = predictive_quantiles(held_store, held_lt, lv)
    step = np.minimum(0.01, np.minimum(lv, 1 - lv) / 2)
    L = len(lv)
    usable = (n[:, None] + 1) * np.minimum(lv, 1 - lv)[None, :] >= 1.0
    # The slope (for the sampling variance) only where a level is usable: sizes share one
    # of a few usable-level patterns (set by n), each asked for just the quantiles it needs.
    base = np.empty((len(n), L))
    lo_q = np.full((len(n), L), np.nan)
    hi_q = np.full((len(n), L), np.nan)
    # the patterns as integers (bit j: level j usable): np.unique over rows sorts them as
    # byte strings, a tenth of this function at 1 M samples
    key = usable.astype(np.int64) @ (1 << np.arange(L, dtype=np.int64))
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    for k, at in enumerate(first):
        rows = np.flatnonzero(which.ravel() == k)
        cols = np.flatnonzero(usable[at])
        # one call for the levels and both sides of the usable ones: the model's terms at
        # these sizes are built once (each level's root is found on its own either way)
        lq = base_lnq(ps.sizes[rows], np.r_[lv, lv[cols] - step[cols], lv[cols] + step[cols]])
        base[rows] = lq[:, :L]
        lo_q[np.ix_(rows, cols)] = lq[:, L:L + len(cols)]
        hi_q[np.ix_(rows, cols)] = lq[:, L + len(cols):]
    slope = np.maximum(hi_q - lo_q, 0.0) / (2 * step)
    with np.errstate(invalid="ignore"):
        v = lv * (1 - lv) / n[:, None] * slope**2
    bps = np.asarray([r.size_min for r in regimes[1:]], dtype=float)
    reg_of = np.searchsorted(bps, ps.sizes, side="right")
    for k in range(len(regimes)):
        small = (reg_of == k) & (n < MEAN_LIKE_N)
        if not small.any():
            continue
        # a few samples' quantiles: their variance simulated from the regime's within-size
        # distribution at a typical size of the regime
        at = float(np.exp(np.median(np.log(np.maximum(ps.sizes[reg_of == k], 1.0)))))
        ns, inv = np.unique(n[small], return_inverse=True)
        v_mc = small_n_variance(_within_size_draw(regimes[k], at), ns, lv)
        v[small] = np.fmax(v[small], v_mc[inv.ravel()])
    d = emp - base
    shape = np.zeros_like(d)
    for k in range(len(regimes)):
        mk = reg_of == k
        taus: list[float | None] = []
        for j in range(L):
            ok = mk & usable[:, j] & np.isfinite(d[:, j])
            if ok.sum() < MIN_SIZES:
                taus.append(None)  # too few repetitions per size to see this level
                continue
            m = float(np.median(d[ok, j]))
            big = ok & (n >= MEAN_LIKE_N)
            if big.sum() >= MIN_SIZES:
                # Moment estimator, not the robust one: at a given level most sizes often
                # sit on the regime's quantile and a minority far off it (a tail share that
                # is a property of the size); a median-based tau² would call that minority
                # noise. Not sizes seen twice: their "median" is a mean (see MEAN_LIKE_N).
                tau2 = max(0.0, float(np.mean((d[big, j] - m) ** 2 - v[big, j])))
            else:
                # Sizes seen twice each (a log-uniform design's chance repeats, or
                # --repeat-fraction's): one stall among two samples is not a tail share,
                # and in a plain mean one such size sets tau² for all of them.
                tau2 = robust_tau2(d[ok, j] - m, v[ok, j])
            B = _shrink(d[ok, j], v[ok, j], tau2)
            shape[mk, j] = m
            shape[ok, j] = m + B * (d[ok, j] - m)
            taus.append(float(np.sqrt(tau2)))
        # A level too far out for a size's sample count takes the shift of the nearest
        # level the size could inform (its tail is the regime's, moved with its body).
        rows = np.flatnonzero(mk)
        if len(rows):
            use = usable[rows]
            mid = L // 2
            sub = shape[rows]
            for j in range(mid - 1, -1, -1):
                sub[:, j] = np.where(use[:, j], sub[:, j], sub[:, j + 1])
            for j in range(mid + 1, L):
                sub[:, j] = np.where(use[:, j], sub[:, j], sub[:, j - 1])
            shape[rows] = sub
            # Those carried tails are then calibrated on the regime's pooled samples: at
            # such a level the offset is the one that puts share u of the samples of these
            # sizes below it (one value per regime and level, so it is well determined).
            for j in range(L):
                few = rows[~use[:, j]]
                if len(few) < MIN_SIZES:
                    continue
                mark = np.zeros(len(n), dtype=bool)
                mark[few] = True
                sel = mark[held_store]
                st = held_store[sel]
                r = held_lt[sel] - (base[st, j] + shape[st, j])
                shape[few, j] += float(np.quantile(r, lv[j]))
        # Quantiles never decrease: raise a level's shift where it would undercut the last.
        w = base[mk] + shape[mk]
        shape[mk] = np.maximum.accumulate(w, axis=1) - base[mk]
        for c in ps.components:
            if c["regime"] == k and c.get("estimated"):
                c["tau_shape"] = taus
    ps.shape = shape


def predictive_quantiles(group: NDArray, values: NDArray, levels: NDArray) -> NDArray:
    """Per-group (n_groups, len(levels)) quantiles at order statistic ``u·(n+1)`` (1-based,
    interpolated, clipped to the sample).

    A new draw falls below the k-th of n samples with probability k/(n+1), whatever the
    distribution, so these are the plug-in quantiles of a *predictive* band: numpy's default
    (u·(n−1)+1) gives a [p05, p95] band that holds only (n−1)/(n+1)·0.9 of new samples
    (0.86 for n = 47).
    """
    order, starts, counts = runs_of(group)
    v = sort_within_runs(values[order], starts, counts)
    out = np.empty((len(starts), len(levels)))
    for k, u in enumerate(levels):
        lo, hi, f = order_position(u, counts)
        out[:, k] = v[starts + lo] * (1 - f) + v[starts + hi] * f
    return out


def order_position(u: float, counts: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """0-based order statistics (lo, hi) and weight f of hi for the predictive u-quantile
    of samples of each count: position u·(n+1) (1-based), interpolated, clipped."""
    p = np.clip(u * (counts + 1) - 1.0, 0.0, counts - 1.0)
    lo = np.floor(p).astype(np.int64)
    return lo, np.minimum(lo + 1, counts - 1), p - lo
