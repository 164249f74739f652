"""Held-out validation: split, CRPS, floor, and the ordering of models it must produce."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import ArrayLike

from kit.core.errors import ModelError
from kit.fit import synth
from kit.fit.baselines import HockneyModel, PeakModel
from kit.fit.validate import (
    cell_scores,
    crps_ensemble,
    holdout_mask,
    score_models,
    size_cells,
    validate,
    validate_into,
    validation_table,
)
from kit.model import RegimeModel


class TruthModel:
    """The synthetic truth as a predictive model: draws from the generator itself."""

    def __init__(self, truth: synth.Truth, seed: int = 1) -> None:
        self.truth = truth
        self.rng = np.random.default_rng(seed)
        self._cache: dict[float, np.ndarray] = {}

    def sample(self, size: ArrayLike, n: int = 1, random_state: int | None = None) -> np.ndarray:
        rng = np.random.default_rng(random_state)
        s = np.atleast_1d(np.asarray(size, dtype=float))
        return synth.generate(self.truth, np.repeat(s, n), rng).reshape(s.size, n)

    def _draws(self, s: float) -> np.ndarray:
        if s not in self._cache:
            self._cache[s] = synth.generate(self.truth, np.full(4000, s), self.rng)
        return self._cache[s]

    def predict_quantiles(self, size: ArrayLike, q: ArrayLike) -> np.ndarray:
        s = np.atleast_1d(np.asarray(size, dtype=float))
        return np.array([np.quantile(self._draws(float(v)), np.atleast_1d(q)) for v in s])

    def predict(self, size: ArrayLike) -> np.ndarray:
        return self.predict_quantiles(size, [0.5])[:, 0]


def _crps_by_definition(x: np.ndarray, y: np.ndarray) -> float:
    """E|X - y| - E|X - X'| / 2 over every pair: the definition, without sorting."""
    return float(np.mean(np.abs(x[:, None] - y[None, :]))
                 - 0.5 * np.mean(np.abs(x[:, None] - x[None, :])))


def test_crps_matches_its_definition() -> None:
    rng = np.random.default_rng(0)
    x = rng.lognormal(size=57)
    y = rng.lognormal(size=13)
    assert crps_ensemble(x, y) == pytest.approx(_crps_by_definition(x, y), rel=1e-12)
    # A point forecast's CRPS is its mean absolute error.
    assert crps_ensemble([2.0], [1.0, 4.0]) == pytest.approx(1.5)
    assert np.isnan(crps_ensemble([], [1.0]))


def test_cell_scores_are_each_cells_crps_and_w1() -> None:
    """The one-sort scores equal the CRPS's definition and scipy's wasserstein_distance cell
    by cell, to rounding, with ties, cells of times 10^5 apart, and empty sides (NaN)."""
    from scipy.stats import wasserstein_distance

    rng = np.random.default_rng(7)
    for trial in range(40):
        ens, obs = [], []
        for _ in range(int(rng.integers(1, 25))):
            scale = 10 ** rng.uniform(-6, -1)
            e = scale * rng.lognormal(0, 0.4, int(rng.integers(1, 400)))
            o = scale * rng.lognormal(0.1, 0.3, int(rng.integers(1, 50)))
            if trial % 3 == 0:  # timer-resolution ties, within and across the two sides
                e, o = np.round(e / scale, 1) * scale, np.round(o / scale, 1) * scale
            ens.append(e)
            obs.append(o)
        med = np.array([np.median(o) for o in obs])
        crps, w1 = cell_scores(ens, obs, med)
        want_crps = [_crps_by_definition(e, o) / m
                     for e, o, m in zip(ens, obs, med, strict=True)]
        want_w1 = [wasserstein_distance(e, o) / m for e, o, m in zip(ens, obs, med, strict=True)]
        np.testing.assert_allclose(crps, want_crps, rtol=1e-9)
        np.testing.assert_allclose(w1, want_w1, rtol=1e-9)
    crps, w1 = cell_scores([np.array([1.0, 2.0]), np.empty(0), np.array([3.0])],
                           [np.array([1.5]), np.array([1.0]), np.empty(0)], np.ones(3))
    assert crps[0] == pytest.approx(0.25) and w1[0] == pytest.approx(0.5)
    assert np.isnan(crps[1:]).all() and np.isnan(w1[1:]).all()
    crps, w1 = cell_scores([np.empty(0), np.array([1.0])], [np.array([1.0]), np.empty(0)],
                           np.ones(2))
    assert np.isnan(crps).all() and np.isnan(w1).all()


def test_repetition_split_keeps_every_size_on_both_sides() -> None:
    size = np.repeat(np.arange(1, 41, dtype=float), 20)
    test = holdout_mask(size, test_fraction=0.3, random_state=4)
    for s in np.unique(size):
        assert 0 < test[size == s].sum() < 20
    assert test.mean() == pytest.approx(0.3, abs=0.01)
    assert np.array_equal(test, holdout_mask(size, test_fraction=0.3, random_state=4))
    assert not np.array_equal(test, holdout_mask(size, test_fraction=0.3, random_state=5))


