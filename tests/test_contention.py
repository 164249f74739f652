"""Latency and bandwidth against k (kit.analyses.contention, `pt2pt contention`), synthetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.analyses import contention as ct
from kit.cli import main
from kit.data.ingest import ingest
from tests.builders import write_contention_run
from tests.test_ingest_probe import META

SMALL, LARGE = 8, 1 << 20
LATENCY, RATE = 20e-6, 1e9  # one pair alone: 20 µs + size / 1 GB/s


def one_way(k: int, size: int, rng: np.random.Generator, n: int,
            sigma: float = 0.2) -> np.ndarray:
    """k pairs share the link: each pair's bandwidth is RATE / k; lognormal noise."""
    return (LATENCY + size * k / RATE) * rng.lognormal(0.0, sigma, n)


@pytest.mark.parametrize("n", [9, 25, 101])
def test_median_interval_covers_near_the_level(n: int) -> None:
    """Lognormal(0, 1) has median 1; the interval must cover it ~95 % of the time (it is
    conservative: the exact binomial coverage at n = 9 is 96.1 %)."""
    seeds = 400
    hits = 0
    for seed in range(seeds):
        iv = ct.median_interval(np.random.default_rng(seed).lognormal(0.0, 1.0, n))
        hits += iv["lo"] <= 1.0 <= iv["hi"]
    assert 0.93 <= hits / seeds <= 0.995, hits / seeds


def test_median_interval_says_why_when_too_few() -> None:
    assert ct.min_samples() == 6
    iv = ct.median_interval([1.0, 2.0, 3.0])
    assert iv["value"] == 2.0 and iv["lo"] is None and "too few" in iv["why"]
    from kit.model.uncertainty import format_interval

    assert "no interval" in format_interval(iv)


def test_one_over_k_is_recovered() -> None:
    rng = np.random.default_rng(7)
    parts = []
    for k in (1, 2, 4, 8):
        for size in (SMALL, LARGE):
            n = 200 * k  # every pair of every round is a sample
            parts.append(pl.DataFrame({"pairs": [k] * n, "size": [size] * n,
                                       "time": one_way(k, size, rng, n)}))
    group = ct.analyse(pl.concat(parts), {"op": "pingpong"})
    assert (group.small_size, group.large_size) == ((SMALL, SMALL + 1), (LARGE, LARGE + 1))
    assert [r.k for r in group.rows] == [1, 2, 4, 8]
    for row in group.rows:
        assert row.bandwidth_ratio is not None
        assert abs(row.bandwidth_ratio / (1 / row.k) - 1) < 0.05, (row.k, row.bandwidth_ratio)
        assert row.ideal == 1 / row.k
        truth = RATE / row.k * LARGE / (LARGE + LATENCY * RATE / row.k)
        assert row.bandwidth["lo"] <= truth <= row.bandwidth["hi"]
        assert row.aggregate_Bps == pytest.approx(row.k * row.bandwidth["value"])
    assert not group.notes


def test_groups_need_common_sizes_and_k1() -> None:
    frame = pl.DataFrame({"pairs": [1, 1, 2, 2], "size": [8, 16, 32, 64],
                          "time": [1e-6, 2e-6, 3e-6, 4e-6]})
    assert "no message size" in ct.analyse(frame).notes[0]
    frame = pl.DataFrame({"pairs": [2] * 12 + [4] * 12, "size": [8] * 24,
                          "time": [1e-6] * 12 + [2e-6] * 12})
    group = ct.analyse(frame)
    assert group.rows and group.rows[0].bandwidth_ratio is None
    assert any("no k = 1" in note for note in group.notes)


