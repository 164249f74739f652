"""Run quality: windows of a run that were disturbed, and runs unlike the others.

A busy node, a noisy neighbour or drift makes a stretch of a run slower *at every size*,
while the run's quiet part shows what the network does. The dataset keeps the order in
which samples were taken (``seq``), so a disturbance is visible as a stretch of samples
far above the run's own quiet level. Per run:

1. sizes are grouped into bins (three per decade) and each bin's *quiet level* is a low
   quantile (25 %) of the run's own times there: a disturbance covering even half of the
   run leaves that quantile on the quiet side;
2. every sample becomes a log ratio ``ln(time / quiet level of its bin)``, which is
   comparable across sizes;
3. a rolling median over ``seq`` (``w`` = n/20 samples, 15 to 30) follows the run's state; the
   reference is a low quantile of that rolling median (the run's quiet state), its
   spread the sampling spread of a median of ``w`` quiet samples;
4. samples whose rolling median exceeds the reference by ``max(ln factor, k·spread)``
   form disturbed windows (shorter stretches than ``w / 2`` are noise, not a window);
   a window's edges are then moved to where a short rolling median (``w / 5``) crosses
   the threshold, since the centred window of step 3 starts ``w / 2`` early.

Across runs (three or more), each run's per-bin median is compared with the median over
runs; a run slower than the others by ``factor`` or more at the median bin is disturbed
throughout (its own quiet part cannot show it, so this is the only way to see it), a
faster or slower run by a smaller but clear margin is reported as different.

Run conditions (:mod:`kit.measure.conditions`: the node's load, CPU pressure and stolen time
recorded around each run) are the third witness: a run measured on a busy node is disturbed
throughout even when its samples look uniform (every one of them waited for a core). Such
runs are left out when the series has a quiet run to fit instead; when every run was
disturbed they are kept, and the verdict says the model describes the load too.

Flagged windows and disturbed runs are excluded from a fit by default (``pt2pt fit
--keep-disturbed`` keeps them); what was found is recorded in the model (``run_quality``,
with its one-word ``verdict``: ``quiet``, ``disturbed`` or ``conditions not recorded``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy.ndimage import median_filter

from kit.measure.conditions import DISTURBED, QUIET, UNKNOWN
from kit.model.runs import runs_of, string_codes

#: How far above the quiet level (times) a stretch must sit to be called disturbed.
FACTOR = 3.0
#: Robust z on the rolling median's spread in the quiet half.
K_SPREAD = 6.0
#: Fewest samples in a run to judge it at all.
MIN_RUN = 60
#: Size bins per decade for the quiet levels.
BINS_PER_DECADE = 3
#: Quantile of a bin's times taken as its quiet level.
QUIET_Q = 0.25
#: Widest rolling window (samples). A CPU hog is handed the CPU in stretches of 15-100
#: samples; a wider window averages them away. At 30, a 1 % spike rate fills half a
#: window with negligible probability, and no reference run is flagged.
W_MAX = 30


@dataclass
class Window:
    """A stretch of one run (``seq_start`` .. ``seq_end`` inclusive) far above its quiet level."""

    run_id: str
    seq_start: int
    seq_end: int
    n_samples: int
    slowdown: float  # median time / quiet level inside the window, over the run's quiet ratio


@dataclass
class RunSummary:
    run_id: str
    n_samples: int
    n_disturbed: int = 0
    level: float = math.nan  # per-bin median time / median over runs (median over bins)
    #: quiet | disturbed windows | disturbed throughout | differs | not judged
    verdict: str = "quiet"
    note: str = ""
    #: the node's state while it ran (kit.measure.conditions.judge): quiet | disturbed |
    #: unknown, and why
    conditions: str = UNKNOWN
    conditions_why: str = ""


@dataclass
class RunQuality:
    """What :func:`assess` found; ``disturbed`` is a per-sample mask in the input order."""

    runs: list[RunSummary]
    windows: list[Window]
    disturbed: NDArray[np.bool_]
    params: dict[str, Any] = field(default_factory=dict)
    excluded: bool = False

    @property
    def n_disturbed(self) -> int:
        return int(self.disturbed.sum())

    @property
    def verdict(self) -> str:
        """``disturbed`` (a window, a run or its node), ``quiet`` (nothing found and every
        run's conditions recorded quiet) or ``conditions not recorded``."""
        return overall_verdict([asdict(r) for r in self.runs], len(self.windows))

    def lines(self) -> list[str]:
        """One human sentence per finding (empty list: every run was quiet)."""
        return quality_lines(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        return {
            "method": "rolling median over seq of ln(time / per-run, per-size-bin "
                      f"{QUIET_Q:g} quantile); flagged above max(ln {self.params['factor']:g}, "
                      f"{self.params['k']:g} robust sd) of the run's quiet state; runs compared "
                      "by per-bin medians (three or more runs)",
            "params": self.params,
            "excluded": self.excluded,
            "n_samples": len(self.disturbed),
            "n_disturbed": self.n_disturbed,
            "windows": [asdict(w) for w in self.windows],
            "runs": [{k: clean(v) for k, v in asdict(r).items()} for r in self.runs],
            "verdict": self.verdict,
        }


#: Run verdicts that say the samples themselves show a disturbance.
_FLAGGED = ("disturbed throughout", "disturbed windows")
NOT_RECORDED = "conditions not recorded"


def overall_verdict(runs: list[Mapping[str, Any]], n_windows: int = 0) -> str:
    """One word for a series' runs (model files' ``run_quality.verdict``)."""
    if n_windows or any(r.get("verdict") in _FLAGGED or r.get("conditions") == DISTURBED
                        for r in runs):
        return DISTURBED
    if runs and all(r.get("conditions") == QUIET for r in runs):
        return QUIET
    return NOT_RECORDED


def quality_lines(quality: Mapping[str, Any]) -> list[str]:
    """One sentence per finding of a model's ``run_quality`` (what fit, report, TUI and
    demo print); empty when nothing was found and every run's conditions were quiet."""
    out = []
    for w in quality.get("windows", []):
        out.append(f"run {w['run_id']}: samples seq {w['seq_start']}..{w['seq_end']} "
                   f"({w['n_samples']}) are {_times(w.get('slowdown'))} above the run's "
                   "quiet level")
    runs = quality.get("runs", [])
    for r in runs:
        if r.get("verdict") in ("disturbed throughout", "differs", "not judged"):
            out.append(f"run {r['run_id']}: {r['verdict']}"
                       + (f" ({r['note']})" if r.get("note") else ""))
        if r.get("conditions") == DISTURBED:
            out.append(f"run {r['run_id']}: measured on a disturbed node: "
                       f"{r.get('conditions_why') or 'see runs.parquet'}")
    unknown = [r for r in runs if r.get("conditions", UNKNOWN) == UNKNOWN]
    kept = [r for r in runs if r.get("conditions") == DISTURBED and not r.get("n_disturbed")]
    if kept:
        out.append(f"{len(kept)} run(s) measured on a disturbed node were kept: no quiet run "
                   "of this series to fit instead, so the model describes the load too; "
                   "measure again on a quiet node")
    if unknown and len(unknown) == len(runs):
        out.append(f"{len(unknown)} run(s) without recorded conditions (load, binding): "
                   "quiet or not cannot be told")
    return out


def _times(v: Any) -> str:
    return f"{float(v):.3g}x" if isinstance(v, int | float) and math.isfinite(v) else "far"


def _bins(size: NDArray) -> NDArray[np.int64]:
    return np.floor(np.log10(np.maximum(size, 0.0) + 1.0) * BINS_PER_DECADE).astype(np.int64)


def _quiet_levels(bins: NDArray, t: NDArray) -> NDArray:
    """Each sample's bin quiet level (QUIET_Q quantile of the bin's times)."""
    out = np.empty(len(t))
    order, starts, counts = runs_of(bins)  # each bin's samples in their order
    idx = np.arange(len(bins))[order]
    for a, c in zip(starts.tolist(), counts.tolist(), strict=True):
        members = idx[a:a + c]
        out[members] = np.quantile(t[members], QUIET_Q)
    return out


def _runs_of(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """[start, end) index pairs of the True stretches of ``mask``."""
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1), strict=True))


