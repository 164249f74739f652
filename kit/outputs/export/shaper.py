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
* **burst and line**: the bytes a lone message gets ahead of the sustained rate, per
  ping-pong size ``S - rate * (t(S) - t(smallest))``, grow with the size while the message
  fits in the bucket and are flat beyond, at the bucket's size b (a tbf of b bytes on a line
  of speed C sends ``b C / (C - rate)`` bytes at C, the bucket refilling while it drains).
  The plateau is read where the growth stops (the median of that size and the next two:
  larger sizes only add noise in proportion to their size), C as the ping-pong's slope over
  the three octaves below it (inf when not faster than the rate). No plateau: no bucket
  (burst 0; the plugin then only queues a host's messages at the sustained rate).

The plugin replays the bucket as a fluid: a message's bytes leave at C while the bucket has
tokens (which drain at C - rate), at the rate after; it waits what this takes beyond the same
message on an idle link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kit.core.errors import ModelError


@dataclass(frozen=True)
class Shaper:
    """A token bucket on every host's outgoing inter-node traffic."""

    rate: float  #: sustained rate, B/s
    burst: float  #: bucket size, bytes
    line: float = math.inf  #: speed while the bucket has tokens, B/s (inf: at once)
    source: str = ""  #: where the numbers come from (for the notes)

    def table_line(self) -> str:
        """The network plugin's line (``shaper RATE_BPS BURST_BYTES [LINE_BPS]``)."""
        line = f" {self.line:.10g}" if math.isfinite(self.line) else ""
        return f"shaper {self.rate:.10g} {self.burst:.10g}{line}"

    def to_dict(self) -> dict[str, Any]:
        return {"rate_Bps": self.rate, "burst_bytes": self.burst,
                "line_Bps": self.line if math.isfinite(self.line) else None,
                "source": self.source}


def _size_range(model: Any, what: str) -> tuple[float, float]:
    regimes = getattr(model, "regimes_", None)
    if not regimes:
        raise ModelError(f"the {what} has no fitted regimes", where=what,
                         hint="give a model file written by pt2pt fit")
    return float(regimes[0].size_min), float(regimes[-1].size_max)


def _octaves(model: Any, what: str) -> np.ndarray:
    """The sizes ``model``'s median is read at: octaves down from its largest size (the
    calibration's power-of-2 grid: measured sizes' own medians, where a regime's line cannot
    bend at a burst and a measured size's median does)."""
    lo, hi = _size_range(model, what)
    k = math.floor(math.log2(hi / max(lo, 1.0)) + 1e-9)
    return hi / 2.0 ** np.arange(k, -1, -1)


def sustained_rate(stream_model: Any) -> float:
    """B/s: 1 / the slope of the median per-message gap over the top octave of the sizes."""
    sizes = _octaves(stream_model, "stream model")
    if sizes.size < 2:
        raise ModelError(f"the stream model covers {sizes[0]:g} B only, less than an octave: "
                         "no slope to read a sustained rate from", where="stream model",
                         hint="measure the stream op up to sizes well above the burst "
                         "(e.g. sizes grid:1:1M:2)")
    lo, hi = float(sizes[-2]), float(sizes[-1])
    g = np.asarray(stream_model.predict(np.array([lo, hi])), dtype=float)
    slope = (g[1] - g[0]) / (hi - lo)
    if not (math.isfinite(slope) and slope > 0):
        raise ModelError(f"the stream model's gap does not grow over {lo:g}-{hi:g} B "
                         f"({g[0]:.4g} s to {g[1]:.4g} s): no sustained rate",
                         where="stream model",
                         hint="is it a model of the probe's stream op (pt2pt fit DS --series "
                         "op=stream)?")
    return 1.0 / slope


def bucket_of(pingpong_model: Any, rate: float) -> tuple[float, float]:
    """(burst bytes, line speed B/s) of the bucket in front of ``rate`` (module docstring);
    (0, inf) when the ping-pong shows none."""
    sizes = _octaves(pingpong_model, "ping-pong model")
    t = np.asarray(pingpong_model.predict(sizes), dtype=float)
    ahead = sizes - rate * (t - t[0])  # t[0]: the smallest size's, the latency
    # ahead grows with the size while the message fits in the burst (doubles per octave),
    # then stays flat (its noise grows with the size): the plateau starts at the first size
    # the next two octaves grow by less than half an octave's doubling.
    for i in range(1, len(sizes) - 2):
        if ahead[i] > 0 and max(ahead[i + 1], ahead[i + 2]) < math.sqrt(2) * ahead[i]:
            plateau = float(np.median(ahead[i:i + 3]))
            j = max(0, i - 3)  # the line: the ping-pong's slope over three octaves below it
            slope = (t[i] - t[j]) / (sizes[i] - sizes[j])
            line = 1.0 / slope if slope > 0 else float("inf")
            return max(0.0, plateau), (line if line > 1.05 * rate else float("inf"))
    return 0.0, float("inf")


def shaper_from_models(pingpong_model: Any, stream_model: Any,
                       burst: float | None = None) -> Shaper:
    """The bucket of a link measured by a ping-pong and a stream (``burst``: given, bytes)."""
    rate = sustained_rate(stream_model)
    b, line = bucket_of(pingpong_model, rate)
    how = "burst and line speed from the ping-pong's departure from that rate"
    if burst is not None:
        if not (burst >= 0 and math.isfinite(burst)):
            raise ModelError(f"burst {burst} bytes", where="option --burst",
                             hint="give a size >= 0, e.g. 64K")
        b, how = float(burst), "burst as given, line speed from the ping-pong"
    return Shaper(rate, b, line, f"sustained rate from the stream model's top octave, {how}")
