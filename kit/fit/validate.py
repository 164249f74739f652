"""Held-out validation of a fitted model, against the data's own floor and two baselines.

Why distributional first: for small messages the noise is larger than the differences
between models, so a model that gets the median right but the spread or the second band
wrong would still simulate the wrong thing. The primary score is therefore the CRPS
(continuous ranked probability score) of the model's predictive distribution against the
held-out samples at each size, on time relative to the held-out median so that sizes with
microsecond and second timings weigh alike. A score alone has no scale, so next to it we
report the *floor*: the CRPS the training samples' own empirical distribution at that size
reaches. A model cannot be expected to beat the data it was fitted on; within a small
factor of the floor means it reproduces what was measured.

Then the usual point numbers per size: relative error of the median, of the 95th
percentile, and the share of held-out samples inside the model's [p05, p95] band (0.90 is
ideal). The same numbers are computed for the honest baselines of :mod:`kit.fit.baselines`
(Hockney on per-size means, robust Hockney on per-size medians, peak), which see the same
training split; tables list them best first, each with a one-line label, so no table
leads with a line that misses the data's own median by orders of magnitude.

The split keeps every size on both sides ("repetition": per size, a seeded random share of
the repetitions is held out), or is a plain seeded random split, or holds out whole runs
(``groups``). When sizes were drawn log-uniformly and rarely repeat, sizes are pooled into
narrow log-spaced cells so that each cell has enough samples for a distribution. Of more
than :data:`MAX_SCORED_SAMPLES` held-out samples (series of ~3 x 10^5 samples and more), a
seeded uniform subsample that many is scored, and the split records it (``n_scored``).

The result is a plain JSON-compatible dict (kept beside the model as
``kit.model.contract.ModelFile.validation``, so the model file keeps it);
:func:`validation_table` turns it into a Polars table.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from kit.core.cost import charged
from kit.core.errors import ModelError
from kit.figures.baseline import best_baseline_name
from kit.model.outliers import group_medians
from kit.model.runs import run_ids, runs_of, stable_order

SPLIT_METHODS = ("repetition", "random", "group")
#: 2: the floor is the held-out samples' own expected CRPS (half their mean absolute
#: difference), a bound; 1 called the lookup table of the training samples the floor.
VALIDATION_VERSION = 2
#: The name of the per-size lookup table of the training samples in the scored models.
LOOKUP = "lookup"
FLOOR_DEFINITION = ("half the mean absolute difference between held-out samples of one size "
                    "(cell): the expected CRPS of the data's own distribution, which no "
                    "model beats except by sampling error")


class Predictive(Protocol):
    """What validation needs from a fitted model (RegimeModel and the baselines have it)."""

    def predict(self, size: ArrayLike) -> Any: ...
    def predict_quantiles(self, size: ArrayLike, q: Any) -> Any: ...
    def sample(self, size: ArrayLike, n: int = 1, random_state: Any = None) -> Any: ...


# --------------------------------------------------------------------------- cells and splits


def size_cells(size: ArrayLike, *, min_per_cell: int = 10,
               cells_per_decade: int = 12) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Group samples by size: exact sizes when they repeat enough, else narrow log cells.

    Returns ``(cell_id per sample, representative size per cell)``; the representative is
    the median size of the cell's samples. Size 0 always gets a cell of its own. One sort of
    the sizes serves both cases: a log cell is a run of consecutive distinct sizes, and its
    median is read off their counts (np.median's value: the middle one, or the mean of the
    two middle ones).
    """
    x = np.asarray(size, dtype=np.float64).ravel()
    uniq, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    if uniq.size and np.median(counts) >= min_per_cell:
        return inverse.astype(np.int64), uniq
    key = np.where(uniq > 0, np.floor(np.log10(np.maximum(uniq, 1.0)) * cells_per_decade), -1.0)
    cell_u = run_ids(key)  # key grows with size: cells are runs of the sorted sizes
    ends = np.cumsum(counts)  # samples up to and including each distinct size
    first = np.flatnonzero(np.r_[True, cell_u[1:] != cell_u[:-1]])
    start = np.r_[0, ends][first]  # samples before each cell
    n = np.diff(np.r_[start, len(x)])
    lo, hi = start + (n - 1) // 2, start + n // 2  # the middle sample(s) of each cell

    def value_at(pos: NDArray[np.int64]) -> NDArray[np.float64]:
        return uniq[np.searchsorted(ends, pos, side="right")]

    reps = np.where(lo == hi, value_at(lo), (value_at(lo) + value_at(hi)) / 2)
    return cell_u[inverse].astype(np.int64), reps.astype(np.float64)


