"""Export a fitted model as SimGrid/SMPI configuration, and read such configuration back.

What SimGrid does with it (checked against the SimGrid sources and manual):

* ``network/latency-factor`` and ``network/bandwidth-factor`` (aliases ``smpi/lat-factor``,
  ``smpi/bw-factor``) are strings ``bound:factor;bound:factor;...``. SimGrid's
  ``FactorSet::parse`` (src/kernel/resource/FactorSet.cpp) splits on ``;`` and ``:``, reads
  the bound with ``std::stoi`` (so bounds are integers below 2^31), and sorts entries by
  bound; values go through ``xbt_parse_get_time`` (strtod, so ``1.5e-06`` is fine and a
  unit-less number is accepted). ``FactorSet::operator()(size)`` walks the sorted
  entries and, at the first entry with ``size <= bound``, returns the *previous* entry
  (the default value when there is none). So the entry used is the one with the
  **largest bound strictly below the size**, and a size at or below the first bound
  gets the default (1.0 once a string is given).
  A regime that starts at size ``lo`` is therefore written with bound ``lo - 1``, and the
  first regime with bound 0 (size-0 messages then use the nominal latency, which by
  default *is* the first regime's start-up time, see below).
* The network model multiplies the route's latency by the latency factor and the route's
  smallest bandwidth by the bandwidth factor (``NetworkCm02Model::comm_action_set_bounds``,
  src/kernel/resource/models/network_cm02.cpp), so one message of ``s`` bytes on an idle
  route with latency ``L`` and bandwidth ``B`` takes ``L*lat(s) + s / (B*bw(s))``. A regime
  ``t = a + b*s`` therefore becomes ``lat = a / L`` and ``bw = 1 / (b * B)``. The SMPI
  model's built-in Stampede factors are *replaced* by the exported strings.
* ``smpi/os``, ``smpi/or`` (and ``smpi/ois``) are ``bound:offset:per_byte;...`` with the
  same lookup and value ``offset + per_byte * size`` (``factor_lambda`` in
  src/smpi/internals/smpi_host.hpp; manual: docs/source/Configuring_SimGrid.rst, section
  "Inject constant times for MPI_send()"). They are CPU time SMPI adds to MPI_Send and
  MPI_Recv *in sequence with* the network time; the SimGrid calibration tutorial
  (docs/source/tuto_network_calibration/network_calibration_tutorial.rst) notes that
  this makes small simulated ping-pongs slower than measured by os + or. We export the
  network factors from the measured one-way ping-pong time as it is and leave that
  choice to the user (the JSON records it).
* Options are given as ``--cfg=network/latency-factor:<string>`` on the smpirun command
  line or as ``<prop id="network/latency-factor" value="<string>"/>`` in the platform's
  ``<config>`` block.
* Noise: SimGrid's factor strings are deterministic. ``set_lat_factor_cb`` /
  ``set_bw_factor_cb`` (NetworkModelFactors.cpp) accept a callback ``(size, src, dst,
  links, netzones) -> factor`` instead (not both for the same option). The JSON written
  here gives, per regime, the deterministic factors plus the noise of ``time / curve`` as a
  quantile table (inverse CDF) a callback can sample by interpolation, and the fitted
  family/parameters for those who prefer to draw from the distribution itself.

A callback using the JSON (C++, sketch): find the segment with the largest ``bound``
strictly below ``size``; draw ``u`` uniform in [0, 1) and interpolate ``r`` in
``ratio_quantiles.values`` at ``u`` (``probs`` are 0, 0.01, ..., 1); return
``latency_factor * r`` from the latency callback and ``bandwidth_factor / r`` from the
bandwidth one (the same ``r`` for one message scales its whole time by ``r``)::

    model->set_lat_factor_cb([&](double size, auto...) { return seg(size).lat * draw(size); });

Regimes are exported through lines ``a + b*s`` fitted to the regime's central curve
(``model.curve``) by non-negative least squares on relative error; a ``linear`` regime is
one exact entry, a ``power`` regime is cut into as many entries as needed to stay within
2 % of its curve. :func:`regimes_from_simgrid` parses the strings
back into those linear regimes, which is how the round trip is tested.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from kit.errors import ModelError

#: SimGrid reads bounds with std::stoi: they must fit a C int.
MAX_BOUND = 2**31 - 1
#: A constant regime has no per-byte cost; SimGrid needs a finite bandwidth factor, so
#: the size term is made this many times smaller than at the nominal bandwidth.
MAX_BW_FACTOR = 1e6
_GRID = 64
#: Largest relative gap allowed between an exported line and the model's curve.
LINE_TOLERANCE = 0.02
#: Ranges narrower than this size ratio are not split further.
MIN_SPLIT_RATIO = 1.05
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


def fit_line(size: NDArray[np.float64], time: NDArray[np.float64],
             min_b: float = 0.0) -> tuple[float, float]:
    """``a, b >= 0`` minimising the relative error of ``a + b*s`` to ``time`` (``b >= min_b``)."""
    w = 1.0 / time
    design = np.column_stack([w, size * w])
    target = np.ones_like(time)
    scale = max(float(size.max()), 1.0)
    design[:, 1] /= scale
    if min_b > 0:  # shift b by its lower bound: fit (a, b - min_b) >= 0
        target = target - min_b * size * w
    (a, b_scaled), _ = nnls(design, target)
    return float(a), float(b_scaled / scale + min_b)


def _split(model: Any, k: int, lo: float, hi: float, last: bool, tol: float,
           out: list[LinearPiece]) -> None:
    """Fit one line on [lo, hi); halve the range (in log size) while it misses by > tol."""
    grid = _grid(lo, hi, last)
    curve = np.asarray(model.curve(grid), dtype=np.float64).ravel()
    if not np.all(np.isfinite(curve)) or np.any(curve <= 0):
        raise ModelError(f"regime {k + 1} has a non-positive curve, cannot export",
                         hint="refit the series; check for bad samples")
    a, b = fit_line(grid, curve)
    err = float(np.max(np.abs(a + b * grid - curve) / curve))
    mid = float(round(math.sqrt(max(lo, 1.0) * hi)))
    if err <= tol or hi / max(lo, 1.0) < MIN_SPLIT_RATIO or not lo + 1 < mid < hi:
        out.append(LinearPiece(lo, hi, a, b, k))
        return
    _split(model, k, lo, mid, False, tol, out)
    _split(model, k, mid, hi, last, tol, out)


def linear_pieces(model: Any, tol: float = LINE_TOLERANCE) -> list[LinearPiece]:
    """Lines ``a + b*s`` that follow the model's central curve within ``tol`` (relative).

    A linear regime is one piece, exactly. A power or constant-plus-jump curve is cut into
    as many pieces as a line needs to stay within ``tol`` (SimGrid takes any number of
    entries), each piece remembering its regime.
    """
    regimes = getattr(model, "regimes_", None)
    if not regimes:
        raise ModelError("the model has no regimes (not fitted?)",
                         hint="fit it first with 'pt2pt fit'")
    pieces: list[LinearPiece] = []
    for k, r in enumerate(regimes):
        _split(model, k, float(r.size_min), float(r.size_max), k == len(regimes) - 1, tol,
               pieces)
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


@dataclass
class SimgridExport:
    """Everything :func:`export_simgrid` computed; ``write`` puts it into a directory."""

    config: dict[str, str]
    latency: float
    bandwidth: float
    document: dict[str, Any]

    def cfg_args(self) -> list[str]:
        """``--cfg=key:value`` arguments for smpirun (one per option)."""
        return [f"--cfg={k}:{v}" for k, v in self.config.items()]

    def write(self, out_dir: Path) -> list[Path]:
        """Write ``smpi-config.txt``, ``smpi-config.xml`` and ``simgrid-noise.json`` atomically."""
        out_dir.mkdir(parents=True, exist_ok=True)
        props = "\n".join(f'  <prop id="{k}" value="{v}"/>' for k, v in self.config.items())
        files = {
            "smpi-config.txt": "\n".join(self.cfg_args()) + "\n",
            "smpi-config.xml": f"<config>\n{props}\n</config>\n",
            "simgrid-noise.json": json.dumps(self.document, indent=2, sort_keys=True) + "\n",
        }
        written = []
        for name, text in files.items():
            path = out_dir / name
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)
            written.append(path)
        return written


def _ratio_table(model: Any, size: float, rng: np.random.Generator) -> list[float]:
    """Quantiles of ``time / curve`` at ``size`` from the model's own predictive draws."""
    draws = np.asarray(model.sample(np.array([size]), 4000, random_state=rng),
                       dtype=np.float64).ravel()
    curve = float(np.asarray(model.curve(np.array([size]))).ravel()[0])
    return [float(v) for v in np.quantile(draws / curve, _QUANTILE_PROBS)]


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