def _one_run(run_id: str, seq: NDArray, size: NDArray, t: NDArray, factor: float, k: float,
             window: int | None) -> tuple[NDArray[np.bool_], list[Window], str]:
    """Disturbed mask (in seq order) and windows of one run."""
    n = len(t)
    w = window or int(np.clip(n // 20, 15, W_MAX))
    if n < max(MIN_RUN, 3 * w):
        return np.zeros(n, dtype=bool), [], f"{n} samples, too few to judge (needs {MIN_RUN})"
    bins = _bins(size)
    lr = np.log(t / _quiet_levels(bins, t))
    rm = median_filter(lr, size=w, mode="nearest")
    ref = float(np.quantile(rm, 0.25))
    # Sampling spread of a rolling median of w quiet samples (1.25 sd / sqrt(w)): only a
    # very noisy quiet part needs more than ln(factor) above its own level.
    quiet = lr[np.abs(rm - ref) <= np.quantile(np.abs(rm - ref), 0.5)]
    sd = 1.4826 * float(np.median(np.abs(quiet - np.median(quiet))))
    thr = ref + max(math.log(factor), k * 1.2533 * sd / math.sqrt(w))
    flag = rm > thr
    mask = np.zeros(n, dtype=bool)
    windows = []
    # The centred rolling median starts a window up to w/2 early and ends it late: move
    # each edge to where a short rolling median (w/5) crosses the threshold.
    short = median_filter(lr, size=max(w // 5, 5), mode="nearest")
    for a0, b0 in _runs_of(flag):
        above = np.flatnonzero(short[a0:b0] > thr)
        if above.size == 0:
            continue
        a, b = a0 + int(above[0]), a0 + int(above[-1]) + 1
        if b - a < max(w // 2, 5):
            continue
        mask[a:b] = True
        windows.append(Window(run_id, int(seq[a]), int(seq[b - 1]), int(b - a),
                              float(np.exp(np.median(lr[a:b]) - ref))))
    return mask, windows, ""


def assess(run_id: Any, seq: Any, size: Any, time: Any, *, factor: float = FACTOR,
           k: float = K_SPREAD, window: int | None = None,
           coded: tuple[list[str], NDArray] | None = None,
           conditions: Mapping[str, tuple[str, str]] | None = None) -> RunQuality:
    """Find disturbed windows per run and runs unlike the others; arrays in any order.

    ``coded``: the run ids already coded as (sorted names, each sample's index into them),
    as :func:`kit.model.runs.string_codes` codes ``run_id`` (which is then not read).
    ``conditions``: run_id -> (verdict, why) of :func:`kit.measure.conditions.judge`
    (:func:`run_conditions` reads them from a dataset); runs on a disturbed node are
    flagged whole when another run of the series was quiet.
    """
    names, code = coded if coded is not None else string_codes(run_id)
    sq = np.asarray(seq, dtype=np.int64)
    s = np.asarray(size, dtype=np.float64)
    t = np.asarray(time, dtype=np.float64)
    disturbed = np.zeros(len(t), dtype=bool)
    windows: list[Window] = []
    runs: list[RunSummary] = []
    # each run's samples in their original order (one stable sort, not a compare per run;
    # every run has samples, so its runs are the names' in order)
    order, starts, counts = runs_of(code)
    by_run = np.arange(len(code))[order]
    for r, a, c in zip(names, starts.tolist(), counts.tolist(), strict=True):
        idx = by_run[a:a + c]
        idx = idx[np.argsort(sq[idx], kind="stable")]
        mask, wins, note = _one_run(r, sq[idx], s[idx], t[idx], factor, k, window)
        disturbed[idx[mask]] = True
        windows += wins
        summary = RunSummary(r, len(idx), int(mask.sum()), note=note)
        if note:
            summary.verdict = "not judged"
        elif wins:
            summary.verdict = "disturbed windows"
        runs.append(summary)
    _compare_runs(code, s, t, disturbed, runs, factor)
    for summary in runs:
        summary.conditions, summary.conditions_why = (conditions or {}).get(
            summary.run_id, (UNKNOWN, ""))
    some_quiet = any(r.conditions == QUIET for r in runs)
    for i, summary in enumerate(runs):
        busy = summary.conditions == DISTURBED and some_quiet
        if summary.verdict == "disturbed throughout" or busy:
            disturbed[code == i] = True
            summary.n_disturbed = summary.n_samples
    return RunQuality(runs, windows, disturbed,
                      params={"factor": factor, "k": k, "window": window,
                              "bins_per_decade": BINS_PER_DECADE, "quiet_quantile": QUIET_Q})


def _compare_runs(code: NDArray, s: NDArray, t: NDArray, disturbed: NDArray,
                  runs: list[RunSummary], factor: float) -> None:
    """Level of each run against the median over runs, on the runs' undisturbed samples
    (``code``: each sample's index into ``runs``)."""
    if len(runs) < 3:
        return
    bins = _bins(s)
    ok = ~disturbed
    ub, bin_of = np.unique(bins, return_inverse=True)
    med = np.full((len(runs), len(ub)), np.nan)
    # the undisturbed samples of each (run, bin) cell, in their original order
    key = code[ok] * len(ub) + bin_of.ravel()[ok]
    tk = t[ok]
    order, starts, counts = runs_of(key)
    idx = np.arange(len(key))[order]
    cells = key[idx[starts]]
    for cell, a, c in zip(cells.tolist(), starts.tolist(), counts.tolist(), strict=True):
        if c >= 3:
            med[cell // len(ub), cell % len(ub)] = np.median(tk[idx[a:a + c]])
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        # a bin no run measured 3 times is all-NaN: its centre is NaN and it is skipped
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = np.nanmedian(med, axis=0)
        rel = np.log(med / centre)
    for i, r in enumerate(runs):
        row = rel[i][np.isfinite(rel[i])]
        if row.size == 0:
            continue
        r.level = float(np.exp(np.median(row)))
    levels = np.log([r.level for r in runs if math.isfinite(r.level)])
    if levels.size < 3:
        return
    spread = max(1.4826 * float(np.median(np.abs(levels - np.median(levels)))), 0.05)
    for r in runs:
        if not math.isfinite(r.level):
            continue
        z = (math.log(r.level) - float(np.median(levels))) / spread
        if r.level >= factor:
            r.verdict = "disturbed throughout"
            r.note = f"{r.level:.3g}x slower than the median run at the same sizes"
        elif abs(z) > 5 and abs(math.log(r.level)) > math.log(1.25):
            r.verdict = "differs"
            r.note = (f"{r.level:.3g}x the median run at the same sizes; kept (a different "
                      "node or setting, not a disturbance within the run)")


def run_conditions(dataset: str | Path) -> dict[str, tuple[str, str]]:
    """run_id -> (conditions verdict, why) from the dataset's runs table; runs of datasets
    written before conditions were recorded read as unknown."""
    from kit.data import dataset as ds

    table = ds.runs(dataset)
    return {str(r): (str(v or UNKNOWN), str(w or "")) for r, v, w in
            table.select("run_id", "conditions", "conditions_why").iter_rows()}


def assess_frame(frame: pl.DataFrame, **kwargs: Any) -> RunQuality:
    """:func:`assess` on a frame's columns, its run ids coded by Polars (sorted distinct
    names, dense ranks): a million run ids as Python strings cost 0.1 CPU-s and 60 MB."""
    run_id = frame["run_id"].cast(pl.String)
    names = [str(n) for n in run_id.unique().sort().to_list()]
    code = (run_id.rank("dense") - 1).cast(pl.Int64).to_numpy() if len(run_id) else \
        np.zeros(0, dtype=np.int64)
    return assess(None, frame["seq"].to_numpy(), frame["size"].to_numpy(),
                  frame["time"].to_numpy(), coded=(names, code), **kwargs)


def drop_disturbed(frame: pl.DataFrame, quality: RunQuality) -> pl.DataFrame:
    """The frame without the samples ``quality`` flagged (same row order as assessed)."""
    quality.excluded = True
    return frame.filter(pl.Series(~quality.disturbed))