def _members(cells: NDArray[np.int64]) -> dict[int, NDArray[np.intp]]:
    """Each cell's sample indices in sample order (what ``cells == c`` selects), found with
    one sort: a mask per cell walked every sample once per cell (76 cells x 1 M samples)."""
    order, starts, _ = runs_of(cells)
    index = np.arange(len(cells))[order]
    return {int(c): idx for c, idx in zip(cells[order][starts].tolist(),
                                          np.split(index, starts[1:]), strict=True)}


def holdout_mask(size: ArrayLike, *, method: str = "repetition", test_fraction: float = 0.3,
                 random_state: int = 0, groups: ArrayLike | None = None) -> NDArray[np.bool_]:
    """Boolean mask of held-out (test) samples; deterministic for a given ``random_state``."""
    if method not in SPLIT_METHODS:
        raise ModelError(f"unknown split method '{method}'", where="option --split",
                         hint=f"use one of {', '.join(SPLIT_METHODS)}")
    if not 0.0 < test_fraction < 1.0:
        raise ModelError(f"test fraction {test_fraction} is not between 0 and 1",
                         where="option --test-fraction", hint="use e.g. 0.3")
    x = np.asarray(size, dtype=np.float64).ravel()
    rng = np.random.default_rng(random_state)
    test = np.zeros(x.size, dtype=bool)
    if method == "random":
        k = round(test_fraction * x.size)
        test[rng.permutation(x.size)[:k]] = True
        return test
    if method == "group":
        if groups is None:
            raise ModelError("split 'group' needs groups (e.g. run ids)", where="option --split",
                             hint="use --split repetition, or a dataset with several runs")
        g = np.asarray(groups).ravel()
        ug = np.unique(g)
        if ug.size < 2:
            raise ModelError("split 'group' needs at least two runs, found one",
                             where="option --split", hint="use --split repetition")
        k = max(1, round(test_fraction * ug.size))
        held = rng.permutation(ug)[:k]
        return np.isin(g, held)
    cell, _ = size_cells(x)
    order = rng.permutation(x.size)
    # Stable sort by cell keeps the random order inside each cell.
    by_cell = order[stable_order(cell[order])]
    bounds = np.flatnonzero(np.diff(cell[by_cell])) + 1
    for members in np.split(by_cell, bounds):
        if members.size < 2:
            continue
        k = min(members.size - 1, max(1, round(test_fraction * members.size)))
        test[members[:k]] = True
    return test


# --------------------------------------------------------------------------- scores


def crps_ensemble(draws: ArrayLike, obs: ArrayLike) -> float:
    """Mean CRPS of the empirical distribution of ``draws`` over the observations ``obs``:
    ``CRPS(F, y) = E|X - y| - E|X - X'| / 2``, exact for an ensemble (:func:`cell_scores`
    with one cell); NaN when either side is empty."""
    x = np.asarray(draws, dtype=np.float64).ravel()
    y = np.asarray(obs, dtype=np.float64).ravel()
    return float(cell_scores([x], [y], np.ones(1))[0][0])


