"""SQUAREM: squared extrapolation of an EM map (Varadhan & Roland, Scand. J. Stat. 2008).

Both EMs of the engine (the two bands of a regime, the Gaussian mixture of a noise) move
slowly where the components overlap: a plain EM stopped after a fixed number of steps was
measured still 5-45 log-likelihood units short of its optimum on real reference runs (a
slow band's share of 0.24 where the optimum is 0.34). SQUAREM takes two EM steps, fits
the geometric trend of their differences and jumps along it (the "SqS3" step length),
keeping the jump only if it does not lower the likelihood, so it is as safe as EM and
reaches the optimum in a fraction of the steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

#: One EM evaluation: the log-likelihood at ``theta`` and the EM update of ``theta``.
Step = Callable[[NDArray], tuple[NDArray, float]]


def accelerate(step: Step, theta: NDArray, max_evals: int, tol: float) -> tuple[NDArray, int]:
    """Parameters at (or, after ``max_evals`` EM evaluations, towards) a likelihood maximum.

    Stops when an accepted point improves the log-likelihood by less than ``tol``. Returns
    the parameters and the number of evaluations spent.
    """
    t1, ll = step(theta)
    evals = 1
    while evals < max_evals:
        t2, ll1 = step(t1)
        evals += 1
        if not (np.isfinite(ll1) and np.all(np.isfinite(t2))):
            break  # keep the last finite point
        r = t1 - theta
        v = t2 - t1 - r
        nv = float(np.sqrt(np.dot(v, v)))
        new = None
        if nv > 0 and evals < max_evals:
            alpha = min(-float(np.sqrt(np.dot(r, r))) / nv, -1.0)
            tp = theta - 2.0 * alpha * r + alpha * alpha * v
            if np.all(np.isfinite(tp)):
                with np.errstate(all="ignore"):  # a far jump may overflow: it is rejected
                    t3, llp = step(tp)
                evals += 1
                if np.isfinite(llp) and llp >= ll1 and np.all(np.isfinite(t3)):
                    new = (tp, t3, llp)
        if new is None:  # the jump lost likelihood: one plain EM step from t1
            new = (t1, t2, ll1)
        done = abs(new[2] - ll) < tol
        theta, t1, ll = new
        if done:
            break
    return theta, evals
