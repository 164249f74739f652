"""A braille dot canvas: the smallest drawing surface that shows a cloud of samples in a terminal.

Each terminal cell holds 2x4 dots (Unicode braille), so a 100x30 plot has 200x120 dots: enough
to see the shape of a latency cloud and its tails. Drawing is vectorised with NumPy because the
series view redraws on every breakpoint edit. One colour per cell: later layers win, so callers
draw the background (samples) first and the things the user acts on (curves, markers) last.
"""

from __future__ import annotations

import numpy as np
from rich.style import Style
from rich.text import Text

# Bit of each dot inside a braille cell, indexed [dot_x (0..1)][dot_y (0..3)].
_DOT_BITS = np.array([[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]], dtype=np.uint8)


class BrailleCanvas:
    """A grid of ``width`` x ``height`` cells, addressed in dots (2 per column, 4 per row)."""

    def __init__(self, width: int, height: int) -> None:
        self.width = max(int(width), 1)
        self.height = max(int(height), 1)
        self.bits = np.zeros((self.height, self.width), dtype=np.uint8)
        self.colour = np.full((self.height, self.width), -1, dtype=np.int16)
        self.palette: list[str] = []
        # Cells that show a text glyph instead of dots (axis markers, labels).
        self.glyphs: dict[tuple[int, int], tuple[str, int]] = {}

    @property
    def dot_width(self) -> int:
        return self.width * 2

    @property
    def dot_height(self) -> int:
        return self.height * 4

    def _colour_index(self, colour: str) -> int:
        if colour not in self.palette:
            self.palette.append(colour)
        return self.palette.index(colour)

    def points(self, px: np.ndarray, py: np.ndarray, colour: str) -> None:
        """Set dots at integer dot coordinates (origin top-left); dots outside are dropped."""
        px = np.asarray(px, dtype=np.int64)
        py = np.asarray(py, dtype=np.int64)
        keep = (px >= 0) & (px < self.dot_width) & (py >= 0) & (py < self.dot_height)
        px, py = px[keep], py[keep]
        if px.size == 0:
            return
        cx, cy = px // 2, py // 4
        np.bitwise_or.at(self.bits, (cy, cx), _DOT_BITS[px % 2, py % 4])
        self.colour[cy, cx] = self._colour_index(colour)

    def polyline(self, px: np.ndarray, py: np.ndarray, colour: str) -> None:
        """Join consecutive dot coordinates with straight segments (NaN breaks the line)."""
        px = np.asarray(px, dtype=float)
        py = np.asarray(py, dtype=float)
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for i in range(len(px) - 1):
            x0, y0, x1, y1 = px[i], py[i], px[i + 1], py[i + 1]
            if not np.all(np.isfinite([x0, y0, x1, y1])):
                continue
            steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            t = np.linspace(0.0, 1.0, steps + 1)
            xs.append(np.rint(x0 + (x1 - x0) * t))
            ys.append(np.rint(y0 + (y1 - y0) * t))
        if len(px) == 1 and np.isfinite(px[0]) and np.isfinite(py[0]):
            xs.append(np.rint(px[:1]))
            ys.append(np.rint(py[:1]))
        if xs:
            self.points(np.concatenate(xs), np.concatenate(ys), colour)

    def vline(self, px: int, colour: str, *, dotted: bool = False) -> None:
        """A vertical line at dot column ``px`` over the whole height."""
        py = np.arange(self.dot_height)
        if dotted:
            py = py[(py // 2) % 2 == 0]
        self.points(np.full(py.shape, int(px)), py, colour)

    def glyph(self, cx: int, cy: int, char: str, colour: str) -> None:
        """Put a text character in a cell (overrides its dots)."""
        if 0 <= cx < self.width and 0 <= cy < self.height:
            self.glyphs[(cx, cy)] = (char, self._colour_index(colour))

    def rows(self) -> list[Text]:
        """One Rich ``Text`` per cell row, runs of equal colour merged into one span."""
        styles = [Style.parse(c) for c in self.palette]
        out: list[Text] = []
        for cy in range(self.height):
            text = Text(no_wrap=True, overflow="crop")
            run_chars: list[str] = []
            run_colour = -2
            for cx in range(self.width):
                glyph = self.glyphs.get((cx, cy))
                if glyph is not None:
                    char, colour = glyph
                else:
                    bits = int(self.bits[cy, cx])
                    char = chr(0x2800 + bits) if bits else " "
                    colour = int(self.colour[cy, cx]) if bits else -1
                if colour != run_colour and run_chars:
                    text.append("".join(run_chars), styles[run_colour] if run_colour >= 0 else None)
                    run_chars = []
                run_colour = colour
                run_chars.append(char)
            if run_chars:
                text.append("".join(run_chars), styles[run_colour] if run_colour >= 0 else None)
            out.append(text)
        return out
