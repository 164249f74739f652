"""``pt2pt diff``: changes detected on synthetic truth, "same" when nothing changed, real data.

The detection rates are the issue's targets: latency +10 %, bandwidth -5 % and a break moved by
20 % each detected in >= 95 % of seeds, two samples of the same truth called "same" in >= 95 %.
By default a subset of seeds runs; with CI=true (or PT2PT_FULL_STATS=1) all 50.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kit.analyses.diff import (
    Side,
    _fit,
    _multiset_quantiles,
    _Resampler,
    broken,
    diff,
    halves,
    parse_threshold,
)
from kit.core.errors import UserError
from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.synth import TrueNoise, TrueRegime, Truth

FULL = os.environ.get("CI") == "true" or os.environ.get("PT2PT_FULL_STATS") == "1"
SEEDS = 50 if FULL else 12
REPO = Path(__file__).resolve().parent.parent


def truth(lat: float = 1.0, bw: float = 1.0, brk: float = 1.0) -> Truth:
    """Latency regime, a linear eager regime, a jump to rendezvous at 64 KiB (× brk)."""
    return Truth([
        TrueRegime(1, "constant", {"a": 5e-6 * lat}, TrueNoise("lognormal", 0.08)),
        TrueRegime(2048, "linear", {"a": 8e-6 * lat, "b": 1 / 2e9}, TrueNoise("lognormal", 0.08)),
        TrueRegime(65536 * brk, "linear", {"a": 40e-6, "b": 1 / (1.2e9 * bw)},
                   TrueNoise("gamma", 0.08)),
    ])


def side(t: Truth, seed: int, label: str, n: int = 4000) -> Side:
    s, tt = synth.sample(t, n, 1, 2**22, seed=seed)
    return Side(label, s, tt, seq=np.arange(len(s)))


@functools.cache
def side_a(seed: int) -> Side:
    """A of every scenario's comparison ``seed``, with the model diff would fit for it (the
    same for all four scenarios: fitted once)."""
    a = side(truth(), 1000 + seed, "A")
    a.model = _fit(a, seed)
    return a


def rate(kind: str) -> tuple[int, int]:
    """(seeds where the expected change was reported, seeds) for one scenario."""
    hit = 0
    for seed in range(SEEDS):
        a = side_a(seed)
        b = side(truth(**{"lat": {"lat": 1.1}, "bw": {"bw": 0.95},
                          "brk": {"brk": 1.2}, "same": {}}[kind]), 2000 + seed, "B")
        r = diff(a, b, seed=seed)
        if kind == "same":
            hit += not r.changed
        elif kind == "lat":
            small = [c for c in r.bands if c.stat == "p50" and c.size_lo <= 1]
            hit += bool(small and small[0].significant and 0.06 < small[0].change < 0.14)
        elif kind == "bw":
            top = [p for p in r.params if p.param == "bandwidth_Bps" and p.size_lo >= 60000]
            hit += bool(top and top[0].significant and -0.09 < top[0].change < -0.01)
        else:
            moved = [b for b in r.breaks if b.kind == "moved" and b.confirmed]
            hit += bool(moved and moved[0].b is not None
                        and abs(moved[0].b / (65536 * 1.2) - 1) < 0.05)
    return hit, SEEDS


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["same", "lat", "bw", "brk"])
def test_synthetic_truth_rates(kind: str) -> None:
    hit, n = rate(kind)
    assert hit >= math.ceil(0.95 * n), f"{kind}: {hit}/{n}"


def test_bootstrap_quantiles_are_numpys_of_the_drawn_samples() -> None:
    """A replicate is how often each sample is drawn, never a copy of the samples: its
    quantiles must be np.quantile's of the copies, bit for bit, ties and empty draws included,
    and a cluster's members are drawn together."""
    rng = np.random.default_rng(3)
    qs = np.array([0.0, 0.05, 0.5, 0.95, 1.0])
    for n, k in ((1, 1), (7, 3), (200, 200), (500, 40)):
        x = np.round(rng.normal(size=n), 1)
        labels = rng.integers(0, k, n) * 2  # unused labels between the used ones
        res = _Resampler(labels)
        counts = np.stack([res.multiplicity(rng) for _ in range(30)])
        if not res.iid:
            for lab in np.unique(labels):
                assert (counts[:, labels == lab] == counts[:, labels == lab][:, :1]).all()
            first = np.unique(labels, return_index=True)[1]
            assert (counts[:, first].sum(axis=1) == res.k).all()
        order = np.argsort(x, kind="stable")
        got = _multiset_quantiles(x[order], counts[:, order], qs)
        want = np.stack([np.quantile(np.repeat(x, c), qs) for c in counts])
        assert np.array_equal(got, want)


