"""LogGP parameters of one campaign, per size range, with bootstrap intervals.

LogGP (Alexandrov et al.) describes a message of s bytes by the sender's overhead o_s,
the receiver's overhead o_r, the latency L, the gap g between consecutive messages and the
gap per byte G: one message takes ``o_s + L + (s - 1) G + o_r``. The probe measures each
piece directly: ``send`` (o_s, MPI_Send with the receive pre-posted), ``recv`` (o_r, the
receive of a message already there), ``stream`` (g: window time / messages per window,
stored per message) and ``pingpong`` (one-way time). Logp_mpi and Netgauge report the same
parameters (their ``gap`` / ``latency`` rows are used when present).

Per size range (the pingpong series' regimes, or one range), each op's time is fitted as
``a + b·s`` by relative least squares on per-size medians (:class:`RobustHockneyModel`):

* ``o_s`` = a(send), ``O_s`` = b(send) (per-byte send overhead, LogGOPS's O);
* ``o_r`` = a(recv), ``O_r`` = b(recv);
* ``g`` = a(stream or gap), ``G`` = b(stream or gap);
* ``T1`` = a(pingpong): the small-message one-way time (what Netgauge prints as L);
* ``L`` = T1 - o_s - o_r (the wire part). Measured overheads can overlap the transfer (a
  blocking send that waits for the receiver); a negative difference is no latency, so it is
  not estimated, with the difference and why (kit.figures.sanity), never printed as an L.

Intervals: every op's rows are resampled (Poisson bootstrap) and everything refitted.
A parameter whose series is missing is not estimated, with the reason.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from kit.core.errors import UserError
from kit.data import dataset as ds
from kit.data.schema import LOGGP_KEYS
from kit.fit.baselines import group_summary

#: Ops feeding each LogGP piece; the first present wins.
SOURCES = {"send": ("send",), "recv": ("recv",), "gap": ("stream", "gap"),
           "pingpong": ("pingpong",), "latency": ("latency",)}
STATS = ("raw", "mean", "median", "p50")
N_BOOT = 200
PARAMS = ("L", "T1", "o_s", "o_r", "g", "G", "O_s", "O_r")
#: What each parameter is and where it comes from (the report and docs show these).
DEFINITIONS = {
    "L": "latency: the wire part of a small message's one-way time, T1 - o_s - o_r "
         "(not estimated where the measured overheads exceed it: a negative difference is "
         "no latency, kit.figures.sanity)",
    "T1": "one-way time of a message: intercept of pingpong's half round trip (Netgauge "
          "prints this as its L)",
    "o_s": "send overhead: intercept of MPI_Send's duration with the receive already posted",
    "o_r": "receive overhead: intercept of MPI_Recv's duration for a message already there",
    "g": "gap: least time between consecutive messages, intercept of the per-message gap "
         "(stream window time / messages per window, or the tool's g)",
    "G": "gap per byte: slope of the per-message gap (1/G is the streaming bandwidth)",
    "O_s": "send overhead per byte (LogGOPS's O): slope of MPI_Send's duration",
    "O_r": "receive overhead per byte: slope of MPI_Recv's duration",
}
UNITS = {"L": "s", "T1": "s", "o_s": "s", "o_r": "s", "g": "s", "G": "s/B", "O_s": "s/B",
         "O_r": "s/B"}


def _line(x: NDArray, y: NDArray) -> tuple[float, float]:
    """(a, b) of ``a + b·s``, relative least squares on per-size medians, a, b >= 0 for b."""
    gx, gy = group_summary(x, y, "median")
    if gx.size == 1:
        return float(gy[0]), math.nan
    A = np.column_stack([np.ones_like(gx), gx]) / gy[:, None]
    coef, *_ = np.linalg.lstsq(A, np.ones_like(gy), rcond=None)
    return float(coef[0]), float(coef[1])


def read_ops(dataset: str | Path, series: dict[str, str],
             used: dict[str, str] | None = None) -> dict[str, tuple[NDArray, NDArray]]:
    """(size, time) per LogGP source op of the selected group (LOGGP_KEYS); ``used``
    (if given) receives the op and stat each piece was read from, e.g. ``stream (raw)``."""
    lf = ds.series_rows(dataset, series, aggregates=True).filter(pl.col("time") > 0)
    frame = (lf.select(pl.col("op").cast(pl.String), pl.col("stat").cast(pl.String),
                       pl.col("size").cast(pl.Float64), "time",
                       *[pl.col(k).cast(pl.String) for k in LOGGP_KEYS])
             .collect())
    keys = frame.select(LOGGP_KEYS).unique()
    if keys.height == 0:
        raise UserError(f"no rows match {series or 'the dataset'}", where=str(dataset),
                        hint="list the series with 'pt2pt datasets'")
    if keys.height > 1:
        listing = "; ".join(",".join(f"{k}={r[k]}" for k in r) for r in keys.iter_rows(named=True))
        raise UserError(f"{keys.height} groups of series match ({', '.join(LOGGP_KEYS)}): "
                        f"{listing}", where="--series",
                        hint="pick one with --series, e.g. campaign=..,transport=..,"
                             "placement=inter-node (LogGP never pools placements, host pairs "
                             "or numbers of pairs)")
    out: dict[str, tuple[NDArray, NDArray]] = {}
    for piece, ops in SOURCES.items():
        for op in ops:
            for stat in STATS:
                sel = frame.filter((pl.col("op") == op) & (pl.col("stat") == stat))
                if sel.height:
                    out[piece] = (sel["size"].to_numpy(), sel["time"].to_numpy())
                    if used is not None:
                        used[piece] = f"{op} ({stat})"
                    break
            if piece in out:
                break
    return out


def _ranges(ops: dict[str, tuple[NDArray, NDArray]], breakpoints: list[float] | None
            ) -> list[tuple[float, float]]:
    if breakpoints is None and "pingpong" in ops and ops["pingpong"][0].size >= 100:
        from kit.model import RegimeModel

        s, t = ops["pingpong"]
        try:
            breakpoints = RegimeModel(mixture=False, overlap=False, noise=False,
                                      max_regimes=4).fit(s, t).breakpoints_
        except UserError:
            breakpoints = []
    edges = [0.0, *sorted(breakpoints or []), math.inf]
    return list(itertools.pairwise(edges))


def _estimate(ops: dict[str, tuple[NDArray, NDArray]], lo: float, hi: float
              ) -> dict[str, float]:
    fits: dict[str, tuple[float, float]] = {}
    for piece, (s, t) in ops.items():
        m = (s >= lo) & (s < hi)
        if piece == "latency":
            if m.any() or lo == 0:
                fits[piece] = (float(np.median(t)), math.nan)
            continue
        if m.sum() >= 1:
            fits[piece] = _line(s[m], t[m])
    nan = math.nan
    out = {p: nan for p in PARAMS}
    if "send" in fits:
        out["o_s"], out["O_s"] = fits["send"]
    if "recv" in fits:
        out["o_r"], out["O_r"] = fits["recv"]
    if "gap" in fits:
        out["g"], out["G"] = fits["gap"]
    if "pingpong" in fits:
        out["T1"] = fits["pingpong"][0]
        out["L"] = out["T1"] - out["o_s"] - out["o_r"]
    elif "latency" in fits:
        out["L"] = fits["latency"][0]
    return out


#: The pieces each parameter is derived from (any one of a tuple's alternatives).
NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "o_s": (("send",),), "O_s": (("send",),), "o_r": (("recv",),), "O_r": (("recv",),),
    "g": (("gap",),), "G": (("gap",),), "T1": (("pingpong",),),
    "L": (("pingpong", "latency"), ("send", "latency"), ("recv", "latency"))}


def _why(param: str, ops: dict[str, Any]) -> str:
    need = {"o_s": "send", "O_s": "send", "o_r": "recv", "O_r": "recv", "g": "stream or gap",
            "G": "stream or gap", "T1": "pingpong", "L": "pingpong, send and recv (or a "
            "latency row)"}[param]
    absent = [alt for alt in NEEDS[param] if not any(a in ops for a in alt)]
    if absent:
        names = sorted({SOURCES[a][0] for alt in absent for a in alt if a != "latency"})
        return (f"needs {need}; the selection has no series of {', '.join(names)} "
                f"(measure with the probe's --op {','.join(names)})")
    if param in ("G", "O_s", "O_r"):
        return f"needs {need} at two or more sizes in this range"
    return f"needs {need} samples in this range"


#: Parameters in seconds and in seconds per byte (kit.figures.sanity checks each kind).
_PER_BYTE = ("G", "O_s", "O_r")


def _physical(p: str, iv: dict[str, Any], entry: dict[str, Any], lo: float, hi: float,
              missing: list[str]) -> dict[str, Any]:
    """``iv`` as physics allows it (kit.figures.sanity): a negative time or per-byte cost is
    refused with the reason (the raw difference kept as ``rejected``); an interval reaching
    below zero around a non-negative value is cut at zero, and says so."""
    from kit.figures import sanity

    v = iv.get("value")
    if v is None:
        return iv
    check = sanity.per_byte_problem if p in _PER_BYTE else sanity.time_problem
    problem = check(v, p)
    if problem is not None:
        why = f"not physical: {problem}"
        if p == "L":
            parts = {q: entry[q].get("value") for q in ("T1", "o_s", "o_r")}
            why += (f" (L = T1 - o_s - o_r = {_us(parts['T1'])} - {_us(parts['o_s'])} - "
                    f"{_us(parts['o_r'])}: the send and recv calls last longer than half the "
                    "round trip here, e.g. a blocking send that waits for the receiver; "
                    "the wire time cannot be separated from them in this range)")
        missing.append(f"{p} in [{lo:g}, {hi:g}) B: {why}")
        return {"value": None, "lo": None, "hi": None, "why": why, "rejected": v}
    if iv.get("lo") is not None and iv["lo"] < 0:
        return {**iv, "lo": 0.0, "note": f"interval cut at 0 (the resamples reached "
                f"{iv['lo']:.3g}, below what a {'cost' if p in _PER_BYTE else 'time'} can be)"}
    return iv


def _us(v: Any) -> str:
    return "?" if v is None else f"{v * 1e6:.4g} us"


def loggp(dataset: str | Path, series: dict[str, str] | None = None, *,
          breakpoints: list[float] | None = None, n_boot: int = N_BOOT, level: float = 0.95,
          random_state: int = 0) -> dict[str, Any]:
    """LogGP per size range with intervals; JSON-ready (``null`` + reason where missing)."""
    series = dict(series or {})
    used: dict[str, str] = {}
    ops = read_ops(dataset, series, used)
    result = loggp_from_ops(ops, series, breakpoints=breakpoints, n_boot=n_boot, level=level,
                            random_state=random_state, where=str(dataset))
    result["used"] = used  # which op and stat fed each piece (sources lists the candidates)
    return result


def loggp_from_ops(ops: dict[str, tuple[NDArray, NDArray]], series: dict[str, str] | None = None,
                   *, breakpoints: list[float] | None = None, n_boot: int = N_BOOT,
                   level: float = 0.95, random_state: int = 0, where: str = "loggp"
                   ) -> dict[str, Any]:
    """:func:`loggp` on (size, time) arrays per piece (``send``, ``recv``, ``gap``,
    ``pingpong``, ``latency``)."""
    series = dict(series or {})
    if not ops:
        raise UserError("none of pingpong, send, recv, stream, gap or latency is in the "
                        "selection, so no LogGP parameter can be estimated", where=where,
                        hint="measure with the probe's --op pingpong,send,recv,stream")
    rng = np.random.default_rng(random_state)
    alpha = (1 - level) / 2
    regimes = []
    missing: list[str] = []
    for lo, hi in _ranges(ops, breakpoints):
        centre = _estimate(ops, lo, hi)
        draws: dict[str, list[float]] = {p: [] for p in PARAMS}
        for _ in range(n_boot):
            res = {}
            for piece, (s, t) in ops.items():
                if s.size == 1:  # one value printed by the tool: nothing to resample
                    res[piece] = (s, t)
                    continue
                idx = np.repeat(np.arange(s.size), rng.poisson(1.0, s.size))
                res[piece] = (s[idx], t[idx]) if idx.size else (s[:0], t[:0])
            est = _estimate(res, lo, hi)
            for p in PARAMS:
                draws[p].append(est[p])
        entry: dict[str, Any] = {"size_min": lo, "size_max": None if math.isinf(hi) else hi}
        for p in PARAMS:
            v = centre[p]
            arr = np.asarray(draws[p])
            arr = arr[np.isfinite(arr)]
            if not math.isfinite(v):
                entry[p] = {"value": None, "lo": None, "hi": None, "why": _why(p, ops)}
                missing.append(f"{p} in [{lo:g}, {hi:g}) B: {_why(p, ops)}")
            elif p == "L" and "pingpong" not in ops:
                entry[p] = {"value": v, "lo": None, "hi": None,
                            "why": "the tool's own single latency value: no spread to resample"}
            elif arr.size < 0.8 * n_boot:
                entry[p] = {"value": v, "lo": None, "hi": None,
                            "why": f"only {arr.size} of {n_boot} resamples could estimate it"}
            else:
                q_lo, q_hi = np.quantile(arr, [alpha, 1 - alpha])
                entry[p] = {"value": v, "lo": float(min(q_lo, v)), "hi": float(max(q_hi, v))}
        for p in PARAMS:
            entry[p] = _physical(p, entry[p], entry, lo, hi, missing)
        regimes.append(entry)
    first = regimes[0]

    def ns(p: str, scale: float = 1e9) -> float | None:
        v = first[p]["value"]
        return None if v is None else round(v * scale, 3)

    return {
        "format": "pt2pt-loggp", "version": 1, "series": series, "units": UNITS,
        "sources": {piece: SOURCES[piece] for piece in ops},
        "level": level, "n_boot": n_boot, "resample": "rows of each op (Poisson bootstrap)",
        "regimes": regimes, "not_estimated": missing,
        # LogGOPSim-style parameters of the smallest-size range, in ns and ns/B; S = the
        # first range boundary (eager/rendezvous switch) when ranges were found.
        "loggopsim": {"L": ns("L"), "o": ns("o_s"), "o_r": ns("o_r"), "g": ns("g"),
                      "G": ns("G"), "O": ns("O_s"),
                      "S": regimes[1]["size_min"] if len(regimes) > 1 else None},
    }
