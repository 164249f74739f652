"""One BLAS thread while the engine runs.

The engine's linear algebra is small: normal equations of 2-3 parameters, a mixture's
Hessian, a kernel mean over a few hundred knots. On such calls OpenBLAS's helper threads
do no useful work, but after each call they spin waiting for the next one, and that spin
is CPU time on the other core: 0.11-0.14 CPU-s of a 1.7 s fit at 1 M samples, for no
gain in wall time. ``pt2pt fit --all`` already runs one BLAS thread per worker process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def limit_blas_threads() -> None:
    """One BLAS (and OpenMP) thread from now on: a worker process whose cores are shared
    with the other workers."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    threadpool_limits(1)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit the loaded BLAS libraries to one thread for the block, then restore them."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield
