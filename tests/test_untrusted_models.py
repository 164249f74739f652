"""Model files that pass the schema yet predict what no message can take (issue 53, line 4).

``kit.model.schema.check_physical`` judges whatever the model predicts -- noise ratio
quantiles, every regime's curves on a dense grid, predictive quantiles and draws there and at
the sizes it stores -- against [1 ns, 1 day]. The issue's files (lognormal s=400, constant
a=1e300, lognormal scale 1e30, fisk c=0.1, weibull c=0.02, gmm means +-50, power b=+-16,
per-size loc +-20, a last regime a=1e-300, b=16) are refused by every reader; a property test
draws parameters across their whole schema range and checks that any accepted model predicts
and samples within the bounds on a finer grid than the gate's.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.core.errors import ModelError
from kit.model.io import load_model, model_from_dict, save_model
from kit.model.schema import TIME_MAX_S, TIME_MIN_S
from tests.model_corpus import base_model

ROOT = Path(__file__).resolve().parent.parent
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}
Doc = dict[str, Any]


def _noise(k: int, family: str, params: Doc) -> Callable[[Doc], None]:
    def edit(d: Doc) -> None:
        d["regimes"][k]["noise"].update(family=family, params=params)
    return edit


def _band(params: Doc) -> Callable[[Doc], None]:
    def edit(d: Doc) -> None:
        d["regimes"][2]["mixture"]["components"][0]["noise"]["params"].update(params)
    return edit


def _curve(k: int, params: Doc, bands: bool = False) -> Callable[[Doc], None]:
    def edit(d: Doc) -> None:
        d["regimes"][k]["params"] = dict(params)
        if bands:
            for comp in d["regimes"][k]["mixture"]["components"]:
                comp["params"] = dict(params)
    return edit


#: The issue's files, built from the corpus' valid base model.
ABSURD = {
    "lognormal-s400": _noise(0, "lognormal", {"s": 400.0, "scale": 1.0}),
    "constant-a1e300": _curve(0, {"a": 1e300}),
    "lognormal-scale1e30": _noise(0, "lognormal", {"s": 0.1, "scale": 1e30}),
    "fisk-c0.1": _noise(1, "fisk", {"c": 0.1, "scale": 1.0}),
    "weibull-c0.02": _noise(1, "weibull", {"c": 0.02, "scale": 1.0}),
    "gmm-means-50-50": _band({"means": [-50.0, 50.0]}),
    "power-b16": _curve(2, {"a": 1.2e-9, "b": 16.0}),
    "power-b-16": _curve(2, {"a": 1.2e-9, "b": -16.0}),
    "last-regime-a1e-300-b16": _curve(2, {"a": 1e-300, "b": 16.0}, bands=True),
}


def _doc(edit: Callable[[Doc], None]) -> Doc:
    doc = base_model()
    edit(doc)
    return doc


@pytest.mark.parametrize("name", sorted(ABSURD))
def test_absurd_model_is_refused_by_the_reader(name: str) -> None:
    with pytest.raises(ModelError, match="not physical") as info:
        model_from_dict(_doc(ABSURD[name]), name)
    assert name in info.value.paragraph() and "Traceback" not in info.value.paragraph()


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Doc:
    """A real fit with a per-size layer (sizes repeated, each with its own true effect: the
    layer stores only sizes that differ from their regime beyond the noise), as its JSON."""
    from kit.fit import synth
    from kit.model import RegimeModel

    truth = synth.Truth([synth.TrueRegime(1, "linear", {"a": 5e-6, "b": 1e-9},
                                          synth.TrueNoise("lognormal", 0.1))])
    size, t = synth.sample(truth, 3000, 1, 2**20, grid=40, seed=5)
    grid, where = np.unique(size, return_inverse=True)
    t = t * np.exp(np.random.default_rng(5).normal(0, 0.3, len(grid)))[where]
    path = save_model(RegimeModel(random_state=0).fit(size, t),
                      tmp_path_factory.mktemp("persize") / "m.json")
    doc = json.loads(path.read_text())
    assert doc["per_size"] and len(doc["per_size"]["sizes"]) >= 20
    return doc


@pytest.mark.parametrize("shift", [20.0, -20.0])
def test_per_size_shift_of_e20_is_refused(fitted: Doc, shift: float) -> None:
    """One stored size moved by e^+-20 (format 2: every level its knots mark, in shape_unit)."""
    doc = copy.deepcopy(fitted)
    ps = doc["per_size"]
    start = sum(int(k).bit_count() for k in ps["knots"][:7])
    for i in range(start, start + int(ps["knots"][7]).bit_count()):
        ps["shape"][i] = round(shift / ps["shape_unit"])
    with pytest.raises(ModelError, match="not physical"):
        model_from_dict(doc, "persize")


def _verdict(doc: Doc) -> str:
    try:
        model_from_dict(copy.deepcopy(doc), "persize")
    except ModelError as exc:
        return exc.paragraph()
    return "accepted"


def test_stored_sizes_are_judged_as_their_exact_cdf_would(fitted: Doc,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The read check clears stored sizes by bounds on their CDF (RegimeModel.cdf_bounds)
    and computes the exact CDF only where the bounds do not decide: tampered shifts on
    both sides of every limit (1 ns, 1 day, 10^6 times the curve) get the verdict, and the
    message, that the exact CDF at every stored size gives."""
    from kit.model.estimator import RegimeModel

    docs = []
    for k, shift in enumerate([-12.0, -9.0, -7.8, -7.7, 0.5, 9.0, 12.2, 12.42, 12.5, 19.0]):
        doc = copy.deepcopy(fitted)
        ps = doc["per_size"]
        row = 3 + k % 5
        start = sum(int(m).bit_count() for m in ps["knots"][:row])
        bits = int(ps["knots"][row]).bit_count()
        for i in range(start, start + bits):  # the row's levels, rising by up to 0.5
            ps["shape"][i] = round((shift + 0.5 * (i - start) / bits) / ps["shape_unit"])
        docs.append(doc)
    fast = [_verdict(d) for d in docs]
    monkeypatch.delattr(RegimeModel, "cdf_bounds")
    assert fast == [_verdict(d) for d in docs]
    assert "accepted" in fast and any("not physical" in v for v in fast), fast


