"""Per-size effects on top of the regime curves, shrunk by empirical Bayes.

On real clusters each exact message size has its own behaviour: its median sits a little
above or below the regime's curve, on Ethernet the share of the slow band is a property of
the size (reproducible between runs, not smooth in size), and so are its spread and tail. A
smooth curve cannot carry that, and a lookup table cannot say anything about a size it has
not seen. This layer does both, per regime:

- location: ``d_z`` = ln(median at size z) − ln(the regime's median at z) (band-relative in
  a two-band regime), sampling variance ``v_z = (π/2)·σ²/n_z`` (σ² the regime's pooled
  within-size variance of ln time), and a between-size variance ``τ²`` (robust method of
  moments). Each size's effect is shrunk: ``loc_z = B_z·d_z`` with ``B_z = τ²/(τ² + v_z)``;
- band share (two-band regimes): the size's slow-band share by EM with the bands fixed,
  sampling variance ``w(1−w)/n_z``, variance component ``τ²_share``, shrunk the same way.

Once the per-size effects are known the regime's noise is refitted on the *within-size*
ratios (the pooled noise also held the between-size scatter). At a size without a shape of
its own the location effect is the kernel mean of neighbouring sizes' effects (a table over
ln size, bandwidth by leave-one-size-out) and what it leaves is integrated out
(Gauss–Hermite over N(0, τ²)), the share is the regime's curve: the population of sizes.
Every size seen often enough then gets its own distribution on top of that population
(:mod:`kit.model.sizeshape`, format 2): its quantile function, pooled with the population's
as much as cross-validation says, stored only where it differs.

Model files written before format 2 (``version`` 1 here) stored every repeated size with its
location, share and a shape at nine levels around them; they are read and predicted as they
were. Designs with one sample per size give nothing to separate the variances from: the
layer then says so (``estimated = False`` with the reason) and changes nothing.
"""

from __future__ import annotations

import math
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
from kit.model.sizeshape import MIN_OWN, SHAPE_LEVELS, SHAPE_UNIT, fill_rows, tail_ratios

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
#: Below this many samples a size's median is the mean of its samples (two), which one stall
#: moves by orders of magnitude: such sizes stay out of the kernel means for unseen sizes
#: (``kernel_min_n``) and get no shape of their own (kit.model.sizeshape.MIN_OWN).
MEAN_LIKE_N = MIN_OWN
#: The nine levels of format-1 shapes (files written before kit.model.sizeshape).
LEGACY_SHAPE_LEVELS = np.array([0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98])
#: Between-size SD left at unseen sizes below this fraction of the within-size SD is not
#: integrated out (the population is then one size's distribution at the kernel mean).
NEGLIGIBLE_SPREAD = 0.1
#: Semantics of the layer this kit writes (see the module docstring).
VERSION = 2
#: Most nodes of a kernel-mean table (over a regime's ln sizes, step h/4).
MAX_TABLE_NODES = 4096