def cell_scores(ensembles: list[NDArray[np.float64]], obs: list[NDArray[np.float64]],
                scale: NDArray[np.float64], *, per_obs: list[NDArray[np.float64]] | None = None
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per cell g: (CRPS of ``ensembles[g]`` over ``obs[g]``, Wasserstein-1 distance between
    them), both divided by ``scale[g]``; NaN where either side is empty.

    The CRPS is computed exactly with sorted members and prefix sums; W1 is
    ``scipy.stats.wasserstein_distance``'s, to rounding. Both from one sort of every cell's
    values: validation scores four models in hundreds of cells, where a call per cell cost
    more in overhead than in arithmetic. Each
    cell's values are divided by its scale first (the scores scale with their values), so
    that sums over a cell's values keep their precision. ``per_obs``, when given, receives
    each observation's own CRPS (scaled), cell by cell in ``obs`` order: the sampling error
    of a score is computed from them.
    """
    n_cells = len(ensembles)
    m = np.array([len(e) for e in ensembles], dtype=np.int64)
    k = np.array([len(o) for o in obs], dtype=np.int64)
    if not (m * k).any():
        return np.full(n_cells, np.nan), np.full(n_cells, np.nan)
    cell = np.repeat(np.arange(n_cells), m + k)
    vals = np.concatenate([part for e, o in zip(ensembles, obs, strict=True)
                           for part in (np.asarray(e, dtype=np.float64).ravel(),
                                        np.asarray(o, dtype=np.float64).ravel())]
                          ) / np.repeat(scale, m + k)
    is_obs = np.concatenate([np.repeat([False, True], [a, b])
                             for a, b in zip(m, k, strict=True)])
    # by cell, then value, ensemble members before equal observations (searchsorted "right")
    order = _merged_order(vals, m, k)
    v, g, ob = vals[order], cell[order], is_obs[order]
    ends = np.cumsum(m + k)
    start = ends - (m + k)
    xv = np.where(ob, 0.0, v)
    n_x = np.cumsum(~ob) - np.concatenate([[0], np.cumsum(~ob)])[start][g]  # members so far
    n_y = np.cumsum(ob) - np.concatenate([[0], np.cumsum(ob)])[start][g]
    s_x = np.empty_like(xv)  # each cell's own running sum: one across cells loses digits
    for a, b in zip(start.tolist(), ends.tolist(), strict=True):
        np.cumsum(xv[a:b], out=s_x[a:b])
    mg, kg = m[g].astype(np.float64), k[g].astype(np.float64)
    total = s_x[np.maximum(ends - 1, 0)][g]
    with np.errstate(divide="ignore", invalid="ignore"):
        # E|X - y| = (y·j - S_j + (S_m - S_j) - y·(m - j)) / m at each observation y
        e_xy = (v * n_x - s_x + (total - s_x) - v * (mg - n_x)) / mg
        crps_sum = np.bincount(g, np.where(ob, e_xy, 0.0), minlength=n_cells)
        # E|X - X'| = 2 sum_i (2i - m + 1) x_(i) / m², i the member's rank (0-based)
        e_xx = 2.0 * np.bincount(g, np.where(ob, 0.0, (2.0 * (n_x - 1) - mg + 1.0) * v),
                                 minlength=n_cells) / (m.astype(np.float64) ** 2)
        crps = crps_sum / k - 0.5 * e_xx
        # W1 = integral of |F_x - F_y| between consecutive values of the cell
        gap = np.diff(v, append=np.nan)
        last = np.zeros(len(v), dtype=bool)
        last[ends[m + k > 0] - 1] = True
        gap[last] = 0.0
        w1 = np.bincount(g, np.abs(n_x / mg - n_y / kg) * gap,
                         minlength=n_cells).astype(np.float64, copy=False)
    empty = (m == 0) | (k == 0)
    crps[empty] = np.nan
    w1[empty] = np.nan
    if per_obs is not None:
        where_obs = np.full(len(v), -1, dtype=np.int64)  # original position -> obs index
        where_obs[np.flatnonzero(is_obs)] = np.arange(int(is_obs.sum()))
        values = np.empty(int(is_obs.sum()))
        values[where_obs[order[ob]]] = (e_xy - 0.5 * e_xx[g])[ob]
        per_obs.extend(np.split(values, np.cumsum(k)[:-1]))
    return crps, w1


def _merged_order(vals: NDArray[np.float64], m: NDArray[np.int64], k: NDArray[np.int64]
                  ) -> NDArray[np.intp]:
    """``np.lexsort((is_obs, vals, cell))`` for ``vals`` laid out cell by cell, each cell's
    ``m`` ensemble members then its ``k`` observations: each side sorted within its cell
    (stably), then merged with members before equal observations. The same permutation;
    a sort per cell and side instead of three stable passes over every value, which were
    most of validation's time at 10^6 samples."""
    ends = np.cumsum(m + k)
    order = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.intp)
    for a, mc, kc in zip((ends - m - k).tolist(), m.tolist(), k.tolist(), strict=True):
        e_idx = np.argsort(vals[a:a + mc], kind="stable")
        o_idx = np.argsort(vals[a + mc:a + mc + kc], kind="stable")
        e, o = vals[a:a + mc][e_idx], vals[a + mc:a + mc + kc][o_idx]
        order[a + np.arange(mc) + np.searchsorted(o, e, side="left")] = a + e_idx
        order[a + np.arange(kc) + np.searchsorted(e, o, side="right")] = a + mc + o_idx
    return order


