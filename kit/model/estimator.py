"""``RegimeModel``: the scikit-learn style estimator tying the engine together.

fit: validate → flag outliers per size neighbourhood → per-size summaries → exact DP
segmentation on ln size (K by BIC, or user breakpoints) → merge neighbours that one
(two-band) regime explains better on the raw samples (BIC) → refine each boundary to the
sample → per regime: family by AIC on robust fits to per-size medians, two-band mixture if
the raw samples hold one, noise on time / curve by ML + AIC → overlaps at each boundary by
EM, refitting regimes on the samples they own. Every step after the outlier flags works on
summaries or bounded subsamples, so the cost grows little beyond sorting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kit.core.blas import one_blas_thread
from kit.core.errors import ModelError
from kit.model.families import FAMILIES, N_PARAMS, aic_from_rss, evaluate, fit_family
from kit.model.memo import ContentMemo, clear_all, content_rng
from kit.model.mixture import (
    MAX_EM_SAMPLES,
    MAX_QUICK_EM_SAMPLES,
    assign_bands,
    detect_bands,
)
from kit.model.noise import NOISE_FAMILIES, Noise, fit_noise
from kit.model.outliers import flag_outliers, stable_argsort
from kit.model.overlap import fit_overlap
from kit.model.params import Params
from kit.model.persize import PerSize, attach_shapes
from kit.model.persize import estimate as estimate_per_size
from kit.model.predictive import cdf as _cdf
from kit.model.predictive import quantiles as _quantiles
from kit.model.predictive import sample as _sample
from kit.model.predictive import terms as _terms
from kit.model.regime import Component, Overlap, Regime
from kit.model.segmentation import (
    Bins,
    choose_segmentation,
    design_weights,
    intra_size_correlation,
    make_bins,
    refine_boundary,
    reweight,
)
from kit.model.special import functions, use_scipy

#: Fewest samples a model can be fitted to.
MIN_SAMPLES = 5
#: Extra regimes the DP may propose beyond max_regimes (the merge pass removes them).
SEARCH_EXTRA = 4
#: Regimes the DP proposes beyond its own choice (the raw-sample merge pass decides).
PROPOSE_EXTRA = 1
#: Refit rounds alternating sample ownership in overlap windows and the overlap EM.
OVERLAP_ROUNDS = 3
#: How far (factor in size) a found boundary may move when refined on raw samples.
REFINE_FACTOR = 1.25
#: Raw samples per comparison (about) when deciding whether to merge neighbouring regimes.
MAX_MERGE_SAMPLES = 20000
#: Fewest samples for trying a two-band mixture in a regime.
MIN_MIXTURE_SAMPLES = 200
#: Slack of :meth:`RegimeModel.cdf_bounds` in ln time and in level: above the root
#: search's tolerance on a stored size's base quantiles (1e-10 relative) and scipy's ppf
#: wobble (up to 1e-5 relative, see predict_quantiles), far below any margin a physical
#: model has (a size nearer a limit than that gets the exact CDF).
_BOUND_MARGIN = 1e-4
#: Candidate curve fits already made on the same samples (see :mod:`kit.model.memo`).
_CURVE_FITS = ContentMemo()


def _regime_params(reg: Regime) -> int:
    """Free parameters of a regime's density (for BIC when merging)."""
    if reg.is_mixture:
        return 2 + sum(2 + _noise_params(c.noise) for c in reg.components)
    return N_PARAMS[reg.family] + _noise_params(reg.noise)


def _noise_params(noise: Noise) -> int:
    if noise.family == "gmm":
        return 3 * len(noise.params["weights"]) - 1
    return len(noise.params)


