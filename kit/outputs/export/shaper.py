"""A host's sustained sending rate and burst: what a stream sees and a lone ping-pong does not.

Why: a link that is rate-limited by a token bucket (Linux ``tbf``, a switch's policer, a
cloud NIC's credit) lets a message on an idle link through at line speed up to the bucket's
*burst*, then at the bucket's *sustained rate*. A ping-pong leaves the link idle between
messages, so its per-size factors describe a full bucket; a window of back-to-back messages
(``osu_bw -W 16``, a collective's fan-out) empties it and moves at the sustained rate.
SimGrid's network factors are per message size, not per flow and time, so they cannot say
both: a burst is a property of the link's recent past. The platform therefore carries the two
separately: the factors (from the ping-pong) for a message on an idle link, and a token bucket
per host (rate from the probe's ``stream`` op, burst from where the ping-pong leaves line
speed) that the network plugin (``kit/outputs/export/smpi/noise_plugin.cpp``) replays in
simulated time. A message that finds the bucket short of what an idle link would give it
waits the difference as extra latency; one on an idle link keeps its factors exactly.

* **rate** = 1 / the slope of the stream model's per-message gap over the top octave of its
  sizes (the median curve: the window's start-up and the bucket's burst cancel in the slope);
* **burst** = the bytes a lone message gets ahead of the sustained rate, per ping-pong size
  ``S - rate * (t(S) - t(smallest))``: it grows with the size while the message fits in the
  bucket and is flat beyond (a tbf of burst b on a line of speed C gives b (1 - rate / C):
  the bucket refills while it drains, and the plugin admits a message's bytes at once, the
  line's time being the factors'). Read where it stops growing (the median of that size and
  the next two: larger sizes only add noise in proportion to their size); 0 when it never
  grows (no bucket: the plugin then only queues a host's messages at the sustained rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kit.core.errors import ModelError

#: Sizes (per decade) at which the ping-pong curve is read for the burst.
_PER_DECADE = 16


@dataclass(frozen=True)
class Shaper:
    """A token bucket on every host's outgoing inter-node traffic."""

    rate: float  #: sustained rate, B/s
    burst: float  #: bucket size, bytes
    source: str = ""  #: where the two numbers come from (for the notes)

    def table_line(self) -> str:
        """The network plugin's line (``shaper RATE_BPS BURST_BYTES``)."""
        return f"shaper {self.rate:.10g} {self.burst:.10g}"

    def to_dict(self) -> dict[str, Any]:
        return {"rate_Bps": self.rate, "burst_bytes": self.burst, "source": self.source}


def _size_range(model: Any, what: str) -> tuple[float, float]:
    regimes = getattr(model, "regimes_", None)
    if not regimes:
        raise ModelError(f"the {what} has no fitted regimes", where=what,
                         hint="give a model file written by pt2pt fit")
    return float(regimes[0].size_min), float(regimes[-1].size_max)


def _read_sizes(model: Any, lo: float, hi: float) -> np.ndarray:
    """Where to read ``model``'s median: its measured sizes (their own medians: a regime's
    line cannot bend at a burst, a measured size's median does), else a log grid."""
    own = np.asarray(model.stored_sizes(), dtype=float) if hasattr(model, "stored_sizes") else (
        np.zeros(0))
    own = np.unique(own[(own >= lo) & (own <= hi)])
    if own.size >= 2:
        return own
    return np.geomspace(lo, hi, max(2, int(math.log10(hi / lo) * _PER_DECADE) + 1))


def sustained_rate(stream_model: Any) -> float:
    """B/s: 1 / the slope of the median per-message gap over the top octave of the sizes."""
    lo, hi = _size_range(stream_model, "stream model")
    sizes = _read_sizes(stream_model, lo, hi)
    below = sizes[sizes <= sizes[-1] / 2]
    lo, hi = (float(below[-1]) if below.size else lo), float(sizes[-1])
    if not hi >= 2 * lo:
        raise ModelError(f"the stream model covers {lo:g}-{hi:g} B, less than an octave: no "
                         "slope to read a sustained rate from", where="stream model",
                         hint="measure the stream op up to sizes well above the burst "
                         "(e.g. sizes grid:1:1M:2)")
    g = np.asarray(stream_model.predict(np.array([lo, hi])), dtype=float)
    slope = (g[1] - g[0]) / (hi - lo)
    if not (math.isfinite(slope) and slope > 0):
        raise ModelError(f"the stream model's gap does not grow over {lo:g}-{hi:g} B "
                         f"({g[0]:.4g} s to {g[1]:.4g} s): no sustained rate",
                         where="stream model",
                         hint="is it a model of the probe's stream op (pt2pt fit DS --series "
                         "op=stream)?")
    return 1.0 / slope


def burst_bytes(pingpong_model: Any, rate: float) -> float:
    """The bytes a message on an idle link gets ahead of ``rate`` (module docstring)."""
    lo, hi = _size_range(pingpong_model, "ping-pong model")
    lo = max(lo, 1.0)
    sizes = _read_sizes(pingpong_model, lo, hi)
    t = np.asarray(pingpong_model.predict(np.concatenate([[lo], sizes])), dtype=float)
    ahead = sizes - rate * (t[1:] - t[0])
    # ahead grows with the size while the message fits in the burst, then stays flat (its
    # noise grows with the size): the plateau is where it stops growing at half its pace.
    for i in range(len(sizes) - 1):
        if ahead[i] > 0 and ahead[i + 1] < ahead[i] * math.sqrt(sizes[i + 1] / sizes[i]):
            return float(max(0.0, np.median(ahead[i:i + 3])))
    return 0.0


def shaper_from_models(pingpong_model: Any, stream_model: Any,
                       burst: float | None = None) -> Shaper:
    """The bucket of a link measured by a ping-pong and a stream (``burst``: given, bytes)."""
    rate = sustained_rate(stream_model)
    if burst is None:
        b = burst_bytes(pingpong_model, rate)
        how = "burst from the ping-pong's departure from that rate"
    else:
        if not (burst >= 0 and math.isfinite(burst)):
            raise ModelError(f"burst {burst} bytes", where="option --burst",
                             hint="give a size >= 0, e.g. 64k")
        b, how = float(burst), "burst as given"
    return Shaper(rate, b, f"sustained rate from the stream model's top octave, {how}")
