"""The sentence a platform or simulation carries when its model was fitted to disturbed runs.

Its own small module (not :mod:`kit.fit.runquality`, which finds the disturbed runs with
NumPy, Polars and SciPy) so that ``pt2pt export`` asks every model file the one question,
"was it calibrated on a disturbed node?", without loading those for the quiet ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kit.measure.conditions import DISTURBED


def calibration_note(quality: Mapping[str, Any], what: str) -> str | None:
    """The sentence a platform or simulation built on a model carries when that model was
    fitted to runs measured on a disturbed node, None otherwise.

    Why: the noise of such a model holds the load's delays (a scheduler quantum of a few ms
    drawn as a ratio to a 20 us message), and every SimGrid run on the platform draws them
    again, per message: on the shaped local cluster a calibration beside other work made
    simulated applications 2-80x slower than real while every message's median was right.
    The model file knows (``run_quality``); the platform and what runs on it must say so.
    """
    if quality.get("verdict") != DISTURBED:
        return None
    runs = quality.get("runs", [])
    why = next((str(r["conditions_why"]) for r in runs
                if r.get("conditions") == DISTURBED and r.get("conditions_why")), "")
    windows = len(quality.get("windows", []))
    parts = ([f"{windows} disturbed window(s) left out"] if windows else []) + (
        [f"measured on a disturbed node: {why}"] if why else [])
    found = "; ".join(parts) or "see its run_quality"
    return (f"{what} was fitted to runs that were not quiet ({found}): its noise also holds "
            "that load's delays, which every simulated message draws again; calibrate again "
            "on a quiet node before trusting simulated spreads and means")
