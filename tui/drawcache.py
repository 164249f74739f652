"""The first plot of a series without its samples: drawing summaries kept beside the dataset.

Opening a series used to read every sample (0.5-0.8 s for Polars alone at 10 M) and bin
them (tui.binning) before anything was drawn. The binned summaries (quantile bands per size
bin, a spread subset of points) are a few hundred kilobytes whatever the series' size, and
depend only on the series' rows, so they are computed once and stored in the dataset folder
(``.pt2pt-draw/``, one ``.npz`` per series), stamped with the dataset's commit fingerprint
(kit.data.dataset.commit_stamp: the runs table and the committed part files). An ingest
changes the stamp, and a stale or damaged file is recomputed, never shown. The samples are
still read, in the background, for the fit; the plot does not wait for them.

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


__all__ = ["CACHE_DIR", "Cached", "load", "path_for", "stamp", "store"]
