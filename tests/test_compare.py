"""compare: per size bin, who is within X % of the best median."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.analyses.compare import compare
from kit.cli import main
from kit.core.errors import UserError


def _series(name: str, alpha: float, beta: float, n: int = 2000, seed: int = 0,
            stat: str = "raw") -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    size = np.floor(np.exp(rng.uniform(0, np.log(2**20), n))).astype(np.uint64)
    time = (alpha + size / beta) * rng.lognormal(0.0, 0.01, n)
    return pl.DataFrame({"transport": name, "tool": "probe", "size": size, "time": time,
                         "stat": stat, "warmup": False})


def test_a_uniformly_faster_series_wins_every_bin() -> None:
    frame = pl.concat([_series("ib", 2e-6, 10e9), _series("tcp", 2.4e-6, 8e9, seed=1)])
    result = compare(frame, by="transport", within=5)
    shares = {r["series"]: r["share"] for r in result.shares.iter_rows(named=True)}
    assert shares["ib"] == 1.0
    assert shares["tcp"] == 0.0
    # Both are within 30 % everywhere (tcp is 20-25 % slower).
    loose = compare(frame, by="transport", within=30)
    assert set(loose.shares["share"].to_list()) == {1.0}


def test_a_crossover_splits_the_bins() -> None:
    # Low latency but low bandwidth vs high latency and high bandwidth: cross near 20 KB.
    frame = pl.concat([_series("a", 2e-6, 1e9), _series("b", 20e-6, 1e10, seed=1)])
    result = compare(frame, by="transport", within=5)
    bins = result.bins
    small = bins.filter(pl.col("size_hi") < 1000)
    large = bins.filter(pl.col("size_lo") > 2e5)
    assert set(small["within"].to_list()) == {"a"}
    assert set(large["within"].to_list()) == {"b"}
    shares = {r["series"]: r["share"] for r in result.shares.iter_rows(named=True)}
    assert 0.3 < shares["a"] < 0.9 and 0.1 < shares["b"] < 0.7


def test_aggregate_only_series_use_their_mean_rows_and_warmup_is_ignored() -> None:
    raw = _series("shm", 1e-6, 5e9)
    means = _series("tcp", 1e-6, 5e9, n=300, seed=3, stat="mean")
    warm = _series("shm", 1.0, 1.0, n=50, seed=4).with_columns(warmup=pl.lit(True))
    result = compare(pl.concat([raw, means, warm]), by="transport", within=10)
    kinds = {r["series"]: r["stat"] for r in result.shares.iter_rows(named=True)}
    assert kinds == {"shm": "raw", "tcp": "mean"}
    assert min(result.shares["share"].to_list()) > 0.8  # same line: both within 10 %


def test_nothing_to_compare_is_a_user_error() -> None:
    with pytest.raises(UserError, match="only one transport"):
        compare(_series("ib", 2e-6, 1e10), by="transport")
    with pytest.raises(UserError, match="cannot compare by"):
        compare(_series("ib", 2e-6, 1e10), by="colour")


def test_cli_on_a_small_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kit.data.ingest import ingest

    for name, alpha, beta in (("tcp", 30e-6, 1.1e9), ("shm", 1e-6, 8e9)):
        frame = _series(name, alpha, beta, n=800).select("size", pl.col("time").alias("duration"))
        csv = tmp_path / f"{name}.csv"
        frame.write_csv(csv)
        report = ingest([csv], tmp_path / "ds", campaign="c1", transport=name)
        assert not report.files_failed
    out_dir = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "ds"), "--by", "transport", "-o", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "shm" in out and "100%" in out
    for name in ("compare-bins.csv", "compare-shares.csv", "compare.png"):
        assert (out_dir / name).stat().st_size > 0
    assert (out_dir / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shares = pl.read_csv(out_dir / "compare-shares.csv")
    assert shares.filter(pl.col("series") == "tcp")["share"][0] == 0.0
    assert main(["compare", str(tmp_path / "ds"), "--by", "tool"]) == 2
    err = capsys.readouterr().err
    assert "--by" in err and "Traceback" not in err


def test_shares_carry_bootstrap_intervals() -> None:
    # Clearly separated series: a tight interval at 100 % / 0 %.
    frame = pl.concat([_series("ib", 2e-6, 10e9), _series("tcp", 2.4e-6, 8e9, seed=1)])
    shares = {r["series"]: r for r in compare(frame, by="transport").shares.iter_rows(named=True)}
    assert shares["ib"]["share_lo"] == shares["ib"]["share_hi"] == 1.0
    assert shares["tcp"]["share_hi"] == 0.0
    # Two draws of the same line: who is "within 1 %" is a coin flip in many bins, so the
    # share's interval must be wide and hold the point estimate.
    same = pl.concat([_series("a", 2e-6, 5e9, n=400), _series("b", 2e-6, 5e9, n=400, seed=1)])
    res = compare(same.with_columns(time=pl.col("time") * pl.Series(
        np.random.default_rng(2).lognormal(0, 0.05, 800))), by="transport", within=1)
    for r in res.shares.iter_rows(named=True):
        assert r["share_lo"] <= r["share"] <= r["share_hi"]
        assert r["share_hi"] - r["share_lo"] >= 0.1


def test_second_dimension_repeats_the_comparison(tmp_path: Path) -> None:
    from kit.analyses.compare import compare_per, summary_lines

    frames = []
    for placement, tcp_alpha in (("intra-node", 1.2e-6), ("inter-node", 30e-6)):
        for name, alpha in (("shm", 1e-6), ("tcp", tcp_alpha)):
            frames.append(_series(name, alpha, 5e9).with_columns(placement=pl.lit(placement)))
    results = compare_per(pl.concat(frames), by="transport", per="placement", within=25)
    groups = {r.group: {x["series"]: x["share"] for x in r.shares.iter_rows(named=True)}
              for r in results}
    assert groups["placement=intra-node"]["tcp"] > 0.9  # within 25 % inside a node
    assert groups["placement=inter-node"]["tcp"] < 0.5  # far behind across nodes
    assert "[placement=inter-node]" in "\n".join(summary_lines(results[0]) +
                                                 summary_lines(results[1]))
    written = results[0].write(tmp_path)
    assert all(p.exists() and "placement=" in p.name for p in written)
    with pytest.raises(UserError, match="--per must differ"):
        compare_per(pl.concat(frames), by="transport", per="transport")