def export_simgrid(model: Any, *, latency: float | None = None, bandwidth: float | None = None,
                   send_model: Any = None, recv_model: Any = None,
                   random_state: int = 0) -> SimgridExport:
    """SMPI configuration for a ping-pong (one-way time) model.

    ``latency`` (s) and ``bandwidth`` (B/s) are the nominal values of the route in the
    user's platform file; factors are relative to them. Without them, the first regime's
    start-up time and the last regime's asymptotic bandwidth are used, so that the
    platform's link can be written with exactly those numbers.
    """
    pieces = linear_pieces(model)
    if latency is None:
        latency = pieces[0].a if pieces[0].a > 0 else min(p.a for p in pieces if p.a > 0)
    if bandwidth is None:
        slopes = [p.b for p in pieces if p.b > 0]
        if not slopes:
            raise ModelError("no regime has a per-byte cost, so no bandwidth can be derived",
                             where="option --bandwidth", hint="give --bandwidth B/s")
        bandwidth = 1.0 / slopes[-1]
    if not (latency > 0 and bandwidth > 0 and math.isfinite(latency) and math.isfinite(bandwidth)):
        raise ModelError(f"nominal latency {latency} s / bandwidth {bandwidth} B/s must be > 0",
                         where="options --latency/--bandwidth", hint="give positive numbers")
    bounds = _bounds(pieces)
    lat_entries, bw_entries, segments = [], [], []
    rng = np.random.default_rng(random_state)
    for k, (bound, piece) in enumerate(zip(bounds, pieces, strict=True)):
        regime = model.regimes_[piece.regime]
        if piece.b <= 0:  # constant: refit a with the smallest per-byte cost SimGrid allows
            grid = _grid(piece.size_min, piece.size_max, k == len(pieces) - 1)
            curve = np.asarray(model.curve(grid), dtype=np.float64).ravel()
            a, b = fit_line(grid, curve, min_b=1.0 / (bandwidth * MAX_BW_FACTOR))
            piece = LinearPiece(piece.size_min, piece.size_max, a, b, piece.regime)
            pieces[k] = piece
        lat = piece.a / latency
        bwf = 1.0 / (piece.b * bandwidth)
        lat_entries.append(FactorEntry(bound, (lat,)))
        bw_entries.append(FactorEntry(bound, (bwf,)))
        mid = math.sqrt(max(piece.size_min, 1.0) * max(piece.size_max, 1.0))
        segments.append({
            "bound": bound, "size_min": piece.size_min, "size_max": piece.size_max,
            "regime": piece.regime, "intercept_s": piece.a, "per_byte_s": piece.b,
            "latency_factor": lat, "bandwidth_factor": bwf,
            "family": regime.family, "params": _jsonable(regime.params),
            "noise": _jsonable(regime.noise),
            "components": _jsonable(getattr(regime, "components", [])),
            "weight": _jsonable(getattr(regime, "weight", {})),
            "overlap": _jsonable(getattr(regime, "overlap", None)),
            "ratio_quantiles": {"size": mid, "probs": list(_QUANTILE_PROBS),
                                "values": _ratio_table(model, mid, rng)},
        })
    config = {"network/latency-factor": format_factor(lat_entries),
              "network/bandwidth-factor": format_factor(bw_entries)}
    if send_model is not None:
        config["smpi/os"] = overhead_string(send_model)
    if recv_model is not None:
        config["smpi/or"] = overhead_string(recv_model)
    document = {
        "format": "pt2pt-simgrid-export", "format_version": 1,
        "latency_base_s": latency, "bandwidth_base_Bps": bandwidth,
        "config": config,
        "lookup": "entry with the largest bound strictly below the size; default below the "
                  "first bound",
        "time_model": "L*latency_factor + size/(B*bandwidth_factor); noise multiplies time",
        "overheads_included_in_network": send_model is None and recv_model is None,
        "segments": segments,
        "provenance": _jsonable(getattr(model, "provenance_", None)),
    }
    return SimgridExport(config=config, latency=latency, bandwidth=bandwidth, document=document)


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