def test_a_real_fit_is_accepted(fitted: Doc) -> None:
    model = model_from_dict(copy.deepcopy(fitted), "fit")
    q = model.predict_quantiles(np.geomspace(1, 2**20, 50), [0.001, 0.999])
    assert np.all((q > TIME_MIN_S) & (q < TIME_MAX_S))


@pytest.mark.parametrize("name", ["lognormal-s400", "last-regime-a1e-300-b16"])
def test_export_refuses_in_a_second_or_two_and_writes_nothing(name: str,
                                                               tmp_path: Path) -> None:
    """`export` of the file that took 34 s to refuse, and of the one whose NaN reached
    simgrid-noise.tsv: exit 2, one paragraph, nothing written."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(_doc(ABSURD[name])))
    out = tmp_path / "out"
    started = time.process_time()
    res = subprocess.run([sys.executable, "-m", "kit", "export", str(path), "--simgrid", "-o",
                          str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "not physical" in " ".join(res.stderr.split()) and "Traceback" not in res.stderr
    assert not out.exists()
    assert time.process_time() - started < 60  # a guard against the old 34 s, not a claim


def test_the_gate_itself_is_cheap() -> None:
    """Refusing takes microseconds of work once the engine is loaded: the noise gate needs no
    prediction (measured as the count of predict calls, not as time)."""
    from kit.model import estimator

    calls = {"n": 0}
    real = estimator.RegimeModel.predict_quantiles

    def counting(self: Any, *args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        return real(self, *args, **kw)

    estimator.RegimeModel.predict_quantiles = counting  # type: ignore[method-assign]
    try:
        for name in ("lognormal-s400", "fisk-c0.1", "weibull-c0.02", "gmm-means-50-50",
                     "constant-a1e300", "power-b16"):
            with pytest.raises(ModelError):
                model_from_dict(_doc(ABSURD[name]), name)
    finally:
        estimator.RegimeModel.predict_quantiles = real  # type: ignore[method-assign]
    assert calls["n"] == 0


# ------------------------------------------------------------------ property test

_POS = st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False)
_NOISES = {
    "lognormal": st.fixed_dictionaries({"s": _POS, "scale": _POS}),
    "gamma": st.fixed_dictionaries({"a": _POS, "scale": _POS}),
    "weibull": st.fixed_dictionaries({"c": _POS, "scale": _POS}),
    "invgauss": st.fixed_dictionaries({"mu": _POS, "scale": _POS}),
    "fisk": st.fixed_dictionaries({"c": _POS, "scale": _POS}),
}


@st.composite
def _mutated(draw: st.DrawFn) -> Doc:
    doc = base_model()
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, 2))
        what = draw(st.sampled_from(["noise", "curve", "band"]))
        if what == "noise":
            family = draw(st.sampled_from(sorted(_NOISES)))
            doc["regimes"][k]["noise"].update(family=family, params=draw(_NOISES[family]))
        elif what == "curve":
            family = doc["regimes"][k]["family"]
            params = {"a": draw(_POS)}
            if family != "constant":
                params["b"] = draw(st.floats(-16, 16) if family == "power"
                                   else st.floats(0, 1e300))
            doc["regimes"][k]["params"] = params
        else:
            means = draw(st.lists(st.floats(-50, 50), min_size=2, max_size=2))
            sds = draw(st.lists(st.floats(1e-6, 50), min_size=2, max_size=2))
            doc["regimes"][2]["mixture"]["components"][0]["noise"]["params"].update(
                means=means, sds=sds)
    return doc


@settings(max_examples=300 if CI else 60, **SETTINGS)
@given(_mutated())
def test_an_accepted_model_is_physical_everywhere(doc: Doc) -> None:
    """Refused, or on a grid three times finer than the gate's (and off its points), every
    predicted quantile and draw is finite and within [1 ns, 1 day]."""
    try:
        model = model_from_dict(doc, "fuzz")
    except ModelError as err:
        assert "fuzz" in err.paragraph()
        return
    sizes = np.geomspace(1.3, 1048576.0 * 0.97, 300)
    with np.errstate(all="ignore"):
        q = model.predict_quantiles(sizes, [0.01, 0.5, 0.99])
        draws = model.sample(sizes, 4, random_state=7)
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(draws))
    assert np.all((q >= TIME_MIN_S) & (q <= TIME_MAX_S))
    assert np.all(draws > 0)


def test_a_saved_model_reads_back_through_the_gate(tmp_path: Path, fitted: Doc) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(fitted))
    assert load_model(path).regimes_


# ------------------------------------------------------------------ line 10: FIFOs

@pytest.mark.parametrize("argv", [["predict", "FIFO", "--sizes", "1"],
                                  ["export", "FIFO", "--simgrid", "-o", "OUT"],
                                  ["validate", "FIFO"],
                                  ["predict", "MODEL", "--sizes-file", "FIFO"],
                                  ["sample", "MODEL", "--sizes-file", "FIFO"]])
def test_a_fifo_is_refused_without_blocking(argv: list[str], tmp_path: Path) -> None:
    fifo = tmp_path / "m.json"
    os.mkfifo(fifo)
    model = tmp_path / "good.json"
    model.write_text(json.dumps(base_model()))
    names = {"FIFO": str(fifo), "MODEL": str(model), "OUT": str(tmp_path / "out")}
    res = subprocess.run([sys.executable, "-m", "kit", *[names.get(a, a) for a in argv]],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "named pipe" in res.stderr and "Traceback" not in res.stderr


def test_the_tui_reports_a_fifo_model_instead_of_hanging(tmp_path: Path) -> None:
    from tui.modelfiles import load_models

    fifo = tmp_path / "m.json"
    os.mkfifo(fifo)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(base_model()))
    loaded, errors = load_models([fifo, good])
    assert len(loaded) == 1 and len(errors) == 1 and "named pipe" in errors[0].paragraph()


def test_the_reader_names_the_noise_and_its_ratios() -> None:
    with pytest.raises(ModelError) as info:
        model_from_dict(_doc(ABSURD["weibull-c0.02"]), "w.json")
    text = " ".join(info.value.paragraph().split())
    assert "w.json" in text and "has a weibull noise whose p0.1, median and p99.9 are" in text
    assert "times its curve (at most 1e+06 either way)" in text and "regime 1" in text


def test_the_fitter_keeps_only_noise_families_the_reader_accepts() -> None:
    """One rule (kit.model.schema.noise_ratios) for both: a candidate the reader would
    refuse (Weibull c=0.02: p0.1 at ~1e-150 of its median) is dropped, whatever its AIC,
    unless no candidate is physical; an unanchored scale does not matter to the fitter."""
    from kit.model.noise import Noise, _physical
    from kit.model.schema import noise_ratios

    absurd, sane = {"c": 0.02, "scale": 1.0}, {"s": 0.5, "scale": 1e9}
    assert not noise_ratios(Noise("weibull", absurd))[1]
    assert not noise_ratios(Noise("lognormal", sane))[1]  # 1e9 times its curve
    assert noise_ratios(Noise("lognormal", sane), anchored=True)[1]
    fits = {"weibull": (-1e9, absurd), "lognormal": (0.0, sane)}
    assert list(_physical(fits)) == ["lognormal"]
    assert _physical({"weibull": fits["weibull"]}) == {"weibull": fits["weibull"]}
