"""Carry-over: samples slowed by the bytes an earlier sample of the run left in flight.

The probe interleaves ops in one run (``pingpong, send, recv, isend`` in a shuffled plan). A
``send``, ``isend`` or ``stream`` is timed until it completes *locally*: its bytes may still be
queued in the socket, the qdisc or a shaped link when the next sample starts, and that sample
then waits behind them. On the shaped local cluster (200 Mbit/s) this made 30 % of the
ping-pongs up to 1 KiB that followed a send or isend stall (by the backlog the send left:
``size / rate - its time``, 2.6 ms after a 64-256 KiB send, 50 ms after 1-4 MiB), against
1 % of those that followed a ping-pong or a recv (``benchmarks/bench_stalls.py``,
BENCHMARKS.md). Such a stall belongs to the measurement's order, not to the op measured: a
real program that sends and then ping-pongs pays it through its own earlier send, which a
simulation models as that send's bytes on the link.

A fit therefore asks, per series, whether its samples taken right after an asynchronous op
of *another* kind are slower than the rest at the same sizes (one-sided Mann-Whitney U on
``ln(time / the clean samples' median of that size)``, p below ``ALPHA``, and their upper
tail ``TAIL_Q`` at least ``TAIL_FACTOR`` times the clean samples'), and if so leaves them out
(``pt2pt fit --keep-carry-over`` keeps them); what was found is in the model's provenance.
A series measured alone (OSU, a single-op probe run, the reference data) has no such sample
and is fitted exactly as before.

The probe itself now waits, after a timed ``send``/``isend``, for the receiver to confirm
delivery (kit/probe/README.md), so its newer runs carry nothing over; this test keeps
guarding older runs and other tools' interleaved data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

#: Ops timed until local completion: their bytes may outlive the sample.
ASYNC_OPS = frozenset({"send", "isend", "stream"})
#: Significance of "slower after an asynchronous op" (one-sided Mann-Whitney U).
ALPHA = 1e-3
#: Upper quantile compared, and how much higher it must be to matter.
TAIL_Q = 0.9
TAIL_FACTOR = 1.5
#: Fewest samples on each side to judge.
MIN_SIDE = 30


@dataclass(frozen=True)
class CarryOver:
    """What the test found on one series' samples."""

    #: samples taken right after an asynchronous op of another kind
    n_after_async: int
    #: samples judged (both sides)
    n_samples: int
    #: their upper tail (``TAIL_Q``) of time / the clean median of their size, and the others'
    tail_after_async: float | None
    tail_others: float | None
    p_value: float | None
    #: left out of the fit
    excluded: bool
    #: kept although found (``--keep-carry-over``)
    kept_by_request: bool = False

    @property
    def found(self) -> bool:
        return self.excluded or self.kept_by_request

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rule"] = (f"samples right after a {'/'.join(sorted(ASYNC_OPS))} of another op in "
                       f"the same run, left out when slower than the rest at the same sizes "
                       f"(one-sided Mann-Whitney U p < {ALPHA:g} and their p{TAIL_Q * 100:.0f} "
                       f"of time / the size's clean median >= {TAIL_FACTOR:g}x the others')")
        return out

    def line(self) -> str:
        """One sentence for the fit's output, or '' when nothing was found."""
        if not self.found:
            return ""
        what = "kept (--keep-carry-over)" if self.kept_by_request else "left out"
        return (f"carry-over: {self.n_after_async} of {self.n_samples} samples followed an "
                f"asynchronous op ({', '.join(sorted(ASYNC_OPS))}) of the same run whose bytes "
                f"were still in flight: p{TAIL_Q * 100:.0f} {self.tail_after_async:.3g}x the "
                f"size's median against {self.tail_others:.3g}x for the others "
                f"(Mann-Whitney p = {self.p_value:.2g}); {what}")


