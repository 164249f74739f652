"""PNG figures of a fitted series (matplotlib, Agg backend: no display needed).

The figures answer the questions a reader of a model has, in the order they have them:
does the curve follow the samples across sizes (log-log scatter with the regimes, the
fitted curves, the p05..p95 band and the overlap windows), is the noise shape right
(histogram of ``time / curve`` per regime with the fitted density and the model's own
draws), and how does that compare with simpler models (validation score per size).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

from kit.core.atomicwrite import save_png

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

#: Cap on plotted points: beyond this the scatter is a random subsample (stated in the title).
MAX_POINTS = 40_000
_COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _subsample(x: NDArray, y: NDArray, rng: np.random.Generator) -> tuple[NDArray, NDArray, str]:
    if x.size <= MAX_POINTS:
        return x, y, ""
    keep = rng.choice(x.size, MAX_POINTS, replace=False)
    return x[keep], y[keep], f" ({MAX_POINTS:,} of {x.size:,} samples shown)"


def _size_span(model: RegimeModel, size: NDArray | None) -> tuple[float, float]:
    regimes = model.regimes_
    lo = max(float(regimes[0].size_min), 1.0)
    hi = max(float(regimes[-1].size_max), lo * 10)
    if size is not None and size.size:
        lo = min(lo, max(float(size.min()), 1.0))
        hi = max(hi, float(size.max()))
    return lo, hi


def scatter_plot(path: Path, model: RegimeModel, size: NDArray | None, time: NDArray | None,
                 title: str, baselines: Mapping[str, Any] | None = None,
                 random_state: int = 0) -> Path:
    """Log-log scatter, regime spans, central curves, median and p05..p95 band, overlaps."""
    rng = np.random.default_rng(random_state)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    note = ""
    if size is not None and time is not None and size.size:
        xs, ys, note = _subsample(np.maximum(size, 0.5), time, rng)
        ax.scatter(xs, ys, s=3, alpha=0.25, color="0.35", lw=0, label="samples", rasterized=True)
    lo, hi = _size_span(model, size)
    for k, r in enumerate(model.regimes_):
        a, b = max(float(r.size_min), lo), min(float(r.size_max), hi)
        if k % 2:
            ax.axvspan(a, b, color="0.92", zorder=0)
        if k:
            ax.axvline(float(r.size_min), color="0.5", lw=0.8, ls=":")
        grid = np.geomspace(max(a, 1.0), max(b, a * 1.0001), 80)
        ax.plot(grid, model.curve(grid), color=_COLORS[k % len(_COLORS)], lw=1.8,
                label=f"regime {k + 1}: {r.family}")
        ov = getattr(r, "overlap", None)
        if ov is not None:
            ax.axvspan(float(ov.size_lo), float(ov.size_hi), color="tab:orange", alpha=0.15,
                       zorder=0, label="overlap window" if k == 0 else None)
    grid = np.geomspace(lo, hi, 400)
    band = np.asarray(model.predict_quantiles(grid, [0.05, 0.5, 0.95]), dtype=float)
    ax.fill_between(grid, band[:, 0], band[:, 2], color="tab:blue", alpha=0.15,
                    label="model p05..p95")
    ax.plot(grid, band[:, 1], color="k", lw=0.8, ls="--", label="model median")
    for name, base in (baselines or {}).items():
        ax.plot(grid, base.predict(grid), lw=1, ls="-.", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("message size [B]")
    ax.set_ylabel("time [s]")
    ax.set_title(title + note, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    return save_png(fig, path, dpi=100)


def _regime_grid(n: int) -> tuple[Any, list[Any]]:
    """One panel per regime, three to a row: the figure and its axes in regime order."""
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3 * nrow), squeeze=False)
    return fig, [ax for row in axes for ax in row]


def _finish_grid(fig: Any, unused: list[Any], title: str, path: Path) -> Path:
    """Blank the panels no regime uses, title the figure and save it."""
    for ax in unused:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path, dpi=100)


def residual_plot(path: Path, model: RegimeModel, size: NDArray, time: NDArray, title: str,
                  random_state: int = 0) -> Path:
    """Per regime: histogram of ``time / curve`` on a log axis with the fitted density and draws.

    The ratio spans from ~0.5 to 10^4 on a busy node: on a linear axis everything is one
    bar, so the bins are log-spaced over the whole range and the density is that of
    ln(ratio) (a lognormal is a bell here, a heavy tail a long shoulder to the right).
    """
    rng = np.random.default_rng(random_state)
    regimes = model.regimes_
    fig, axes = _regime_grid(len(regimes))
    idx = np.asarray(model.regime_index(size)).ravel()
    curve = np.asarray(model.curve(size), dtype=float).ravel()
    for k, r in enumerate(regimes):
        ax = axes[k]
        sel = idx == k
        ratio = time[sel] / curve[sel]
        ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
        ax.set_title(f"regime {k + 1} ({r.family}, noise {r.noise.family})", fontsize=8)
        if ratio.size < 2:
            ax.text(0.5, 0.5, "no samples", ha="center", transform=ax.transAxes)
            continue
        lo, hi = float(ratio.min()), float(ratio.max())
        if hi <= lo * 1.001:
            hi = lo * 1.01
        bins = np.geomspace(lo, hi, 60)
        ax.hist(ratio, bins=bins, density=False, weights=np.full(ratio.size, 1 / ratio.size),
                color="0.7", label="samples")
        draws_sizes = rng.choice(size[sel], min(400, int(sel.sum())), replace=False)
        draws = np.asarray(model.sample(draws_sizes, 20, random_state=rng), dtype=float)
        dratio = (draws / np.asarray(model.curve(draws_sizes), dtype=float)[:, None]).ravel()
        ax.hist(dratio, bins=bins, weights=np.full(dratio.size, 1 / dratio.size),
                histtype="step", color="tab:blue", lw=1.2, label="model draws")
        if not getattr(r, "components", None):
            # Share of samples per log bin from the fitted CDF: comparable with the bars.
            with np.errstate(all="ignore"):
                share = np.diff(np.asarray(r.noise.cdf(bins), dtype=float))
            ax.step(bins[:-1], share, where="post", color="tab:red", lw=1.0,
                    label=f"fitted {r.noise.family}")
        ax.set_xscale("log")
        ax.set_xlabel("time / curve (log axis)")
        ax.set_ylabel("share of samples per bin")
        ax.legend(fontsize=6)
    return _finish_grid(fig, axes[len(regimes):], title, path)


def tail_plot(path: Path, model: RegimeModel, size: NDArray, time: NDArray, title: str) -> Path:
    """Per regime: the share of samples above each ratio, empirical beside fitted (log-log).

    This is where a noise family that matches the body but misses p95/p99 shows: the
    fitted line leaves the samples' staircase at the right. p95 and p99 are marked.
    """
    regimes = model.regimes_
    fig, axes = _regime_grid(len(regimes))
    idx = np.asarray(model.regime_index(size)).ravel()
    curve = np.asarray(model.curve(size), dtype=float).ravel()
    for k, r in enumerate(regimes):
        ax = axes[k]
        ratio = np.sort(time[idx == k] / curve[idx == k])
        ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
        ax.set_title(f"regime {k + 1}: tail, noise {r.noise.family}", fontsize=8)
        if ratio.size < 2:
            ax.text(0.5, 0.5, "no samples", ha="center", transform=ax.transAxes)
            continue
        surv = 1.0 - np.arange(ratio.size) / ratio.size
        ax.step(ratio, surv, where="post", color="0.3", lw=1.2, label="samples")
        grid = np.geomspace(ratio[0], ratio[-1], 300)
        if not getattr(r, "components", None):
            with np.errstate(all="ignore"):
                ax.plot(grid, 1.0 - np.asarray(r.noise.cdf(grid), dtype=float),
                        color="tab:red", lw=1.2, label=f"fitted {r.noise.family}")
        for q, ls in ((0.95, "--"), (0.99, ":")):
            ax.axhline(1 - q, color="0.6", lw=0.8, ls=ls)
            ax.text(grid[0], 1 - q, f" p{int(q * 100)}", fontsize=6, va="bottom")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(max(0.5 / ratio.size, 1e-5), 1.05)
        ax.set_xlabel("time / curve")
        ax.set_ylabel("share above")
        ax.legend(fontsize=6)
    return _finish_grid(fig, axes[len(regimes):], title, path)


def sequence_plot(path: Path, run_id: NDArray, seq: NDArray, size: NDArray, time: NDArray,
                  disturbed: NDArray, title: str, random_state: int = 0) -> Path:
    """Time relative to each run's quiet level at the same sizes, in measurement order.

    Runs are laid end to end (separated by a line); flagged samples are red, so a busy
    stretch shows as a red plateau above the quiet band at 1.
    """
    from kit.fit.runquality import _bins, _quiet_levels

    fig, ax = plt.subplots(figsize=(9, 3.5))
    offset = 0
    xs, ys, bad = [], [], []
    for r in sorted(set(np.asarray(run_id).astype(str).tolist())):
        m = np.flatnonzero(np.asarray(run_id).astype(str) == r)
        m = m[np.argsort(seq[m], kind="stable")]
        if m.size == 0:
            continue
        ratio = time[m] / _quiet_levels(_bins(size[m]), time[m])
        xs.append(offset + np.arange(m.size))
        ys.append(ratio)
        bad.append(disturbed[m])
        offset += m.size
        ax.axvline(offset, color="0.6", lw=0.6)
    x, y, d = np.concatenate(xs), np.concatenate(ys), np.concatenate(bad)
    rng = np.random.default_rng(random_state)
    keep = np.arange(x.size) if x.size <= MAX_POINTS else rng.choice(x.size, MAX_POINTS,
                                                                       replace=False)
    ax.scatter(x[keep][~d[keep]], y[keep][~d[keep]], s=2, color="0.4", lw=0, alpha=0.4,
               label="samples", rasterized=True)
    if d.any():
        ax.scatter(x[keep][d[keep]], y[keep][d[keep]], s=2, color="tab:red", lw=0, alpha=0.5,
                   label="flagged: disturbed", rasterized=True)
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_yscale("log")
    ax.set_xlabel("sample in measurement order (runs end to end)")
    ax.set_ylabel("time / run's quiet level")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return save_png(fig, path, dpi=100)


#: Bins per decade of message size for the held-out scores: per-size scores of a few
#: held-out samples each zig-zag by a factor of 2 from one size to the next; a bin pools
#: the sizes so that the line shows the model, not the sampling noise of the score.
SCORE_BINS_PER_DECADE = 2


def binned_scores(validation: Mapping[str, Any],
                  per_decade: int = SCORE_BINS_PER_DECADE) -> dict[str, Any]:
    """CRPS / floor per size bin: ``edges``, ``n_sizes`` and one ratio list per model.

    A bin's ratio is the mean CRPS of its sizes over their mean floor (the same pooling as the
    whole-series ``crps_over_floor``), so bins and summary agree.
    """
    per = validation["per_size"]
    x = np.maximum(np.asarray(per["size"], dtype=float), 1.0)
    floor = np.asarray(per["floor_crps"], dtype=float)
    lo = math.floor(math.log10(x.min()) * per_decade)
    hi = math.floor(math.log10(x.max()) * per_decade) + 1
    edges = 10.0 ** (np.arange(lo, hi + 1) / per_decade)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    keep = [b for b in range(len(edges) - 1) if np.any(which == b)]
    ratios: dict[str, list[float]] = {}
    for name, s in per["models"].items():
        crps = np.asarray(s["crps"], dtype=float)
        ratios[name] = [float(crps[which == b].mean() / floor[which == b].mean())
                        if floor[which == b].mean() > 0 else math.nan for b in keep]
    return {"lo": [float(edges[b]) for b in keep], "hi": [float(edges[b + 1]) for b in keep],
            "n_sizes": [int(np.sum(which == b)) for b in keep], "ratios": ratios}


def validation_plot(path: Path, validation: Mapping[str, Any], title: str,
                    breakpoints: list[float] | None = None) -> Path:
    """Held-out CRPS / floor per half-decade of size for the model and each baseline.

    1.0 (the floor) is the best any model can do given the scatter of the data.
    """
    bins = binned_scores(validation)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.axhline(1.0, color="k", lw=1.2, label="floor = 1 (as good as the data allows)")
    styles = {"model": ("tab:blue", 2.2, "o"), "hockney": ("tab:red", 1.2, "s"),
              "peak": ("tab:green", 1.2, "^")}
    all_r: list[float] = []
    for k, (name, ratios) in enumerate(bins["ratios"].items()):
        color, lw, marker = styles.get(name, (_COLORS[(k + 3) % len(_COLORS)], 1.2, "d"))
        for j, (a, b, r) in enumerate(zip(bins["lo"], bins["hi"], ratios, strict=True)):
            if not math.isfinite(r):
                continue
            all_r.append(r)
            ax.plot([a, b], [r, r], color=color, lw=lw,
                    label=("Hockney" if name == "hockney" else name) if j == 0 else None)
            ax.plot([math.sqrt(a * b)], [r], color=color, marker=marker, ms=4)
    for bp in breakpoints or []:
        ax.axvline(float(bp), color="0.5", lw=0.8, ls=":")
    ax.set_xscale("log")
    if all_r and max(all_r) / max(min(all_r), 1e-9) > 8:
        ax.set_yscale("log")  # a baseline 20x off would squash the model's line at 1
    else:
        ax.set_ylim(0, max([*all_r, 1.0]) * 1.15)
    ax.set_xlabel("message size [B] (bins of half a decade; dotted: the model's switches)")
    ax.set_ylabel("held-out CRPS / floor")
    ax.set_title(title, fontsize=10)
    # Below the axes: inside, it hid the baselines' points at small sizes.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=4,
              frameon=False)
    fig.tight_layout()
    return save_png(fig, path, dpi=100)