def _draws(model: Predictive, cells: list[NDArray[np.float64]], ns: list[int],
           rng: np.random.Generator) -> list[NDArray[np.float64]]:
    """Each cell's predictive draws, ``ns[i]`` at each of ``cells[i]``'s sizes, pooled.

    One ``sample`` call per distinct draw count, at every size that many draws are taken
    at: a call per cell evaluated the model anew each time, most of validation's cost with
    hundreds of stored sizes. A model whose ``sample`` does not give a row per size for an
    array of sizes is asked one size at a time."""
    out: list[NDArray[np.float64]] = [np.empty(0)] * len(cells)
    for n in sorted(set(ns)):
        chosen = [i for i, k in enumerate(ns) if k == n and len(cells[i])]
        if not chosen:
            continue
        sizes = np.concatenate([cells[i] for i in chosen]).astype(np.float64)
        state = rng.bit_generator.state
        rows = np.asarray(model.sample(sizes, n, random_state=rng), dtype=np.float64)
        if rows.shape != (len(sizes), n):
            rng.bit_generator.state = state  # as if the batch had not been asked
            rows = np.stack([np.asarray(model.sample(float(x), n, random_state=rng),
                                        dtype=np.float64).ravel() for x in sizes])
        at = 0
        for i in chosen:
            k = len(cells[i])
            out[i] = rows[at:at + k].ravel()
            at += k
    return out


_BAND_QS = (0.05, 0.5, 0.95)


def _bands(model: Predictive, sizes: NDArray[np.float64]) -> dict[float, NDArray[np.float64]]:
    """p05, p50, p95 at every size, computed once per distinct size in one call."""
    uniq, inverse = np.unique(sizes, return_inverse=True)
    q = np.asarray(model.predict_quantiles(uniq, list(_BAND_QS)), dtype=np.float64)
    q = q.reshape(uniq.size, len(_BAND_QS))
    return {p: q[:, j][inverse] for j, p in enumerate(_BAND_QS)}


def _rel(a: NDArray[np.float64] | float, b: NDArray[np.float64] | float) -> Any:
    return np.abs(np.asarray(a) - np.asarray(b)) / np.asarray(b)


def floor_scores(obs: list[NDArray[np.float64]], scale: NDArray[np.float64]
                 ) -> tuple[NDArray[np.float64], list[NDArray[np.float64]]]:
    """Per cell: the floor, half the mean absolute difference between its observations
    (``sum_{i != j} |y_i - y_j| / (2 k (k - 1))``), divided by ``scale``; and each
    observation's share (``sum_j |y_i - y_j| / (2 (k - 1))``, whose mean is the floor).

    Why this is a floor: the CRPS is a proper score, so the expected CRPS of any forecast
    is at least that of the true distribution F, which is ``E|Y - Y'| / 2`` for two
    independent draws of F. The U-statistic above estimates it without bias from the
    held-out samples themselves, so no model scores below it except by sampling error.
    NaN for a cell with fewer than two observations (no pair to compare).
    """
    floors = np.full(len(obs), np.nan)
    shares: list[NDArray[np.float64]] = []
    for c, y in enumerate(obs):
        k = len(y)
        if k < 2:
            shares.append(np.full(k, np.nan))
            continue
        order = np.argsort(y, kind="stable")
        v = np.asarray(y, dtype=np.float64)[order] / scale[c]
        below = np.concatenate([[0.0], np.cumsum(v)[:-1]])  # sum of the smaller values
        rank = np.arange(k)
        total = float(v.sum())
        dist = v * rank - below + (total - below - v) - v * (k - 1 - rank)  # sum_j |v_i - v_j|
        share = np.empty(k)
        share[order] = dist / (2.0 * (k - 1))
        shares.append(share)
        floors[c] = float(share.mean())
    return floors, shares


def _ratio_se(c: list[NDArray[np.float64]], f: list[NDArray[np.float64]],
              floors: NDArray[np.float64], ratio: float) -> float:
    """Sampling error (standard error) of ``mean_g C_g / mean_g F_g`` where ``C_g`` is the
    mean over cell g's observations of ``c`` and ``F_g`` the floor's U-statistic.

    Delta method, cells as strata: the ratio minus its value is, to first order, the mean
    over cells of ``mean_i z_i`` with ``z_i = c_i - ratio * (2 f_i - F_g)`` (``2 f_i - F_g``
    is the floor's influence: a U-statistic of order two counts each observation twice),
    divided by the mean floor; each cell contributes ``var(z) / k_g``."""
    n_cells = len(c)
    if n_cells == 0:
        return math.nan
    var = 0.0
    for cg, fg, floor in zip(c, f, floors, strict=True):
        k = len(cg)
        if k < 2:
            continue
        z = cg - ratio * (2.0 * fg - floor)
        var += float(np.var(z, ddof=1)) / k
    return math.sqrt(var) / n_cells / float(np.mean(floors))


