"""The compare screen's table: kit.analyses.compare's best-within-X % bins over any series."""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from tui.loading import Samples


@dataclass(frozen=True)
class BestRow:
    """One size bin of the best-within-X % table; series by their index in the input."""

    size_lo: float
    size_hi: float
    best: int
    best_median: float
    within: tuple[int, ...]


@dataclass(frozen=True)
class Share:
    """In how many contested bins a series was within X % of the best."""

    index: int
    n_bins: int
    n_within: int


def best_within(series: list[Samples], tolerance_pct: float
                ) -> tuple[list[BestRow], list[Share]]:
    """kit.analyses.compare over the given series, labelled A, B, ... in input order.

    ``kit.analyses.compare.compare`` groups by one column; the series here may differ in any key
    (transport, tool, campaign...), so each gets its letter in the ``campaign`` column and
    the comparison runs by campaign.
    """
    from kit.analyses.compare import compare

    letters = [chr(65 + i) for i in range(len(series))]
    frame = pl.concat([pl.DataFrame({"campaign": letter, "size": s.size, "time": s.time,
                                     "stat": "raw", "warmup": False})
                       for letter, s in zip(letters, series, strict=True)])
    result = compare(frame, by="campaign", within=float(tolerance_pct))
    rows = []
    for rec in result.bins.iter_rows(named=True):
        medians = [rec.get(letter) for letter in letters]
        present = [(m, i) for i, m in enumerate(medians) if m is not None and math.isfinite(m)]
        if not present:
            continue
        best_median, best = min(present)
        within = tuple(letters.index(n.strip()) for n in str(rec["within"]).split(",")
                       if n.strip() in letters)
        rows.append(BestRow(float(rec["size_lo"]), float(rec["size_hi"]), best,
                            float(best_median), within))
    shares = [Share(letters.index(r["series"]), int(r["n_bins"]), int(r["n_within"]))
              for r in result.shares.iter_rows(named=True) if r["series"] in letters]
    return rows, shares