@dataclass
class PerSize:
    """Per-size adjustments (stored sizes) and the variance components (per regime).

    ``version`` 2 (what fits make): ``sizes``/``n`` are the sizes whose own distribution
    differs from the population's, ``shape`` their ln shifts at ``levels`` (NaN where a
    level is not stored: linear in ln time between the stored ones), ``loc``/``share``/
    ``loc_slow`` are empty, and each component holds its kernel-mean tables. ``version`` 1
    (files before format 2): every repeated size with its location and share, and
    ``shape`` (full rows, or none) at ``levels`` on top of them.
    """

    estimated: bool
    reason: str = ""
    sizes: NDArray = field(default_factory=lambda: np.zeros(0))
    n: NDArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loc: NDArray = field(default_factory=lambda: np.zeros(0))  # ln shift at that size
    share: NDArray = field(default_factory=lambda: np.zeros(0))  # slow-band share or NaN
    #: per regime: regime, size_min, size_max, n_sizes, tau_loc, sigma_within, tau_share,
    #: shrink_median (median B over its sizes), estimated (bool), reason; version 2: the
    #: kernel-mean tables (``kernel``, ``kernel_slow``) and the shape's ``alpha`` per level
    components: list[dict[str, Any]] = field(default_factory=list)
    loc_slow: NDArray = field(default_factory=lambda: np.zeros(0))  # slow band's, or NaN
    #: (len(sizes), len(levels)) ln shift of the predictive quantile at each level
    #: (empty: no shape adjustment)
    shape: NDArray = field(default_factory=lambda: np.zeros((0, len(SHAPE_LEVELS))))
    version: int = VERSION
    levels: NDArray = field(default_factory=lambda: SHAPE_LEVELS.copy())
    #: False in a view that predicts every size as one never measured (the stored sizes
    #: still inform the kernel mean of their neighbours): not serialised.
    own: bool = True

    def has_shape(self) -> bool:
        return (self.estimated and self.own and len(self.sizes) > 0
                and self.shape.shape[0] == len(self.sizes))

    def warp_rows(self, size: NDArray) -> tuple[NDArray, NDArray, NDArray] | None:
        """(positions in ``size`` of stored sizes, their rows of ln shifts, the levels any of
        the rows stores) or None. A version-2 row keeps a few levels: the map through them
        is the map through every level (the others lie on its segments), so the base
        quantiles are needed at those levels only."""
        if not self.has_shape():
            return None
        idx = self.lookup(size)
        at = np.flatnonzero(idx >= 0)
        if not len(at):
            return None
        rows = self.shape[idx[at]]
        cols = (np.arange(len(self.levels)) if self.version < 2
                else np.flatnonzero(~np.isnan(rows).all(axis=0)))
        return at, rows[:, cols], cols

    def warp_map(self, rows: NDArray, base_knots: NDArray, z: NDArray,
                 inverse: bool = False) -> NDArray:
        """The monotone map of ln time, base -> own (``inverse``: own -> base), of sizes with
        ``rows`` of ln shifts (from :meth:`warp_rows`).

        ``base_knots`` (len(rows), used levels) are the base distribution's ln quantiles at
        the rows' levels; the map is piecewise linear in ln time through (base knot, base
        knot + shift), so between levels a size keeps the base's shape, and quantiles, CDF
        and draws are one distribution. Beyond the end knots: a plain shift (version 1), or
        the base's tail compressed by :func:`kit.model.sizeshape.tail_ratios` (version 2).
        ``z`` is (len(rows),) or (len(rows), m).
        """
        x = np.asarray(base_knots, dtype=float)
        shift = np.asarray(rows, dtype=float)
        if self.version >= 2:
            shift = fill_rows(x, shift)
        y = np.maximum.accumulate(x + shift, axis=1)
        if self.version >= 2:
            r_lo, r_hi = tail_ratios(x, y)
        else:
            r_lo = r_hi = np.ones(len(x))
        if inverse:
            x, y = y, x
            r_lo, r_hi = 1.0 / r_lo, 1.0 / r_hi
        zz = np.asarray(z, dtype=float)
        flat = zz.reshape(len(x), -1)
        if len(x) > 1 and not np.isnan(x).any() and not np.any(np.diff(x, axis=1) < 0):
            out = _interp_rows(flat, x, y)
        else:  # a row at a time, as np.interp does it (unordered knots: its own answer)
            out = np.empty_like(flat)
            for r in range(len(x)):
                out[r] = np.interp(flat[r], x[r], y[r])
        lo, hi = flat < x[:, :1], flat > x[:, -1:]
        out[lo] = (y[:, :1] + r_lo[:, None] * (flat - x[:, :1]))[lo]
        out[hi] = (y[:, -1:] + r_hi[:, None] * (flat - x[:, -1:]))[hi]
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
        if self.version >= 2:
            table = comp.get("kernel_slow" if band == 1 else "kernel")
            if not h or not table:
                return np.zeros(len(size)), tau_u
            return table_mean(table, size), tau_u
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
        if self.version < 2:
            return self._to_dict_v1()
        rows = np.asarray(self.shape, dtype=np.float64)
        kept = ~np.isnan(rows)
        # each row: a bit mask of its stored levels, and its values (row by row, one flat
        # list) in SHAPE_UNIT: 9,000 stored sizes of 9 levels each take 0.5 MB as written
        # floats in nested lists, and 0.2 MB so
        masks = (kept.astype(np.int64) << np.arange(rows.shape[1], dtype=np.int64)).sum(axis=1)
        units = np.rint(rows[kept] / SHAPE_UNIT).astype(np.int64)
        return {
            "version": self.version, "estimated": self.estimated, "reason": self.reason,
            "method": ("random effects per regime: ln-median location and slow-band share "
                       "per size, variance components by the method of moments, kernel "
                       "means for unseen sizes; each size's own predictive quantiles "
                       "pooled with the population's as n / (n + alpha), alpha per level by "
                       "five-fold cross-validation (pinball loss); stored where they differ "
                       "beyond the noise"),
            "min_repeats": MIN_OWN,
            "variance_components": self.components,
            # tolist(): the same Python numbers as float()/int() of each element, without
            # a Python call per element
            "sizes": _floats(self.sizes), "n": np.asarray(self.n).astype(np.int64).tolist(),
            "shape_levels": _floats(self.levels),
            "shape_unit": SHAPE_UNIT,
            "knots": masks.tolist(),
            "shape": units.tolist(),
        }

    def _to_dict_v1(self) -> dict[str, Any]:
        return {
            "estimated": self.estimated, "reason": self.reason,
            "method": ("random effects per regime: ln-median location and slow-band share "
                       "per size, variance components by the method of moments, "
                       "shrinkage B = tau^2 / (tau^2 + sampling variance)"),
            "min_repeats": MIN_REPEATS,
            "variance_components": self.components,
            "sizes": _floats(self.sizes), "n": np.asarray(self.n).astype(np.int64).tolist(),
            "loc": _floats(self.loc),
            "loc_slow": _finite_or_none(self.loc_slow),
            "share": _finite_or_none(self.share),
            **({"shape_levels": _floats(self.levels),
                "shape": np.asarray(self.shape, dtype=np.float64).tolist()}
               if self.has_shape() else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PerSize:
        version = int(d.get("version", 1))
        comps = [dict(c) for c in d.get("variance_components", [])]
        sizes = np.asarray(d.get("sizes", []), dtype=float)
        n = np.asarray(d.get("n", []), dtype=np.int64)
        if version >= 2:
            levels = np.asarray(d.get("shape_levels", SHAPE_LEVELS), dtype=float)
            shape = np.full((len(sizes), len(levels)), np.nan)
            masks = np.asarray(d.get("knots", []), dtype=np.int64)
            kept = (masks[:, None] >> np.arange(len(levels), dtype=np.int64)) & 1 == 1
            shape[kept] = np.asarray(d.get("shape", []), dtype=float) * float(
                d.get("shape_unit", SHAPE_UNIT))
            return cls(bool(d["estimated"]), str(d.get("reason", "")), sizes, n,
                       components=comps, shape=shape, version=version, levels=levels)

        def opt(key: str) -> NDArray:
            return np.asarray([np.nan if v is None else float(v) for v in d.get(key, [])],
                              dtype=float)

        levels = np.asarray(d.get("shape_levels", LEGACY_SHAPE_LEVELS), dtype=float)
        shape = np.zeros((0, len(levels)))
        if d.get("shape"):
            shape = np.asarray(d["shape"], dtype=float).reshape(-1, len(levels))
        return cls(bool(d["estimated"]), str(d.get("reason", "")), sizes, n,
                   np.asarray(d.get("loc", []), dtype=float), opt("share"), comps,
                   opt("loc_slow"), shape, version=1, levels=levels)

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
            if self.version >= 2:
                line += _describe_shape(c, self.levels)
            else:
                line += _describe_legacy_shape(c, self.levels)
            out.append(line)
        return out


def _describe_shape(c: dict[str, Any], levels: NDArray) -> str:
    """The shape's pooling in words: how much a size's own quantiles count."""
    alpha = c.get("alpha")
    if not alpha:
        return ("; no size was seen often enough to tell its own distribution from the "
                "population's")
    at = {name: alpha[int(np.argmin(np.abs(levels - u)))] for name, u in
          (("p05", 0.05), ("median", 0.5), ("p95", 0.95))}
    n = int(c.get("n_median", 0)) or 10

    def kept(a: float | None) -> str:
        return "0%" if a is None else f"{n / (n + a):.0%}"

    tau, sigma = c.get("tau_loc_unseen") or 0.0, c.get("sigma_within") or 0.0
    v = (math.pi / 2) * sigma**2 / n
    located = tau**2 / (tau**2 + v) if tau > 0 and v > 0 else 0.0
    return (f"; a size seen {n} times keeps {located:.0%} of its own median's deviation, "
            f"and beyond that {kept(at['median'])} of its own median, {kept(at['p05'])} of "
            f"its p05 and {kept(at['p95'])} of its p95 (cross-validated); "
            f"{c.get('n_stored', 0)} of {c.get('n_candidates', 0)} sizes seen "
            f"{MIN_OWN}+ times differ from the population by more than 0.1 % and are stored")


def _describe_legacy_shape(c: dict[str, Any], levels: NDArray) -> str:
    line = ""
    if "shrink_median" in c:
        line += (f"; a size seen {int(c['n_median'])} times keeps "
                 f"{c['shrink_median']:.0%} of its own deviation")
    if c.get("tau_shape"):
        ts = dict(zip(levels, c["tau_shape"], strict=False))
        tails = [f"in {name} by ±{np.expm1(ts[u]):.1%}" for name, u in
                 (("p05", 0.05), ("p95", 0.95)) if ts.get(u) is not None]
        line += ("; beyond that, they differ " + " and ".join(tails) + " (SD)" if tails else
                 "; their tails cannot be told apart with so few repetitions (the "
                 "regime's tails, calibrated on its pooled samples, are used)")
    return line


def table_mean(table: dict[str, Any], size: NDArray) -> NDArray:
    """A kernel-mean table's value at each size: linear in ln size between its nodes, its
    end values beyond them."""
    values = np.asarray(table["values"], dtype=float)
    nodes = float(table["x0"]) + float(table["step"]) * np.arange(len(values))
    at = np.log(np.maximum(np.asarray(size, dtype=float), 1.0))
    return np.interp(at, nodes, values)


def kernel_table(lo: float, hi: float, x: NDArray, eff: NDArray, h: float) -> dict[str, Any]:
    """The kernel mean of effects ``eff`` at ln sizes ``x`` on nodes from ln ``lo`` to ln
    ``hi`` every h/4 (at most MAX_TABLE_NODES): what unseen sizes read, instead of every
    stored size's effect (the kernel is smooth on the scale h, so linear interpolation
    between nodes h/4 apart is within ~1 % of the effects' own size)."""
    a, b = math.log(max(lo, 1.0)), math.log(max(hi, 1.0))
    count = min(MAX_TABLE_NODES, max(2, math.ceil((b - a) / (h / 4)) + 1))
    step = (b - a) / (count - 1) if b > a else 1.0
    nodes = a + step * np.arange(count)
    values = np.round(kernel_mean(nodes, x, eff, h), 7)
    return {"x0": a, "step": step, "values": values.tolist()}


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
    """Per-size location layer from inlier samples (``si`` sorted): variance components and
    kernel tables per regime; refits regime noises in place (the stored sizes come from
    :func:`attach_shapes`).

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
            if t2u < (NEGLIGIBLE_SPREAD ** 2) * sig2:
                # Integrating a spread this small moves no quantile by more than ~0.5 % of
                # the within-size spread, and costs five terms instead of one at every size
                # a model is asked about (an export asks at thousands).
                t2u = 0.0
            comp[key + "_unseen"] = float(np.sqrt(t2u))
            if h:
                comp["kernel_slow" if j == 1 else "kernel"] = kernel_table(
                    float(reg.size_min), float(reg.size_max),
                    np.log(np.maximum(sizes[mj][kern], 1.0)), loc[mj, j][kern], h)
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

    _refit_noise(regimes, reg_of_size, in_overlap, gid, si, ti, np.nan_to_num(loc), band_of,
                 rng, noise_fams)
    # The sizes and their shapes come next (attach_shapes); the location and share
    # effects live on in the kernel tables and the noise refitted within sizes.
    return PerSize(True, "", components=components)


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



def attach_shapes(ps: PerSize, regimes: list[Regime], si: NDArray, ti: NDArray,
                  pop_lnq: Any, one_lnq: Any, rng: np.random.Generator) -> None:
    """Each size's own distribution on top of the population (:mod:`kit.model.sizeshape`):
    fills ``ps.sizes``/``n``/``shape`` with the sizes that differ, and each component's
    ``alpha``, ``tail_scale``, ``n_candidates``, ``n_stored`` (in place).
    ``pop_lnq(sizes, levels)``: the model's ln quantiles at sizes it has not seen;
    ``one_lnq``: of one size at the kernel mean's location (no spread between sizes)."""
    from kit.model.sizeshape import estimate_shape

    if not ps.estimated:
        return
    sizes_all, counts = np.unique(si, return_counts=True)
    bps = np.asarray([r.size_min for r in regimes[1:]], dtype=float)
    regime_of = np.searchsorted(bps, sizes_all, side="right")
    edges = [*bps] + [e for r in regimes if r.overlap is not None
                      for e in (r.overlap.size_lo, r.overlap.size_hi)]
    location = [(math.nan, math.nan)] * len(regimes)
    for c in ps.components:
        if c.get("estimated") and c.get("sigma_within") is not None:
            location[c["regime"]] = (float(c.get("tau_loc_unseen", c["tau_loc"]) or 0.0),
                                     float(c["sigma_within"]))
    stored, rows, info = estimate_shape(sizes_all, counts, np.log(ti), regime_of, location,
                                        pop_lnq, one_lnq, rng, np.asarray(edges))
    ps.sizes, ps.n, ps.shape = sizes_all[stored], counts[stored].astype(np.int64), rows
    for c in ps.components:
        if c.get("estimated"):
            c.update(info[c["regime"]])
