"""TUI responsiveness targets (issues 8 and 56), measured headless through Textual's pilot.

* open: a 10 M-sample single-series dataset, from app start to the series plot drawn
  (issue 56: <= 1.0 s with the drawing summaries stored beside the dataset, "warm", at load
  average <= 2; <= 2 s "cold", the first open, which has none stored: it draws a preview of
  every k-th row, tui.drawcache.first_plot, then reads the samples and stores the exact
  summaries). "cold" keeps the series summary (series.json); "first" removes it too, as a
  dataset of more than kit.data.dataset.SUMMARY_REFRESH_MAX_ROWS rows is left by
  `pt2pt ingest` / `pt2pt collect` (its first reader computes and stores it). With one
  series the browser opens it directly, as a user would see it.
* refit: after moving a breakpoint on a 1 M-sample series, from the key press to the new
  model adopted by the screen (target <= 1 s).

The datasets are built once with kit.data.ingest from a synthetic ``size,duration`` CSV (three
regimes, lognormal noise, fixed seed) under --workdir, and reused by later runs.

    .venv/bin/python benchmarks/bench_tui.py [--workdir DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Heavy modules (numpy, polars, kit, tui) are imported inside the functions, after this
# mark, so that a cold open is timed with the imports a user's `pt2pt tui` pays.
T_START = time.perf_counter()


def build(workdir: Path, n: int) -> Path:
    import numpy as np
    import polars as pl

    from kit.data.ingest import ingest

    dataset = workdir / f"tui-{n}"
    if (dataset / "runs.parquet").is_file():
        return dataset
    workdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    size = np.floor(np.exp(rng.uniform(0.0, math.log(4 << 20), n))).astype(np.int64)
    base = np.where(size < 1024, 20e-6, np.where(size < 65536, 30e-6 + size * 2e-9,
                                                  90e-6 + size * 1e-9))
    duration = base * rng.lognormal(0.0, 0.1, n)
    raw = workdir / f"pingpong-tcp-{n}.csv"
    pl.DataFrame({"size": size, "duration": duration}).write_csv(raw)
    t0 = time.perf_counter()
    report = ingest([raw], dataset, campaign="bench", transport="tcp")
    print(f"  built {dataset} ({report.rows_added:,} rows) in {time.perf_counter() - t0:.1f} s")
    # Above kit.data.dataset.SUMMARY_REFRESH_MAX_ROWS ingest leaves series.json to the first
    # reader; be that reader here, so the timed opens are the second and later ones.
    from kit.data.dataset import series_table
    series_table(dataset)
    raw.unlink()
    return dataset


async def wait_for(predicate, timeout: float = 120.0) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    while not predicate():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.002)
    return time.perf_counter()


async def time_open(dataset: Path) -> tuple[float, float]:
    """Seconds from app start to the first plot, and to the first (preview) model on it."""
    from tui.app import ExplorerApp
    from tui.screens.series import SeriesScreen
    from tui.widgets.plot import Plot

    t0 = time.perf_counter()
    app = ExplorerApp(dataset)
    async with app.run_test(size=(140, 40)):
        def plotted() -> bool:  # the plot has something on it (from stored summaries or not)
            s = app.screen
            if not isinstance(s, SeriesScreen):
                return False
            plots = s.query(Plot)  # (none while the screen is still being composed)
            return bool(plots) and bool(plots.first().spec.layers)
        t_plot = await wait_for(plotted)
        t_fit = await wait_for(lambda: app.screen.state is not None  # type: ignore[union-attr]
                               and app.screen.state.model is not None)  # type: ignore[union-attr]
    return t_plot - t0, t_fit - t0


def open_in_child(dataset: Path) -> tuple[float, float, float]:
    """One cold open in a fresh interpreter (no warm caches, no fit threads of a previous
    run competing for the 2 cores); the child leaves without waiting for its own fit.

    A child that fails is run again (at most twice more) and the failure printed: at load
    average ~18, leaving the app right after the first plot once raised inside Textual's
    Header (its title widget not mounted yet), a race of the benchmark's early exit."""
    for attempt in range(3):
        proc = subprocess.run([sys.executable, __file__, "--open-once", str(dataset)],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            out = proc.stdout.split()
            return float(out[0]), float(out[1]), float(out[2])
        print(f"  (open failed, attempt {attempt + 1}: {proc.stderr.strip().splitlines()[-1:]})",
              flush=True)
    raise RuntimeError(proc.stderr[-3000:])


def time_parts(dataset: Path) -> dict[str, float]:
    """Where the open time goes: kit's series table, loading the series, the drawing summary.

    The series table is timed twice: without a stored summary (``series.json`` removed, as
    for a dataset written by an older kit: a full scan, which stores the summary again) and
    then served from it, as every open after an ingest is.
    """
    from kit.data import dataset as kds
    from tui import data

    out = {}
    (dataset / kds.SUMMARY_FILE).unlink(missing_ok=True)
    t0 = time.perf_counter()
    data.series_rows(dataset)
    out["series table, no stored summary (full scan + store)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = data.series_rows(dataset)
    out["series table (kit.data.dataset.series_table, from series.json)"] = (
        time.perf_counter() - t0)
    from tui import drawcache

    t0 = time.perf_counter()
    drawcache.preview(dataset, rows[0].key, rows[0].n_samples)
    out["preview (every k-th row, lazy scan + per-bin summary)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    samples = data.load_samples(dataset, rows[0].key, [r.key for r in rows])
    out["load samples"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    data.bin_samples(samples)
    out["per-bin summary"] = time.perf_counter() - t0
    return out


def store_summaries(dataset: Path) -> None:
    """Store the exact drawing summaries, as the series screen does once the samples of a
    first open are read, and check they are there: the warm opens must not be cold ones."""
    from tui import drawcache
    from tui.binning import draw_summaries
    from tui.loading import load_samples, series_rows

    key = series_rows(dataset)[0].key
    samples = load_samples(dataset, key)
    raw, median = draw_summaries(samples)
    stamp = drawcache.stamp(dataset)
    drawcache.store(dataset, key, stamp, raw, median, len(samples))
    if drawcache.load(dataset, key, stamp) is None:
        raise RuntimeError(f"no drawing summaries stored in {dataset}")


async def time_refit(dataset: Path, repeat: int) -> list[tuple[float, float]]:
    """Seconds from the 'r' key after a breakpoint move to the new (preview, full) model."""
    from tui.app import ExplorerApp
    from tui.screens.series import SeriesScreen

    out = []
    app = ExplorerApp(dataset)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(lambda: isinstance(app.screen, SeriesScreen)
                       and app.screen.state is not None and app.screen.state.model is not None
                       and not app.screen.busy, timeout=600)
        screen = app.screen
        assert isinstance(screen, SeriesScreen)
        await pilot.press("left")  # the last breakpoint: the wide regime above it stays valid
        for i in range(repeat):
            await wait_for(lambda: not screen.busy, timeout=600)  # validation done too
            old = screen.state.model  # type: ignore[union-attr]
            await pilot.press("l" if i % 2 == 0 else "h")
            t0 = time.perf_counter()
            # pilot.press returns only once the app is idle (after the full fit): press in a
            # task and watch the screen instead, as the user's eyes would.
            press = asyncio.create_task(pilot.press("r"))
            t1 = await wait_for(lambda old=old: screen.state.model is not old  # type: ignore[union-attr]
                                or any(n.severity == "error" for n in app._notifications))
            if screen.state.model is old:  # type: ignore[union-attr]
                raise RuntimeError(f"refit failed: {list(app._notifications)[-1].message}")
            t2 = await wait_for(lambda: not screen.fitting, timeout=600)
            await press
            out.append((t1 - t0, t2 - t0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pt2pt-bench-tui"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--open-once", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.open_once:
        import tui.app  # noqa: F401  (timed as part of the cold open)

        imports = time.perf_counter() - T_START
        plot_s, model_s = asyncio.run(time_open(args.open_once))
        print(plot_s, model_s, plot_s + imports, flush=True)
        os._exit(0)  # do not wait for the full fit still running in the worker thread
    big = build(args.workdir, 10_000_000)
    mid = build(args.workdir, 1_000_000)
    for name, secs in time_parts(big).items():
        print(f"  10M {name}: {secs:.3f} s")
    from kit.data.dataset import SUMMARY_FILE
    from tui.drawcache import CACHE_DIR

    for kind in ("first", "cold", "warm"):
        if kind == "warm":  # (the cold children store them before their first model)
            store_summaries(big)
        opens = []
        for _ in range(max(args.repeat // 2, 1)):
            if kind != "warm":  # no stored drawing summaries
                shutil.rmtree(big / CACHE_DIR, ignore_errors=True)
            if kind == "first":  # nor a series summary, as ingest leaves a 10 M dataset
                (big / SUMMARY_FILE).unlink(missing_ok=True)
            opens.append(open_in_child(big))
        plot_s = [o[0] for o in opens]
        print(f"open 10M samples ({kind}) -> first plot: median "
              f"{statistics.median(plot_s):.2f} s (runs {', '.join(f'{v:.2f}' for v in plot_s)};"
              f" target <= {'1.0' if kind == 'warm' else '2'} s); from process start (imports "
              f"included) {statistics.median(o[2] for o in opens):.2f} s; first (preview) model "
              f"drawn at {statistics.median(o[1] for o in opens):.2f} s; load average "
              f"{os.getloadavg()[0]:.1f}")
    refits = asyncio.run(time_refit(mid, args.repeat))
    first = [r[0] for r in refits]
    full = [r[1] for r in refits]
    print(f"refit after breakpoint move, 1M samples: new model on screen after median "
          f"{statistics.median(first):.2f} s (runs {', '.join(f'{v:.2f}' for v in first)}; "
          f"target <= 1 s); full-fidelity fit replaces it after median "
          f"{statistics.median(full):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
