"""The analysis engine: per-regime models of time vs message size, with noise.

See docs/architecture.md "Model" for the contract other parts of the kit rely on.
"""

from kit.model.estimator import RegimeModel
from kit.model.noise import Noise
from kit.model.regime import Component, Overlap, Regime

__all__ = ["Component", "Noise", "Overlap", "Regime", "RegimeModel"]
