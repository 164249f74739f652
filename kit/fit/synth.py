"""Synthetic (size, time) samples from known regimes and noise: test data with a truth.

The engine is checked against data whose breakpoints, families, parameters, overlap and
noise are known exactly. A :class:`TrueRegime` is a size range, a curve family and a
noise shape on time / curve (median-normalised, so the curve is the true median); an
optional second band (curve + share growing logistically with ln size) mimics the
Ethernet fast/slow bands, and an :class:`TrueOverlap` lets samples near a boundary follow
either neighbouring regime.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.special import expit

from kit.model.families import evaluate

SHAPES = ("lognormal", "gamma", "weibull", "invgauss", "fisk", "bimodal")


@dataclass
class TrueNoise:
    """Ratio distribution with median 1 (except ``bimodal``: two lognormal modes).

    ``lognormal``: sigma=spread; ``gamma``: shape=shape; ``weibull``: c=shape;
    ``invgauss``: mu=spread; ``fisk``: c=shape; ``bimodal``: a second mode ``factor``
    times the first holding ``share`` of the samples, both with sigma=spread.
    """

    shape: str = "lognormal"
    spread: float = 0.1
    factor: float = 3.0
    share: float = 0.3

    def draw(self, n: int, rng: np.random.Generator) -> NDArray:
        if self.shape == "lognormal":
            return rng.lognormal(0.0, self.spread, n)
        if self.shape == "bimodal":
            slow = rng.random(n) < self.share
            return rng.lognormal(0.0, self.spread, n) * np.where(slow, self.factor, 1.0)
        dist = self.scipy()
        return dist.rvs(size=n, random_state=rng) / dist.median()

    def scipy(self) -> stats.rv_continuous:
        """The frozen scipy distribution of a unimodal shape (before median scaling)."""
        if self.shape == "gamma":
            return stats.gamma(1.0 / self.spread**2)
        if self.shape == "weibull":
            return stats.weibull_min(1.2 / self.spread)
        if self.shape == "invgauss":
            return stats.invgauss(self.spread**2)
        if self.shape == "fisk":
            return stats.fisk(1.8 / self.spread)
        raise ValueError(f"unknown noise shape {self.shape!r}")


@dataclass
class TrueBand:
    """A slow band: its own curve; share = expit(intercept + slope·ln s)."""

    family: str
    params: dict[str, float]
    intercept: float
    slope: float


@dataclass
class TrueRegime:
    size_min: float
    family: str
    params: dict[str, float]
    noise: TrueNoise = field(default_factory=TrueNoise)
    band: TrueBand | None = None


@dataclass
class TrueOverlap:
    """Near boundary ``index`` (between regime index and index+1), share of the right regime
    = expit(slope·(ln s − ln center))."""

    index: int
    center: float
    slope: float


@dataclass
class Truth:
    regimes: list[TrueRegime]
    overlaps: list[TrueOverlap] = field(default_factory=list)

    @property
    def breakpoints(self) -> list[float]:
        return [r.size_min for r in self.regimes[1:]]

    def median(self, size: NDArray) -> NDArray:
        """The true curve of the regime each size belongs to (ignores bands/overlaps)."""
        s = np.asarray(size, dtype=float)
        idx = np.searchsorted(self.breakpoints, s, side="right")
        out = np.empty(len(s))
        for k, reg in enumerate(self.regimes):
            m = idx == k
            out[m] = evaluate(reg.family, reg.params, s[m])
        return out


def sizes(n: int, lo: float, hi: float, *, grid: int | None = None,
          rng: np.random.Generator) -> NDArray:
    """``n`` sizes in [lo, hi]: log-uniform integers, or ``grid`` geometric points each
    repeated evenly (in random order, as a well-designed campaign does)."""
    if grid:
        pts = np.unique(np.round(np.geomspace(lo, hi, grid)))
        out = np.resize(pts, n)
        rng.shuffle(out)
        return out
    return np.floor(np.exp(rng.uniform(np.log(lo), np.log(hi + 1), n)))


def generate(truth: Truth, size: NDArray, rng: np.random.Generator) -> NDArray:
    """One time per size, drawn from ``truth``."""
    s = np.asarray(size, dtype=float)
    idx = np.searchsorted(truth.breakpoints, s, side="right")
    x = np.log(np.maximum(s, 1.0))
    for ov in truth.overlaps:
        near = (idx == ov.index) | (idx == ov.index + 1)
        right = rng.random(len(s)) < expit(ov.slope * (x - np.log(ov.center)))
        idx = np.where(near, np.where(right, ov.index + 1, ov.index), idx)
    t = np.empty(len(s))
    for k, reg in enumerate(truth.regimes):
        m = idx == k
        if not m.any():
            continue
        curve = evaluate(reg.family, reg.params, s[m])
        if reg.band is not None:
            b = reg.band
            slow = rng.random(int(m.sum())) < expit(b.intercept + b.slope * x[m])
            curve = np.where(slow, evaluate(b.family, b.params, s[m]), curve)
        t[m] = curve * reg.noise.draw(int(m.sum()), rng)
    return t


def sample(truth: Truth, n: int, lo: float = 1, hi: float = 2**20, *, grid: int | None = None,
           seed: int = 0) -> tuple[NDArray, NDArray]:
    """(size, time) arrays of ``n`` samples from ``truth``."""
    rng = np.random.default_rng(seed)
    s = sizes(n, lo, hi, grid=grid, rng=rng)
    return s, generate(truth, s, rng)


def ethernet_like() -> Truth:
    """Three regimes shaped like a 10 GbE TCP ping-pong: constant latency, a jump to a
    two-band middle whose slow share grows with size, a jump at 64 KiB to a linear
    rendezvous regime."""
    return Truth([
        TrueRegime(1, "constant", {"a": 11e-6}, TrueNoise("lognormal", 0.05)),
        TrueRegime(128, "power", {"a": 4e-6, "b": 0.3}, TrueNoise("lognormal", 0.06),
                   band=TrueBand("power", {"a": 16e-6, "b": 0.3}, -9.0, 1.0)),
        TrueRegime(65537, "linear", {"a": 60e-6, "b": 1.0 / 1.1e9}, TrueNoise("gamma", 0.08)),
    ])


def jumps() -> Truth:
    """Three regimes with jumps at 128 B and 64 KiB and no slow band: its curve is the true
    median (the noises have median 1), so intervals on the median can be checked against it,
    next to the breaks too."""
    return Truth([
        TrueRegime(1, "constant", {"a": 11e-6}, TrueNoise("lognormal", 0.25)),
        TrueRegime(128, "linear", {"a": 20e-6, "b": 1e-9}, TrueNoise("lognormal", 0.3)),
        TrueRegime(65537, "linear", {"a": 60e-6, "b": 1.0 / 1.1e9}, TrueNoise("gamma", 0.3)),
    ])


def size_effects(reps: int, seed: int, *, n_sizes: int = 600, levels: NDArray | None = None,
                 truth_draws: int = 20000) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """(sizes, times, grid, true quantiles at ``levels`` per grid size): ``reps`` samples of
    each of ``n_sizes`` log-spaced sizes (1 B - 1 MB) around :func:`ethernet_like`'s curves,
    every size with its own location (SD 2 %), spread (lognormal σ = 0.04·e^N(0, 0.4)) and
    upper tail (a share U(0, 8 %) of its samples slowed by 1 + Exp(0.15-0.45)).

    Why: on real clusters each size has a distribution of its own, which a model must carry
    (kit.model.sizeshape) without memorising noise; here the true quantiles are known (from
    ``truth_draws`` draws per size), so a model can be scored against the truth and against
    the lookup table of its training samples alike."""
    rng = np.random.default_rng(seed)
    grid = np.unique(np.round(np.geomspace(1, 999_999, n_sizes)))
    curve = ethernet_like().median(grid)
    loc = rng.normal(0, 0.02, len(grid))
    sigma = 0.04 * np.exp(rng.normal(0, 0.4, len(grid)))
    p_tail = rng.uniform(0, 0.08, len(grid))
    tail = 0.3 * rng.uniform(0.5, 1.5, len(grid))

    def draw(i: int, n: int) -> NDArray:
        t = curve[i] * np.exp(loc[i] + sigma[i] * rng.standard_normal(n))
        slow = rng.random(n) < p_tail[i]
        return np.asarray(t * np.where(slow, 1 + rng.exponential(tail[i], n), 1.0))

    s = np.repeat(grid, reps)
    t = np.concatenate([draw(i, reps) for i in range(len(grid))])
    lv = np.linspace(0.01, 0.99, 99) if levels is None else np.asarray(levels, dtype=float)
    true_q = np.array([np.quantile(draw(i, truth_draws), lv) for i in range(len(grid))])
    return s, t, grid, true_q