def test_random_and_group_splits() -> None:
    size = np.arange(1000, dtype=float)
    assert holdout_mask(size, method="random", test_fraction=0.25).sum() == 250
    groups = np.repeat(["r1", "r2", "r3", "r4"], 250)
    test = holdout_mask(size, method="group", groups=groups, test_fraction=0.25)
    held = set(groups[test])
    assert len(held) == 1 and not (held & set(groups[~test]))
    with pytest.raises(ModelError, match="needs groups"):
        holdout_mask(size, method="group")
    with pytest.raises(ModelError, match="unknown split"):
        holdout_mask(size, method="kfold")
    with pytest.raises(ModelError, match="test fraction"):
        holdout_mask(size, test_fraction=1.0)


def test_cells_are_exact_sizes_or_narrow_log_bins() -> None:
    cell, reps = size_cells(np.repeat([1.0, 8.0, 64.0], 15))
    assert list(reps) == [1.0, 8.0, 64.0]
    unique_sizes = np.geomspace(1, 1e6, 5000)
    cell, reps = size_cells(unique_sizes, cells_per_decade=12)
    assert len(reps) == pytest.approx(6 * 12, abs=2)
    for c in range(len(reps)):
        members = unique_sizes[cell == c]
        assert members.max() / members.min() < 10 ** (1 / 12) + 1e-9


@pytest.fixture(scope="module")
def synthetic_validation() -> dict:
    truth = synth.ethernet_like()
    size, time = synth.sample(truth, 4000, grid=40, seed=3)
    return validate(RegimeModel(), size, time, extra_models={"truth": TruthModel(truth)})


def test_truth_scores_at_the_floor_and_hockney_far_above(synthetic_validation: dict) -> None:
    s = synthetic_validation["summary"]
    # The generating distribution is at least as good as the training samples' own
    # empirical distribution (which carries sampling noise), and not far better.
    assert 0.8 < s["truth"]["crps_over_floor"] < 1.05
    for r in synthetic_validation["ranges"]:
        assert r["truth"]["crps_over_floor"] < 1.15
    # One line through a three-regime, two-band series is much worse.
    assert s["hockney"]["crps"] > 3 * s["truth"]["crps"]
    assert s["hockney"]["median_err"] > 10 * s["truth"]["median_err"]
    # The fitted model sits near the truth; coverage of [p05, p95] near 0.90.
    assert s["model"]["crps_over_floor"] < 1.2
    assert s["model"]["crps"] < 0.5 * s["hockney"]["crps"]
    assert 0.85 < s["model"]["coverage"] < 0.95
    assert 0.85 < s["truth"]["coverage"] < 0.95


class OneSizeAtATime:
    """A model whose ``sample`` takes one size only (n draws, whatever it is given)."""

    def __init__(self, model: object) -> None:
        self.model = model

    def sample(self, size: ArrayLike, n: int = 1, random_state: object = None) -> np.ndarray:
        first = float(np.asarray(size, dtype=float).ravel()[0])
        return self.model.sample(first, n, random_state=random_state)  # type: ignore[attr-defined]

    def predict_quantiles(self, size: ArrayLike, q: ArrayLike) -> np.ndarray:
        return self.model.predict_quantiles(size, q)  # type: ignore[attr-defined]

    def predict(self, size: ArrayLike) -> np.ndarray:
        return self.model.predict(size)  # type: ignore[attr-defined]


@pytest.mark.parametrize("grid", [40, 0])  # exact-size cells; log cells of several sizes
def test_a_models_scores_depend_on_its_draws_alone(grid: int) -> None:
    """Each model draws from a generator of its own, one call for all cells: its scores are
    the same whichever models are scored beside it, and run after run; another seed gives
    other draws. A model that samples one size at a time is asked size by size, and gets
    each cell its own sizes' draws (a line baseline's draws are the same either way: a row
    of uniforms per size, in order)."""
    size, time = synth.sample(synth.ethernet_like(), 3000, grid=grid, seed=5)
    test = holdout_mask(size, random_state=1)
    train = (size[~test], time[~test])
    model = RegimeModel(per_size=True, random_state=0).fit(*train)
    line = HockneyModel().fit(*train)
    held = (size[test], time[test])
    alone = score_models({"model": model}, train, held)["per_size"]["models"]["model"]
    both = score_models({"peak": PeakModel().fit(*train), "model": model, "hockney": line},
                        train, held)["per_size"]["models"]
    assert both["model"] == alone
    again = score_models({"model": model, "hockney": line}, train, held)["per_size"]["models"]
    assert again["model"] == alone and again["hockney"] == both["hockney"]
    one = score_models({"hockney": OneSizeAtATime(line)}, train, held)["per_size"]["models"]
    assert one["hockney"] == both["hockney"]
    other = score_models({"model": model}, train, held, random_state=1)["per_size"]
    assert other["models"]["model"]["crps"] != alone["crps"]


