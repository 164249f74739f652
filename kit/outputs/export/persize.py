"""The measured sizes' own adjustments in a SimGrid export: one-byte factor entries.

Why: ``pt2pt predict`` gives a measured size its own location, band share and shape
(``kit/model/persize.py``); between them it predicts the kernel mean of the neighbours'
shifts (``RegimeModel.unmeasured``). SimGrid's factor strings are per size already (an entry
applies to every size above its bound until the next entry), so a size whose prediction
differs from the smooth curve gets two entries: one at its own transfer size (``size +
envelope``) and one that resumes the smooth line right after it. The noise plugin reads the
size's own quantile table from an exact-size line of the noise table (``= SIZE ...``).
A simulation then runs what ``predict`` prints at every size, measured or not.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kit.core.errors import ModelError
from kit.core.sets import unique_sorted

#: A stored size whose median, p05 or p95 differs from the smooth curve's by more than this
#: (relative) gets entries of its own; below it the smooth line already says the same.
PER_SIZE_TOLERANCE = 0.002
#: Why a model is refused when SMPI's overheads leave no network time (docs/simgrid.md).
OVERHEADS_EXCEED = ("the send/recv overheads (smpi/os + smpi/or) exceed the ping-pong time, "
                    "so no network time is left for SimGrid")


class OverheadsExceed(ModelError):
    """The send/recv models' overheads leave no network time somewhere: export without them
    (the demo does, and says so)."""
#: Probabilities of a measured size's own noise table, (i - 0.5) / 25: its shape is set at
#: nine levels (kit.model.persize.SHAPE_LEVELS, p02 ... p98), which 25 quantiles carry, at a
#: quarter of the cost of the segments' 100 (the predictive quantiles of ~10^4 sizes were
#: most of an export's time).
OWN_PROBS = tuple((i + 0.5) / 25 for i in range(25))
#: The levels compared to decide whether a stored size needs its own entries.
_DECIDE_LEVELS = (0.05, 0.5, 0.95)


@dataclass(frozen=True)
class SizePoint:
    """One measured size exported on its own (factors relative to the nominal route)."""

    size: int
    #: what SimGrid looks the factors up at: size + the MPI envelope
    transfer: int
    latency_factor: float
    bandwidth_factor: float
    #: ``pt2pt predict``'s median at ``size`` (s), overheads included
    median_s: float
    #: quantiles at the noise table's probabilities of network time / its centre
    ratios: tuple[float, ...]

    def to_dict(self) -> dict[str, object]:
        """Without the table: it is in the noise table (``= SIZE ...``), 25 numbers a size."""
        return {"size": self.size, "transfer": self.transfer,
                "latency_factor": self.latency_factor,
                "bandwidth_factor": self.bandwidth_factor, "median_s": self.median_s}


@dataclass(frozen=True)
class OwnSizes:
    """The stored sizes to export on their own, with the model's median and quantiles."""

    sizes: NDArray[np.float64]
    median: NDArray[np.float64]
    #: (len(sizes), len(probs)) quantiles at the noise table's probabilities
    quantiles: NDArray[np.float64]


def own_sizes(model: Any, stored: NDArray[np.float64], probs: Sequence[float] = OWN_PROBS,
              tolerance: float = PER_SIZE_TOLERANCE) -> OwnSizes:
    """The stored sizes whose median, p05 or p95 differ from the smooth curve's (what
    ``model.unmeasured()`` predicts there) by > tolerance; both from one root search
    (``predict_quantiles_and_unmeasured``: the model's own at ``probs`` and the three
    levels, the smooth view's at the three levels)."""
    sizes = unique_sorted(stored)
    # size 0 too: its own median can differ from size 1's (the demo's tcp model: 3.6 %)
    sizes = sizes[(sizes >= 0) & (sizes == np.round(sizes))]
    levels = [*probs, *_DECIDE_LEVELS]
    if not sizes.size:
        return OwnSizes(sizes, sizes, np.zeros((0, len(probs))))
    q, base = (np.asarray(v, dtype=np.float64) for v in model.predict_quantiles_and_unmeasured(
        sizes, levels, range(len(probs), len(levels))))
    own = q[:, len(probs):]
    keep = np.max(np.abs(own / base - 1.0), axis=1) > tolerance
    return OwnSizes(sizes[keep], own[keep, 1], q[keep, :len(probs)])


def size_points(own: OwnSizes, *, envelope: int,
                overhead: Callable[[NDArray[np.float64]], NDArray[np.float64]],
                line: Callable[[NDArray[np.float64]], tuple[NDArray[np.float64],
                                                            NDArray[np.float64]]],
                latency: float, bandwidth: float) -> list[SizePoint]:
    """The sizes of :func:`own_sizes` as entries of their own.

    ``overhead(transfer)`` is what SMPI adds around the network time (smpi/os + smpi/or of
    eager messages), ``line(transfer)`` the ``(a, b)`` of the exported smooth line there.
    A point's line is the smooth one scaled to the size's median (both factors move by the
    same ratio, so they stay as physical as the line they come from); its noise table is
    the size's own quantiles over that median.
    """
    sizes, median, q = own.sizes, own.median, own.quantiles
    if not sizes.size:
        return []
    transfer = sizes + envelope
    o = overhead(transfer)
    centre = median - o
    if np.any(centre <= 0):
        bad = int(sizes[np.argmax(centre <= 0)])
        raise OverheadsExceed(f"at the measured size {bad} B {OVERHEADS_EXCEED}",
                              where="ping-pong model",
                              hint="check that --send/--recv are models of the same pair, or "
                              "export without them")
    a, b = line(transfer)
    scale = centre / (a + b * transfer)
    ratios = np.maximum((q - o[:, None]) / centre[:, None], 1e-3)
    return [SizePoint(int(s), int(t), float(ai * k / latency), float(1.0 / (bi * k * bandwidth)),
                      float(m), tuple(float(v) for v in row))
            for s, t, ai, bi, k, m, row in zip(sizes, transfer, a, b, scale, median, ratios,
                                              strict=True)]


def with_points(bounds: Sequence[int], values: Sequence[tuple[float, float]],
                points: Sequence[SizePoint]) -> list[tuple[int, tuple[float, float]]]:
    """Factor entries ``(bound, (lat, bw))``: the smooth ones with each point cut in.

    SimGrid applies an entry to sizes strictly above its bound: a point at transfer size
    ``t`` is the entry at ``t - 1``, and the smooth line resumes with an entry at ``t``
    (unless the next size is a point too).
    """
    smooth = sorted(zip(bounds, values, strict=True))
    keys = [b for b, _ in smooth]

    def smooth_at(size: int) -> tuple[float, float]:
        at = bisect.bisect_left(keys, size) - 1  # the largest bound strictly below
        return smooth[at][1] if at >= 0 else (1.0, 1.0)

    table = dict(smooth)
    # a point is the entry at transfer - 1: a transfer of 0 (size 0, no envelope) has none
    points = [p for p in points if p.transfer >= 1]
    for p in points:
        table[p.transfer] = smooth_at(p.transfer + 1)
    for p in points:
        table[p.transfer - 1] = (p.latency_factor, p.bandwidth_factor)
    return sorted(table.items())
