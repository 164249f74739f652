"""Bootstrap intervals: they cover a known truth about 95 % of the time, and say when not.

The coverage test draws 50 data sets from one synthetic truth (a constant regime, a jump at
8 KiB, a linear regime; lognormal noise) on a geometric size grid, fits, bootstraps, and
counts how often each 95 % interval holds the true value: the breakpoint, latency a,
per-byte b, bandwidth, and the noise p50/p95/p99 of each regime (true ratio quantiles of
the lognormal around the true median). Pooled over quantities and seeds the share must be
within 88-99 %: below, the intervals lie; above, they are uselessly wide.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kit.fit import synth
from kit.model import RegimeModel
from kit.model.noise import fit_noise
from kit.model.resampled_bins import RegimeBins, running_sum, weighted_quantiles
from kit.model.segmentation import make_bins, refine_boundary
from kit.model.uncertainty import bootstrap_intervals, format_interval, summary_lines

Z95, Z99 = 1.6448536269514722, 2.3263478740408408
TRUTH = synth.Truth([
    synth.TrueRegime(1, "constant", {"a": 5e-6}, synth.TrueNoise("lognormal", 0.1)),
    synth.TrueRegime(8192, "linear", {"a": 2e-5, "b": 1 / 2e9}, synth.TrueNoise("lognormal", 0.08)),
])
TRUE = {"bp0": 8192.0, "r0.a": 5e-6, "r1.a": 2e-5, "r1.b": 1 / 2e9, "r1.bandwidth_Bps": 2e9,
        "r0.noise.p50": 1.0, "r0.noise.p95": math.exp(Z95 * 0.1),
        "r0.noise.p99": math.exp(Z99 * 0.1), "r1.noise.p50": 1.0,
        "r1.noise.p95": math.exp(Z95 * 0.08), "r1.noise.p99": math.exp(Z99 * 0.08)}


def _flat(iv: dict) -> dict[str, dict]:
    out = {f"bp{k}": b for k, b in enumerate(iv["breakpoints"])}
    for k, reg in enumerate(iv["regimes"]):
        out.update({f"r{k}.{n}": v for n, v in reg["params"].items()})
        out.update({f"r{k}.noise.{n}": v for n, v in reg["noise"].items()})
    return out


@pytest.mark.slow
def test_95_percent_intervals_cover_the_truth_88_to_99_percent_of_the_time() -> None:
    hits = {k: 0 for k in TRUE}
    fitted = 0
    for seed in range(50):
        size, time = synth.sample(TRUTH, 1000, hi=2**22, grid=25, seed=seed)
        model = RegimeModel(max_regimes=3, mixture=False, noise=False).fit(size, time)
        assert len(model.regimes_) == 2, f"seed {seed}: {len(model.regimes_)} regimes"
        fitted += 1
        flat = _flat(bootstrap_intervals(model, size, time, n_boot=80, random_state=seed))
        for key, truth in TRUE.items():
            iv = flat[key]
            assert iv["lo"] is not None, (seed, key, iv)
            hits[key] += int(iv["lo"] <= truth <= iv["hi"])
    per = {k: v / fitted for k, v in hits.items()}
    pooled = sum(hits.values()) / (fitted * len(hits))
    assert 0.88 <= pooled <= 0.99, per
    assert min(per.values()) >= 0.75, per  # no quantity systematically missed


@pytest.mark.slow
def test_noise_quantile_intervals_cover_the_truth_above_the_noise_fits_subsample() -> None:
    # 20 k samples: each regime holds ~10 k, above the 2,500 ratios a noise family is fitted
    # to. Its empirical quantiles (what the intervals are on) must come from all of them:
    # from the subsample they were 2-3x less precise than the bootstrap said, and 95 %
    # intervals held the truth 33-57 % of the time (30 k samples, 30 data sets).
    keys = [k for k in TRUE if ".noise." in k or k == "r1.b"]
    hits = {k: 0 for k in keys}
    seeds = range(24)
    for seed in seeds:
        size, time = synth.sample(TRUTH, 20000, hi=2**22, grid=25, seed=seed)
        model = RegimeModel(max_regimes=3, mixture=False).fit(size, time)
        assert len(model.regimes_) == 2, f"seed {seed}: {len(model.regimes_)} regimes"
        flat = _flat(bootstrap_intervals(model, size, time, n_boot=60, random_state=seed))
        for key in keys:
            iv = flat[key]
            hits[key] += int(iv["lo"] <= TRUE[key] <= iv["hi"])
    per = {k: v / len(seeds) for k, v in hits.items()}
    assert 0.88 <= sum(hits.values()) / (len(seeds) * len(keys)) <= 0.99, per
    assert min(per.values()) >= 0.75, per


@pytest.mark.parametrize("seed", range(20))
def test_weighted_quantiles_are_np_quantile_of_the_repeated_values(seed: int) -> None:
    """Counts of a resample (zeros included) over values with ties; sorted values may skip
    the sort (a bin's sizes) and give the same quantiles."""
    rng = np.random.default_rng(seed)
    values = np.sort(rng.choice(rng.normal(size=6), size=int(rng.integers(1, 40))))
    weight = rng.integers(0, 3, size=len(values))
    weight[int(rng.integers(0, len(values)))] += 1  # total > 0
    qs = (0.1, 0.25, 0.5, 0.75, 0.9)
    want = np.quantile(np.repeat(values, weight), qs)
    shuffled = rng.permutation(len(values))
    assert np.allclose(weighted_quantiles(values[shuffled], weight[shuffled], qs), want)
    assert np.allclose(weighted_quantiles(values, weight, qs, ascending=True), want)
    assert np.array_equal(weighted_quantiles(values, weight, qs, ascending=True),
                          weighted_quantiles(values, weight, qs))


def test_resampled_bins_are_make_bins_of_the_copied_resample() -> None:
    # The bootstrap never copies a resample: it re-reads the full data's bins with counts.
    # With a bin per size (and for log-spaced bins over the regime they were placed on,
    # when the resample holds its two end samples) that is exactly make_bins of the copy.
    rng = np.random.default_rng(3)
    for grid, n in ((40, 20000), (0, 50000)):
        s0, t0 = synth.sample(synth.ethernet_like(), n, lo=1, hi=2**22, seed=2,
                              **({"grid": grid} if grid else {}))
        o = np.lexsort((t0, s0))
        s, t = s0[o], t0[o]
        lo, hi = (int(i) for i in np.searchsorted(s, [100, 60000]))
        ext = (int(i) for i in np.searchsorted(s, [50, 120000]))
        rb = RegimeBins.place(s, np.log(np.maximum(s, 1)), np.log(t), (lo, hi), tuple(ext))
        assert rb.per_size == bool(grid)
        ranges = [(lo, hi)]
        if grid:  # a moved boundary: per-size bins stay exact
            ranges.append((int(np.searchsorted(s, 80)), int(np.searchsorted(s, 90000))))
        sums = np.full(n + 1, -7, dtype=np.int64)  # one buffer for every resample, as the
        for _ in range(3):                           # bootstrap keeps it
            mult = rng.poisson(1.0, n).astype(np.uint8)
            mult[[lo, hi - 1]] = np.maximum(mult[[lo, hi - 1]], 1)
            assert running_sum(mult, out=sums) is sums
            np.testing.assert_array_equal(sums, running_sum(mult))
            counts = rb.gather(mult, sums)
            for a, b in ranges:
                got = rb.summarise(a, b, counts)
                idx = np.repeat(np.arange(a, b), mult[a:b])
                want = make_bins(s[idx], t[idx], local=False)
                assert got is not None and len(got.size) == len(want.size)
                for name in ("first", "size", "median", "weight", "count"):
                    np.testing.assert_allclose(getattr(got, name), getattr(want, name),
                                               rtol=1e-12, err_msg=name)


def test_weighted_boundary_search_is_the_search_on_repeated_samples() -> None:
    rng = np.random.default_rng(5)
    size = np.sort(rng.integers(1000, 9000, 3000)).astype(float)
    lt = np.log(np.where(size < 4000, 1e-5, 2e-5) * rng.lognormal(0, 0.2, size.size))
    left, right = np.full(size.size, np.log(1e-5)), np.full(size.size, np.log(2e-5))
    for _ in range(5):
        w = rng.poisson(1.0, size.size)
        held = np.flatnonzero(w)
        rep = np.repeat(np.arange(size.size), w)
        i_w = refine_boundary(size[held], lt[held], left[held], right[held], w[held])
        i_r = refine_boundary(size[rep], lt[rep], left[rep], right[rep])
        assert size[held][i_w] == size[rep][i_r]
        assert size[held][i_w - 1] == size[rep][i_r - 1]


def test_boundary_search_is_the_best_split_between_sizes() -> None:
    """The search sums each size's costs first: it must still pick the first split of
    least total cost, also where sizes hold no weight (exact ties) and where the window
    does not start at a size's first sample (the running-sum path)."""
    rng = np.random.default_rng(11)
    for trial in range(60):
        n = int(rng.integers(2, 400))
        size = np.sort(rng.integers(1, 40, n)).astype(float)
        lt = rng.normal(0, 1, n)
        left, right = rng.normal(0, 1, n), rng.normal(0, 1, n)
        w = rng.poisson(1.0, n).astype(np.uint8)
        w[size == size[n // 2]] = 0  # a size the resample lacks: ties around it
        cost = np.minimum((lt - left) ** 2, 1.0) - np.minimum((lt - right) ** 2, 1.0)
        starts = np.flatnonzero(np.r_[True, size[1:] != size[:-1]])
        if trial % 3 == 0 and len(starts) > 1:
            starts = starts[1:]  # a window cut inside its first size
        splits = np.r_[starts, n]
        totals = np.array([float(np.sum((cost * w)[:i])) for i in splits])
        best = splits[np.flatnonzero(totals <= totals.min() + 1e-9)]
        got = refine_boundary(size, lt, left, right, w, starts)
        assert got in best
        gap = np.sort(totals)[1] - totals.min() if len(totals) > 1 else np.inf
        if gap > 1e-6:  # no other split comes close: it is that one
            assert got == splits[np.argmin(totals)]


def test_held_neighbours_of_a_split_are_found_near_it_and_far_from_it() -> None:
    from kit.model.uncertainty import _first_held, _last_held

    rng = np.random.default_rng(8)
    for _ in range(200):
        # long runs of samples the resample lacks (a whole run or block missing)
        w = (rng.random(400) < rng.choice([0.02, 0.3, 0.9])).astype(np.uint8)
        w[rng.integers(0, 400, 3)] = 0
        i = int(rng.integers(0, 401))
        held_before, held_after = np.flatnonzero(w[:i]), np.flatnonzero(w[i:])
        assert _last_held(w, i) == (held_before[-1] if len(held_before) else -1)
        assert _first_held(w, i) == (i + held_after[0] if len(held_after) else -1)


def test_fast_16_bit_draws_are_numpys_own_and_leave_the_same_state() -> None:
    from kit.model.uncertainty import _uint16s

    # lengths of every remainder mod 4, in sequences that leave a half-used 32-bit draw
    for lengths in ([1000, 1001, 1002, 1003, 4, 5, 6, 7], [3, 1, 2, 9, 4000, 2], [10**6] * 3):
        ours, numpys = np.random.default_rng(11), np.random.default_rng(11)
        for n in lengths:
            got = _uint16s(ours, n)
            assert got.dtype == np.uint16
            assert np.array_equal(got, numpys.integers(0, 2**16, n, dtype=np.uint16))
            a, b = ours.bit_generator.state, numpys.bit_generator.state
            assert a["state"] == b["state"] and a["has_uint32"] == b["has_uint32"]
            if a["has_uint32"]:
                assert a["uinteger"] == b["uinteger"]
        assert ours.random() == numpys.random()


def test_reported_noise_quantiles_are_those_of_every_ratio() -> None:
    rng = np.random.default_rng(1)
    ratio = rng.lognormal(0.0, 0.1, 20000)
    noise = fit_noise(ratio, np.random.default_rng(0), ("lognormal",))
    want = np.quantile(ratio, [0.5, 0.95, 0.99])
    got = [noise.quantiles[q]["empirical"] for q in ("p50", "p95", "p99")]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert noise.n == 20000


def test_intervals_are_json_and_hold_the_reported_values() -> None:
    size, time = synth.sample(synth.ethernet_like(), 3000, grid=40, seed=1)
    model = RegimeModel().fit(size, time)
    iv = bootstrap_intervals(model, size, time, n_boot=40)
    text = json.dumps(iv, allow_nan=False)  # no NaN anywhere
    assert json.loads(text)["resample"] == "samples"
    assert len(iv["breakpoints"]) == len(model.breakpoints_)
    for k, b in enumerate(iv["breakpoints"]):
        assert b["value"] == model.breakpoints_[k] and b["lo"] <= b["value"] <= b["hi"]
    mix = [r for r, reg in zip(iv["regimes"], model.regimes_, strict=True) if reg.is_mixture]
    assert mix and all(len(r["band_shares"]) == 2 for r in mix)
    for reg in iv["regimes"]:
        for v in [*reg["params"].values(), *reg["noise"].values(), *reg["band_shares"]]:
            if v["lo"] is not None:
                assert v["lo"] <= v["value"] <= v["hi"]
    assert any("intervals" in line for line in summary_lines(iv))


def test_resampling_by_run_and_by_seq_block() -> None:
    size, time = synth.sample(synth.ethernet_like(), 2000, grid=20, seed=2)
    model = RegimeModel(mixture=False).fit(size, time)
    runs = np.repeat([f"r{i}" for i in range(5)], 400)
    assert bootstrap_intervals(model, size, time, groups=runs, n_boot=20)["resample"] == "runs"
    one = bootstrap_intervals(model, size, time, groups=runs[:1].repeat(2000),
                              seq=np.arange(2000), n_boot=20)
    assert one["resample"] == "seq blocks" and one["n_units"] == 40


def test_what_cannot_be_estimated_is_said_never_printed_as_a_number() -> None:
    # One sample per size: a p99 from a few dozen ratios is the maximum, not a quantile.
    rng = np.random.default_rng(0)
    size = np.unique(np.floor(np.exp(rng.uniform(0, np.log(2**20), 60))))
    time = (3e-6 + size / 1e9) * rng.lognormal(0, 0.1, size.size)
    model = RegimeModel(max_regimes=1, mixture=False).fit(size, time)
    iv = bootstrap_intervals(model, size, time, n_boot=30)
    p99 = iv["regimes"][0]["noise"]["p99"]
    assert p99["lo"] is None and p99["hi"] is None and p99["why"]
    text = "\n".join(summary_lines(iv))
    assert "nan" not in text.lower() and "not estimated" in text
    assert format_interval({"value": None, "lo": None, "hi": None, "why": "x"}) == \
        "not estimated (x)"
    assert format_interval({"value": 1.0, "lo": None, "hi": None, "why": "y"}) == \
        "1 (no interval: y)"


def test_model_file_keeps_intervals_and_the_schema_checks_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest as _pytest

    from kit.core.errors import ModelError
    from kit.model.contract import ModelFile
    from kit.model.io import read_model, write_model

    size, time = synth.sample(synth.ethernet_like(), 1500, grid=25, seed=4)
    model = RegimeModel(mixture=False).fit(size, time)
    iv = bootstrap_intervals(model, size, time, n_boot=20)
    path = write_model(ModelFile(model, intervals=iv, run_quality={"n_samples": 1500,
                                                                    "n_disturbed": 0}),
                       tmp_path / "m.json")
    again = read_model(path)
    assert again.intervals == json.loads(json.dumps(iv))
    assert again.run_quality["n_disturbed"] == 0
    doc = json.loads(path.read_text())
    doc["intervals"]["breakpoints"][0]["lo"] = doc["intervals"]["breakpoints"][0]["value"] * 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with _pytest.raises(ModelError, match=r"intervals\.breakpoints\[0\]"):
        read_model(bad)


@pytest.mark.slow
def test_median_intervals_next_to_a_break_cover_the_truth_as_far_from_it() -> None:
    # Next to a jump the regime's curve ends and the fitted break may sit a few sizes off
    # the true one: the bootstrap searches each break again, so the median's interval there
    # must hold the true median about as often as elsewhere (20 seeds: 0.954 vs 0.955, the
    # exact first size of a regime 0.85; benchmarks/bench_break_coverage.py).
    truth = synth.jumps()
    near = np.floor([b * f for b in (128.0, 65537.0) for f in (0.8, 0.9, 0.97, 1.03, 1.1, 1.25)])
    far = np.array([3.0, 20.0, 1000.0, 8000.0, 400_000.0, 3_000_000.0])
    at = np.r_[near, far]
    hits = np.zeros((8, len(at)), dtype=bool)
    for seed in range(len(hits)):
        size, time = synth.sample(truth, 20000, hi=2**22, seed=seed)
        model = RegimeModel().fit(size, time)
        assert len(model.breakpoints_) == 2, seed
        iv = bootstrap_intervals(model, size, time, at=at, n_boot=80, random_state=seed)
        hits[seed] = [m["lo"] is not None and m["lo"] <= v <= m["hi"]
                      for m, v in zip(iv["medians"], truth.median(at), strict=True)]
    near_rate, far_rate = hits[:, :len(near)].mean(), hits[:, len(near):].mean()
    assert near_rate >= 0.85, (near_rate, hits[:, :len(near)].mean(axis=0))
    assert near_rate >= far_rate - 0.08, (near_rate, far_rate)


def test_interval_ends_from_few_resamples_sit_at_the_percentile() -> None:
    # From 120 resamples numpy's linear quantile puts the 2.5/97.5 % points ~1.88 σ out
    # (intervals ~4 % narrow: the median intervals of issue 60 covered 0.89 of 20 seeds);
    # the ends the intervals use must sit at ±1.96 σ on average.
    from kit.model.uncertainty import percentiles

    rng = np.random.default_rng(0)
    ends = np.array([percentiles(rng.standard_normal(120), 0.025) for _ in range(400)])
    linear = np.array([np.quantile(rng.standard_normal(120), [0.025, 0.975])
                       for _ in range(400)])
    lo, hi = ends.mean(axis=0)
    assert -2.06 < lo < -1.94 and 1.94 < hi < 2.06, (lo, hi)
    assert linear.mean(axis=0)[0] > -1.92  # what the fix is for
    assert np.all(ends[:, 0] < ends[:, 1])
