"""The first plot of a series without its samples: drawing summaries kept beside the dataset.

Opening a series used to read every sample (0.5-0.8 s for Polars alone at 10 M) and bin
them (tui.binning) before anything was drawn. The binned summaries (quantile bands per size
bin, a spread subset of points) are a few hundred kilobytes whatever the series' size, and
depend only on the series' rows, so they are computed once and stored in the dataset folder
(``.pt2pt-draw/``, one ``.npz`` per series), stamped with the dataset's commit fingerprint
(kit.data.dataset.commit_stamp: the runs table and the committed part files). An ingest
changes the stamp, and a stale or damaged file is recomputed, never shown. The samples are
still read, in the background, for the fit; the plot does not wait for them.

The first open of a large series has nothing stored yet, and reading its samples as the fit
does (run quality judges every run first: ~4 s at 10 M) would hold the plot back. It is then
drawn from a **preview** (:func:`first_plot`): every k-th row of the series by one lazy scan
of two columns, binned as usual, said on screen to be a preview before run quality's
exclusions, never stored. The exact summaries replace it once the samples are read, and are
stored for the next open.

Best effort, like kit's series.json: a read-only dataset opens as before, without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tui.binning import BAND_QUANTILES, Binned
from tui.serieskey import SeriesKey

#: Folder of the cache files inside the dataset folder.
CACHE_DIR = ".pt2pt-draw"
#: Bumped whenever tui.binning would draw the same rows differently, or the rows a series
#: draws change (tui.loading): a stored summary is trusted for its stamp and this.
FORMAT = 1


@dataclass(frozen=True)
class Cached:
    """A series' two drawing summaries (raw view, per-bin medians) and its sample count."""

    raw: Binned
    median: Binned
    n_samples: int
    #: a preview (:func:`first_plot`): drawn from every ``preview_step``-th row of the
    #: series before run quality's exclusions; 0 for the exact, stored summaries
    preview_step: int = 0

    def describe(self) -> tuple[str, str]:
        """What the plot shows while the samples are read, in the status line's two lines
        (the first is followed by the view's name)."""
        if not self.preview_step:
            return f"{self.n_samples:,} samples", "reading samples…"
        every = "every row" if self.preview_step == 1 else f"every {self.preview_step}th"
        return (f"preview of {self.n_samples:,} rows",
                f"{every}, before run quality; reading…")


def stamp(dataset: str | Path) -> str:
    """The dataset's commit fingerprint, with this cache's format."""
    from kit.data.dataset import commit_stamp

    return f"{FORMAT}:{commit_stamp(dataset)}"


def path_for(dataset: str | Path, key: SeriesKey) -> Path:
    name = hashlib.sha256("\0".join(key.values).encode()).hexdigest()[:24]
    return Path(dataset) / CACHE_DIR / f"{name}.npz"


def _arrays(prefix: str, b: Binned) -> dict[str, np.ndarray]:
    out = {f"{prefix}size": b.size, f"{prefix}count": b.count,
           f"{prefix}points_size": b.points_size, f"{prefix}points_time": b.points_time}
    out.update({f"{prefix}q{i}": b.quantiles[q] for i, q in enumerate(BAND_QUANTILES)})
    return out


def _binned(prefix: str, z: np.lib.npyio.NpzFile) -> Binned:
    return Binned(size=z[f"{prefix}size"], count=z[f"{prefix}count"],
                  quantiles={q: z[f"{prefix}q{i}"] for i, q in enumerate(BAND_QUANTILES)},
                  points_size=z[f"{prefix}points_size"], points_time=z[f"{prefix}points_time"])


def load(dataset: str | Path, key: SeriesKey, current: str) -> Cached | None:
    """The stored summaries of ``key`` if they were made from the data stamped ``current``;
    None when there are none, they are stale or the file is damaged."""
    try:
        with np.load(path_for(dataset, key), allow_pickle=False) as z:
            if (str(z["stamp"]) != current or str(z["key"]) != "\0".join(key.values)
                    or tuple(z["quantiles"].tolist()) != BAND_QUANTILES):
                return None
            raw = _binned("raw_", z)
            median = raw if bool(z["same"]) else _binned("median_", z)
            return Cached(raw, median, int(z["n_samples"]))
    except (OSError, ValueError, KeyError, EOFError):
        return None


def store(dataset: str | Path, key: SeriesKey, current: str, raw: Binned, median: Binned,
          n_samples: int) -> bool:
    """Write the summaries atomically (temp file + rename); False where the dataset folder
    cannot take them (read-only, full): the next open computes them again."""
    target = path_for(dataset, key)
    arrays = {"stamp": np.array(current), "key": np.array("\0".join(key.values)),
              "quantiles": np.array(BAND_QUANTILES), "same": np.array(raw is median),
              "n_samples": np.array(n_samples), **_arrays("raw_", raw)}
    if raw is not median:
        arrays.update(_arrays("median_", median))
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # (numpy's stub: allow_pickle)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        target.parent.mkdir(exist_ok=True)
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


#: Series with fewer rows have no preview: their samples are read in well under a second,
#: and a preview would only read them twice.
PREVIEW_MIN_ROWS = 200_000


def preview(dataset: str | Path, key: SeriesKey, n_rows: int) -> Cached:
    """Drawing summaries of every k-th row of the series (tui.loading.preview_rows), as
    many rows as the exact summaries are drawn from (tui.binning.DRAW_MAX_SAMPLES)."""
    from tui.binning import DRAW_MAX_SAMPLES, draw_summaries_of
    from tui.loading import preview_rows

    size, time, step = preview_rows(dataset, key, n_rows, DRAW_MAX_SAMPLES)
    raw, median = draw_summaries_of(size, time)
    return Cached(raw, median, int(n_rows), preview_step=step)


def first_plot(dataset: str | Path, key: SeriesKey, n_rows: int | None
               ) -> tuple[str | None, Cached | None]:
    """The dataset's stamp (None if unreadable) and what to draw before the samples are
    read: the stored summaries, else a preview for a series of at least
    :data:`PREVIEW_MIN_ROWS` rows (``n_rows``: the series table's count), else None.

    A preview that fails is skipped: reading the samples reports the problem properly.
    """
    from kit.core.errors import UserError

    try:
        current = stamp(dataset)
    except (UserError, OSError):
        return None, None
    cached = load(dataset, key, current)
    if cached is not None or not n_rows or n_rows < PREVIEW_MIN_ROWS:
        return current, cached
    import polars as pl

    try:
        return current, preview(dataset, key, n_rows)
    except (UserError, OSError, pl.exceptions.PolarsError):
        return current, None


__all__ = ["CACHE_DIR", "PREVIEW_MIN_ROWS", "Cached", "first_plot", "load", "path_for",
           "preview", "stamp", "store"]