def test_result_is_json_and_tabulates(synthetic_validation: dict) -> None:
    text = json.dumps(synthetic_validation, allow_nan=False)
    assert json.loads(text)["split"]["n_test"] == pytest.approx(0.3 * 4000, rel=0.02)
    table = validation_table(synthetic_validation)
    names = table["model"].to_list()
    assert names[0] == "model" and names[-3:] == ["truth", "lookup", "floor"]
    # Baselines best first (lowest CRPS), each with its label; the raw-sample strawman is out.
    base = names[1:-3]
    assert sorted(base) == ["hockney", "hockney_robust", "peak"]
    crps = [synthetic_validation["summary"][b]["crps"] for b in base]
    assert crps == sorted(crps)
    assert synthetic_validation["best_baseline"] == base[0]
    assert all(w for w in table["what"].to_list())
    row = table.row(0, named=True)
    assert row["crps_over_floor"] == pytest.approx(
        synthetic_validation["summary"]["model"]["crps_over_floor"])


def test_validate_into_is_saved_with_the_model(tmp_path: Path) -> None:
    from kit.model.io import read_model, save_model

    size, time = synth.sample(synth.ethernet_like(), 1500, grid=25, seed=5)
    model = RegimeModel().fit(size, time)
    result = validate_into(model, size, time, random_state=2)
    assert not hasattr(model, "validation_")  # kept beside the model, not on it
    regimes = result["regimes"]
    assert len(regimes) == len(model.regimes_)
    assert sum(r["n_sizes"] for r in regimes) == len(result["per_size"]["size"])
    for r in regimes:
        if r["n_sizes"]:
            assert 0 < r["crps_over_floor"] < r["hockney_crps_over_floor"]
    path = save_model(model, tmp_path / "m.json", validation=result)
    again = read_model(path)
    assert again.validation["summary"]["model"]["crps"] == pytest.approx(
        result["summary"]["model"]["crps"])


def test_too_little_data_is_a_clear_error() -> None:
    with pytest.raises(ModelError, match="usable samples"):
        validate(RegimeModel(), [1.0, 2.0], [1e-6, 2e-6])


def test_cli_validates_a_dataset_series_and_saves_it(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    from kit.cli import main
    from kit.data.ingest import ingest

    truth = synth.ethernet_like()
    for run in range(2):  # two runs of one series: the group split holds one out
        size, time = synth.sample(truth, 1200, grid=25, seed=20 + run)
        csv = tmp_path / f"run{run}.csv"
        pl.DataFrame({"size": size.astype(np.uint64), "duration": time}).write_csv(csv)
        assert not ingest([csv], tmp_path / "ds", campaign="c", transport="tcp").files_failed
    out = tmp_path / "m.json"
    assert main(["validate", str(tmp_path / "ds"), "--split", "group", "--test-fraction", "0.5",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "hockney" in printed and "floor" in printed
    saved = json.loads(out.read_text())
    assert saved["validation"]["split"]["method"] == "group"
    assert saved["validation"]["split"]["n_test"] == 1200
    assert saved["provenance"]["series"]["transport"] == "tcp"
    # A second series makes the selection ambiguous: a one-paragraph error listing both.
    size, time = synth.sample(truth, 300, grid=10, seed=3)
    csv = tmp_path / "shm.csv"
    pl.DataFrame({"size": size.astype(np.uint64), "duration": time}).write_csv(csv)
    ingest([csv], tmp_path / "ds", campaign="c", transport="shm")
    assert main(["validate", str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert "transport=shm" in err and "transport=tcp" in err and "Traceback" not in err


def test_held_out_samples_beyond_the_cap_are_scored_on_a_recorded_subsample(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Above MAX_SCORED_SAMPLES held-out samples, a seeded uniform subsample of them is
    scored (the training split is unchanged): the split says how many, the per-cell counts
    add up to it, and the same seed scores the same samples."""
    import kit.fit.validate as v

    size, time = synth.sample(synth.ethernet_like(), 4000, grid=40, seed=3)
    whole = validate(PeakModel(), size, time, baselines=["peak"])
    assert "n_scored" not in whole["split"]  # under the cap: every held-out sample
    monkeypatch.setattr(v, "MAX_SCORED_SAMPLES", 500)
    capped = validate(PeakModel(), size, time, baselines=["peak"])
    split = capped["split"]
    assert split["n_train"] == whole["split"]["n_train"]
    assert split["n_test"] == whole["split"]["n_test"] > 500 and split["n_scored"] == 500
    assert sum(capped["per_size"]["n_test"]) <= 500
    assert capped == validate(PeakModel(), size, time, baselines=["peak"])
