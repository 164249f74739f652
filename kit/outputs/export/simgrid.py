"""Export a fitted model as SimGrid/SMPI configuration, and read such configuration back.

What SimGrid does with it (checked against the SimGrid sources, and run by
tests/test_simgrid.py in the installed SimGrid):

* Option names depend on the version (:func:`factor_keys`). Up to 3.32 the piecewise
  strings are ``smpi/lat-factor`` and ``smpi/bw-factor`` (src/surf/network_smpi.cpp) and
  ``network/latency-factor`` is one number (a string aborts with ``std::range_error:
  invalid double``). From 3.34 they are ``network/latency-factor`` /
  ``network/bandwidth-factor`` (``FactorSet``, the smpi/ names are aliases).
* The strings are ``bound:factor;bound:factor;...``: bounds are read with ``std::stoi`` (C
  ints), entries sorted by bound, values through ``xbt_parse_get_time`` (strtod). The
  lookup returns the entry with the **largest bound strictly below the size**, the default
  (1.0) at or below the first bound. A segment starting at size ``lo`` is written with bound
  ``lo - 1``, the first with bound 0.
* One transfer of ``s`` bytes on an idle route with latency ``L`` and bandwidth ``B`` takes
  ``L*lat(s) + s / (B*bw(s))`` (``NetworkCm02Model::comm_action_set_bounds``), so a line
  ``t = a + b*s`` becomes ``lat = a / L`` and ``bw = 1 / (b * B)``.
* SMPI puts ``size + 16`` bytes on the network for an MPI message (the envelope,
  smpi_request.cpp) and looks the factors up at that size: ``envelope`` shifts the export.
* ``smpi/os``, ``smpi/or``, ``smpi/ois`` are ``bound:offset:per_byte;...`` (same lookup, at
  the message size). SMPI sleeps ``os`` (``ois`` for MPI_Isend) before and ``or`` after an
  eager message (below ``smpi/send-is-detached-thresh``), in sequence with the network
  time; with overheads the network factors carry the ping-pong time minus them.
* ``network/crosstraffic:0``: with it on, the reply of a ping-pong shares the link with the
  request's acknowledgement flow and large messages simulate up to 6 % slow.
* ``smpi/wtime:0``: SMPI charges 10 ns per ``MPI_Wtime`` call by default; measured times
  hold the timer's cost already (it made a 0.5 us shared-memory ping-pong 3 % slow).
* Noise: the factor strings are deterministic. The kit's plugin
  (kit/outputs/export/smpi/noise_plugin.cpp) installs ``set_lat_factor_cb`` / ``set_bw_factor_cb``
  and draws every message's ratio from the quantile tables written here
  (``simgrid-noise.tsv``, the flat twin of ``simgrid-noise.json``): latency factor
  ``lat * r``, bandwidth factor ``bw / r``. SimGrid refuses callbacks and strings together.

Lines are fitted to the model's centre (``model.curve`` or ``model.predict``) by
non-negative least squares on relative error, with a floor on the per-byte cost
(``MAX_BW_FACTOR``): a linear regime is one exact entry, other curves are cut until every
line is within 2 %. A model that would need non-physical factors is refused
(:func:`check_physical`, ``REFUSE_TOLERANCE``) with a message naming the regime.
:func:`regimes_from_simgrid` parses the strings back into linear regimes (the round trip
is tested).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kit.core.atomicwrite import make_dirs, write_text
from kit.core.errors import ModelError
from kit.core.lsq import nnls2
from kit.core.sets import member, setdiff_sorted, unique_sorted
from kit.figures import sanity
from kit.outputs.export.persize import (
    OVERHEADS_EXCEED,
    OverheadsExceed,
    own_sizes,
    size_points,
    with_points,
)

#: SimGrid reads bounds with std::stoi: they must fit a C int.
MAX_BOUND = 2**31 - 1
_GRID = 64
#: Largest relative gap allowed between an exported line and the model's curve (a quarter
#: of the 2 % the closed loop promises: SimGrid's own arithmetic and the noise draws get
#: the rest).
LINE_TOLERANCE = 0.005
#: The last regime's lines follow the model's extrapolation up to this size (SimGrid
#: applies the last entry to every larger message).
EXTRAPOLATE_TO = 2.0**30
#: Ranges narrower than this size ratio are not split further.
MIN_SPLIT_RATIO = 1.05
#: More factor entries than this means the curve is not something a network does.
MAX_PIECES = 2000
_QUANTILE_PROBS = tuple(float(q) for q in np.linspace(0.0, 1.0, 101))


@dataclass(frozen=True)
class FactorEntry:
    """One ``bound:v1[:v2...]`` section: applies to sizes strictly above ``bound``."""

    bound: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class LinearPiece:
    """``time = a + b * size`` for sizes in ``[size_min, size_max)``."""

    size_min: float
    size_max: float
    a: float
    b: float
    regime: int = 0


# --------------------------------------------------------------------------- strings


def _num(v: float) -> str:
    return f"{v:.10g}"


def format_factor(entries: Sequence[FactorEntry]) -> str:
    """The SimGrid string for ``entries`` (sorted by bound, as SimGrid would)."""
    return ";".join(":".join([str(e.bound), *(_num(v) for v in e.values)])
                    for e in sorted(entries, key=lambda e: e.bound))


def parse_factor(text: str, *, option: str = "factor") -> tuple[float | None, list[FactorEntry]]:
    """Parse a SimGrid factor string like SimGrid does.

    Returns ``(single_value, entries)``: a string without ``:`` and ``;`` is one value for
    all sizes (``single_value``), otherwise the sorted entries.
    """
    text = text.strip()
    if ":" not in text and ";" not in text:
        try:
            return float(text), []
        except ValueError as exc:
            raise ModelError(f"'{text}' is not a number", where=f"{option}",
                             hint="write bound:value;bound:value or one number") from exc
    entries = []
    for k, chunk in enumerate(filter(None, text.split(";")), start=1):
        parts = [p for p in chunk.split(":") if p]
        try:
            bound = int(parts[0])
            values = tuple(float(p) for p in parts[1:])
        except (ValueError, IndexError) as exc:
            raise ModelError(f"chunk {k} '{chunk}' is not bound:value[:value]",
                             where=option, hint="bounds are integers, values numbers") from exc
        if not values:
            raise ModelError(f"chunk {k} '{chunk}' has no value", where=option,
                             hint="write bound:value")
        entries.append(FactorEntry(bound, values))
    return None, sorted(entries, key=lambda e: e.bound)


def factor_at(entries: Sequence[FactorEntry], size: float,
              default: tuple[float, ...]) -> tuple[float, ...]:
    """The values SimGrid uses for ``size``: largest bound strictly below it, else default."""
    chosen = default
    for e in sorted(entries, key=lambda e: e.bound):
        if size <= e.bound:
            break
        chosen = e.values
    return chosen


# --------------------------------------------------------------------------- linearisation


def _grid(lo: float, hi: float, last: bool) -> NDArray[np.float64]:
    lo = max(lo, 1.0)
    hi = max(hi, lo)
    if hi <= lo * (1 + 1e-9):
        return np.array([lo])
    g = np.geomspace(lo, hi, _GRID + 1)
    return g if last else g[:-1]


#: Smallest share of a piece's shortest time its line's intercept (the latency it exports)
#: may have: a line through the origin writes latency factor 0, a link without latency
#: (kit.figures.sanity refuses it). A convex stretch of the curve, whose best line wants a
#: negative intercept, gets this floor and is split until the line follows it.
MIN_LATENCY_SHARE = 0.01


def fit_line(size: NDArray[np.float64], time: NDArray[np.float64],
             min_b: float = 0.0, min_a: float = 0.0) -> tuple[float, float]:
    """``a, b >= 0`` minimising the relative error of ``a + b*s`` to ``time`` (``b >= min_b``,
    ``a >= min_a``).

    One size alone fixes no slope: it gets the flattest allowed one (the time is start-up
    cost, as for the small messages such lone sizes are), not whichever vertex NNLS picks.
    """
    if size.size and float(np.ptp(size)) == 0.0:
        t, s = float(np.median(time)), float(size[0])
        b = min(min_b, (t - min_a) / s) if s > 0 else 0.0
        return t - b * s, b
    w = 1.0 / time
    design = np.column_stack([w, size * w])
    target = np.ones_like(time)
    scale = max(float(size.max()), 1.0)
    design[:, 1] /= scale
    if min_b > 0:  # shift b by its lower bound: fit (a, b - min_b) >= 0
        target = target - min_b * size * w
    if min_a > 0:  # likewise a: fit (a - min_a, b) >= 0
        target = target - min_a * w
    (a, b_scaled), _ = nnls2(design, target)
    return float(a + min_a), float(b_scaled / scale + min_b)


#: Lines already fitted, by their sizes, times and floors (``linear_pieces`` runs twice
#: on one target: without and with the per-byte floor, mostly on the same ranges).
LineMemo = dict[tuple[bytes, bytes, float, float], tuple[float, float]]


def _fit_kept(grid: NDArray[np.float64], curve: NDArray[np.float64], min_b: float,
              min_a: float, memo: LineMemo | None) -> tuple[float, float]:
    if memo is None:
        return fit_line(grid, curve, min_b=min_b, min_a=min_a)
    key = (grid.tobytes(), curve.tobytes(), min_b, min_a)
    if key not in memo:
        memo[key] = fit_line(grid, curve, min_b=min_b, min_a=min_a)
    return memo[key]


def _split(model: Any, k: int, lo: float, hi: float, last: bool, tol: float,
           out: list[LinearPiece], min_b: float = 0.0, memo: LineMemo | None = None) -> None:
    """Fit one line on [lo, hi); halve the range (in log size) while it misses by > tol."""
    grid = model.grid(lo, hi, last) if hasattr(model, "grid") else _grid(lo, hi, last)
    # Every size of the range is exported on its own (measured sizes): any line will do.
    free = grid.size == 0
    if free:
        grid = np.array([max(lo, 1.0)])
    curve = np.asarray(model.curve(grid), dtype=np.float64).ravel()
    if not np.all(np.isfinite(curve)) or np.any(curve <= 0):
        raise ModelError(f"regime {k + 1} [{lo:.0f}, {hi:.0f}) B has a non-positive curve, "
                         "cannot export", hint="refit the series; check for bad samples")
    min_a = MIN_LATENCY_SHARE * float(curve.min())
    a, b = _fit_kept(grid, curve, 0.0, 0.0, memo)
    if b < min_b or a < min_a:
        a, b = _fit_kept(grid, curve, min_b, min_a, memo)
    err = float(np.max(np.abs(a + b * grid - curve) / curve))
    # The split point is a whole size with sizes on both sides of it, so that a jump (e.g.
    # the median of two bands switching, downwards too) is split down to the byte.
    first, final = math.ceil(max(lo, 1.0)), math.ceil(hi) - 1
    mid = float(min(max(round(math.sqrt(max(lo, 1.0) * hi)), first + 1), final))
    # Narrow ranges stop splitting once close.
    narrow = hi / max(lo, 1.0) < MIN_SPLIT_RATIO and err <= 1.25 * tol
    if len(out) >= MAX_PIECES:
        raise ModelError(f"regime {k + 1} needs more than {MAX_PIECES} lines to follow its "
                         f"curve near [{lo:.0f}, {hi:.0f}) B within {tol:.0%}",
                         hint="refit the series with fewer regimes (--max-regimes) or fixed "
                         "--breakpoints")
    if err <= tol or narrow or free or not first < mid <= final:
        out.append(LinearPiece(lo, hi, a, b, k))
        return
    _split(model, k, lo, mid, False, tol, out, min_b, memo)
    _split(model, k, mid, hi, last, tol, out, min_b, memo)


def linear_pieces(model: Any, tol: float = LINE_TOLERANCE, min_b: float = 0.0,
                  memo: LineMemo | None = None) -> list[LinearPiece]:
    """Lines ``a + b*s`` that follow the model's central curve within ``tol`` (relative).

    A linear regime is one piece, exactly. A power or constant-plus-jump curve is cut into
    as many pieces as a line needs to stay within ``tol`` (SimGrid takes any number of
    entries), each piece remembering its regime. ``min_b`` is the smallest per-byte cost a
    piece may have (the export's physical floor); a flatter stretch becomes a staircase.
    """
    regimes = getattr(model, "regimes_", None)
    if not regimes:
        raise ModelError("the model has no regimes (not fitted?)",
                         hint="fit it first with 'pt2pt fit'")
    pieces: list[LinearPiece] = []
    for k, r in enumerate(regimes):
        _split(model, k, float(r.size_min), float(r.size_max), k == len(regimes) - 1, tol,
               pieces, min_b, memo)
    return pieces


def _bounds(pieces: Sequence[LinearPiece]) -> list[int]:
    out = [0]
    for p in pieces[1:]:
        bound = math.ceil(p.size_min) - 1
        if bound > MAX_BOUND:
            raise ModelError(f"regime boundary {p.size_min:.0f} B is beyond what SimGrid reads "
                             f"(bounds are C ints, at most {MAX_BOUND})",
                             hint="fit with fixed --breakpoints below 2 GiB")
        out.append(max(bound, out[-1] + 1))
    return out


# --------------------------------------------------------------------------- export


# --------------------------------------------------------------------------- versions

#: The syntax written when no SimGrid is installed and none is named.
LATEST_KNOWN = (3, 36)
#: First release whose ``network/latency-factor`` takes the piecewise string (3.33 was never
#: released; 3.34 moved the SMPI factors into ``NetworkModelFactors``).
PIECEWISE_NETWORK_KEYS = (3, 33)


def parse_version(text: str, where: str = "option --simgrid-version") -> tuple[int, int]:
    """``3.32`` / ``v3.32.1`` / ``SimGrid version 3.32`` -> ``(3, 32)``."""
    m = re.search(r"(\d+)\.(\d+)", text)
    if not m:
        raise ModelError(f"cannot read a SimGrid version in {text!r}", where=where,
                         hint="give MAJOR.MINOR, e.g. 3.32")
    major, minor = int(m.group(1)), int(m.group(2))
    if not (3 <= major <= 9 and minor <= 999):  # SimGrid 3.x today; a typo, not a version
        raise ModelError(f"{text!r} is not a SimGrid version (3.x to 9.x)", where=where,
                         hint="give MAJOR.MINOR, e.g. 3.32")
    return major, minor


def detect_version() -> tuple[int, int] | None:
    """The installed SimGrid's version (``smpirun --version``, ``pkg-config``); None if absent."""
    probes = (["smpirun", "--version"], ["pkg-config", "--modversion", "simgrid"])
    for cmd in probes:
        if shutil.which(cmd[0]) is None:
            continue
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        m = re.search(r"(\d+)\.(\d+)", out.stdout + out.stderr)
        if out.returncode == 0 and m:
            return int(m.group(1)), int(m.group(2))
    return None


def factor_keys(version: tuple[int, int]) -> tuple[str, str]:
    """The option names SimGrid ``version`` reads the piecewise factor strings from.

    Up to 3.32, ``network/latency-factor`` is one number (``std::range_error: invalid
    double`` on a string) and SMPI's piecewise strings are ``smpi/lat-factor`` and
    ``smpi/bw-factor`` (src/surf/network_smpi.cpp). From 3.34 the strings are
    ``network/latency-factor`` / ``network/bandwidth-factor`` (the smpi/ names are aliases).
    """
    if version < PIECEWISE_NETWORK_KEYS:
        return "smpi/lat-factor", "smpi/bw-factor"
    return "network/latency-factor", "network/bandwidth-factor"


# --------------------------------------------------------------------------- physics

#: The largest bandwidth factor the export writes: a piece whose per-byte cost implies more
#: than this many times the nominal bandwidth is refitted with that cost as a floor (and
#: split until it follows the curve). A flat ("constant") stretch of the curve is thus
#: a staircase of physical lines, not one line at 10^6 x the link's bandwidth.
MAX_BW_FACTOR = 100.0
#: A piece still this far from its curve after the split means the model asks for
#: something no physical link does; the export refuses instead of writing it.
REFUSE_TOLERANCE = 0.10
#: Message sizes below this are sent eagerly (detached) by SMPI, which then adds
#: smpi/os (or smpi/ois) and smpi/or around the network time (smpi_request.cpp).
DETACHED_THRESH = 65536
#: Probabilities of the noise quantile tables: (i - 0.5) / N.
NOISE_PROBS = tuple((i + 0.5) / 100 for i in range(100))
_TCP_GAMMA_DEFAULT = 4194304.0
#: SMPI puts ``size + 16`` bytes on the network for an MPI message of ``size`` bytes.
SMPI_ENVELOPE = 16


def _describe_regime(model: Any, k: int) -> str:
    r = model.regimes_[k]
    params = ", ".join(f"{n}={v:.4g}" if isinstance(v, float) else f"{n}={v}"
                       for n, v in dict(r.params).items())
    return (f"regime {k + 1} [{float(r.size_min):.0f}, {float(r.size_max):.0f}) B "
            f"({r.family}: {params})")


def check_physical(model: Any, bandwidth: float | None = None,
                   what: str = "model") -> None:
    """Refuse a model SimGrid could only reproduce with non-physical factors.

    Checks, per regime: finite parameters; a finite, positive central curve (a negative
    parameter is accepted where the curve stays positive: the export then approximates
    it with physical lines or refuses it by ``REFUSE_TOLERANCE``); and, when ``bandwidth``
    (the nominal route's) is known, that the regime does not carry its largest message
    faster than ``MAX_BW_FACTOR`` times that bandwidth.
    """
    regimes = getattr(model, "regimes_", None)
    if not regimes:
        raise ModelError(f"the {what} has no regimes (not fitted?)",
                         hint="fit it first with 'pt2pt fit'")
    for k, r in enumerate(regimes):
        for name, v in dict(r.params).items():
            if isinstance(v, int | float) and not math.isfinite(v):
                raise ModelError(f"{_describe_regime(model, k)} has parameter {name}={v}: "
                                 "a time model needs finite parameters",
                                 where=what, hint="refit the series (pt2pt fit), e.g. with "
                                 "fewer regimes (--max-regimes) or fixed --breakpoints")
        lo, hi = max(float(r.size_min), 1.0), max(float(r.size_max), 1.0)
        # The regime's own sizes: its upper bound belongs to the next regime.
        hi = max(math.ceil(hi) - 1.0, lo) if k < len(regimes) - 1 else hi
        grid = np.geomspace(lo, max(hi, lo), 16)
        curve = np.asarray(model.curve(grid), dtype=np.float64).ravel()
        if not np.all(np.isfinite(curve)) or np.any(curve <= 0):
            raise ModelError(f"{_describe_regime(model, k)} predicts a non-positive or "
                             "non-finite time", where=what,
                             hint="refit the series; check for bad samples")
        if bandwidth is not None and hi > 1:
            top = float(curve[-1])
            implied = hi / top
            if implied > MAX_BW_FACTOR * bandwidth:
                raise ModelError(
                    f"{_describe_regime(model, k)} moves {hi:.0f} B in {top:.3g} s, "
                    f"{implied:.3g} B/s = {implied / bandwidth:.3g} x the route's nominal "
                    f"bandwidth {bandwidth:.3g} B/s (at most {MAX_BW_FACTOR:g} x is exported): "
                    "a flat regime over too wide a range, not a physical link",
                    where=what, hint="refit with fewer regimes (--max-regimes) or fixed "
                    "--breakpoints, or give the real --bandwidth")


@dataclass
class _Regime:
    """A regime of a derived target curve, remembering the model regime it came from."""

    size_min: float
    size_max: float
    source: int


class _Target:
    """The curve the network factors must reproduce: the model's centre minus overheads.

    SMPI adds ``smpi/os`` before and ``smpi/or`` after the network time of an eager
    message, so with overheads exported the network has to account for the rest only.
    Regimes are the model's, cut at the overheads' bounds and the eager threshold, where
    the difference jumps.
    """

    def __init__(self, model: Any, center: str, overheads: Sequence[str], thresh: int,
                 envelope: int = 0, own: NDArray[np.float64] | None = None) -> None:
        self.model = model
        #: transfer sizes exported on their own (measured sizes): the lines need not follow
        #: the smooth curve there (around a small measured size it is mostly that size's own)
        self.own = np.zeros(0) if own is None else np.asarray(own, dtype=np.float64) + envelope
        self.envelope = envelope
        self.center = center
        self.overheads = [parse_factor(o, option="smpi/os")[1] for o in overheads]
        self.thresh = thresh
        cuts: set[float] = set()
        for entries in self.overheads:
            # Every entry starts where SMPI's lookup switches to it, the first included
            # (size 0 gets no overhead, size 1 the first entry's).
            cuts.update(float(e.bound + 1) for e in entries)
        if self.overheads:
            cuts.add(float(thresh))
        self.regimes_: list[_Regime] = []
        last = len(model.regimes_) - 1
        for k, r in enumerate(model.regimes_):
            lo, hi = float(r.size_min), float(r.size_max)
            if k == last:
                hi = max(hi, EXTRAPOLATE_TO)
            inner = sorted(c for c in cuts if lo < c < hi)
            edges = [e + envelope if e > 0 else e for e in (lo, *inner, hi)]
            self.regimes_.extend(_Regime(a, b, k) for a, b in itertools.pairwise(edges))

    def prefetch(self, per_regime: int = 2048) -> None:
        """Evaluate the centre once on a dense log grid of every regime.

        The model's predictive quantiles cost a fixed overhead per call, so the line
        splitting reads from this table (``grid``) instead of calling once per range.
        """
        pts = [unique_sorted(np.round(np.geomspace(max(r.size_min, 1.0),
                                               max(r.size_max, r.size_min, 1.0), per_regime)))
               for r in self.regimes_]
        dense = setdiff_sorted(np.concatenate(pts), self.own)
        self._dense = dense
        self._dense_centre = self._centre_uncached(dense)

    def grid(self, lo: float, hi: float, last: bool) -> NDArray[np.float64]:
        """Sizes in [lo, hi) (hi included when ``last``) to fit on, from the dense table."""
        dense = getattr(self, "_dense", None)
        if dense is not None:
            lo_i = np.searchsorted(dense, max(lo, 1.0), side="left")
            hi_i = np.searchsorted(dense, hi, side="right" if last else "left")
            inside = dense[lo_i:hi_i]
            integers = math.floor(hi) - math.ceil(max(lo, 1.0)) + (1 if last else 0)
            if inside.size >= min(16, max(integers, 1)) and inside.size:
                step = max(1, inside.size // _GRID)
                picked = inside[::step]
                return picked if picked[-1] == inside[-1] else np.append(picked, inside[-1])
        # whole sizes only (messages are): a range of one size exported on its own is empty
        whole = unique_sorted(np.round(_grid(lo, hi, last)))
        whole = whole[(whole >= max(lo, 1.0)) & ((whole < hi) | last)]
        return setdiff_sorted(whole, self.own)

    def message(self, size: ArrayLike) -> NDArray[np.float64]:
        """The message size the user sent for a network transfer of ``size`` bytes."""
        return np.maximum(np.asarray(size, dtype=np.float64) - self.envelope, 0.0)

    def centre(self, size: ArrayLike) -> NDArray[np.float64]:
        """The model's centre for the message carried by a ``size``-byte transfer."""
        s = np.asarray(size, dtype=np.float64)
        dense = getattr(self, "_dense", None)
        if dense is not None and s.size:
            idx = np.clip(np.searchsorted(dense, s), 0, dense.size - 1)
            hit = dense[idx] == s
            if not np.all(hit):  # evaluate the misses once and keep them (the line split
                # and the check after it ask for the same narrow ranges again)
                new = unique_sorted(s[~hit])
                merged = np.concatenate([dense, new])
                order = np.argsort(merged, kind="stable")
                self._dense = dense = merged[order]
                self._dense_centre = np.concatenate(
                    [self._dense_centre, self._centre_uncached(new)])[order]
                idx = np.clip(np.searchsorted(dense, s), 0, dense.size - 1)
            return np.asarray(self._dense_centre[idx], dtype=np.float64)
        return self._centre_uncached(s)

    def _centre_uncached(self, size: ArrayLike) -> NDArray[np.float64]:
        s = self.message(size)
        if self.center == "median":
            return np.asarray(self.model.predict(s), dtype=np.float64).ravel()
        return np.asarray(self.model.curve(s), dtype=np.float64).ravel()

    def overhead(self, size: NDArray[np.float64]) -> NDArray[np.float64]:
        """What SMPI adds around an eager message: smpi/os + smpi/or at each size."""
        s = self.message(size)
        out = np.zeros(s.shape)
        for entries in self.overheads:
            for i, v in enumerate(s):
                if v < self.thresh:
                    vals = factor_at(entries, float(v), (0.0, 0.0))
                    out[i] += vals[0] + (vals[1] if len(vals) > 1 else 0.0) * v
        return out

    def curve(self, size: ArrayLike) -> NDArray[np.float64]:
        s = np.asarray(size, dtype=np.float64)
        return self.centre(s) - self.overhead(s)


# --------------------------------------------------------------------------- export


#: Host names of the exported platform (and hostfile).
HOSTS = ("pt2pt-0", "pt2pt-1")


@dataclass
class SimgridExport:
    """Everything :func:`export_simgrid` computed; ``write`` puts it into a directory."""

    config: dict[str, str]
    latency: float
    bandwidth: float
    document: dict[str, Any]
    version: tuple[int, int] = LATEST_KNOWN
    latency_factor: str = ""
    bandwidth_factor: str = ""
    noise_table: str = ""

    def cfg_args(self, *, factors: bool = True) -> list[str]:
        """``--cfg=key:value`` arguments for smpirun (one per option).

        ``factors=False`` leaves out the factor strings, for a run where the noise plugin's
        callbacks set them (SimGrid refuses both at once).
        """
        skip = set() if factors else set(factor_keys(self.version))
        return [f"--cfg={k}:{v}" for k, v in self.config.items() if k not in skip]

    def platform_xml(self, *, with_config: bool = True, hosts: tuple[str, str] = HOSTS) -> str:
        """A platform of the measured pair: two hosts, one link at the nominal L and B."""
        config = ""
        if with_config:
            props = "\n".join(f'    <prop id="{k}" value="{v}"/>' for k, v in self.config.items())
            config = f"  <config>\n{props}\n  </config>\n"
        return (
            "<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            "<!-- pt2pt-kit: the measured pair. The factors in <config> (and smpi-config.txt)\n"
            "     are relative to this link's latency and bandwidth: keep them together. -->\n"
            '<platform version="4.1">\n'
            f"{config}"
            '  <zone id="pt2pt" routing="Full">\n'
            f'    <host id="{hosts[0]}" speed="1Gf"/>\n'
            f'    <host id="{hosts[1]}" speed="1Gf"/>\n'
            f'    <link id="measured" bandwidth="{_num(self.bandwidth)}Bps" '
            f'latency="{_num(self.latency)}s"/>\n'
            f'    <route src="{hosts[0]}" dst="{hosts[1]}"><link_ctn id="measured"/></route>\n'
            "  </zone>\n"
            "</platform>\n")

    def write(self, out_dir: Path) -> list[Path]:
        """Write the configuration, the platform, the hostfile and the noise tables atomically.

        ``smpi-config.txt`` (--cfg= arguments), ``smpi-config.xml`` (the ``<config>`` block),
        ``platform.xml`` (the measured pair with that block), ``hostfile``,
        ``simgrid-noise.json`` and its flat twin ``simgrid-noise.tsv`` for the noise plugin.
        """
        make_dirs(out_dir)
        props = "\n".join(f'  <prop id="{k}" value="{v}"/>' for k, v in self.config.items())
        files = {
            "smpi-config.txt": "\n".join(self.cfg_args()) + "\n",
            "smpi-config.xml": f"<config>\n{props}\n</config>\n",
            "platform.xml": self.platform_xml(),
            "hostfile": "\n".join(HOSTS) + "\n",
            # compact: json's C encoder (indent= runs the pure-Python one: 0.25 CPU-s of
            # a 2 MB document, most of writing it)
            "simgrid-noise.json": json.dumps(self.document, sort_keys=True,
                                             separators=(",", ":")) + "\n",
            "simgrid-noise.tsv": self.noise_table,
        }
        return [write_text(out_dir / name, text) for name, text in files.items()]


def _refuse_unphysical(model: Any, lat_entries: Sequence[FactorEntry],
                       bw_entries: Sequence[FactorEntry], latency: float,
                       bandwidth: float) -> None:
    """Refuse factors physics forbids (kit.figures.sanity): a factor <= 0 (SimGrid would make
    the latency or the bandwidth vanish), or one that makes the nominal latency / bandwidth
    unphysical. Named by the sizes and the model regime they come from."""
    bounds = [e.bound for e in lat_entries]
    for i, (lat, bw) in enumerate(zip(lat_entries, bw_entries, strict=True)):
        upto = bounds[i + 1] if i + 1 < len(bounds) else math.inf
        problem = (sanity.factor_problem(lat.values[0], "the latency factor", latency)
                   or sanity.factor_problem(bw.values[0], "the bandwidth factor", bandwidth,
                                            kind="bandwidth"))
        if problem is None:
            continue
        size = max(float(lat.bound), 1.0)
        k = int(np.asarray(model.regime_index(np.array([size])))[0]) \
            if hasattr(model, "regime_index") else 0
        raise ModelError(
            f"{_describe_regime(model, k)}: at sizes [{lat.bound}, {upto}) B {problem} "
            f"(nominal latency {latency:.4g} s, bandwidth {bandwidth:.4g} B/s): the curve "
            "there cannot be written as SimGrid factors",
            where="ping-pong model", hint="refit the series (fewer regimes with "
            "--max-regimes, or fixed --breakpoints), measure it on a quiet node, or give the "
            "real --latency/--bandwidth")


def _ratio_tables(model: Any, sizes: Sequence[float], rng: np.random.Generator
                  ) -> list[list[float]]:
    """Per size, quantiles of ``time / curve`` from the model's own predictive draws (4000
    each, a size after another from ``rng``)."""
    s = np.asarray(sizes, dtype=np.float64)
    if hasattr(model, "sample_each"):
        draws = np.asarray(model.sample_each(s, 4000, random_state=rng), dtype=np.float64)
    else:
        draws = np.stack([np.asarray(model.sample(s[i:i + 1], 4000, random_state=rng),
                                     dtype=np.float64).ravel() for i in range(len(s))])
    curve = np.asarray(model.curve(s), dtype=np.float64).ravel()
    if not len(s):
        return []
    # one call for every row (the values of one call per row: the same order statistics)
    return np.quantile(draws / curve[:, None], _QUANTILE_PROBS, axis=1).T.tolist()


def _network_ratios(target: _Target, sizes: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per size (rows), quantiles at NOISE_PROBS of the ratio network time / its centre.

    The model's quantiles ``q`` of the whole one-way time, minus the overheads ``o``
    (constant per size), over the network centre ``c - o``: drawing from this table and
    multiplying the network time by it gives the model's distribution of the whole time.
    """
    q = np.asarray(target.model.predict_quantiles(target.message(sizes), list(NOISE_PROBS)),
                   dtype=np.float64)
    c = target.centre(sizes)[:, None]
    o = target.overhead(sizes)[:, None]
    ratio = (q - o) / (c - o)
    return np.maximum(ratio, 1e-3)


def _top(piece: LinearPiece) -> float:
    """A piece's largest whole size (its first size for the open last piece)."""
    lo = max(piece.size_min, 1.0)
    return max(piece.size_max - 1 if math.isfinite(piece.size_max) else lo, lo)


def _noise_tables(target: _Target, pieces: Sequence[LinearPiece]
                  ) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """Per piece, the table sizes and their ratio quantiles (one model call for all)."""
    per_piece = []
    own = unique_sorted(target.own)
    for piece in pieces:
        lo, hi = max(piece.size_min, 1.0), _top(piece)
        # Noise tables at most a factor 2 apart: band weights change with size. Not at a
        # size exported on its own (the smooth view there is mostly that size's own).
        n_tables = max(2, math.ceil(math.log2(hi / lo)) + 1) if hi > lo else 1
        sizes = unique_sorted(np.round(np.geomspace(lo, hi, n_tables)))
        for _ in range(8):
            clash = member(sizes, own) & (sizes + 1 <= hi)
            if not clash.any():
                break
            sizes = unique_sorted(np.where(clash, sizes + 1, sizes))
        per_piece.append(sizes)
    ratios = _network_ratios(target, np.concatenate(per_piece))
    out, at = [], 0
    for sizes in per_piece:
        out.append((sizes, ratios[at:at + sizes.size]))
        at += sizes.size
    return out


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return _jsonable(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return obj


def overhead_string(model: Any) -> str:
    """``smpi/os`` / ``smpi/or`` string (``bound:offset:per_byte``) from a send or recv model."""
    pieces = linear_pieces(model)
    return format_factor([FactorEntry(b, (p.a, p.b)) for b, p in zip(_bounds(pieces), pieces,
                                                                      strict=True)])


def _resolve_version(version: tuple[int, int] | str | None) -> tuple[int, int]:
    if isinstance(version, str):
        return parse_version(version)
    if version is None:
        return detect_version() or LATEST_KNOWN
    return version


def export_simgrid(model: Any, *, latency: float | None = None, bandwidth: float | None = None,
                   send_model: Any = None, recv_model: Any = None, isend_model: Any = None,
                   version: tuple[int, int] | str | None = None, center: str = "median",
                   envelope: int = SMPI_ENVELOPE, random_state: int = 0,
                   provenance: Mapping[str, Any] | None = None) -> SimgridExport:
    """SMPI configuration for a ping-pong (one-way time) model.

    ``latency`` (s) and ``bandwidth`` (B/s) are the nominal values of the route in the
    user's platform file; factors are relative to them. Without them, the first regime's
    start-up time and the last regime's asymptotic bandwidth are used, so that the
    platform's link can be written with exactly those numbers.

    ``version`` (``(3, 32)``, ``"3.32"``; default: the installed SimGrid, else the newest
    known) picks the option names. ``center`` is what the factors follow: ``"median"``
    (default: ``model.predict``, what ``pt2pt predict`` prints, measured sizes' own
    adjustments included as one-byte entries, kit/outputs/export/persize.py) or ``"curve"``
    (the regimes' central curves, the population's noise). With
    ``send_model``/``recv_model`` (``smpi/os``/``smpi/or``) the network factors carry the
    ping-pong time minus the overheads SMPI adds to eager messages, so the simulated one-way
    time is the model's; a model whose overheads exceed the ping-pong time is refused.
    ``isend_model`` gives ``smpi/ois`` (not on a blocking ping-pong's path).
    ``envelope``: SMPI sends ``size + 16`` bytes (the MPI envelope, smpi_request.cpp) and
    looks the factors up at that size; the factors are computed for it (0 for a plain
    SimGrid transfer of exactly ``size`` bytes).
    A model whose regimes need non-physical factors is refused (:func:`check_physical`).
    """
    if center not in ("curve", "median"):
        raise ModelError(f"unknown centre {center!r}", where="center", hint="curve or median")
    ver = _resolve_version(version)
    # The lines follow a smooth curve: what predict says at sizes never measured (median),
    # or the population (curve). Measured sizes' own adjustments are cut in afterwards.
    full = model
    send_model, recv_model, isend_model = (
        m.population() if hasattr(m, "population") else m
        for m in (send_model, recv_model, isend_model))
    if hasattr(model, "unmeasured"):
        model = model.unmeasured() if center == "median" else model.population()
    check_physical(model, what="ping-pong model")
    for extra, name in ((send_model, "send model"), (recv_model, "recv model"),
                        (isend_model, "isend model")):
        if extra is not None:
            check_physical(extra, what=name)
    overhead_cfg: dict[str, str] = {}
    overheads: list[str] = []
    for key, extra in (("smpi/os", send_model), ("smpi/or", recv_model),
                       ("smpi/ois", isend_model)):
        if extra is None:
            continue
        text = overhead_string(extra)
        overhead_cfg[key] = text
        if key != "smpi/ois":
            overheads.append(text)
    own = (own_sizes(full, full.stored_sizes())
           if center == "median" and hasattr(full, "stored_sizes") else None)
    target = _Target(model, center, overheads, DETACHED_THRESH, envelope,
                     own.sizes if own is not None else None)
    target.prefetch()
    for k, r in enumerate(target.regimes_):
        grid = target.grid(r.size_min, r.size_max, k == len(target.regimes_) - 1)
        net = target.curve(grid)
        if not np.all(np.isfinite(net)) or np.any(net <= 0):
            raise OverheadsExceed(f"{_describe_regime(model, r.source)}: {OVERHEADS_EXCEED}",
                             where="ping-pong model",
                             hint="check that --send/--recv are models of the same pair, or "
                             "export without them")
    lines: LineMemo = {}
    pieces = linear_pieces(target, memo=lines)
    if latency is None:
        latency = pieces[0].a if pieces[0].a > 0 else min((p.a for p in pieces if p.a > 0),
                                                          default=float("nan"))
    if bandwidth is None:
        slopes = [p.b for p in pieces if p.b > 0]
        if not slopes:
            raise ModelError("no regime has a per-byte cost, so no bandwidth can be derived",
                             where="option --bandwidth", hint="give --bandwidth B/s")
        bandwidth = 1.0 / slopes[-1]
        if sanity.bandwidth_problem(bandwidth):
            # A flat top (no per-byte cost left at the largest sizes, a busy run's fit):
            # the route's rate is then what the largest message achieved (kit.figures'
            # effective bandwidth), which a transfer really did.
            top = max(float(pieces[-1].size_max if math.isfinite(pieces[-1].size_max)
                            else pieces[-1].size_min), 1.0)
            bandwidth = top / float(np.asarray(target.curve(np.array([top])))[0])
        problem = sanity.bandwidth_problem(bandwidth, "the nominal bandwidth (the largest "
                                           "message's rate)")
        if problem:
            raise ModelError(f"{problem}: the curve is flat up to its largest size, so it "
                             "holds no bandwidth to derive (is it a ping-pong of growing "
                             "messages?)", where="ping-pong model",
                             hint="give the route's bandwidth with --bandwidth B/s, or export "
                             "a series measured up to sizes where the per-byte cost shows")
    if not (latency > 0 and bandwidth > 0 and math.isfinite(latency) and math.isfinite(bandwidth)):
        raise ModelError(f"nominal latency {latency} s / bandwidth {bandwidth} B/s must be > 0",
                         where="options --latency/--bandwidth", hint="give positive numbers")
    check_physical(model, bandwidth, what="ping-pong model")
    # Refit pieces whose per-byte cost is below the physical floor, splitting as needed.
    min_b = 1.0 / (bandwidth * MAX_BW_FACTOR)
    pieces = linear_pieces(target, min_b=min_b, memo=lines)
    bounds = _bounds(pieces)
    tables = _noise_tables(target, pieces)
    lat_entries, bw_entries, segments, rows = [], [], [], []
    described: dict[int, dict[str, Any]] = {}
    mids = [math.sqrt(max(p.size_min, 1.0) * _top(p)) for p in pieces]
    ratio_tables = _ratio_tables(model, [max(mid - envelope, 1.0) for mid in mids],
                                 np.random.default_rng(random_state))
    for k, (bound, piece) in enumerate(zip(bounds, pieces, strict=True)):
        source = target.regimes_[piece.regime].source
        regime = model.regimes_[source]
        grid = target.grid(piece.size_min, piece.size_max, k == len(pieces) - 1)
        want = target.curve(grid)
        # a piece of sizes all exported on their own follows nothing (its grid is empty)
        miss = float(np.max(np.abs(piece.a + piece.b * grid - want) / want)) if grid.size else 0.0
        if miss > REFUSE_TOLERANCE:
            raise ModelError(
                f"{_describe_regime(model, source)} cannot be written with physical factors: "
                f"the best line with bandwidth at most {MAX_BW_FACTOR:g} x nominal misses the "
                f"curve by {miss:.0%} on [{piece.size_min:.0f}, {piece.size_max:.0f}) B",
                where="ping-pong model", hint="refit with fewer regimes (--max-regimes) or "
                "fixed --breakpoints, or give the real --bandwidth")
        lat = piece.a / latency
        bwf = 1.0 / (piece.b * bandwidth)
        lat_entries.append(FactorEntry(bound, (lat,)))
        bw_entries.append(FactorEntry(bound, (bwf,)))
        table_sizes, ratios = tables[k]
        values = ratios.tolist()
        for size, row in zip(table_sizes.tolist(), values, strict=True):
            rows.append(f"{bound} {_num(lat)} {_num(bwf)} {_num(size)} {len(row)} "
                        + " ".join(map(_num, row)))
        mid = mids[k]
        if source not in described:  # a regime's description, once for all its segments
            described[source] = {
                "family": regime.family, "params": _jsonable(regime.params),
                "noise": _jsonable(regime.noise),
                "components": _jsonable(getattr(regime, "components", [])),
                "weight": _jsonable(getattr(regime, "weight", {})),
                "overlap": _jsonable(getattr(regime, "overlap", None))}
        segments.append({
            "bound": bound, "size_min": piece.size_min, "size_max": piece.size_max,
            "regime": source, "intercept_s": piece.a, "per_byte_s": piece.b,
            "latency_factor": lat, "bandwidth_factor": bwf, **described[source],
            "ratio_quantiles": {"size": mid, "probs": list(_QUANTILE_PROBS),
                                "values": ratio_tables[k]},
            "network_ratio_tables": [
                {"size": size, "probs": list(NOISE_PROBS), "values": row}
                for size, row in zip(table_sizes.tolist(), values, strict=True)],
        })
    points = [] if own is None else size_points(
        own, envelope=envelope, overhead=target.overhead,
        line=lambda t: _line_at(pieces, bounds, t), latency=latency, bandwidth=bandwidth)
    merged = with_points([e.bound for e in lat_entries],
                         [(a.values[0], b.values[0])
                          for a, b in zip(lat_entries, bw_entries, strict=True)], points)
    lat_entries = [FactorEntry(bound, (v[0],)) for bound, v in merged]
    bw_entries = [FactorEntry(bound, (v[1],)) for bound, v in merged]
    _refuse_unphysical(model, lat_entries, bw_entries, latency, bandwidth)
    rows += [f"= {p.transfer} {_num(p.latency_factor)} {_num(p.bandwidth_factor)} "
             f"{len(p.ratios)} " + " ".join(_num(v) for v in p.ratios) for p in points]
    lat_key, bw_key = factor_keys(ver)
    lat_text, bw_text = format_factor(lat_entries), format_factor(bw_entries)
    # smpi/wtime: SMPI charges 10 ns per MPI_Wtime call by default; the measured times hold
    # the timer's cost already (3 % of a 0.5 us shared-memory ping-pong).
    config = {lat_key: lat_text, bw_key: bw_text, "network/crosstraffic": "0",
              "smpi/wtime": "0"}
    # TCP-gamma bounds a flow's rate by gamma / (2 * route latency): keep it out of the way.
    fastest = bandwidth * max(e.values[0] for e in bw_entries)
    if _TCP_GAMMA_DEFAULT / (2 * latency) < 10 * fastest:
        config["network/TCP-gamma"] = _num(20 * fastest * 2 * latency)
    config.update(overhead_cfg)
    if overhead_cfg:
        config["smpi/send-is-detached-thresh"] = str(DETACHED_THRESH)
    header = ("# pt2pt-kit noise table for libpt2pt_noise"
              " (kit/outputs/export/smpi/noise_plugin.cpp)\n"
              f"# latency {_num(latency)} s, bandwidth {_num(bandwidth)} B/s; "
              "BOUND LAT_FACTOR BW_FACTOR SIZE N Q_1..Q_N at p=(i-0.5)/N;\n"
              "# '= SIZE LAT_FACTOR BW_FACTOR N Q_1..Q_N': that transfer size alone "
              "(a measured size's own adjustment)\n")
    document = {
        "format": "pt2pt-simgrid-export", "format_version": 2,
        "simgrid_version": f"{ver[0]}.{ver[1]}",
        "latency_base_s": latency, "bandwidth_base_Bps": bandwidth,
        "center": center,
        "config": config,
        "lookup": "entry with the largest bound strictly below the size; default below the "
                  "first bound",
        "time_model": "L*latency_factor + size/(B*bandwidth_factor); noise multiplies time",
        "eager_threshold_B": DETACHED_THRESH,
        "envelope_B": envelope,
        "segments": segments,
        "measured_sizes": [p.to_dict() for p in points],
        "provenance": _jsonable(dict(provenance) if provenance else None),
    }
    return SimgridExport(config=config, latency=latency, bandwidth=bandwidth, document=document,
                         version=ver, latency_factor=lat_text, bandwidth_factor=bw_text,
                         noise_table=header + "\n".join(rows) + "\n")


def _line_at(pieces: Sequence[LinearPiece], bounds: Sequence[int],
             transfer: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(a, b)`` of the exported piece SimGrid uses at each transfer size."""
    at = np.searchsorted(np.asarray(bounds), transfer, side="left") - 1
    at = np.clip(at, 0, len(pieces) - 1)
    return (np.array([pieces[i].a for i in at]), np.array([pieces[i].b for i in at]))


def regimes_from_simgrid(latency_factor: str, bandwidth_factor: str, latency: float,
                         bandwidth: float, size_max: float = math.inf) -> list[LinearPiece]:
    """Turn exported factor strings back into linear regimes ``a + b*s``.

    Each bound ``c`` starts a regime at size ``c + 1`` (SimGrid applies it to sizes strictly
    above ``c``); the first regime starts at 0.
    """
    _, lat = parse_factor(latency_factor, option="network/latency-factor")
    _, bwf = parse_factor(bandwidth_factor, option="network/bandwidth-factor")
    bounds = sorted({e.bound for e in lat} | {e.bound for e in bwf})
    if not bounds:
        raise ModelError("the factor strings hold no bound:value entries",
                         where="network/latency-factor", hint="pass the exported strings")
    starts = [0.0] + [float(c + 1) for c in bounds[1:]]
    ends = [*starts[1:], size_max]
    out = []
    for c, lo, hi in zip(bounds, starts, ends, strict=True):
        probe = c + 1  # a size this entry applies to
        (lf,) = factor_at(lat, probe, (1.0,))[:1]
        (bf,) = factor_at(bwf, probe, (1.0,))[:1]
        out.append(LinearPiece(lo, hi, lf * latency, 1.0 / (bf * bandwidth)))
    return out


def overheads_from_simgrid(text: str, size_max: float = math.inf) -> list[LinearPiece]:
    """Parse an ``smpi/os``/``smpi/or`` string into linear pieces ``offset + per_byte*s``."""
    single, entries = parse_factor(text, option="smpi/os")
    if single is not None:
        return [LinearPiece(0.0, size_max, single, 0.0)]
    starts = [0.0] + [float(e.bound + 1) for e in entries[1:]]
    ends = [*starts[1:], size_max]
    return [LinearPiece(lo, hi, e.values[0], e.values[1] if len(e.values) > 1 else 0.0)
            for e, lo, hi in zip(entries, starts, ends, strict=True)]