def test_verdict_names_the_change_with_its_interval() -> None:
    r = diff(side(truth(), 1, "A"), side(truth(lat=1.1), 2, "B"))
    assert r.changed
    assert "p50 slower by" in r.verdict and "1 B–2 KiB" in r.verdict
    first = next(c for c in r.bands if c.stat == "p50")
    assert first.ci_lo < first.change < first.ci_hi
    assert r.settings["tests"] == len(r.bands) + len(r.params)
    # The interval is simultaneous: wider than a single 95 % one would be.
    assert r.settings["z"] > 1.96


def test_halves_of_one_stationary_run_are_same_and_drift_is_named() -> None:
    s, t = synth.sample(truth(), 6000, 1, 2**22, seed=5)
    steady = Side("run", s, t, run=np.array(["r1"] * len(s)), seq=np.arange(len(s)))
    first, second = halves(steady)
    assert first.n + second.n == steady.n and first.seq.max() < second.seq.min()
    assert not diff(first, second).changed
    drift = t * np.where(np.arange(len(t)) >= len(t) // 2, 1.15, 1.0)
    drifting = Side("run", s, drift, run=steady.run, seq=steady.seq)
    r = diff(*halves(drifting), reason="drift within the run: its two halves differ")
    assert r.changed and r.verdict.endswith("(drift within the run: its two halves differ)")


@pytest.mark.parametrize("text,stat,direction,pct", [
    ("p50 slower > 5%", "p50", "slower", 5.0), ("bandwidth lower>3 %", "bandwidth", "lower", 3.0),
    ("p95 changed > 10", "p95", "changed", 10.0), ("latency higher > 0.5%", "latency", "higher",
                                                   0.5)])
def test_threshold_grammar(text: str, stat: str, direction: str, pct: float) -> None:
    rule = parse_threshold(text)
    assert (rule.stat, rule.direction, rule.pct) == (stat, direction, pct)


@pytest.mark.parametrize("text", ["p50 > 5%", "p50 lower > 5%", "bandwidth slower > 1%",
                                  "p99 slower > 1%", "p50 slower < 5%", "rm -rf /"])
def test_bad_thresholds_are_user_errors(text: str) -> None:
    with pytest.raises(UserError, match="--fail-if"):
        parse_threshold(text)


def test_thresholds_fire_only_on_significant_changes_in_their_direction() -> None:
    r = diff(side(truth(), 1, "A"), side(truth(lat=1.1), 2, "B"))
    assert broken(r, [parse_threshold("p50 slower > 5%")])
    assert not broken(r, [parse_threshold("p50 slower > 30%")])
    assert not broken(r, [parse_threshold("p50 faster > 5%")])
    assert broken(r, [parse_threshold("latency higher > 5%")])
    same = diff(side(truth(), 1, "A"), side(truth(), 2, "B"))
    assert not broken(same, [parse_threshold("p50 changed > 0%")])


def _csv(path: Path, size: np.ndarray, time: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["size,duration"] + [f"{int(s)},{t:.9e}" for s, t in zip(size, time, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _pt2pt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


def test_cli_gates_an_upgrade_with_exit_code_and_json(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    for name, t in (("before", truth()), ("after", truth(lat=1.1))):
        s, tt = synth.sample(t, 3000, 1, 2**22, seed=len(name))
        ingest([_csv(tmp_path / name / "pp.csv", s, tt)], ds, campaign=name)
    out = tmp_path / "out"
    res = _pt2pt("diff", f"{ds}#campaign=before", f"{ds}#campaign=after",
                 "--fail-if", "p50 slower > 5%", "--json", str(tmp_path / "d.json"),
                 "-o", str(out))
    assert res.returncode == 3, res.stderr
    assert "threshold exceeded: p50 slower > 5%" in res.stderr
    assert "verdict: p50 slower by" in res.stdout and "Traceback" not in res.stderr
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["format"] == "pt2pt-diff" and data["changed"] is True
    assert (out / "diff.png").stat().st_size > 10_000
    page = (out / "diff.html").read_text()
    assert "p50 slower by" in page and 'src="diff.png"' in page and "family-wise" in page
    res = _pt2pt("diff", f"{ds}#campaign=before", f"{ds}#campaign=after",
                 "--fail-if", "p50 faster > 5%", "--json", "-")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"].startswith("p50 slower")


@pytest.mark.parametrize("args,where", [
    (["{ds}#campaign=before"], "B is missing"),
    (["{ds}#campaign=before", "{ds}#campaign=before", "--halves"], "--halves"),
    (["{ds}#campaign=nope", "{ds}#campaign=before"], "no raw samples"),
    (["{ds}#colour=red", "{ds}#campaign=before"], "bad series selector"),
    (["{tmp}/missing", "{ds}"], "does not exist"),
    (["{ds}#campaign=before", "{ds}#campaign=before", "--fail-if", "p50 up"], "--fail-if"),
    (["{ds}#campaign=before", "{ds}#campaign=before", "--bootstrap", "3"], "--bootstrap"),
])
def test_cli_user_errors(tmp_path: Path, args: list[str], where: str) -> None:
    ds = tmp_path / "ds"
    s, tt = synth.sample(truth(), 500, 1, 2**22, seed=1)
    ingest([_csv(tmp_path / "before" / "pp.csv", s, tt)], ds, campaign="before")
    res = _pt2pt("diff", *[a.format(ds=ds, tmp=tmp_path) for a in args])
    assert res.returncode == 2, res.stdout + res.stderr
    assert where in " ".join(res.stderr.split()) and "Traceback" not in res.stderr


def test_no_common_sizes_and_too_few_samples() -> None:
    a = Side("A", np.full(50, 8.0), np.full(50, 1e-6) * (1 + np.arange(50) / 500))
    b = Side("B", np.full(50, 4096.0), np.full(50, 2e-6) * (1 + np.arange(50) / 500))
    with pytest.raises(UserError, match="no message sizes in common"):
        diff(a, b)
    with pytest.raises(UserError, match="only 3 samples"):
        diff(Side("A", a.size[:3], a.time[:3]), b)


# ------------------------------------------------------------------ public reference data
@pytest.fixture(scope="module")
def reference(refdata_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = refdata_dir / "platform-calibration"
    ds = tmp_path_factory.mktemp("refdiff") / "ds"
    for folder, campaign in (("taurus_26_07_2016_calibration", "taurus"),
                             ("taurus_26_07_2016_taurus-loopback", "taurus-lo"),
                             ("stampede_17_06_01-17_14_calibration", "stampede-2n"),
                             ("stampede_17_06_01-17_26_calibration", "stampede-1n")):
        ingest(sorted((root / folder).glob("*_PingPong.csv")), ds, campaign=campaign)
    return ds


def test_reference_two_taurus_halves_are_same(reference: Path) -> None:
    from kit.analyses.diff import load_side

    first, second = halves(load_side(f"{reference}#campaign=taurus"))
    r = diff(first, second)
    # Called "same", or if not, the reason is in the verdict.
    assert not r.changed, r.verdict


def test_reference_one_node_vs_two_nodes_and_loopback(reference: Path) -> None:
    from kit.analyses.diff import load_side

    one = load_side(f"{reference}#campaign=stampede-1n")
    two = load_side(f"{reference}#campaign=stampede-2n")
    r = diff(one, two, params=False)
    # What the plots show: two nodes are slower at every size, by a factor 2.5-5.
    assert r.verdict.startswith("p50 slower in every size band")
    assert all(1.0 < c.change < 5.0 for c in r.bands if c.stat == "p50")
    tcp = load_side(f"{reference}#campaign=taurus")
    lo = load_side(f"{reference}#campaign=taurus-lo")
    r = diff(tcp, lo, params=False)
    assert r.verdict.startswith("p50 faster in every size band")
    big = [c for c in r.bands if c.stat == "p50" and c.size_lo >= 65536]
    assert big and all(c.change < -0.5 for c in big)  # shared memory beats 10 GbE
