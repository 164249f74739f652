"""Breakpoint and family editing rules of the explorer, tested on the session state alone."""

from __future__ import annotations

import numpy as np
import pytest

from tui.data import Binned, Samples, SeriesKey
from tui.session import FINE_STEP, SeriesState


def _state(breakpoints: list[float]) -> SeriesState:
    size = np.geomspace(1, 1 << 20, 200)
    empty = Binned(np.array([]), np.array([]), {}, np.array([]), np.array([]))
    key = SeriesKey(("c", "probe", "tcp", "unknown", "unknown", "1", "pingpong", "raw"))
    samples = Samples(key, size, np.full(size.size, 1e-5))
    state = SeriesState(samples, empty)
    state.breakpoints = list(breakpoints)
    state.families = [None] * (len(breakpoints) + 1)
    return state


def test_move_stays_between_neighbours() -> None:
    state = _state([1024.0, 65536.0])
    assert state.move_breakpoint(0, 8) is None  # one octave up
    assert state.breakpoints[0] == 2048.0 and state.edited
    # Far past the next breakpoint: stops one step below it, and stays there.
    assert state.move_breakpoint(0, 200) is None
    assert state.breakpoints[0] == pytest.approx(65536.0 / FINE_STEP, rel=1e-3)
    assert state.move_breakpoint(0, 1) is None
    assert state.breakpoints[0] == pytest.approx(65536.0 / FINE_STEP, rel=1e-3)
    # Neighbours one step apart leave no room at all.
    crowded = _state([1000.0, 1040.0, 1080.0])
    assert crowded.move_breakpoint(1, 1) == "No room to move this breakpoint further."
    assert state.move_breakpoint(5, 1) is not None  # no such breakpoint


def test_add_delete_and_families() -> None:
    state = _state([1024.0])
    state.families = ["constant", "linear"]
    assert state.add_breakpoint(1) is None  # split [1024, 1 MiB) at its geometric middle
    assert state.breakpoints == [1024.0, 32768.0]
    assert state.families == ["constant", "linear", "linear"]
    assert state.delete_breakpoint(0) is None
    assert state.breakpoints == [32768.0] and state.families == ["constant", "linear"]
    families = (None, "constant", "linear", "power")
    assert state.cycle_family(1, families) is None and state.families[1] == "power"
    assert state.cycle_family(1, families) is None and state.families[1] is None
    tight = _state([2.0])
    assert tight.add_breakpoint(0) == "This regime is too narrow to split."
