"""One BLAS thread while the engine runs.

The engine's linear algebra is small: normal equations of 2-3 parameters, a mixture's
Hessian, a kernel mean over a few hundred knots. On such calls OpenBLAS's helper threads
do no useful work, but after each call they spin waiting for the next one, and that spin
is CPU time on the other core: 0.11-0.14 CPU-s of a 1.7 s fit at 1 M samples, for no
gain in wall time. threadpoolctl comes with scikit-learn; it is imported when first used,
not with the CLI.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any


def limit_blas_threads() -> None:
    """One BLAS (and OpenMP) thread from now on: a worker process whose cores are shared
    with the other workers (``pt2pt fit --all``)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def one_blas_thread() -> AbstractContextManager[Any]:
    """Limit the loaded BLAS libraries to one thread for a ``with`` block, then restore
    the caller's setting (also when the block raises)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1, user_api="blas")