def score_models(models: Mapping[str, Predictive], train: tuple[ArrayLike, ArrayLike],
                 test: tuple[ArrayLike, ArrayLike], *, n_draws: int = 400,
                 max_sizes_per_cell: int = 16, random_state: int = 0) -> dict[str, Any]:
    """Per-cell scores of already fitted models on held-out samples, the floor, and the
    lookup table of the training samples.

    ``test`` is scored and gives the floor (:func:`floor_scores`: what the held-out samples'
    own distribution scores); ``train`` gives the *lookup* reference, each cell's training
    samples taken as its predicted distribution (what a per-size table of the measurements
    would predict: a pooled model beats it where a size has few samples, so it is a
    reference, not a floor). Cells are formed on the test sizes together with the training
    sizes so that both sides share them; a cell needs two held-out samples (a floor) and
    two training samples (a lookup). Returns ``per_size`` columns and ``se``: each scored
    model's sampling error of CRPS / floor, and of its difference to ``"model"``.
    """
    xtr, ytr = (np.asarray(a, dtype=np.float64).ravel() for a in train)
    xte, yte = (np.asarray(a, dtype=np.float64).ravel() for a in test)
    if xte.size == 0 or xtr.size == 0:
        raise ModelError("validation needs samples on both sides of the split",
                         hint="use more samples or a larger --test-fraction")
    cell_all, reps = size_cells(np.concatenate([xtr, xte]))
    ctr, cte = cell_all[: xtr.size], cell_all[xtr.size:]
    # One generator picks the sizes drawn at in large cells; each model draws from its own,
    # keyed by its name: its draws are taken in one batch, and its scores do not depend on
    # which other models are scored beside it (adding a baseline changes no other row).
    rng = np.random.default_rng(np.random.SeedSequence(random_state, spawn_key=(0,)))

    # Quantiles at every held-out sample's own size (vectorised once per model).
    bands = {name: _bands(m, xte) for name, m in models.items()}

    cols: dict[str, list[float]] = {k: [] for k in ("size", "size_lo", "size_hi", "n_test",
                                                    "n_train", "floor_crps")}
    names = [*models, LOOKUP]
    per: dict[str, dict[str, list[float]]] = {
        name: {k: [] for k in ("crps", "w1", "median_err", "p95_err", "coverage")}
        for name in names}
    train_of = _members(ctr)
    no_train = np.zeros(0, dtype=np.intp)
    scored: list[tuple[NDArray[np.intp], NDArray[np.float64], float, float]] = []
    trains: list[NDArray[np.float64]] = []
    cells: list[NDArray[np.float64]] = []
    ns: list[int] = []
    for c, te in _members(cte).items():
        tr = train_of.get(c, no_train)
        if len(tr) < 2 or len(te) < 2:
            continue
        y = yte[te]
        med = float(np.median(y))
        p95 = float(np.quantile(y, 0.95))
        t_train = ytr[tr]
        cols["size"].append(float(reps[c]))
        cols["size_lo"].append(float(min(xte[te].min(), xtr[tr].min())))
        cols["size_hi"].append(float(max(xte[te].max(), xtr[tr].max())))
        cols["n_test"].append(float(len(te)))
        cols["n_train"].append(float(len(tr)))
        trains.append(t_train)
        sizes = np.unique(xte[te])
        if sizes.size > max_sizes_per_cell:
            sizes = rng.choice(sizes, max_sizes_per_cell, replace=False)
        cells.append(sizes)
        ns.append(max(8, math.ceil(n_draws / sizes.size)))
        scored.append((te, y, med, p95))
    if not scored:
        raise ModelError("no size has two samples on each side of the split",
                         hint="use --split repetition or more samples per size")
    members = [te for te, _, _, _ in scored]
    held = [y for _, y, _, _ in scored]
    meds = np.array([med for _, _, med, _ in scored])
    p95s = np.array([p95 for _, _, _, p95 in scored])
    floors, floor_shares = floor_scores(held, meds)
    cols["floor_crps"] = floors.tolist()
    counts = np.array([len(te) for te in members], dtype=np.intp)
    cell_of = np.repeat(np.arange(len(members)), counts)
    at = np.concatenate(members)
    y_at = yte[at]
    obs_crps: dict[str, list[NDArray[np.float64]]] = {}
    for name, m in models.items():
        stream = np.random.SeedSequence(random_state, spawn_key=(1, zlib.crc32(name.encode())))
        draws = _draws(m, cells, ns, np.random.default_rng(stream))
        b = bands[name]
        obs_crps[name] = []
        crps, w1 = cell_scores(draws, held, meds, per_obs=obs_crps[name])
        per[name]["crps"], per[name]["w1"] = crps.tolist(), w1.tolist()
        hi = b[0.95][at]
        per[name]["median_err"] = _rel(group_medians(b[0.5][at], cell_of, counts),
                                       meds).tolist()
        per[name]["p95_err"] = _rel(group_medians(hi, cell_of, counts), p95s).tolist()
        inside = (y_at >= b[0.05][at]) & (y_at <= hi)
        per[name]["coverage"] = (np.bincount(cell_of, inside, minlength=len(members))
                                 / counts).tolist()
    # The lookup table: each cell's training samples as its distribution.
    obs_crps[LOOKUP] = []
    crps, w1 = cell_scores(trains, held, meds, per_obs=obs_crps[LOOKUP])
    lookup = per[LOOKUP]
    lookup["crps"], lookup["w1"] = crps.tolist(), w1.tolist()
    q = [np.quantile(t, [0.05, 0.5, 0.95]) for t in trains]
    lookup["median_err"] = [float(_rel(qt[1], med)) for qt, med in zip(q, meds, strict=True)]
    lookup["p95_err"] = [float(_rel(qt[2], p95)) for qt, p95 in zip(q, p95s, strict=True)]
    lookup["coverage"] = [float(np.mean((y >= qt[0]) & (y <= qt[2])))
                          for qt, y in zip(q, held, strict=True)]
    se: dict[str, dict[str, float]] = {}
    mean_floor = float(floors.mean())
    for name in names:
        ratio = float(np.mean(per[name]["crps"])) / mean_floor
        entry = {"crps_over_floor": _ratio_se(obs_crps[name], floor_shares, floors, ratio)}
        if name != "model" and "model" in obs_crps:
            diff = [a - b for a, b in zip(obs_crps[name], obs_crps["model"], strict=True)]
            gap = ratio - float(np.mean(per["model"]["crps"])) / mean_floor
            entry["vs_model"] = _ratio_se(diff, floor_shares, floors, gap)
        se[name] = entry
    return {"per_size": {**cols, "models": per}, "se": se}


