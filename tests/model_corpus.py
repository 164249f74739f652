"""Malformed model files, generated: the corpus behind the model-file hardening tests.

``base_model()`` is a small valid model exercising every branch of the format (an overlap,
a two-band mixture, GMM noise). ``malformed()`` derives from it the files issue 13 listed
(not UTF-8, deep nesting, ``regimes: [null]``, ``noise: null``, ``1e400``, an unknown noise
family, empty parameters, a non-integer ``format_version``, 12,000 regimes, negative or NaN
predictions, ``size_min > size_max``, reversed regimes, negative noise scales) and more; every
one must be refused with a ModelError. ``accepted()`` are unusual files that must still load
(unknown keys from newer writers).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]


def _noise(family: str, params: dict[str, Any]) -> Doc:
    return {"family": family, "params": params, "aic": {family: -100.0, "gmm": None},
            "quantiles": {"p50": {"fitted": 1.0, "empirical": 1.0}}, "n": 100}


def base_model() -> Doc:
    """Three regimes: constant (+overlap), linear, a two-band power mixture with GMM noise."""
    return {
        "format": "pt2pt-model", "format_version": 1, "kit_version": "0.1.0",
        "estimator": {"breakpoints": None, "families": None, "max_regimes": 6,
                      "min_support": None, "mixture": True, "noise": True, "outlier_k": 6.0,
                      "overlap": True, "random_state": 0},
        "regimes": [
            {"size_min": 1.0, "size_max": 1024.0, "family": "constant", "params": {"a": 2e-5},
             "noise": _noise("lognormal", {"s": 0.1, "scale": 1.0}), "mixture": None,
             "overlap": {"size_lo": 800.0, "size_hi": 1300.0, "center": 1024.0, "slope": 8.0,
                         "share_left": 0.6, "share_right": 0.4, "n_samples": 50},
             "n_samples": 1000, "n_outliers": 0, "aic": {"constant": -10.0, "power": None}},
            {"size_min": 1024.0, "size_max": 65536.0, "family": "linear",
             "params": {"a": 3e-5, "b": 2e-9}, "noise": _noise("gamma", {"a": 100.0,
                                                                          "scale": 0.01}),
             "mixture": None, "overlap": None, "n_samples": 1000, "n_outliers": 1, "aic": {}},
            {"size_min": 65536.0, "size_max": 1048576.0, "family": "power",
             "params": {"a": 1.2e-9, "b": 1.0}, "noise": _noise("weibull", {"c": 12.0,
                                                                            "scale": 1.0}),
             "mixture": {"components": [
                 {"family": "power", "params": {"a": 1e-9, "b": 1.0}, "share": 0.7,
                  "noise": _noise("gmm", {"weights": [0.5, 0.5], "means": [-0.05, 0.05],
                                          "sds": [0.05, 0.05]})},
                 {"family": "power", "params": {"a": 1.6e-9, "b": 1.0}, "share": 0.3,
                  "noise": _noise("invgauss", {"mu": 0.01, "scale": 100.0})}],
                 "weight": {"intercept": -1.0, "slope": 0.0}},
             "overlap": None, "n_samples": 1000, "n_outliers": 2, "aic": {}},
        ],
        "breakpoints": [1024.0, 65536.0],
        "outliers": {"count": 3, "rule": "robust", "by_regime": [0, 1, 2]},
        "n_samples": 3000,
        "provenance": {"kit_version": "0.1.0", "series": {"transport": "tcp"}},
        "validation": {},
    }


def _edit(fn: Callable[[Doc], Any]) -> bytes:
    doc = base_model()
    fn(doc)
    return json.dumps(doc).encode()


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    """Setter for a dotted path (``regimes.0.noise.params.scale``)."""
    def fn(doc: Doc) -> None:
        *head, last = path.split(".")
        obj: Any = doc
        for key in head:
            obj = obj[int(key)] if isinstance(obj, list) else obj[key]
        if isinstance(obj, list):
            obj[int(last)] = value
        else:
            obj[last] = value
    return fn


def _drop(path: str) -> Callable[[Doc], None]:
    def fn(doc: Doc) -> None:
        *head, last = path.split(".")
        obj: Any = doc
        for key in head:
            obj = obj[int(key)] if isinstance(obj, list) else obj[key]
        del obj[last]
    return fn


def _raw_replace(old: str, new: str) -> bytes:
    text = json.dumps(base_model())
    assert old in text, old
    return text.replace(old, new, 1).encode()


def _many_regimes(n: int) -> Callable[[Doc], None]:
    def fn(doc: Doc) -> None:
        reg = doc["regimes"][1]
        doc["regimes"] = []
        for k in range(n):
            r = copy.deepcopy(reg)
            r["size_min"], r["size_max"] = float(k + 1), float(k + 2)
            doc["regimes"].append(r)
        doc["breakpoints"] = [float(k + 2) for k in range(n - 1)]
    return fn


def _swap_regimes(doc: Doc) -> None:
    doc["regimes"][0], doc["regimes"][1] = doc["regimes"][1], doc["regimes"][0]


def _nested(depth: int, key: str) -> Callable[[Doc], None]:
    def fn(doc: Doc) -> None:
        obj: Any = "leaf"
        for _ in range(depth):
            obj = {"x": obj}
        doc[key] = obj
    return fn


def malformed() -> list[tuple[str, bytes]]:
    """(name, file bytes) of files every reader must refuse with a ModelError."""
    good = json.dumps(base_model())
    cases: list[tuple[str, bytes]] = [
        ("not-utf8", b"\xff\xfe" + good.encode()),
        ("latin1-in-string", good.replace('"robust"', '"caf\u00e9"').encode("latin-1")),
        ("deep-list-100k", b"[" * 100_000 + b"]" * 100_000),
        ("deep-dict-50k", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
        ("deep-provenance-200", _edit(_nested(200, "provenance"))),
        ("deep-unknown-key-500", _edit(_nested(500, "per_size"))),
        ("regimes-null-item", _edit(_set("regimes", [None]))),
        ("regimes-empty", _edit(_set("regimes", []))),
        ("regimes-null", _edit(_set("regimes", None))),
        ("regimes-string", _edit(_set("regimes", "abc"))),
        ("regimes-object", _edit(_set("regimes", {}))),
        ("regime-is-list", _edit(_set("regimes.0", [1, 2]))),
        ("noise-null", _edit(_set("regimes.0.noise", None))),
        ("noise-empty", _edit(_set("regimes.0.noise", {}))),
        ("noise-unknown-family", _edit(_set("regimes.0.noise.family", "cauchy"))),
        ("noise-family-null", _edit(_set("regimes.1.noise.family", None))),
        ("noise-params-empty", _edit(_set("regimes.0.noise.params", {}))),
        ("noise-params-list", _edit(_set("regimes.0.noise.params", [0.1, 1.0]))),
        ("noise-missing-scale", _edit(_drop("regimes.0.noise.params.scale"))),
        ("noise-scale-negative", _edit(_set("regimes.0.noise.params.scale", -1.0))),
        ("noise-scale-zero", _edit(_set("regimes.1.noise.params.scale", 0.0))),
        ("lognormal-s-negative", _edit(_set("regimes.0.noise.params.s", -0.5))),
        ("gamma-a-negative", _edit(_set("regimes.1.noise.params.a", -3.0))),
        ("noise-param-string", _edit(_set("regimes.0.noise.params.s", "0.1"))),
        ("noise-param-bool", _edit(_set("regimes.0.noise.params.s", True))),
        ("weibull-c-tiny", _edit(_set("regimes.1.noise", _noise("weibull", {"c": 1e-300,
                                                                           "scale": 1.0})))),
        ("fisk-c-tiny", _edit(_set("regimes.1.noise", _noise("fisk", {"c": 1e-3,
                                                                     "scale": 1.0})))),
        ("gmm-weights-sum", _edit(_set("regimes.2.mixture.components.0.noise.params.weights",
                                       [0.5, 0.7]))),
        ("gmm-lengths-differ", _edit(_set("regimes.2.mixture.components.0.noise.params.means",
                                          [0.0]))),
        ("gmm-sds-negative", _edit(_set("regimes.2.mixture.components.0.noise.params.sds",
                                        [0.05, -0.05]))),
        ("gmm-empty", _edit(_set("regimes.2.mixture.components.0.noise.params",
                                 {"weights": [], "means": [], "sds": []}))),
        ("param-1e400", _raw_replace('"a": 2e-05', '"a": 1e400')),
        ("param-minus-1e400", _raw_replace('"a": 2e-05', '"a": -1e400')),
        ("size-1e400", _raw_replace('"size_max": 1048576.0', '"size_max": 1e400')),
        ("nan-token", _raw_replace('"a": 2e-05', '"a": NaN')),
        ("infinity-token", _raw_replace('"s": 0.1', '"s": Infinity')),
        ("int-10e400", _raw_replace('"n_samples": 3000', '"n_samples": 1' + "0" * 400)),
        ("int-5000-digits", _raw_replace('"n_samples": 3000', '"n_samples": 1' + "0" * 5000)),
        ("format-version-string", _edit(_set("format_version", "1"))),
        ("format-version-float", _edit(_set("format_version", 1.5))),
        ("format-version-null", _edit(_set("format_version", None))),
        ("format-version-newer", _edit(_set("format_version", 99))),
        ("format-version-list", _edit(_set("format_version", [1]))),
        ("format-missing", _edit(_drop("format"))),
        ("format-wrong", _edit(_set("format", "other-model"))),
        ("top-level-list", b"[1, 2, 3]"),
        ("top-level-string", b'"pt2pt-model"'),
        ("top-level-number", b"42"),
        ("empty-file", b""),
        ("truncated-json", good[: len(good) // 2].encode()),
        ("regimes-12000", _edit(_many_regimes(12_000))),
        ("regimes-65", _edit(_many_regimes(65))),
        ("constant-negative", _edit(_set("regimes.0.params.a", -2e-5))),
        ("constant-zero", _edit(_set("regimes.0.params.a", 0.0))),
        ("linear-b-negative", _edit(_set("regimes.1.params.b", -1e-6))),
        ("linear-both-zero", _edit(lambda d: d["regimes"][1].update(params={"a": 0.0,
                                                                            "b": 0.0}))),
        ("param-null-nan", _edit(_set("regimes.0.params.a", None))),
        ("params-empty", _edit(_set("regimes.0.params", {}))),
        ("params-missing", _edit(_drop("regimes.1.params"))),
        ("power-b-huge", _edit(_set("regimes.2.params.b", 1000.0))),
        ("power-a-negative", _edit(_set("regimes.2.mixture.components.1.params.a", -1e-9))),
        ("regime-family-unknown", _edit(_set("regimes.0.family", "cubic"))),
        ("regime-family-null", _edit(_set("regimes.0.family", None))),
        ("size-min-above-max", _edit(lambda d: d["regimes"][1].update(size_min=70000.0))),
        ("size-min-negative", _edit(_set("regimes.0.size_min", -5.0))),
        ("size-string", _edit(_set("regimes.0.size_max", "1024"))),
        ("regimes-reversed", _edit(lambda d: d["regimes"].reverse())),
        ("regimes-swapped", _edit(_swap_regimes)),
        ("regimes-overlap", _edit(_set("regimes.1.size_min", 500.0))),
        ("breakpoints-count", _edit(_set("breakpoints", [1024.0]))),
        ("breakpoints-decreasing", _edit(_set("breakpoints", [65536.0, 1024.0]))),
        ("breakpoints-null", _edit(_set("breakpoints", None))),
        ("breakpoint-outside", _edit(_set("breakpoints", [1024.0, 1e9]))),
        ("breakpoint-negative", _edit(_set("breakpoints", [-1.0, 65536.0]))),
        ("outliers-missing", _edit(_drop("outliers"))),
        ("outliers-count-string", _edit(_set("outliers.count", "x"))),
        ("outliers-null", _edit(_set("outliers", None))),
        ("n-samples-negative", _edit(_set("n_samples", -1))),
        ("estimator-string", _edit(_set("estimator", "RegimeModel()"))),
        ("estimator-max-regimes-string", _edit(_set("estimator.max_regimes", "six"))),
        ("mixture-one-component", _edit(lambda d: d["regimes"][2]["mixture"]["components"]
                                        .pop())),
        ("mixture-components-null", _edit(_set("regimes.2.mixture.components", None))),
        ("mixture-share-2", _edit(_set("regimes.2.mixture.components.0.share", 2.0))),
        ("mixture-weight-missing", _edit(_drop("regimes.2.mixture.weight"))),
        ("mixture-weight-string", _edit(_set("regimes.2.mixture.weight.slope", "steep"))),
        ("overlap-reversed", _edit(lambda d: d["regimes"][0]["overlap"].update(
            size_lo=1300.0, size_hi=800.0))),
        ("overlap-missing-keys", _edit(_set("regimes.0.overlap", {"center": 1024.0}))),
        ("overlap-center-zero", _edit(_set("regimes.0.overlap.center", 0.0))),
        ("overlap-list", _edit(_set("regimes.0.overlap", [1, 2]))),
        ("aic-string", _edit(_set("regimes.0.aic", {"constant": "low"}))),
        ("noise-n-negative", _edit(_set("regimes.0.noise.n", -4))),
        ("provenance-string", _edit(_set("provenance", "me"))),
        ("validation-list", _edit(_set("validation", [1]))),
        ("per-size-lengths", _edit(_set("per_size", {"estimated": True, "sizes": [1, 2],
                                                      "loc": [0.1]}))),
        ("per-size-huge-shift", _edit(_set("per_size", {"estimated": True, "sizes": [1],
                                                        "loc": [400.0]}))),
        ("per-size-shape-rows", _edit(_set("per_size", {"estimated": True, "sizes": [1, 2],
                                                        "shape_levels": [0.5],
                                                        "shape": [[0.0]]}))),
        ("per-size-shape-width", _edit(_set("per_size", {"estimated": True, "sizes": [1],
                                                         "shape_levels": [0.1, 0.9],
                                                         "shape": [[0.0]]}))),
        ("per-size-kernel-min-n-string", _edit(_set("per_size", {
            "estimated": True, "sizes": [1], "n": [3], "loc": [0.0],
            "variance_components": [{"regime": 0, "estimated": True, "tau_loc": 0.1,
                                     "tau_loc_h": 0.05, "kernel_min_n": "three"}]}))),
    ]
    names = [n for n, _ in cases]
    assert len(names) == len(set(names))
    return cases


def accepted() -> list[tuple[str, bytes]]:
    """Unusual files that must load: unknown keys are ignored (forward compatibility)."""
    def extra(doc: Doc) -> None:
        # per_size is a known key since engine v2: a valid one, with a future key inside.
        doc["per_size"] = {"estimated": True, "sizes": [1, 2], "n": [3, 60],
                           "loc": [0.0, 0.01], "loc_slow": [None, None],
                           "share": [None, None], "future_scale": [1.0, 1.1]}
        # Known since issue 16 (kit.model.uncertainty / kit.fit.runquality): checked, but keys
        # they do not know are ignored too.
        doc["intervals"] = {"level": 0.95, "breakpoints": [],
                            "regimes": [{"params": {}, "future": 1}] * len(doc["regimes"]),
                            "future": True}
        doc["run_quality"] = {"n_samples": 10, "n_disturbed": 0, "future": "x"}
        doc["baselines"] = {"hockney": {"alpha": 1e-5}}
        doc["estimator"]["future_param"] = 3
        doc["regimes"][0]["future"] = {"x": 1}
        doc["regimes"][0]["noise"]["future"] = "y"
        doc["regimes"][0]["overlap"]["future"] = 1.5
    base = json.dumps(base_model()).encode()
    return [("base", base), ("unknown-keys", _edit(extra)),
            ("bom-prefix", b"\xef\xbb\xbf" + base)]
