"""The analysis engine: per-regime models of time vs message size, with noise.

See docs/architecture.md "Model" for the contract other parts of the kit rely on.

The names below are imported on first use (PEP 562): reading a model file imports
:mod:`kit.model.io` and its schema first, so a malformed file is refused before
scikit-learn and SciPy are loaded (about 1.5 s of CPU a command would otherwise pay to
print one line).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel
    from kit.model.noise import Noise
    from kit.model.regime import Component, Overlap, Regime

__all__ = ["Component", "Noise", "Overlap", "Regime", "RegimeModel"]

_HOME = {"RegimeModel": "kit.model.estimator", "Noise": "kit.model.noise",
         "Component": "kit.model.regime", "Overlap": "kit.model.regime",
         "Regime": "kit.model.regime"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'kit.model' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