def previous_ops(dataset: str | Path, frame: pl.DataFrame, op: str) -> pl.Series:
    """For each row of ``frame`` (``run_id``, ``seq``, samples of ``op``), the op of the
    sample before it in its run (null for the first, or when the run holds ``op`` alone).
    Reads whole runs only where ``seq`` has gaps (a run of one op read in full has none) and
    the run holds another op: a subsample of a single-op run has gaps everywhere, and reading
    its runs to learn that every previous op is ``op`` cost 5.4 CPU-s and 2.8 GB at 6 M rows."""
    from kit.data import dataset as ds

    gaps = (frame.select("run_id", "seq").sort("run_id", "seq")
            .with_columns(pl.col("seq").diff().over("run_id").alias("d"))
            .group_by("run_id").agg((pl.col("d") > 1).any().alias("gap"))
            .filter(pl.col("gap"))["run_id"].to_list())
    empty = pl.Series("prev_op", [None] * frame.height, dtype=pl.String)
    if gaps:
        gaps = (ds.scan(dataset)
                .filter(pl.col("run_id").is_in(gaps)
                        & ~pl.col("op").cast(pl.String).is_in([op, f"{op}_call"]))
                .select("run_id").unique().collect()["run_id"].to_list())
    if not gaps:
        return empty
    prev = (ds.scan(dataset).filter(pl.col("run_id").is_in(gaps))
            .select("run_id", (pl.col("seq").cast(pl.Int64) + 1).alias("seq"),
                    pl.col("op").cast(pl.String).alias("prev_op"))
            .filter(~pl.col("prev_op").str.ends_with("_call"))
            .unique(["run_id", "seq"], keep="first").collect())
    joined = frame.select("run_id", pl.col("seq").cast(pl.Int64)).join(
        prev, on=["run_id", "seq"], how="left", maintain_order="left")
    return joined["prev_op"]


def after_async(op: str, prev_op: Any) -> np.ndarray:
    """Which samples of ``op`` came right after an asynchronous op of another kind: the one
    rule both the test and the exclusion read."""
    return (pl.Series("prev_op", prev_op, dtype=pl.String).is_in(list(ASYNC_OPS - {op}))
            .fill_null(False).to_numpy())


def assess(op: str, size: Any, time: Any, prev_op: Any, *, keep: bool = False) -> CarryOver:
    """Whether samples of ``op`` right after an asynchronous op of another kind are slower
    than the others at the same sizes (see the module's docstring)."""
    size = np.asarray(size, dtype=np.float64)
    time = np.asarray(time, dtype=np.float64)
    after = after_async(op, prev_op)
    n_after = int(after.sum())
    none = CarryOver(n_after, len(size), None, None, None, False)
    if n_after < MIN_SIDE or len(size) - n_after < MIN_SIDE:
        return none
    frame = pl.DataFrame({"size": size, "time": time, "after": after})
    clean_median = (frame.filter(~pl.col("after")).group_by("size")
                    .agg(pl.col("time").median().alias("m")))
    judged = frame.join(clean_median, on="size", how="inner")
    ratio = (judged["time"] / judged["m"]).to_numpy()
    a = judged["after"].to_numpy()
    if a.sum() < MIN_SIDE or (~a).sum() < MIN_SIDE:
        return none
    from scipy.stats import mannwhitneyu

    x, y = np.log(ratio[a]), np.log(ratio[~a])
    p = float(mannwhitneyu(x, y, alternative="greater").pvalue)
    tail_a = float(np.exp(np.quantile(x, TAIL_Q)))
    tail_o = float(np.exp(np.quantile(y, TAIL_Q)))
    found = p < ALPHA and tail_a >= TAIL_FACTOR * tail_o
    return CarryOver(n_after, len(size), tail_a, tail_o, p, found and not keep,
                     found and keep)


def exclusion_mask(dataset: str | Path, op: str, frame: pl.DataFrame, *, keep: bool = False
                   ) -> tuple[CarryOver, np.ndarray]:
    """The finding on a series' rows and the mask of the rows a fit keeps."""
    prev = previous_ops(dataset, frame, op)
    found = assess(op, frame["size"].to_numpy(), frame["time"].to_numpy(), prev,
                   keep=keep)
    if not found.excluded:
        return found, np.ones(frame.height, dtype=bool)
    return found, ~after_async(op, prev)
