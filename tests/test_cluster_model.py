"""The cluster model (kit.fit.clustermodel, hierarchy, pairmetrics) and its slow-link finder
(kit.analyses.slowlinks), on synthetic clusters whose slow nodes and links are known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.analyses.slowlinks import Thresholds, benjamini_hochberg, find
from kit.cli import main
from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.clustermodel import ClusterModel, read_cluster_model, save_cluster_model
from kit.fit.clustervalidate import held_out
from kit.fit.fitting import fit_arrays
from kit.fit.hierarchy import decompose, two_group
from kit.fit.pairmetrics import group_quantiles, unit_metrics, windows_for
from kit.fit.synthcluster import Effect, SynthCluster, draw, write_probe_runs


@pytest.fixture(scope="module")
def population():  # type: ignore[no-untyped-def]
    """A RegimeModel of a 10 GbE-like ping-pong (three regimes, a two-band middle)."""
    s, t = synth.sample(synth.ethernet_like(), 20000, 1, 4 * 2**20, seed=1)
    return fit_arrays({"stat": "raw"}, s, t)


PLANTED = SynthCluster(n_nodes=8, nodes_slow={2: Effect(latency=0.5)},
                       links_slow={(0, 5): Effect(bandwidth=0.4), (3, 4): Effect(noise=0.6)},
                       samples=400)


def test_group_quantiles_match_numpy_and_their_errors_cover() -> None:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 50, 20000)
    values = rng.lognormal(0.0, 1.0, codes.size)
    g = group_quantiles(codes, values, 52, (0.5, 0.95))
    for k in (0, 17, 49):
        sel = values[codes == k]
        assert g.value[k, 0] == pytest.approx(np.quantile(sel, 0.5))
        assert g.value[k, 1] == pytest.approx(np.quantile(sel, 0.95))
        assert g.count[k] == sel.size
    assert np.isnan(g.value[50:]).all() and (g.count[50:] == 0).all()
    # the order-statistic standard error: the median's 95 % interval covers the truth (1)
    hits = np.abs(g.value[:50, 0] - 1.0) <= 1.96 * g.se[:50, 0]
    assert 0.85 <= hits.mean() <= 1.0


def test_the_noise_figure_reads_the_upper_tail_not_the_fast_side() -> None:
    """A noisier link has slower slow messages: a wider upper tail counts in full, a wider
    fast side (below the median) does not count at all. A two-sided scale would read both
    at about half (benchmarks/bench_noise_statistic.py), so this fails if the figure's
    statistic is swapped for one."""
    rng = np.random.default_rng(5)
    units, n = 40, 2000
    # the reference runs' shape: a narrow bulk and a slow band (ln residuals)
    slow = rng.random((units, n)) < 0.15
    r = np.where(slow, 0.3 + rng.exponential(0.2, (units, n)), rng.normal(0.0, 0.05, (units, n)))
    r -= np.median(r, axis=1, keepdims=True)
    r[0] = np.where(r[0] > 0, 1.5 * r[0], r[0])  # upper tail 50 % wider
    r[1] = np.where(r[1] < 0, 1.5 * r[1], r[1])  # fast side 50 % wider
    r[2] = 1.5 * r[2]  # the whole distribution (what the synthetic cluster plants)
    size = np.tile(np.repeat([64.0, 4096.0], n // 2), units)
    m = unit_metrics(np.repeat(np.arange(units), n), units, size, 1e-5 * np.exp(r.ravel()),
                     np.full(units * n, 1e-5), windows_for(size))
    y, se = m.y["noise"], np.sqrt(m.w["noise"])
    assert abs(y[0] - math.log(1.5)) <= 3.5 * se[0]
    assert abs(y[2] - math.log(1.5)) <= 3.5 * se[2]
    assert abs(y[1]) <= 3.5 * se[1] and 3.5 * se[1] < 0.5 * math.log(1.5)


def test_benjamini_hochberg_matches_the_step_up_rule() -> None:
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, np.nan])
    reject, q = benjamini_hochberg(p, 0.05)
    # m = 8 tests: p(k) <= k/8 * 0.05 holds up to k = 2 (0.008 <= 0.0125), not at 3..8
    assert reject.tolist() == [True, True] + [False] * 7
    assert q[0] == pytest.approx(0.008) and q[1] == pytest.approx(0.032)
    assert np.isnan(q[-1])
    assert np.all(np.diff(q[:8]) >= -1e-12)  # adjusted values are monotone in p
    assert not benjamini_hochberg(np.array([0.5, 0.9]), 0.05)[0].any()


def test_a_slow_node_is_one_node_not_its_links() -> None:
    """Pairs of 10 nodes: node 3 adds 1.0 to every pair, link (0, 7) 0.8; a little noise."""
    rng = np.random.default_rng(1)
    N = 10
    ends = np.array([(i, j) for i in range(N) for j in range(i + 1, N)])
    y = rng.normal(0.0, 0.05, len(ends))
    y[(ends == 3).any(axis=1)] += 1.0
    slow = int(np.flatnonzero((ends[:, 0] == 0) & (ends[:, 1] == 7))[0])
    y[slow] += 0.8
    parts = decompose(y, np.full(len(ends), 0.01**2), ends, N)
    assert parts.node[3] == pytest.approx(1.0, abs=0.05)
    assert np.abs(np.delete(parts.node, 3)).max() < 0.06
    assert parts.link[slow] == pytest.approx(0.8, abs=0.1)
    others = np.delete(parts.link, slow)
    assert np.abs(others).max() < 0.25  # the slow node's links carry nothing of it
    # the shrunk value keeps the outlier (two-group prior), pulls the bulk in
    assert parts.link_shrunk[slow] == pytest.approx(parts.link[slow], abs=0.05)
    assert parts.bulk_prob[slow] < 0.01 and np.median(parts.bulk_prob) > 0.9


def test_two_group_shrinks_by_how_much_was_measured() -> None:
    e = np.array([0.1, 0.1, 0.0, 2.0])
    v = np.array([0.01, 1e-4, 0.01, 1e-4])
    mean, var, bulk, share, _ = two_group(e, v, tau2=0.01)
    assert mean[0] == pytest.approx(0.05, abs=0.01)  # B = 0.01 / (0.01 + 0.01)
    assert mean[1] == pytest.approx(0.099, abs=0.005)  # well measured: its own value
    assert mean[3] == pytest.approx(2.0, abs=0.01) and bulk[3] < 1e-6
    assert 0 < share <= 0.5 and (var > 0).all()


def test_planted_nodes_and_links_are_found_with_intervals(population) -> None:  # type: ignore[no-untyped-def]
    rows, truth = draw(PLANTED, population, seed=3)
    model = ClusterModel().fit(rows)
    findings = find(model)
    assert findings.flagged_nodes() == {"n3"}
    assert findings.flagged_links() == {"n1-n6", "n4-n5"}
    by = {(f.name, f.figure): f for f in findings.flagged}
    # One seed's 95 % interval misses its truth one time in 20 (over seeds 0-9 these three
    # covered 24 of 30 on this 8-node cluster): each estimate is held to 3.5 standard
    # errors of the truth (a miss by chance: 1 in 2,000). Before tau² was taken from the
    # Huber fit's leverage-scaled residuals, n3's latency was off by 5 to 6 of them.
    lat = by[("n3", "latency")]
    assert abs(lat.estimate - 0.5 * truth["latency_64B"]) <= 3.5 * lat.se  # s added at 64 B
    assert lat.lo < lat.estimate < lat.hi
    bw = by[("n1-n6", "bandwidth")]
    assert abs(bw.estimate - math.log(0.6)) <= 3.5 * bw.se  # asymptotic bandwidth, ln ratio
    noise = by[("n4-n5", "noise")]
    assert abs(noise.estimate - math.log(1.6)) <= 3.5 * noise.se
    assert "n3 adds" in lat.sentence and "to every pair it is in" in lat.sentence
    assert bw.sentence.startswith("link n1-n6 bandwidth (asymptotic) -")
    # a stricter threshold above the planted bandwidth loss: that link is no longer slow
    strict = find(model, Thresholds(bandwidth=0.6))
    assert "n1-n6" not in {f.name for f in strict.flagged if f.figure == "bandwidth"}


def test_a_uniform_cluster_has_no_finding(population) -> None:  # type: ignore[no-untyped-def]
    rows, _ = draw(SynthCluster(n_nodes=8, samples=300), population, seed=4)
    assert find(ClusterModel().fit(rows)).flagged == []


def test_seen_and_unseen_pairs_and_the_file_round_trip(population, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows, _ = draw(PLANTED, population, seed=3)
    model = ClusterModel().fit(rows)
    sizes = np.array([64.0, 2.0**20, 4.0 * 2**20])
    slow = model.predict_quantiles(sizes, [0.05, 0.5, 0.95], ("n1", "n6"))
    fast = model.predict_quantiles(sizes, [0.05, 0.5, 0.95], ("n1", "n2"))
    assert (np.diff(slow, axis=1) > 0).all()
    assert slow[2, 1] / fast[2, 1] == pytest.approx(1 / 0.6, rel=0.1)  # 40 % less bandwidth
    unseen = model.predict_quantiles(sizes, [0.05, 0.95])
    assert (unseen[:, 1] / unseen[:, 0] > fast[:, 2] / fast[:, 0]).all()  # + pair spread
    path = save_cluster_model(model, tmp_path / "cluster.json", provenance={"dataset": "x"})
    back = read_cluster_model(path)
    assert back.nodes_ == model.nodes_ and back.pairs_ == model.pairs_
    np.testing.assert_allclose(back.predict(sizes, ("n1", "n6")),
                               model.predict(sizes, ("n1", "n6")), rtol=1e-9)
    draws = back.sample(sizes, 200, random_state=1, pair="n1-n6")
    assert draws.shape == (3, 200) and (draws > 0).all()
    assert json.loads(path.read_text())["format"] == "pt2pt-cluster-model"


def test_held_out_pairs_fall_in_the_population_band(population) -> None:  # type: ignore[no-untyped-def]
    rows, _ = draw(SynthCluster(n_nodes=9, samples=300), population, seed=5)
    result = held_out(rows, 0.25, seed=2)
    assert abs(result["coverage"] - 0.90) <= 0.05, result


def test_windows_follow_the_sizes() -> None:
    win = windows_for(np.array([1.0, 100.0, 4.0 * 2**20 - 3]))
    assert (win.latency_at, win.latency_max) == (64.0, 1024.0)
    assert (win.bandwidth_min, win.bandwidth_at) == (2.0**20, 4.0 * 2**20)
    small = windows_for(np.array([2.0, 4000.0]))
    assert small.bandwidth_min is None  # no transfer-dominated sizes: no bandwidth figure


def _dataset(tmp_path: Path, population, cluster: SynthCluster, seed: int = 3) -> Path:  # type: ignore[no-untyped-def]
    rows, _ = draw(cluster, population, seed=seed)
    files = write_probe_runs(rows, tmp_path / "raw")
    report = ingest(files, tmp_path / "ds", campaign="syn", transport="tcp")
    assert report.ok
    return tmp_path / "ds"


def test_cli_verdict_health_check_model_and_json(population, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path, population, PLANTED)
    model = tmp_path / "cluster.json"
    assert main(["cluster", str(dataset), "-o", str(model)]) == 0
    out = capsys.readouterr().out
    assert "8 nodes, 28 pairs" in out and "slow (3):" in out
    assert "n3 adds" in out and "link n1-n6 bandwidth (asymptotic) -" in out
    assert "Benjamini-Hochberg" in out
    # the health check: a stated rule and exit 1 when it matches
    assert main(["cluster", str(model), "--fail-if"]) == 1
    assert "health check FAILED: rule --fail-if any" in capsys.readouterr().out
    assert main(["cluster", str(model), "--fail-if", "node", "--latency-threshold", "1ms"]) == 0
    assert "health check passed" in capsys.readouterr().out
    assert main(["cluster", str(model), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {f["name"] for f in doc["flagged"]} == {"n3", "n1-n6", "n4-n5"}
    assert doc["fdr"] == 0.05 and len(doc["tests"]) == 3 * (8 + 28)


def test_cli_errors_name_the_option_or_the_data(population, tmp_path: Path,  # type: ignore[no-untyped-def]
                                               capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path, population, SynthCluster(n_nodes=2, samples=50))
    assert main(["cluster", str(dataset)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "1 node pair(s)" in err and "at least 3" in err
    assert main(["cluster", str(dataset), "--threshold", "ten"]) == 2
    assert "argument --threshold: 'ten' is not a fraction" in capsys.readouterr().err
    assert main(["cluster", str(dataset), "--series", "placement=intra-node"]) == 2
    assert "inter-node series only" in " ".join(capsys.readouterr().err.split())


def _app_run(folder: Path, pair: tuple[str, str], wall: float) -> Path:
    """An application job's folder (app.txt + job.json, as the kit's job templates leave
    them) on a node pair: np 2, one rank per node."""
    folder.mkdir(parents=True)
    (folder / "app.txt").write_text(f"halo: np 2 cells 2048 width 256 bytes 2048 iterations 3 "
                                    f"compute_us 10 mode sendrecv\nwall_time_s {wall:.6e}\n")
    plan = {"tool": "app", "benchmark": "halo", "command": ["halo", "-n", "2048"],
            "outputs": ["app.txt"], "nodes": 2, "ntasks_per_node": 1,
            "placement": "inter-node", "host_pair": list(pair),
            "transport_env": {"OMPI_MCA_btl": "self,tcp", "OMPI_MCA_pml": "ob1"}}
    (folder / "job.json").write_text(json.dumps({
        "state": "completed", "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z",
        "host": pair[0], "exit_status": 0, "plan": plan}))
    return folder / "app.txt"


def test_application_runs_on_node_pairs_are_left_out(population, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """An app campaign on node pairs (one wall time per run) is no cluster: the probe's
    series is the only candidate, and asking for the app series says where apps go."""
    rows, _ = draw(SynthCluster(n_nodes=4, samples=200), population, seed=4)
    probe = write_probe_runs(rows, tmp_path / "raw")
    apps = [_app_run(tmp_path / "apps" / f"{a}{b}-{r}", (a, b), 1e-3 * (1 + r) + 1e-5 * k)
            for k, (a, b) in enumerate(rows.pairs) for r in range(2)]  # distinct: not dupes
    dataset = tmp_path / "ds"
    assert ingest(probe, dataset, campaign="syn", transport="tcp").ok
    assert ingest(apps, dataset, campaign="syn", transport="tcp").ok
    from kit.data.dataset import scan
    from kit.data.pairrows import clusters

    app = scan(dataset).filter(pl.col("op") == "app").collect()
    assert app.height == 2 * len(rows.pairs)  # the app runs are there, on the pairs
    assert set(app["placement"].cast(pl.String)) == {"inter-node"}
    assert app["host_pair"].cast(pl.String).n_unique() == len(rows.pairs)
    assert clusters(dataset)["op"].to_list() == ["pingpong"]
    assert main(["cluster", str(dataset)]) == 0
    assert "4 nodes, 6 pairs" in capsys.readouterr().out
    assert main(["cluster", str(dataset), "--series", "op=app"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "op app" in err and "predict-app" in err
