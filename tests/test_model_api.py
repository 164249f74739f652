"""RegimeModel's estimator contract, model files and degenerate inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from kit.core.errors import ModelError
from kit.fit import synth as S
from kit.model import RegimeModel
from kit.model.io import (
    FORMAT_VERSION,
    dumps,
    load_model,
    read_model,
    save_model,
    write_model,
)

TRUTH = S.Truth([
    S.TrueRegime(1, "constant", {"a": 20e-6}, S.TrueNoise("lognormal", 0.1)),
    S.TrueRegime(65537, "linear", {"a": 80e-6, "b": 1 / 1.2e9}, S.TrueNoise("gamma", 0.1)),
])


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return S.sample(TRUTH, 4000, grid=80, seed=7)


@pytest.fixture(scope="module")
def fitted(data) -> RegimeModel:
    return RegimeModel().fit(*data)


def test_sklearn_contract(fitted):
    params = RegimeModel(max_regimes=3, breakpoints=[100.0]).get_params()
    assert params["max_regimes"] == 3 and params["breakpoints"] == [100.0]
    copy = clone(fitted)
    assert not hasattr(copy, "regimes_") and copy.get_params() == fitted.get_params()
    assert copy.set_params(overlap=False).overlap is False
    with pytest.raises(ModelError, match="not fitted"):
        copy.predict([1])


def test_predictions_shapes_and_order(fitted):
    sizes = np.array([0, 1, 1024, 65536, 70000, 1e6, 4e6])
    med = fitted.predict(sizes)
    q = fitted.predict_quantiles(sizes, [0.05, 0.5, 0.95])
    assert med.shape == (7,) and q.shape == (7, 3)
    assert np.all(np.diff(q, axis=1) > 0)
    np.testing.assert_allclose(q[:, 1], med)
    draws = fitted.sample(sizes, 5, random_state=1)
    assert draws.shape == (7, 5) and np.all(draws > 0)
    np.testing.assert_array_equal(draws, fitted.sample(sizes, 5, random_state=1))
    assert fitted.regime_index([10, 1e6]).tolist() == [0, 1]
    cdf = fitted.cdf([10, 10], [fitted.predict([10])[0], 1.0])
    assert abs(cdf[0] - 0.5) < 1e-3 and cdf[1] == pytest.approx(1.0)
    with pytest.raises(ModelError, match="between 0 and 1"):
        fitted.predict_quantiles([1], [1.5])
    with pytest.raises(ModelError):
        fitted.predict([-1])


def test_save_load_round_trip_exact(fitted, tmp_path):
    validation = {"crps": {"model": 0.1}}
    prov = {"dataset": "d", "series": {"op": "x"}}
    path = save_model(fitted, tmp_path / "m.json", provenance=prov, validation=validation)
    doc = json.loads(path.read_text())
    assert doc["format"] == "pt2pt-model" and doc["format_version"] == FORMAT_VERSION == 2
    assert doc["provenance"]["dataset"] == "d" and doc["provenance"]["kit_version"]
    assert doc["validation"] == {"crps": {"model": 0.1}}
    first = doc["regimes"][0]
    assert {"size_min", "size_max", "family", "params", "noise"} <= set(first)
    assert [r["size_min"] for r in doc["regimes"]] == sorted(r["size_min"] for r in doc["regimes"])
    mf = read_model(path)
    loaded = mf.model
    assert dumps(loaded, mf.provenance, mf.validation) == path.read_text()
    assert write_model(mf, tmp_path / "again.json").read_text() == path.read_text()
    sizes = np.geomspace(1, 2**21, 50)
    np.testing.assert_array_equal(loaded.predict(sizes), fitted.predict(sizes))
    np.testing.assert_array_equal(loaded.sample(sizes, 3, random_state=4),
                                  fitted.sample(sizes, 3, random_state=4))
    assert mf.validation == validation and mf.provenance["dataset"] == "d"
    # The contract: validation and provenance live beside the estimator, never on it.
    assert not hasattr(loaded, "validation_") and not hasattr(loaded, "provenance_")


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="line 1"):
        load_model(bad)
    bad.write_text('{"format": "other"}')
    with pytest.raises(ModelError, match="not a pt2pt model"):
        load_model(bad)
    bad.write_text('{"format": "pt2pt-model", "format_version": 1, "regimes": [{}]}')
    with pytest.raises(ModelError, match="malformed"):
        load_model(bad)
    with pytest.raises(ModelError, match="cannot read"):
        load_model(tmp_path / "missing.json")


def test_fixed_breakpoints_and_families(data):
    model = RegimeModel(breakpoints=[4096, 65537], families=["constant", None, "linear"])
    model.fit(*data)
    assert model.breakpoints_ == [4096.0, 65537.0]
    assert [r.family for r in model.regimes_][::2] == ["constant", "linear"]
    fixed_k = RegimeModel(families=["constant", "linear"], overlap=False).fit(*data)
    assert len(fixed_k.regimes_) == 2
    assert abs(fixed_k.breakpoints_[0] / 65537 - 1) < 0.3


@pytest.mark.parametrize(("size", "time", "match"), [
    ([], [], "only 0 samples"),
    ([1, 2, 3, 4, 5, 6], [1e-6, np.nan, 1e-6, 1e-6, 1e-6, 1e-6], "1 of 6 times"),
    ([1, 2, 3, 4, 5, 6], [1e-6, -1e-6, 1e-6, 1e-6, 1e-6, 1e-6], "negative"),
    ([1, 2, -3, 4, 5, 6], [1e-6] * 6, ">= 0"),
    ([1, 2, 3], [1e-6] * 4, "differ in length"),
])
def test_bad_inputs_raise_model_error(size, time, match):
    with pytest.raises(ModelError, match=match):
        RegimeModel().fit(size, time)


def test_too_few_samples_for_requested_regimes(data):
    s, t = data
    with pytest.raises(ModelError, match="minimum support"):
        RegimeModel(breakpoints=[2, 65537], min_support=200).fit(s, t)
    with pytest.raises(ModelError, match="cannot split"):
        RegimeModel(families=[None] * 6, min_support=1000).fit(s, t)
    with pytest.raises(ModelError, match="unknown family"):
        RegimeModel(families=["cubic"]).fit(s, t)


def test_degenerate_single_size_gives_constant_model():
    rng = np.random.default_rng(0)
    t = 1e-5 * rng.lognormal(0, 0.05, 200)
    model = RegimeModel().fit(np.full(200, 1024), t)
    assert len(model.regimes_) == 1 and model.regimes_[0].family == "constant"
    assert abs(model.predict([1024])[0] / np.median(t) - 1) < 0.02
    # Identical times: a near-degenerate lognormal keeps sampling defined.
    flat = RegimeModel().fit([8, 8, 8, 8, 8, 8], [2e-6] * 6)
    assert np.allclose(flat.sample([8], 3, random_state=0), 2e-6, rtol=1e-4)


@settings(max_examples=15, deadline=None)
@given(n_sizes=st.integers(1, 40), reps=st.integers(1, 8), jump=st.floats(0.5, 5.0),
       spread=st.floats(0.0, 0.5), seed=st.integers(0, 2**16))
def test_any_positive_input_fits_or_fails_cleanly(n_sizes, reps, jump, spread, seed):
    """Arbitrary small series: a model with ordered positive quantiles, or a ModelError."""
    rng = np.random.default_rng(seed)
    sizes = np.repeat(np.unique(rng.integers(0, 2**20, n_sizes)), reps)
    base = np.where(sizes < 4096, 2e-6, 2e-6 * jump) + sizes / 1e9
    times = base * rng.lognormal(0.0, spread, len(sizes))
    try:
        model = RegimeModel().fit(sizes, times)
    except ModelError as err:
        assert "samples" in str(err)
        return
    q = model.predict_quantiles(sizes, [0.05, 0.5, 0.95])
    assert np.all(np.isfinite(q)) and np.all(q > 0)
    assert np.all(np.diff(q, axis=1) >= 0)
    assert np.all(model.sample(sizes[:3], 2, random_state=0) > 0)


@pytest.fixture(scope="module")
def sized() -> RegimeModel:
    """A fit whose sizes differ beyond their noise (each its own median, x1.2 apart), so
    that the per-size layer stores them."""
    rng = np.random.default_rng(3)
    grid = np.unique(np.round(np.geomspace(1, 2**21, 60)))
    s = np.repeat(grid, 40)
    t = TRUTH.median(s) * np.repeat(rng.lognormal(0, 0.2, len(grid)), 40) * rng.lognormal(
        0, 0.05, len(s))
    return RegimeModel().fit(s, t)


def test_per_size_columns_are_a_line_each_and_round_trip(sized, tmp_path):
    """A per-size column is written on one line (10^4 values at 1 M log-uniform samples),
    the rest indented; the file reads back to the same bytes, even when a provenance string
    looks like the placeholder the writer uses for a column."""
    assert sized.per_size_ is not None and sized.per_size_.estimated
    prov = {"campaign": "pt2pt-column-shape-0", "note": '"pt2pt-column-sizes-x"'}
    path = save_model(sized, tmp_path / "m.json", provenance=prov)
    text = path.read_text()
    doc = json.loads(text)
    assert doc["provenance"]["campaign"] == "pt2pt-column-shape-0"
    assert doc["provenance"]["note"] == '"pt2pt-column-sizes-x"'
    ps = doc["per_size"]
    assert len(ps["sizes"]) == len(sized.per_size_.sizes) > 10
    for key in ("sizes", "n", "knots", "shape"):
        line = next(ln for ln in text.splitlines() if ln.lstrip().startswith(f'"{key}": ['))
        assert json.loads(line.split(": ", 1)[1].rstrip(",")) == ps[key], key
    assert '"estimated": true' in text and '\n  "estimated": true' in text  # still indented
    mf = read_model(path)
    assert write_model(mf, tmp_path / "again.json").read_text() == text
    np.testing.assert_array_equal(mf.model.per_size_.shape, sized.per_size_.shape)
    sizes = np.r_[sized.per_size_.sizes, sized.per_size_.sizes * 1.01]
    np.testing.assert_array_equal(mf.model.predict_quantiles(sizes, [0.01, 0.5, 0.99]),
                                  sized.predict_quantiles(sizes, [0.01, 0.5, 0.99]))


def test_a_smooth_truth_stores_no_size(fitted):
    """Sizes that differ from their regime only by sampling noise are not stored: the file
    is sized by what the data say, not by how many sizes were measured."""
    ps = fitted.per_size_
    assert ps is not None and ps.estimated and len(ps.sizes) <= 2, ps.sizes


def test_round_trip_with_uncomputable_aic(fitted):
    """JSON has no infinity: an AIC that could not be computed survives as null."""
    from kit.model.io import model_from_dict

    model = clone(fitted).fit(*S.sample(TRUTH, 600, grid=20, seed=9))
    model.regimes_[0].aic["linear"] = float("inf")
    model.regimes_[0].noise.aic["fisk"] = float("inf")
    text = dumps(model)
    assert json.loads(text)["regimes"][0]["aic"]["linear"] is None
    again = model_from_dict(json.loads(text))
    assert dumps(again) == text and again.regimes_[0].aic["linear"] == float("inf")


def test_max_regimes_caps_the_final_count():
    s, t = S.sample(S.ethernet_like(), 6000, seed=2)
    for cap in (1, 2):
        model = RegimeModel(max_regimes=cap).fit(s, t)
        assert len(model.regimes_) == cap


def test_quantiles_invert_the_cdf_of_a_band_mixture():
    """Where bands overlap a quantile is found by root finding on the mixture CDF: the CDF
    at the returned quantile is the level asked for, at unseen sizes and across levels from
    1e-6 to 1 - 1e-6, and quantiles never decrease with the level."""
    truth = S.ethernet_like()
    s, t = S.sample(truth, 20000, lo=1, hi=2**22, seed=4)
    model = RegimeModel(per_size=False).fit(s, t)
    assert any(r.is_mixture for r in model.regimes_)
    sizes = np.exp(np.linspace(0, np.log(2**22), 301)) + 0.5  # between stored sizes
    levels = np.array([1e-6, 0.01, 0.05, 0.3, 0.5, 0.7, 0.95, 0.99, 1 - 1e-6])
    q = model.predict_quantiles(sizes, levels)
    assert np.all(np.diff(q, axis=1) > 0)
    assert np.allclose(model.cdf(sizes, q), levels[None, :], rtol=0, atol=1e-7)


def _two_bands(gap: float, n: int = 400) -> list:
    from kit.model.noise import Noise

    share = np.linspace(0.05, 0.95, n)
    fast = Noise("gamma", {"a": 900.0, "scale": 1 / 900.0})  # CV 3 %
    slow = Noise("gmm", {"weights": [0.7, 0.3], "means": [0.0, 0.08], "sds": [0.02, 0.05]})
    scale = 1e-5 * np.geomspace(1, 50, n)
    return [(1 - share, scale, fast), (share, scale * np.exp(gap), slow)]


@pytest.mark.parametrize("gap", [1.4, 0.05, 0.0])
def test_mixture_quantiles_solve_the_cdf_and_start_at_the_bands_masses(monkeypatch, gap):
    """Between two bands an ln unit apart (a fast and a slow band of a few percent each),
    a mixture quantile is within ~1e-7 of the one its band's mass puts it at: the solver
    starts there and settles each (size, level) in two CDF evaluations, without a bracket
    (it took 8.4 from the bracket's interpolation, bracket ends included). Overlapping and
    coinciding bands still give the root of the CDF."""
    import kit.model.predictive as P

    tlist = _two_bands(gap)
    levels = np.array([0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98])
    calls = []
    real = P._cdf_and_slope

    def counted(*args, **kw):
        calls.append(len(args[1]))
        return real(*args, **kw)

    monkeypatch.setattr(P, "_cdf_and_slope", counted)
    q = P.quantiles(tlist, len(tlist[0][0]), levels)
    if gap > 1:
        assert sum(calls) <= 2.05 * q.size
    monkeypatch.undo()
    assert np.all(np.diff(q, axis=1) >= 0)
    at = P.cdf(tlist, q)
    assert np.max(np.abs(at - levels[None, :])) < 1e-10
