"""Non-negative least squares with two unknowns: a latency and a per-byte cost.

Every line the kit fits as "a + b·size, a, b >= 0" (the Hockney baselines, the SimGrid
factor pieces) has two columns. scipy.optimize.nnls solves it, but importing
scipy.optimize costs 0.3-0.5 CPU-s, more than ``pt2pt export`` does otherwise; with two
columns the active-set answer is one of four candidates (both free, either alone, none),
so it is written out here.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def nnls2(design: NDArray[np.float64], target: NDArray[np.float64]
          ) -> tuple[NDArray[np.float64], float]:
    """``x >= 0`` minimising ``||design @ x - target||`` for a two-column ``design``, and
    that residual norm (what ``scipy.optimize.nnls(design, target)`` returns, to rounding:
    tests/test_lsq.py)."""
    a = np.asarray(design, dtype=np.float64)
    b = np.asarray(target, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(f"nnls2 takes a two-column (n, 2) design and n targets, got {a.shape}, "
                         f"{b.shape}")
    both = np.asarray(np.linalg.lstsq(a, b, rcond=None)[0], dtype=np.float64)
    if np.all(both >= 0):  # the unconstrained optimum is feasible: it is the answer
        return both, float(np.linalg.norm(a @ both - b))
    candidates = [np.zeros(2)]
    for j in (0, 1):  # one column alone, the other at its bound 0
        col = a[:, j]
        norm = float(col @ col)
        if norm > 0:
            x = np.zeros(2)
            x[j] = max(float(col @ b) / norm, 0.0)
            candidates.append(x)
    residuals = [float(np.linalg.norm(a @ x - b)) for x in candidates]
    best = int(np.argmin(residuals))
    return candidates[best], residuals[best]


__all__ = ["nnls2"]