def test_log_uniform_plans_are_compared_in_windows_every_k_measured_densely() -> None:
    """Two log-uniform plans (other seeds per k) share no size but 0..3 B: the figures are
    read in quarter-octave windows each k measured densely, not "@3 B"."""
    parts = []
    for k, seed in ((1, 1), (2, 2), (4, 3)):
        rng = np.random.default_rng(seed)
        sizes = np.floor(np.exp(rng.uniform(0, np.log(4 << 20), 3000))).astype(np.int64)
        parts.append(pl.DataFrame({"pairs": [k] * sizes.size, "size": sizes,
                                   "time": [float(one_way(k, int(s), rng, 1)[0])
                                            for s in sizes]}))
    group = ct.analyse(pl.concat(parts))
    assert group.small_size is not None and group.large_size is not None
    lo, hi = group.large_size
    assert lo >= 1 << 20 and hi / lo <= 2 ** 0.25 + 1e-6, group.large_size
    assert "[" in ct.headers(group)[3] and "@3 B" not in " ".join(ct.headers(group))
    ratios = {r.k: r.bandwidth_ratio for r in group.rows}
    assert abs(ratios[2] - 0.5) < 0.1 and abs(ratios[4] - 0.25) < 0.05, ratios
    # too sparse: no window with enough samples of every k, and it says so
    sparse = pl.concat(p.head(12) for p in parts)
    found = ct.analyse(sparse)
    assert not found.rows and "cannot be compared like for like" in found.notes[0]


def _dataset(root: Path, ks: tuple[int, ...], seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    files = []
    for k in ks:
        rounds = [(size, list(one_way(k, size, rng, k, 0.05))) for _ in range(40)
                  for size in (SMALL, 4096, LARGE)]
        files.append(write_contention_run(root / f"k{k}", k, rounds,
                                          {**META, "hosts": ["n1"] * k + ["n2"] * k}))
    report = ingest(files, root / "ds", campaign="cont", transport="tcp")
    assert report.ok
    return root / "ds"


def test_cli_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path, (1, 2, 4))
    out = tmp_path / "k.json"
    assert main(["contention", str(dataset), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for words in ("median one-way time @8 B [95% CI]", "per-pair eff. bw @1 MiB",
                  "bw x k=1", "ideal 1/k", "aggregate bw", "0.250"):
        assert words in text, words
    doc = json.loads(out.read_text())
    (group,) = doc["groups"]
    assert group["series"]["placement"] == "inter-node" and doc["level"] == 0.95
    ratios = {r["k"]: r["per_pair_bandwidth_x_k1"] for r in group["rows"]}
    assert ratios[1] == 1.0
    assert abs(ratios[2] - 0.5) < 0.05 and abs(ratios[4] - 0.25) < 0.025
    row = group["rows"][2]
    assert row["per_pair_bandwidth_Bps"]["lo"] <= row["per_pair_bandwidth_Bps"]["value"]
    assert main(["contention", str(dataset), "--series", "pairs=1"]) == 1  # one k: no group
    assert "no contention runs" in " ".join(capsys.readouterr().err.split())
    assert main(["contention", str(dataset), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"][0]["large_sizes"] == [LARGE, LARGE + 1]


def test_a_dataset_without_contention_says_so(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path, (1,))
    assert main(["contention", str(dataset)]) == 1
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "no contention runs to compare" in err and "--pairs K" in err
    assert "Traceback" not in captured.err + captured.out
    assert ct.contention(dataset) == []


def test_report_section_only_with_contention(tmp_path: Path) -> None:
    from kit.outputs.report.build import report_dataset

    dataset = _dataset(tmp_path / "a", (1, 4))
    html = report_dataset(dataset, tmp_path / "ra", validate=False).read_text()
    assert "Contention: latency and bandwidth against k" in html
    assert "per-pair eff. bw @1 MiB (median) [95% CI]" in html and "ideal 1/k" in html
    assert "/ 4 pairs /" in html  # the k = 4 series' section title; k = 1 is unnamed
    plain = _dataset(tmp_path / "b", (1,))
    html = report_dataset(plain, tmp_path / "rb", validate=False).read_text()
    assert "Contention" not in html and "pairs" not in html
