"""Worker processes for CPU-bound work spread over the cores (``fit --all``, the demo's report).

Why processes: fitting and plotting are CPU-bound Python (the GIL is held most of the time),
so threads would not overlap. Workers come from a ``forkserver`` that has already imported
the modules the work needs (numpy, scipy, scikit-learn and matplotlib cost seconds of CPU to
import); fork from a process holding threads (Polars' pool) is unsafe. BLAS is limited to one
thread per worker so that N workers use N cores rather than N x cores threads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor


def _init_worker() -> None:
    """Each worker: one BLAS thread (the cores are shared among the workers) and no bars."""
    from kit.core import progress
    from kit.core.blas import limit_blas_threads

    progress.set_quiet(True)
    limit_blas_threads()


def pool(jobs: int, preload: Sequence[str]) -> ProcessPoolExecutor:
    """``jobs`` worker processes; ``preload``: modules the forkserver imports once, if this
    process has not started its forkserver yet (later pools share it)."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker)


def default_jobs() -> int:
    """All the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


__all__ = ["default_jobs", "pool"]