def _ranges(sizes: NDArray[np.float64]) -> list[tuple[float, float]]:
    """Decade ranges [10^k, 10^(k+1)) covering the sizes (size 0 joins the first)."""
    pos = sizes[sizes > 0]
    if pos.size == 0:
        return [(0.0, 1.0)]
    lo = math.floor(math.log10(pos.min()))
    hi = math.floor(math.log10(pos.max()))
    out = [(10.0**k, 10.0 ** (k + 1)) for k in range(lo, hi + 1)]
    out[0] = (0.0, out[0][1])
    return out


def summarize(per_size: Mapping[str, Any],
              se: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """Whole-series and per-decade numbers from :func:`score_models` output (``se``: its
    sampling errors, kept beside each whole-series ratio)."""
    size = np.asarray(per_size["size"])
    n_test = np.asarray(per_size["n_test"])
    floor = np.asarray(per_size["floor_crps"])
    summary: dict[str, Any] = {"floor": {"crps": float(floor.mean())}}
    for name, s in per_size["models"].items():
        crps = np.asarray(s["crps"])
        errors = dict((se or {}).get(name, {}))
        summary[name] = {
            "crps": float(crps.mean()),
            "crps_over_floor": float(crps.mean() / floor.mean()),
            "crps_over_floor_se": errors.get("crps_over_floor", math.nan),
            "w1": float(np.mean(s["w1"])),
            "median_err": float(np.median(s["median_err"])),
            "median_err_max": float(np.max(s["median_err"])),
            "p95_err": float(np.median(s["p95_err"])),
            "coverage": float(np.average(s["coverage"], weights=n_test)),
        }
        if "vs_model" in errors:
            summary[name]["vs_model_se"] = errors["vs_model"]
    ranges = []
    for lo, hi in _ranges(size):
        sel = (size >= lo) & (size < hi)
        if not sel.any():
            continue
        row: dict[str, Any] = {"size_min": lo, "size_max": hi, "n_sizes": int(sel.sum()),
                               "floor": float(floor[sel].mean())}
        for name, s in per_size["models"].items():
            crps_mean = float(np.asarray(s["crps"])[sel].mean())
            row[name] = {"crps": crps_mean, "crps_over_floor": crps_mean / row["floor"],
                         "median_err": float(np.median(np.asarray(s["median_err"])[sel]))}
        ranges.append(row)
    return {"summary": summary, "ranges": ranges}


# --------------------------------------------------------------------------- entry points


def _clone_unfitted(estimator: Any) -> Any:
    from kit.model.params import clone

    try:
        return clone(estimator)
    except Exception as exc:  # not an sklearn estimator: refuse instead of scoring in-sample
        raise ModelError(f"cannot refit {type(estimator).__name__} on the training split: {exc}",
                         hint="pass an estimator with get_params()/set_params()") from exc


#: Held-out samples scored at most; above, a seeded uniform subsample of them (the rest are
#: neither trained on nor scored; the split records ``n_scored``). Scoring costs in
#: proportion to the samples scored (the predictive quantiles at each one's own size, the
#: CRPS sorts: most of validation at 10^6 samples), while the score's sampling error at
#: 10^5 held-out samples is already far below the differences between the models.
MAX_SCORED_SAMPLES = 100_000


def _scored(test: NDArray[np.bool_], random_state: int) -> NDArray[np.bool_]:
    """``test``, or a uniform subsample of :data:`MAX_SCORED_SAMPLES` of its samples."""
    held = np.flatnonzero(test)
    if held.size <= MAX_SCORED_SAMPLES:
        return test
    rng = np.random.default_rng(np.random.SeedSequence(random_state, spawn_key=(2,)))
    out = np.zeros_like(test)
    out[rng.choice(held, MAX_SCORED_SAMPLES, replace=False)] = True
    return out


def validate(estimator: Any, size: ArrayLike, time: ArrayLike, *, method: str = "repetition",
             test_fraction: float = 0.3, random_state: int = 0, groups: ArrayLike | None = None,
             baselines: Sequence[str] | None = None, n_draws: int = 400,
             extra_models: Mapping[str, Predictive] | None = None) -> dict[str, Any]:
    """Refit a copy of ``estimator`` on a training split and score it on the held-out rest.

    ``estimator`` may be fitted or not: only its parameters are used (``clone``),
    so the held-out samples never leak into the fit. ``baselines``: names from
    ``kit.fit.baselines.BASELINES`` (default ``DEFAULT_BASELINES``). ``extra_models`` are
    already fitted models to score alongside (e.g. the known truth of a synthetic series).
    """
    # imported here: the CLI's parser imports this module for SPLIT_METHODS
    from kit.fit.baselines import BASELINES, DEFAULT_BASELINES, LABELS

    if baselines is None:
        baselines = DEFAULT_BASELINES
    x = np.asarray(size, dtype=np.float64).ravel()
    y = np.asarray(time, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y) & (y > 0) & (x >= 0)
    g = None if groups is None else np.asarray(groups).ravel()[ok]
    x, y = x[ok], y[ok]
    if x.size < 4:
        raise ModelError(f"only {x.size} usable samples; validation needs a few per size",
                         hint="measure more repetitions")
    test = holdout_mask(x, method=method, test_fraction=test_fraction,
                        random_state=random_state, groups=g)
    train = ~test
    xtr, ytr = x[train], y[train]
    models: dict[str, Predictive] = {}
    models["model"] = _clone_unfitted(estimator).fit(xtr, ytr)
    for name in baselines:
        models[name] = BASELINES[name]().fit(xtr, ytr)
    if extra_models:
        models.update(extra_models)
    scored_test = _scored(test, random_state)
    scored = score_models(models, (xtr, ytr), (x[scored_test], y[scored_test]),
                          n_draws=n_draws, random_state=random_state)
    summary = summarize(scored["per_size"], scored["se"])
    ranked = sorted(baselines, key=lambda b: summary["summary"][b]["crps"])
    result: dict[str, Any] = {
        "version": VALIDATION_VERSION,
        "score": "crps_relative_to_heldout_median",
        "floor_definition": FLOOR_DEFINITION,
        "split": {"method": method, "test_fraction": test_fraction, "seed": random_state,
                  "n_train": int(train.sum()), "n_test": int(test.sum()),
                  **({"n_scored": int(scored_test.sum())} if scored_test is not test else {})},
        "baselines": {name: {**models[name].to_dict(),  # type: ignore[attr-defined]
                             "label": LABELS.get(name, name)} for name in baselines},
        "baseline_order": ranked,
        **summary,
        "per_size": scored["per_size"],
    }
    result["best_baseline"] = best_baseline_name(result)
    return result


def per_regime(result: Mapping[str, Any], model: Any) -> list[dict[str, float]]:
    """The validation numbers of each of ``model``'s regimes (sizes scored inside it).

    The TUI shows these next to each regime; sizes are assigned with the model's own
    ``regime_index`` so the numbers line up with the regimes the user sees.
    """
    per = result["per_size"]
    size = np.asarray(per["size"], dtype=np.float64)
    idx = np.asarray(model.regime_index(size)).ravel()
    floor = np.asarray(per["floor_crps"])
    scores = per["models"]
    rows = []
    for k, reg in enumerate(model.regimes_):
        sel = idx == k
        row: dict[str, float] = {"size_min": float(reg.size_min), "size_max": float(reg.size_max),
                                 "n_sizes": float(sel.sum())}
        if sel.any():
            crps = float(np.mean(np.asarray(scores["model"]["crps"])[sel]))
            row.update(crps=crps, crps_over_floor=crps / float(floor[sel].mean()),
                       median_err=float(np.median(np.asarray(scores["model"]["median_err"])[sel])),
                       coverage=float(np.mean(np.asarray(scores["model"]["coverage"])[sel])))
            if "hockney" in scores:
                h = float(np.mean(np.asarray(scores["hockney"]["crps"])[sel]))
                row["hockney_crps_over_floor"] = h / float(floor[sel].mean())
            best = result.get("best_baseline")
            if best and best in scores:
                b = float(np.mean(np.asarray(scores[best]["crps"])[sel]))
                row["best_baseline_crps_over_floor"] = b / float(floor[sel].mean())
        rows.append(row)
    return rows


def validate_into(model: Any, size: ArrayLike, time: ArrayLike, **kwargs: Any) -> dict[str, Any]:
    """:func:`validate` plus, for a fitted regime model, per-regime numbers (``"regimes"``).

    The result is returned, never written onto ``model``: the caller keeps it beside the
    estimator (``ModelFile.validation``), which ``kit.model.io.write_model`` saves.
    """
    with charged("validation"):
        result = validate(model, size, time, **kwargs)
        if getattr(model, "regimes_", None) and hasattr(model, "regime_index"):
            result["regimes"] = per_regime(result, model)
    return result


TABLE_COLUMNS = ("model", "crps", "crps_over_floor", "crps_over_floor_se",
                 "worst_range_over_floor", "median_err", "median_err_max", "p95_err",
                 "coverage", "what")


def _table_order(result: Mapping[str, Any]) -> list[str]:
    """The model first, then the baselines best (lowest CRPS) first, then any extra models,
    then the lookup table (a reference, next to the floor)."""
    names = [n for n in result["summary"] if n not in ("floor", LOOKUP)]
    base = set(result.get("baselines", {}))
    ranked = sorted((n for n in names if n in base), key=lambda n: result["summary"][n]["crps"])
    rest = [n for n in names if n not in base]
    lookup = [LOOKUP] if LOOKUP in result["summary"] else []
    return rest[:1] + ranked + rest[1:] + lookup


def validation_table(result: Mapping[str, Any]) -> pl.DataFrame:
    """One row per scored model (and the floor): the numbers the report and CLI show.

    Each row says what it is (``what``: kit.figures.baseline's labels, the textbook line
    named as such); ``crps_over_floor_se`` is its sampling error."""
    from kit.figures.baseline import label

    rows = []
    summary = result["summary"]
    for name in _table_order(result):
        s = summary[name]
        worst = max((r[name]["crps_over_floor"] for r in result.get("ranges", []) if name in r),
                    default=float("nan"))
        rows.append({"model": name, "crps": s["crps"], "crps_over_floor": s["crps_over_floor"],
                     "crps_over_floor_se": s.get("crps_over_floor_se"),
                     "worst_range_over_floor": worst, "median_err": s["median_err"],
                     "median_err_max": s["median_err_max"], "p95_err": s["p95_err"],
                     "coverage": s["coverage"], "what": label(name)})
    rows.append({"model": "floor", "crps": summary["floor"]["crps"], "crps_over_floor": 1.0,
                 "crps_over_floor_se": None, "worst_range_over_floor": 1.0,
                 "median_err": summary["floor"].get("median_err"), "median_err_max": None,
                 "p95_err": None, "coverage": None, "what": label("floor")})
    return pl.DataFrame(rows, schema={c: (pl.String if c in ("model", "what") else pl.Float64)
                                      for c in TABLE_COLUMNS})
