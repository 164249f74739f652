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
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import NDArray

#: Cap on plotted points: beyond this the scatter is a random subsample (stated in the title).
MAX_POINTS = 40_000
_COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _save(fig: Any, path: Path) -> Path:
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return path


def _subsample(x: NDArray, y: NDArray, rng: np.random.Generator) -> tuple[NDArray, NDArray, str]:
    if x.size <= MAX_POINTS:
        return x, y, ""
    keep = rng.choice(x.size, MAX_POINTS, replace=False)
    return x[keep], y[keep], f" ({MAX_POINTS:,} of {x.size:,} samples shown)"


def _size_span(model: Any, size: NDArray | None) -> tuple[float, float]:
    regimes = model.regimes_
    lo = max(float(regimes[0].size_min), 1.0)
    hi = max(float(regimes[-1].size_max), lo * 10)
    if size is not None and size.size:
        lo = min(lo, max(float(size.min()), 1.0))
        hi = max(hi, float(size.max()))
    return lo, hi


def scatter_plot(path: Path, model: Any, size: NDArray | None, time: NDArray | None,
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
    return _save(fig, path)


def residual_plot(path: Path, model: Any, size: NDArray, time: NDArray, title: str,
                  random_state: int = 0) -> Path:
    """Per regime: histogram of ``time / curve`` with the fitted noise density and draws."""
    rng = np.random.default_rng(random_state)
    regimes = model.regimes_
    ncol = min(3, len(regimes))
    nrow = math.ceil(len(regimes) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3 * nrow), squeeze=False)
    idx = np.asarray(model.regime_index(size)).ravel()
    curve = np.asarray(model.curve(size), dtype=float).ravel()
    for k, r in enumerate(regimes):
        ax = axes[k // ncol][k % ncol]
        sel = idx == k
        ratio = time[sel] / curve[sel]
        ax.set_title(f"regime {k + 1} ({r.family}, noise {r.noise.family})", fontsize=8)
        if ratio.size < 2:
            ax.text(0.5, 0.5, "no samples", ha="center", transform=ax.transAxes)
            continue
        hi = float(np.quantile(ratio, 0.99))
        lo = float(max(np.quantile(ratio, 0.001), 1e-9))
        bins = np.linspace(lo, hi, 60)
        ax.hist(ratio, bins=bins, density=True, color="0.7", label="samples")
        draws_sizes = rng.choice(size[sel], min(400, int(sel.sum())), replace=False)
        draws = np.asarray(model.sample(draws_sizes, 20, random_state=rng), dtype=float)
        dratio = (draws / np.asarray(model.curve(draws_sizes), dtype=float)[:, None]).ravel()
        ax.hist(dratio, bins=bins, density=True, histtype="step", color="tab:blue", lw=1.2,
                label="model draws")
        if not getattr(r, "components", None):
            grid = np.linspace(lo, hi, 300)
            ax.plot(grid, np.exp(r.noise.logpdf(grid)), color="tab:red", lw=1.2,
                    label=f"fitted {r.noise.family}")
        ax.set_xlabel("time / curve")
        ax.legend(fontsize=6)
    for k in range(len(regimes), nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def validation_plot(path: Path, validation: Mapping[str, Any], title: str) -> Path:
    """CRPS (relative to the held-out median) per size for each model and the floor."""
    per = validation["per_size"]
    x = np.maximum(np.asarray(per["size"], dtype=float), 0.5)
    order = np.argsort(x)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(x[order], np.asarray(per["floor_crps"])[order], color="k", lw=1.5,
            label="floor (training samples)")
    for name, s in per["models"].items():
        ax.plot(x[order], np.asarray(s["crps"])[order], lw=1, marker=".", ms=3, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("message size [B]")
    ax.set_ylabel("CRPS / held-out median")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
