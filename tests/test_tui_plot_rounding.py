"""A plot does not change with the last bits of its data.

A histogram's log-spaced edges sit at fixed fractions of the padded axis, whatever the
data, so some fall on half a dot exactly; rounded half-to-even they went one way or the
other by the last bit of the arithmetic, and a refit that moved a curve by 1e-10 changed
the noise screen's picture (a snapshot test failed on it).
"""

from __future__ import annotations

import numpy as np
import pytest
from textual.geometry import Size

from tui.figures import histogram_spec
from tui.noiseview import NoiseView
from tui.widgets.plot import Plot, PlotSpec


class _SizedPlot(Plot):
    """The plot widget at a fixed size, outside an app."""

    spec: PlotSpec | None = None  # type: ignore[assignment]  # plain, not the reactive

    def __init__(self, width: int, height: int) -> None:
        super().__init__()
        self._fixed = Size(width, height)

    @property
    def size(self) -> Size:
        return self._fixed


def _view(ratio: np.ndarray) -> NoiseView:
    lo, hi = float(ratio.min()), float(ratio.max())
    grid = np.geomspace(lo, hi, 400)
    density = grid * np.exp(-0.5 * (np.log(grid) / 0.05) ** 2) / (0.05 * np.sqrt(2 * np.pi))
    return NoiseView(ratio=ratio, density_x=grid, density_y=density, family="lognormal",
                     candidates=[])


def _picture(view: NoiseView, width: int, height: int) -> str:
    plot = _SizedPlot(width, height)
    plot.spec = histogram_spec(view, "cyan")
    return plot.render().plain


def test_halves_round_up_whatever_their_last_bit() -> None:
    from tui.widgets.plot import _nearest_dot

    half = np.array([50.5, np.nextafter(50.5, 0), np.nextafter(50.5, 100), -0.5, 3.2, 3.7])
    assert _nearest_dot(half).tolist() == [51, 51, 51, 0, 3, 4]


@pytest.mark.parametrize("seed", range(3))
def test_a_noise_histogram_is_the_same_picture_for_ratios_moved_by_1e_10(seed: int) -> None:
    # The middle edge of the 60 sits on a half dot at every width (the axis is padded
    # alike on both sides); which way it went depended on the ratios' last bits.
    rng = np.random.default_rng(seed)
    ratio = 1.0 + rng.exponential(0.1, 3000)  # a skewed noise: steep in the middle of its range
    for width, height in ((60, 16), (97, 24), (120, 30)):
        want = _picture(_view(ratio), width, height)
        for k in range(1, 41):
            factor = 1 + k * 1e-11 * (-1) ** k
            assert _picture(_view(ratio * factor), width, height) == want, (width, k)
