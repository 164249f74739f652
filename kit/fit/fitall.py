"""Fit one series to a model file, and every series of a dataset in parallel (``fit --all``).

``pt2pt fit``, ``pt2pt fit --all`` and ``pt2pt demo`` share :func:`kit.fit.fitting.fit_series`
(every surface's one fit) so that a model fitted in a batch is the model ``pt2pt fit --series
...`` writes for that series, byte for byte.

One series per worker process (:mod:`kit.core.workers` says why processes, and how); each worker
reads its own series from the dataset (no large arrays are pickled). One series' failure
(bad data, too few samples, even a crashed worker) is reported for that series; the others'
models are kept.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from kit.core import workers
from kit.core.atomicwrite import make_dirs
from kit.core.errors import UserError
from kit.fit.fitting import FitOptions


@dataclass
class SeriesFit:
    """What fitting one series produced: the model file and its messages, or an error."""

    series: dict[str, str]
    n_rows: int = 0
    path: Path | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # warnings such as "not validated"
    cpu_s: float = 0.0  # CPU seconds of this series' fit in its process (read + fit + write)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def model_filename(series: Mapping[str, str]) -> str:
    """A file name for a series' model that no other series of the dataset shares: every
    key's value in SERIES_KEYS order, characters unsafe in a file name replaced by ``_``.
    The pair count appears only for k > 1 (``k4``), so names fitted before it was a key stay."""
    from kit.data.schema import SERIES_KEYS, pairs_short
    from kit.data.series_keys import OPTIONAL_KEYS

    values = [pairs_short(series.get(k)) if k == "pairs" else str(series.get(k, "unknown"))
              for k in SERIES_KEYS if k not in OPTIONAL_KEYS or series.get(k)]
    parts = [re.sub(r"[^A-Za-z0-9.+=-]+", "_", v) for v in values if v]
    return "__".join(parts) + ".json"


def _fit_to_file(dataset: str, chosen: dict[str, str], output: str,
                 opts: FitOptions) -> SeriesFit:
    """One task: fit ``chosen`` and write its model to ``output``; never raises for a
    series' own fault (that is the result's ``error``), so the batch goes on."""
    from kit.fit.fitting import fit_series
    from kit.model.io import write_model

    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = SeriesFit(series=dict(chosen))
    try:
        fit = fit_series(dataset, chosen, opts)
        result.notes += fit.notes
        result.n_rows = int(fit.fitted.provenance.get("n_samples", 0))
        result.path = write_model(fit.fitted, output)
    except UserError as err:
        result.error = err.paragraph()
    except Exception as exc:  # one series' failure must not lose the others
        result.error = f"internal error while fitting: {type(exc).__name__}: {exc}"
    result.cpu_s = time.process_time() - cpu0
    result.wall_s = time.perf_counter() - wall0
    return result


#: What a fit worker needs imported (by the forkserver, once).
FIT_MODULES = ("kit.fit.fitall", "kit.fit.fitting", "kit.fit.validate",
               "kit.model.uncertainty", "kit.fit.runquality")


def fit_all(dataset: str | Path, series: list[dict[str, str]], out_dir: str | Path,
            opts: FitOptions, *, jobs: int | None = None,
            on_done: Callable[[int, int, SeriesFit], None] | None = None,
            filename: Callable[[Mapping[str, str]], str] = model_filename) -> list[SeriesFit]:
    """Fit every series in ``series`` (each with all its keys) into ``out_dir``.

    ``jobs`` processes (default: all cores; 1 fits in this process, one after the other).
    ``on_done(done, total, result)`` is called as each series finishes, in completion order.
    ``filename(series)`` names each model file (``pt2pt demo`` uses short names).
    Returns the results in the order of ``series``; failures are results with ``error``.
    """
    out = Path(out_dir)
    make_dirs(out)
    tasks = [(dict(s), str(out / filename(s))) for s in series]
    jobs = max(1, min(jobs or workers.default_jobs(), len(tasks) or 1))
    results: list[SeriesFit | None] = [None] * len(tasks)
    for done, (index, result) in enumerate(_run(str(dataset), tasks, opts, jobs), start=1):
        results[index] = result
        if on_done is not None:
            on_done(done, len(tasks), result)
    return [r for r in results if r is not None]


def _run(dataset: str, tasks: list[tuple[dict[str, str], str]], opts: FitOptions,
         jobs: int) -> Iterator[tuple[int, SeriesFit]]:
    if jobs == 1:
        for index, (chosen, output) in enumerate(tasks):
            yield index, _fit_to_file(dataset, chosen, output, opts)
        return
    from concurrent.futures.process import BrokenProcessPool

    with workers.pool(jobs, FIT_MODULES) as pool:
        futures: dict[Future[SeriesFit], int] = {
            pool.submit(_fit_to_file, dataset, chosen, output, opts): index
            for index, (chosen, output) in enumerate(tasks)}
        for future in as_completed(futures):
            index = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                result = SeriesFit(series=tasks[index][0], error=(
                    "the worker process fitting this series died (killed, perhaps out of "
                    "memory); the batch's other workers were stopped with it: rerun "
                    "this series alone, or with fewer --jobs"))
            except Exception as exc:  # e.g. a result that failed to pickle
                result = SeriesFit(series=tasks[index][0],
                                   error=f"internal error: {type(exc).__name__}: {exc}")
            yield index, result


__all__ = ["SeriesFit", "fit_all", "model_filename"]
