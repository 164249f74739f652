"""One definition per figure (kit.figures): latency and bandwidth with their intervals, the
same numbers from the dataset's summary query (Polars) and from plain arrays."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import binom

from kit.figures import bandwidth, latency
from kit.figures.estimate import lower_rank, median_exprs, median_interval
from kit.figures.text import format_with_interval


def test_rank_is_the_binomial_interval() -> None:
    """The normal-approximation rank covers the median with about 95 % (binomial, exact)."""
    for n in (6, 9, 20, 100, 1000, 12345):
        r = lower_rank(n)
        exact = 1 - 2 * binom.cdf(r - 1, n, 0.5)
        assert exact >= 0.945, (n, r, exact)
        assert 1 - 2 * binom.cdf(r, n, 0.5) < 0.96, (n, r)  # not a wider one than needed
    assert lower_rank(5) == 0 and median_interval([1.0, 2.0, 3.0]).lo is None


def test_python_and_polars_give_the_same_figure() -> None:
    rng = np.random.default_rng(3)
    for n in (7, 40, 501):
        x = rng.lognormal(0.0, 0.5, n)
        est = median_interval(x.tolist())
        got = pl.DataFrame({"x": x}).select(median_exprs(pl.col("x"), "f")).row(0)
        assert got[0] == pytest.approx(est.value, rel=1e-15)
        assert (got[1], got[2]) == (est.lo, est.hi)


def test_latency_and_bandwidth_of_a_known_line() -> None:
    """t = 10 µs + s / 1 GB/s: latency is the smallest sizes' median, the bandwidth the top
    octave's median of s / t, each with an interval around it."""
    rng = np.random.default_rng(0)
    size = np.floor(np.exp(rng.uniform(0, np.log(4 << 20), 20000)))
    time = (1e-5 + size / 1e9) * rng.lognormal(0.0, 0.02, size.size)
    lat = latency.latency_of(size.tolist(), time.tolist())
    assert lat.value == pytest.approx(1e-5, rel=0.01) and lat.lo < lat.value < lat.hi
    bw = bandwidth.bandwidth_of(size.tolist(), time.tolist())
    top = size[size >= size.max() / 2]
    expected = float(np.median(top / (1e-5 + top / 1e9)))
    assert bw.value == pytest.approx(expected, rel=0.01) and bw.lo < bw.value < bw.hi
    # A series starting above 64 B takes its smallest octave.
    assert latency.small_bound(1.0) == 64 and latency.small_bound(1000.0) == 2000


def test_the_dataset_summary_holds_the_figures(tmp_path: Path) -> None:
    from kit.data import dataset as ds
    from kit.data.ingest import ingest

    rng = np.random.default_rng(1)
    size = np.floor(np.exp(rng.uniform(0, np.log(1 << 20), 3000)))
    time = (2e-6 + size / 5e9) * rng.lognormal(0.0, 0.1, size.size)
    csv = tmp_path / "run.csv"
    csv.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                               for s, t in zip(size, time, strict=True)))
    ingest([csv], tmp_path / "ds", campaign="c")
    row = ds.series_table(tmp_path / "ds").row(0, named=True)
    frame = ds.series_frame(tmp_path / "ds", {k: row[k] for k in ds.SERIES_KEYS})
    lat = latency.latency_of(frame["size"].to_list(), frame["time"].to_list())
    bw = bandwidth.bandwidth_of(frame["size"].to_list(), frame["time"].to_list())
    assert row["latency_s"] == pytest.approx(lat.value, rel=1e-12)
    assert (row["latency_s_lo"], row["latency_s_hi"]) == (lat.lo, lat.hi)
    assert row["bandwidth_Bps"] == pytest.approx(bw.value, rel=1e-12)
    assert (row["bandwidth_Bps_lo"], row["bandwidth_Bps_hi"]) == (bw.lo, bw.hi)


def test_labels_and_text() -> None:
    assert bandwidth.label(4 << 20) == "eff. bw 2 MiB-4 MiB"
    assert "top octave" in bandwidth.DEFINITION and "median" in latency.DEFINITION
    assert format_with_interval(34.7e-6, 34.4e-6, 35.1e-6, "time") == "34.7 µs [34.4–35.1]"
    assert format_with_interval(1.1e8, 1.09e8, 1.1e8, "rate") == "110 MB/s [109–110]"
    assert format_with_interval(math.nan, None, None, "rate") == "–"