def _as_sizes(size: ArrayLike, what: str = "size") -> NDArray:
    s = np.asarray(size, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ModelError(f"{what} must be finite and >= 0 bytes", where=what,
                         hint="give message sizes in bytes")
    return s


def _monotone(out: NDArray, q: NDArray) -> NDArray:
    """Quantiles ``out`` (a column per level ``q``) made non-decreasing in the level, in place:
    a quantile function never decreases; scipy's ppf of near-degenerate fits (e.g. inverse
    Gaussian with mu ~ 1e-10) can wobble by 1e-5 relative."""
    order = np.argsort(q, kind="stable")
    out[:, order] = np.maximum.accumulate(out[:, order], axis=1)
    return out


def _too_few(lo_edge: float, hi_edge: float, n: int, min_support: int) -> ModelError:
    return ModelError(f"regime [{max(lo_edge, 0):g}, {hi_edge:g}) B holds {n} samples, "
                      f"fewer than the minimum support {min_support}", where="breakpoints",
                      hint="use fewer breakpoints or lower min_support")


def default_min_support(n: int) -> int:
    """Fewest samples per regime when ``min_support=None``: max(20, 1 % of ``n``).

    Public so that callers fitting a subsample (the TUI's preview) apply the same rule.
    """
    return max(20, int(np.ceil(0.01 * n)))


class RegimeModel(Params):
    """Piecewise (per-regime) model of point-to-point time vs message size, with noise.

    Parameters are stored verbatim (scikit-learn contract); see docs/architecture.md "Model".
    ``min_support=None`` means max(20, 1 % of the samples) per regime; ``noise=False`` fits
    lognormal noise only (faster); ``mixture=False`` never makes two-band regimes.
    """

    #: Training rows flagged as outliers (fit order); None for a model read from a file.
    outlier_mask_: NDArray[np.bool_] | None

    def __init__(self, breakpoints: Sequence[float] | None = None,
                 families: Sequence[str | None] | None = None, max_regimes: int = 6,
                 min_support: int | None = None, overlap: bool = True, noise: bool = True,
                 random_state: int | None = 0, mixture: bool = True,
                 outlier_k: float = 6.0, per_size: bool = True) -> None:
        self.breakpoints = breakpoints
        self.families = families
        self.max_regimes = max_regimes
        self.min_support = min_support
        self.overlap = overlap
        self.noise = noise
        self.random_state = random_state
        self.mixture = mixture
        self.outlier_k = outlier_k
        self.per_size = per_size

    # ------------------------------------------------------------------ fitting
    def _check_params(self, n: int) -> int:
        if self.families is not None:
            bad = [f for f in self.families if f is not None and f not in FAMILIES]
            if bad:
                raise ModelError(f"unknown family {bad[0]!r}", where="families",
                                 hint=f"use one of {', '.join(FAMILIES)} (or None to choose)")
        if int(self.max_regimes) < 1:
            raise ModelError("max_regimes must be >= 1", where="max_regimes")
        ms = self.min_support
        return default_min_support(n) if ms is None else max(1, int(ms))

    def fit(self, size: ArrayLike, time: ArrayLike) -> RegimeModel:
        # A fit computes with scipy.special's functions from its first step, whatever was
        # read in this process before (kit.model.special): the same bits every time.
        use_scipy()
        with one_blas_thread():
            return self._fit(size, time)

    def _fit(self, size: ArrayLike, time: ArrayLike) -> RegimeModel:
        s = np.asarray(size, dtype=np.float64).reshape(-1)
        t = np.asarray(time, dtype=np.float64).reshape(-1)
        if s.shape != t.shape:
            raise ModelError(f"size and time differ in length ({len(s)} vs {len(t)})",
                             where="fit(size, time)")
        if len(s) < MIN_SAMPLES:
            raise ModelError(f"only {len(s)} samples; a model needs at least {MIN_SAMPLES}",
                             where="fit(size, time)", hint="select a series with more samples")
        bad_t = ~np.isfinite(t) | (t <= 0)
        if bad_t.any():
            raise ModelError(f"{int(bad_t.sum())} of {len(t)} times are NaN, infinite, zero or "
                             "negative", where="fit(size, time)",
                             hint="drop or repair those rows (times are seconds > 0)")
        _as_sizes(s, "fit(size, time)")
        min_support = self._check_params(len(s))
        clear_all()  # memoised EMs live for one fit
        rng = np.random.default_rng(self.random_state)
        # Regime fits seed their own generators from their samples and this (content_rng).
        self._regime_seed = (int(self.random_state) if self.random_state is not None
                             else int(np.random.default_rng().integers(2**63)))

        order = stable_argsort(s)
        ss, ts = s[order], t[order]
        out_sorted = flag_outliers(ss, np.log(ts), k=float(self.outlier_k))
        inl = ~out_sorted
        si, ti = ss[inl], ts[inl]
        if len(si) < MIN_SAMPLES:
            raise ModelError("too few samples left after outlier flagging", where="fit(size, time)")

        bins_all = make_bins(si, ti)
        # Samples of one size share that size's effect: with intra-size correlation rho a
        # size seen n times carries the information of
        # n / (1 + (n-1)·rho) independent samples (Kish's design effect). Every
        # likelihood-based decision below (merging regimes, two bands or one) weighs
        # samples by that, so that repeating the same sizes cannot buy regimes or bands.
        breakpoints = self._breakpoints(si, ti, min_support, bins_all)
        cuts = np.searchsorted(bins_all.first, breakpoints).tolist()
        self._bins = bins_all
        self._rho = intra_size_correlation(bins_all, cuts)
        weights = design_weights(si, bins_all, self._rho)
        edges = np.r_[-np.inf, breakpoints, np.inf]
        fam_list: list[str | None] = (list(self.families) if self.families is not None
                                      else [None] * (len(edges) - 1))
        if len(fam_list) != len(edges) - 1:
            raise ModelError(f"{len(fam_list)} families given for {len(edges) - 1} regimes",
                             where="families", hint="give one family (or None) per regime")
        def fit_between(lo_edge: float, hi_edge: float, family: str | None,
                        quick: bool = False) -> Regime:
            lo, hi = np.searchsorted(si, [lo_edge, hi_edge], side="left")
            olo, ohi = np.searchsorted(ss, [lo_edge, hi_edge], side="left")
            # One regime holding every sample needs no support check (5 samples suffice).
            if hi - lo < max(min_support, 1) and (lo > 0 or hi < len(si)):
                raise _too_few(lo_edge, hi_edge, int(hi - lo), min_support)
            reg = self._fit_regime(si[lo:hi], ti[lo:hi], family, quick)
            reg.size_min = float(si[lo]) if lo_edge == -np.inf else float(lo_edge)
            reg.size_max = float(si[-1]) if hi_edge == np.inf else float(hi_edge)
            reg.n_outliers = int(out_sorted[olo:ohi].sum())
            return reg

        # Whether max_regimes decided anything (the selection wanted more regimes): the cap
        # is a safety net, and a fit that hits it says so.
        k_dp: int | None = getattr(self, "_k_chosen", None)
        report: dict[str, bool] = {"cap": bool(
            self.breakpoints is None and self.families is None and k_dp is not None
            and k_dp >= int(self.max_regimes) + SEARCH_EXTRA)}
        if self.breakpoints is None and self.families is None and len(edges) > 2:
            # Merge decisions compare many candidate regimes: use the two most flexible noise
            # families there, then refit the survivors with every family.
            regimes = [fit_between(edges[k], edges[k + 1], None, True)
                       for k in range(len(edges) - 1)]
            regimes, breakpoints = self._merge_pass(regimes, list(edges), si, ti,
                                                    lambda a, b: fit_between(a, b, None, True), rng,
                                                    int(self.max_regimes), weights,
                                                    getattr(self, "_k_chosen", None), report)
            breakpoints = self._refine(regimes, breakpoints, si, ti, min_support)
            edges = np.r_[-np.inf, breakpoints, np.inf]
            fam_list = [None] * (len(edges) - 1)
        regimes = [fit_between(edges[k], edges[k + 1], fam_list[k]) for k in range(len(edges) - 1)]
        if self.overlap:
            self._fit_overlaps(regimes, breakpoints, si, ti, fam_list, min_support)

        self.regimes_ = regimes
        self.breakpoints_ = [float(b) for b in breakpoints]
        self.cap_reached_ = report["cap"]
        self.per_size_: PerSize | None = None
        if self.per_size:
            if not self.noise:
                fams: tuple[str, ...] = ("lognormal",)
            else:
                fams = NOISE_FAMILIES
            self.per_size_ = estimate_per_size(
                regimes, self.breakpoints_, si, ti,
                lambda z: _quantiles(_terms(regimes, self.breakpoints_, z), len(z),
                                     np.array([0.5]))[:, 0], rng, fams)
            ps = self.per_size_
            bps = self.breakpoints_
            attach_shapes(
                ps, regimes, si, ti,
                lambda z, q: np.log(_quantiles(_terms(regimes, bps, z, ps), len(z), q)),
                lambda z, q: np.log(_quantiles(_terms(regimes, bps, z, ps, spread=False),
                                               len(z), q)), rng)
        mask = np.zeros(len(s), dtype=bool)
        mask[order] = out_sorted
        self.outlier_mask_ = mask
        self.n_outliers_ = int(mask.sum())
        self.n_samples_ = len(s)
        return self

    def _fit_overlaps(self, regimes: list[Regime], breakpoints: list[float], si: NDArray,
                      ti: NDArray, fam_list: list[str | None], min_support: int) -> None:
        """Overlap windows at each boundary (in place); found boundaries move to their centre."""
        def refit(k: int, mine: NDArray, quick: bool) -> None:
            new = self._fit_regime(si[mine], ti[mine], fam_list[k], quick)
            new.size_min, new.size_max = regimes[k].size_min, regimes[k].size_max
            new.n_outliers = regimes[k].n_outliers
            regimes[k] = new

        seen: dict[int, tuple[Regime, Regime, float, Overlap | None]] = {}
        overlaps = self._overlaps(regimes, breakpoints, si, ti, seen)
        refitted: dict[int, NDArray] = {}  # regime -> the samples it was last refitted on
        for _ in range(OVERLAP_ROUNDS):
            if not any(overlaps):
                break
            # Samples of the other regime inside a window would otherwise be fitted as
            # a band or noise tail of this one: refit on the samples each regime owns,
            # with the two quick noise families while the windows still move.
            labels = self._owners(regimes, breakpoints, overlaps, si, ti)
            moved = False
            for k in range(len(regimes)):
                near = (k > 0 and overlaps[k - 1]) or (k < len(overlaps) and overlaps[k])
                mine = labels == k
                if not near or np.sum(mine) < min_support:
                    continue
                if k in refitted and np.array_equal(refitted[k], mine):
                    continue  # the same samples: the same quick fit
                refit(k, mine, True)
                refitted[k] = mine
                moved = True
            if not moved:
                break  # a fixed point: the windows would not move again
            overlaps = self._overlaps(regimes, breakpoints, si, ti, seen)
        labels = self._owners(regimes, breakpoints, overlaps, si, ti)
        for k in sorted(refitted):  # final noise with every family
            if np.sum(labels == k) >= min_support:
                refit(k, labels == k, False)
        if refitted:
            overlaps = self._overlaps(regimes, breakpoints, si, ti, seen)
        for k, ov in enumerate(overlaps):
            regimes[k].overlap = ov
            if ov is not None and self.breakpoints is None:
                # A found boundary sits where the summary moved; with an overlap the
                # natural boundary is where each regime holds half of the samples.
                bp = float(np.clip(ov.center, regimes[k].size_min, regimes[k + 1].size_max))
                breakpoints[k] = regimes[k].size_max = regimes[k + 1].size_min = bp

    @staticmethod
    def _merge_pass(regimes: list[Regime], edges: list[float], si: NDArray, ti: NDArray,
                    fit_between: Any, rng: np.random.Generator, max_regimes: int,
                    weights: NDArray | None = None,
                    k_chosen: int | None = None, report: dict[str, bool] | None = None
                    ) -> tuple[list[Regime], list[float]]:
        """Merge neighbours while one regime (with bands) explains their raw samples better.

        The DP sees per-size summaries only: where a slow band's share drifts with size, or
        two regimes overlap, the summary drifts too and the DP cuts it into pieces. Here
        the full densities (curve × noise, bands) are compared on the raw samples by BIC,
        which sees that one two-band regime describes the pieces at once. While more than
        ``max_regimes`` remain, the pair whose merge costs least is merged even if BIC
        prefers them apart. ``weights`` (per sample, design effect) make the unit of the
        likelihood the size rather than the repetition. ``k_chosen``: the number of regimes
        the summaries' selection chose; regimes proposed beyond it are there for band
        structure the summaries cannot see, so while more remain, a boundary between two
        one-band regimes (merging into one band) is merged even if BIC keeps it.
        """
        wts = np.ones(len(si)) if weights is None else weights
        cache: dict[tuple[float, float], tuple[Regime, float]] = {}
        # One fixed subsample of all samples: both sides of a comparison must be scored on
        # the same samples, or subsampling noise decides the merge.
        keep = np.ones(len(si), dtype=bool)
        if len(si) > MAX_MERGE_SAMPLES * 4:
            keep = rng.random(len(si)) < MAX_MERGE_SAMPLES * 4 / len(si)

        # A regime's log-likelihood of its samples is asked again by the pair on its other
        # side and at every merge round that leaves it as it was (40 % of the evaluations
        # at 33 k): kept by (regime, the sizes its part spans, weighting), with the regime
        # itself, so that a freed regime's id reused by a new one is not taken for it.
        part_ll: dict[tuple[Any, ...], tuple[Regime, float]] = {}

        def score(lo_e: float, hi_e: float, parts: list[Regime], per_sample: bool) -> float:
            lo, hi = np.searchsorted(si, [lo_e, hi_e], side="left")
            idx = lo + np.flatnonzero(keep[lo:hi])
            s, t = si[idx], ti[idx]
            bounds = [p.size_min for p in parts[1:]]
            which = np.searchsorted(bounds, s, side="right")
            w = np.ones(len(idx)) if per_sample else wts[idx]
            ll = 0.0
            for k, p in enumerate(parts):
                span = (max(lo_e, bounds[k - 1]) if k else lo_e,
                        min(hi_e, bounds[k]) if k < len(bounds) else hi_e)
                key = (id(p), *span, per_sample)
                hit = part_ll.get(key)
                if hit is not None and hit[0] is p:
                    ll += hit[1]
                    continue
                m = which == k
                part = (float(np.sum(w[m] * np.maximum(p.logpdf(s[m], t[m]), -1e3)))
                        if m.any() else 0.0)
                part_ll[key] = (p, part)
                ll += part
            k_par = sum(_regime_params(p) for p in parts) + len(parts) - 1
            return -2 * ll + k_par * float(np.log(max(float(w.sum()), 2.0)))

        while len(regimes) > 1:
            best: tuple[float, int, Regime] | None = None
            for k in range(len(regimes) - 1):
                key = (edges[k], edges[k + 2])
                if key not in cache:
                    try:
                        merged = fit_between(edges[k], edges[k + 2])
                    except ModelError:
                        continue
                    cache[key] = (merged, 0.0)
                merged, _ = cache[key]
                # Two bands are seen within each size (every repetition is evidence of the
                # bimodality), so comparisons involving a two-band regime count samples;
                # otherwise the size is the unit (design-effect weights).
                per_sample = merged.is_mixture or any(r.is_mixture for r in regimes[k:k + 2])
                delta = (score(*key, [merged], per_sample)
                         - score(*key, regimes[k:k + 2], per_sample))
                spare = (k_chosen is not None and len(regimes) > k_chosen and not per_sample)
                if ((delta < 0 or spare or len(regimes) > max_regimes)
                        and (best is None or delta < best[0])):
                    best = (delta, k, merged)
            if best is None:
                break
            delta, k, merged = best
            if report is not None and delta >= 0 and len(regimes) > max_regimes and not (
                    k_chosen is not None and len(regimes) > k_chosen):
                report["cap"] = True  # merged only because of max_regimes
            regimes[k:k + 2] = [merged]
            del edges[k + 1]
        return regimes, [float(e) for e in edges[1:-1]]

    @staticmethod
    def _overlaps(regimes: list[Regime], breakpoints: list[float], si: NDArray, ti: NDArray,
                  seen: dict[int, tuple[Regime, Regime, float, Overlap | None]] | None = None
                  ) -> list[Overlap | None]:
        """Each boundary's overlap. ``seen`` (per boundary: the two regime objects, the
        boundary and the result) carries results across overlap rounds: a boundary whose
        regimes were not refitted gets the same (deterministic) fit again."""
        out: list[Overlap | None] = []
        for k in range(len(regimes) - 1):
            left, right, bp = regimes[k], regimes[k + 1], breakpoints[k]
            last = None if seen is None else seen.get(k)
            if last is not None and last[0] is left and last[1] is right and last[2] == bp:
                out.append(last[3])
                continue
            ov = fit_overlap(left, right, bp, si, ti)
            if seen is not None:
                seen[k] = (left, right, bp, ov)
            out.append(ov)
        return out

    @staticmethod
    def _owners(regimes: list[Regime], breakpoints: list[float],
                overlaps: list[Overlap | None], si: NDArray, ti: NDArray) -> NDArray:
        """Regime index of each sample: by boundary, or inside an overlap window by posterior."""
        labels = np.searchsorted(np.asarray(breakpoints), si, side="right")
        for b, ov in enumerate(overlaps):
            if ov is None:
                continue
            m = (si >= ov.size_lo) & (si <= ov.size_hi) & ((labels == b) | (labels == b + 1))
            if not m.any():
                continue
            s, t = si[m], ti[m]
            w = np.clip(ov.weight(s), 1e-12, 1 - 1e-12)
            right = np.log(w) + regimes[b + 1].logpdf(s, t) > np.log1p(-w) + regimes[b].logpdf(s, t)
            labels[m] = np.where(right, b + 1, b)
        return labels

    @staticmethod
    def _refine(regimes: list[Regime], breakpoints: list[float], si: NDArray, ti: NDArray,
                min_support: int) -> list[float]:
        """Move each found boundary to the best split of the raw samples near it (keeping
        every regime's minimum support)."""
        out = list(breakpoints)
        for k, bp in enumerate(breakpoints):
            lo_s = max(bp / REFINE_FACTOR, regimes[k].size_min)
            hi_s = min(bp * REFINE_FACTOR, regimes[k + 1].size_max)
            lo, hi = np.searchsorted(si, [lo_s, hi_s], side="left")
            if hi - lo < 2:
                continue
            s, lt = si[lo:hi], np.log(ti[lo:hi])
            i = refine_boundary(s, lt, np.log(regimes[k].curve(s)), np.log(regimes[k + 1].curve(s)))
            if 0 < i < len(s):
                trial = [*out[:k], float(s[i]), *out[k + 1:]]
                counts = np.diff(np.searchsorted(si, [-np.inf, *trial, np.inf], side="left"))
                if counts.min() >= min_support:
                    out = trial
        return out

    def _breakpoints(self, si: NDArray, ti: NDArray, min_support: int,
                     bins: Bins | None = None) -> list[float]:
        if self.breakpoints is not None:
            bps = sorted(float(b) for b in self.breakpoints)
            if any(not np.isfinite(b) or b <= 0 for b in bps) or len(set(bps)) != len(bps):
                raise ModelError("breakpoints must be distinct sizes > 0 bytes",
                                 where="breakpoints", hint="e.g. --breakpoints 1420,65536")
            # Checked before anything is fitted: an empty regime (a breakpoint beyond the
            # largest size, --breakpoints 1e12) ended in a ZeroDivisionError on the way.
            edges = [-np.inf, *bps, np.inf]
            counts = np.diff(np.searchsorted(si, edges, side="left"))
            for k, n in enumerate(counts.tolist() if bps else []):
                if n < max(min_support, 1):
                    raise _too_few(edges[k], edges[k + 1], n, min_support)
            return bps
        bins = make_bins(si, ti) if bins is None else bins
        fams = list(self.families) if self.families is not None else None
        # The DP may use SEARCH_EXTRA more regimes than asked: it allocates regimes by the
        # summaries' fit, and spends some on small features the raw-sample merge pass then
        # removes; the pass merges down to max_regimes.
        k_max = int(self.max_regimes) + (SEARCH_EXTRA if fams is None else 0)
        self._k_chosen = None
        cuts = choose_segmentation(bins, k_max, min_support, fams)
        if fams is None and cuts:
            # Second pass on weights from the scatter around the first pass's curves; it
            # proposes PROPOSE_EXTRA more regimes than it chooses, for the merge pass.
            chosen: list[int] = []
            cuts = choose_segmentation(reweight(bins, cuts), k_max, min_support, fams,
                                       extra=PROPOSE_EXTRA if bins.per_size else 0,
                                       chosen=chosen)
            self._k_chosen = chosen[0] if chosen else None
        if cuts is None:
            raise ModelError(f"cannot split {len(si)} samples into {len(fams or [])} regimes of at "
                             f"least {min_support} samples", where="families",
                             hint="ask for fewer regimes or lower min_support")
        return [float(bins.first[c]) for c in cuts]

    def _fit_regime(self, s: NDArray, t: NDArray, family: str | None,
                    quick: bool = False) -> Regime:
        key = ContentMemo.key(s, t)
        rng = content_rng(self._regime_seed, key)
        nb, fits = self._curve_fits(s, t, family, key)
        # Parsimony: among families within 2 AIC units of the best (equally supported), the
        # one with fewest parameters; otherwise a flat regime often comes out as s^0.001.
        top = min(v[0] for v in fits.values())
        best = min((f for f in fits if fits[f][0] <= top + 2.0),
                   key=lambda f: (N_PARAMS[f], fits[f][0]))
        if not self.noise:
            noise_fams: tuple[str, ...] = ("lognormal",)
        else:
            noise_fams = ("lognormal", "gmm") if quick else NOISE_FAMILIES
        params = fits[best][1]
        noise = fit_noise(t / evaluate(best, params, s), rng, noise_fams)
        reg = Regime(0.0, 0.0, best, params, noise, n_samples=len(s),
                     aic={f: v[0] for f, v in fits.items()})
        if self.mixture and len(s) >= MIN_MIXTURE_SAMPLES and nb >= 3:
            deff = (len(s) / float(design_weights(s, self._bins, self._rho).sum())
                    if hasattr(self, "_rho") else 1.0)
            self._add_bands(reg, s, t, rng, noise_fams, deff,
                            MAX_QUICK_EM_SAMPLES if quick else MAX_EM_SAMPLES)
        return reg

    @staticmethod
    def _curve_fits(s: NDArray, t: NDArray, family: str | None, key: bytes
                    ) -> tuple[int, dict[str, tuple[float, dict[str, float]]]]:
        """(number of bins, {family: (AIC, parameters)}) of the candidate curves of these
        samples; ``key`` is their content digest. A merge-pass candidate that survives
        unchanged is refitted with every noise family: its curves are the same."""
        memo_key = key + repr(family).encode()
        hit, value = _CURVE_FITS.get(memo_key)
        if hit:
            return value
        # One regime's family: its own overall between-size variance is enough (the local
        # one matters for placing boundaries, which is done).
        bins = make_bins(s, t, local=False)
        nb = len(bins.size)
        # One size identifies a level only: constant (the others would fit it exactly too,
        # and round-off would pick among them).
        cands = [family] if family else [f for f in FAMILIES if nb > N_PARAMS[f] or (nb == 1
                                         and f == "constant")]
        fits: dict[str, tuple[float, dict[str, float]]] = {}
        for fam in cands:
            params, rss = fit_family(fam, bins.size, bins.median, bins.weight)
            fits[fam] = (aic_from_rss(rss, float(bins.weight.mean()), nb, N_PARAMS[fam]), params)
        _CURVE_FITS.put(memo_key, (nb, fits))
        return nb, fits

    @staticmethod
    def _add_bands(reg: Regime, s: NDArray, t: NDArray, rng: np.random.Generator,
                   noise_fams: tuple[str, ...], deff: float = 1.0,
                   max_samples: int = MAX_EM_SAMPLES) -> None:
        """Turn ``reg`` into a two-band regime if its raw samples hold two bands."""
        x, y = np.log(np.maximum(s, 1.0)), np.log(t)

        def baseline(xb: NDArray, yb: NDArray) -> tuple[float, int]:
            # ln-time density of curve × noise: ln p(t) + ln t, with t = exp(yb).
            curve = reg.curve(np.exp(xb))
            ll = float(np.sum(reg.noise.logpdf(np.exp(yb) / curve) - np.log(curve) + yb))
            return ll, N_PARAMS[reg.family] + _noise_params(reg.noise)

        bands = detect_bands(x, y, rng, baseline, deff, max_samples)
        if bands is None:
            return
        owner = assign_bands(bands, x, y)
        for k in range(2):
            params = {"a": float(np.exp(bands.lines[k, 0])), "b": float(bands.lines[k, 1])}
            mine = owner == k
            ratio = t[mine] / evaluate("power", params, s[mine])
            reg.components.append(Component("power", params, fit_noise(ratio, rng, noise_fams),
                                            float(np.mean(mine))))
        reg.weight = {"intercept": float(bands.weight[0]), "slope": float(bands.weight[1])}

    # --------------------------------------------------------------- prediction
    def _check_fitted(self) -> None:
        if not hasattr(self, "regimes_"):
            raise ModelError("the model is not fitted", where="RegimeModel",
                             hint="call fit() or load a model file first")

    def _terms(self, size: ArrayLike) -> tuple[NDArray, list]:
        self._check_fitted()
        s = _as_sizes(size)
        return s, _terms(self.regimes_, self.breakpoints_, s, getattr(self, "per_size_", None))

    def _shape_rows(self, s: NDArray, tl: list
                    ) -> tuple[PerSize, NDArray, NDArray, NDArray, list] | None:
        """(per-size layer, positions in ``s``, their rows of shifts, base ln quantiles at
        the rows' levels, their terms) of the sizes with a map of their own
        (kit.model.persize.PerSize.warp_rows), or None when there are none."""
        ps = getattr(self, "per_size_", None)
        if ps is None:
            return None
        found = ps.warp_rows(s)
        if found is None:
            return None
        at, rows, cols = found
        # only the terms these sizes have: the same answer, and the same key for the same
        # sizes whatever else was asked with them (a model file's check asks for its grid
        # too, whose Gauss-Hermite terms weigh nothing here; export then asks for these alone)
        sub = [(w[at], sc[at], nz) for w, sc, nz in tl if w[at].any()]
        return ps, at, rows, self._base_knots(ps, sub, len(at), ps.levels[cols]), sub

    def _base_knots(self, ps: PerSize, sub: list, n: int, levels: NDArray) -> NDArray:
        """ln quantiles of the base terms ``sub`` at ``levels``: the root searches that are
        most of a per-size model's evaluation. The last answer is kept on the model: a
        validation asks for the held-out sizes' quantiles and then draws at the same sizes
        (0.13 CPU-s a repeat at 490 stored sizes). The key is everything the answer depends
        on: the layer (the same object, held), the terms' values and noises (the same
        objects, held; a fitted model's noises are not changed in place), the levels and
        which special functions run (kit.model.special): a hit is that computation's result."""
        key = (functions(), n, levels.tobytes(),
               tuple((w.tobytes(), sc.tobytes(), id(nz)) for w, sc, nz in sub))
        memo = getattr(self, "_knots_memo", None)
        if memo is not None and memo[0] is ps and memo[1] == key:
            return memo[2].copy()
        knots = np.log(_quantiles(sub, n, levels))
        self._knots_memo = (ps, key, knots.copy(), [nz for _, _, nz in sub])  # noises held
        return knots

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles (``fit --all`` workers, a test's deepcopy) carry no kept base
        quantiles: the kept key holds the special-functions module, which cannot be copied,
        and a copy's first evaluation recomputes them (the same values)."""
        return {k: v for k, v in self.__dict__.items() if k != "_knots_memo"}

    def regime_index(self, size: ArrayLike) -> NDArray:
        """Index of the regime each size falls in (by breakpoints, overlaps ignored)."""
        self._check_fitted()
        return np.searchsorted(np.asarray(self.breakpoints_), _as_sizes(size), side="right")

    def curve(self, size: ArrayLike) -> NDArray:
        """Each size's regime curve family(params): the central line export uses."""
        s = _as_sizes(size)
        idx = self.regime_index(s)
        out = np.empty(len(s))
        for k, reg in enumerate(self.regimes_):
            m = idx == k
            if m.any():
                out[m] = reg.curve(s[m])
        return out

    def predict_quantiles(self, size: ArrayLike, q: ArrayLike) -> NDArray:
        s, tl = self._terms(size)
        qq = np.asarray(q, dtype=float).reshape(-1)
        if np.any((qq <= 0) | (qq >= 1)):
            raise ModelError("quantiles must lie strictly between 0 and 1", where="q")
        return _monotone(self._shaped(s, tl, _quantiles(tl, len(s), qq)), qq)

    def predict_quantiles_and_unmeasured(self, size: ArrayLike, q: ArrayLike,
                                         cols: Sequence[int]) -> tuple[NDArray, NDArray]:
        """``predict_quantiles(size, q)`` and ``unmeasured().predict_quantiles(size,
        q[cols])`` from one root search: a format-2 layer's stored sizes are monotone maps
        on the unmeasured distribution (their terms are the same), so its quantiles before
        the maps are the unmeasured view's. Each (size, level) is solved on its own, so the
        values are those of the two calls (the SimGrid export asks for both at the stored
        sizes: kit/outputs/export/persize.py)."""
        qq = np.asarray(q, dtype=float).reshape(-1)
        ps = getattr(self, "per_size_", None)
        if ps is not None and ps.version < 2:  # format 1: terms of their own
            return (self.predict_quantiles(size, qq),
                    self.unmeasured().predict_quantiles(size, qq[list(cols)]))
        s, tl = self._terms(size)
        if np.any((qq <= 0) | (qq >= 1)):
            raise ModelError("quantiles must lie strictly between 0 and 1", where="q")
        base = _quantiles(tl, len(s), qq)
        smooth = _monotone(base[:, list(cols)], qq[list(cols)])
        return _monotone(self._shaped(s, tl, base), qq), smooth

    def population(self) -> RegimeModel:
        """A view of the fitted model without the per-size adjustments of stored sizes.

        Consumers that cannot carry a per-size effect (a simulator's smooth factor curves)
        need the population distribution at every size, with the spread between sizes
        folded in, not the adjustments of the sizes that happened to be measured.
        """
        import copy
        import dataclasses

        self._check_fitted()
        view = copy.copy(self)
        ps = getattr(self, "per_size_", None)
        if ps is not None and ps.estimated and len(ps.sizes):
            empty = np.zeros(0)
            view.per_size_ = dataclasses.replace(
                ps, sizes=empty, n=np.zeros(0, dtype=np.int64), loc=empty, share=empty,
                loc_slow=empty, shape=np.zeros((0, ps.shape.shape[1])))
        return view

    def unmeasured(self) -> RegimeModel:
        """A view predicting every size as a size that was never measured.

        What ``predict`` says between the stored sizes (their neighbours' kernel-mean shift,
        the remaining between-size spread integrated out), at every size: a smooth curve.
        The SimGrid export follows it with its factor lines and adds the stored sizes'
        own adjustments as one-byte entries (kit/outputs/export/persize.py).
        """
        import copy
        import dataclasses

        self._check_fitted()
        view = copy.copy(self)
        ps = getattr(self, "per_size_", None)
        if ps is not None and ps.estimated:
            view.per_size_ = dataclasses.replace(ps, own=False)
        return view

    def stored_sizes(self) -> NDArray:
        """The sizes with adjustments of their own (empty without a per-size layer)."""
        self._check_fitted()
        ps = getattr(self, "per_size_", None)
        if ps is None or not ps.estimated or not ps.own:
            return np.zeros(0)
        return np.asarray(ps.sizes, dtype=np.float64)

    def predict(self, size: ArrayLike) -> NDArray:
        """Median time (s) of the predictive distribution at each size."""
        return self.predict_quantiles(size, [0.5])[:, 0]

    def cdf(self, size: ArrayLike, time: ArrayLike) -> NDArray:
        """Predictive CDF at ``time`` ((n,) or (n, m)) for each of the n sizes."""
        s, tl = self._terms(size)
        t = np.asarray(time, dtype=float)
        out = _cdf(tl, t)
        warp = self._shape_rows(s, tl)
        if warp is not None:  # stored sizes: F(t) = F_base(map⁻¹(t))
            ps, at, rows, knots, sub = warp
            lt = np.log(np.maximum(t[at], 1e-300))
            out[at] = _cdf(sub, np.exp(ps.warp_map(rows, knots, lt, inverse=True)))
        return out

    def cdf_bounds(self, size: ArrayLike, time: ArrayLike) -> tuple[NDArray, NDArray]:
        """(lower, upper) bounds on :meth:`cdf` at ``time`` ((n, m)), without the base
        quantiles a stored size's own map rests on (a root search per size and level: most
        of a model file's read check at 490 stored sizes). Exact where a size has no map
        of its own; at a stored size, from its shifts alone.

        Why they hold: the map g (kit.model.persize.PerSize.warp_map) goes through knots
        (x_j, y_j) with y_j - x_j between the row's least and greatest stored shift
        (s_min, s_max; fill_rows interpolates between stored shifts, the running maximum
        only moves y_j to an earlier x_i + s_i with x_i <= x_j), is linear between knots and
        beyond the ends keeps a ratio in (0, 1] of the base's tail. So g(z) >= z + s_min
        up to the last knot x_L (and >= y_L beyond), g(z) <= z + s_max from the first knot
        x_0 on (and <= y_0 below). Hence F(t) <= F_base(t·e^-s_min) while that is below
        the row's last stored level (then ln t - s_min < x_L), and F(t) >= F_base(t·e^-s_max)
        while that is above its first stored level; otherwise 1 and 0. A margin of
        :data:`_BOUND_MARGIN` in ln time covers the root search's tolerance on the knots."""
        s, tl = self._terms(size)
        t = np.asarray(time, dtype=float)
        exact = _cdf(tl, t)
        lo, hi = exact, exact.copy()
        ps = getattr(self, "per_size_", None)
        found = None if ps is None else ps.warp_rows(s)
        if ps is None or found is None:
            return lo, hi
        at, rows, cols = found
        sub = [(w[at], sc[at], nz) for w, sc, nz in tl if w[at].any()]
        kept = ~np.isnan(rows)
        has = kept.any(axis=1)
        with np.errstate(all="ignore"):
            s_min = np.where(has, np.nanmin(np.where(kept, rows, np.inf), axis=1), np.nan)
            s_max = np.where(has, np.nanmax(np.where(kept, rows, -np.inf), axis=1), np.nan)
            levels = ps.levels[cols]
            first = levels[np.argmax(kept, axis=1)]
            last = levels[len(cols) - 1 - np.argmax(kept[:, ::-1], axis=1)]
            tt = t[at]
            f_hi = _cdf(sub, tt * np.exp(-(s_min - _BOUND_MARGIN))[:, None])
            f_lo = _cdf(sub, tt * np.exp(-(s_max + _BOUND_MARGIN))[:, None])
        # NaN (a row without shifts, a failed evaluation) compares False: the trivial bounds
        hi[at] = np.where(f_hi < (last - _BOUND_MARGIN)[:, None], f_hi, 1.0)
        lo[at] = np.where(f_lo > (first + _BOUND_MARGIN)[:, None], f_lo, 0.0)
        return lo, hi

    def sample(self, size: ArrayLike, n: int = 1,
               random_state: int | np.random.Generator | None = None) -> NDArray:
        """(len(size), n) times drawn from the predictive distribution."""
        s, tl = self._terms(size)
        rng = np.random.default_rng(random_state)
        return self._shaped(s, tl, _sample(tl, len(s), int(n), rng))

    def sample_each(self, size: ArrayLike, n: int,
                    random_state: int | np.random.Generator | None = None) -> NDArray:
        """(len(size), n) draws: what ``sample([s], n, rng)`` gives for each size in turn
        on the one generator (the same stream, the same values), with the terms evaluated
        once for all sizes (a third of the SimGrid export's 112 calls of 4000 draws)."""
        s, tl = self._terms(size)
        rng = np.random.default_rng(random_state)
        out = np.empty((len(s), int(n)))
        for i in range(len(s)):
            one = [(w[i:i + 1], sc[i:i + 1], nz) for w, sc, nz in tl if w[i] != 0]
            out[i] = self._shaped(s[i:i + 1], one, _sample(one, 1, int(n), rng))[0]
        return out

    def _shaped(self, s: NDArray, tl: list, base: NDArray) -> NDArray:
        """``base`` times (quantiles or draws of the base terms ``tl``, a row per size of
        ``s``) with each stored size's row through that size's monotone map (in place)."""
        warp = self._shape_rows(s, tl)
        if warp is not None:
            ps, at, rows, knots, _ = warp
            base[at] = np.exp(ps.warp_map(rows, knots, np.log(base[at])))
        return base
