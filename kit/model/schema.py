"""The model file's schema: what a model JSON must hold before anything evaluates it.

Model files travel between people and sites, so they are untrusted input: a file with
``regimes: [null]``, ``1e400``, a reversed regime or a negative noise scale used to crash
``predict``/``export``/the TUI with a traceback, or worse be accepted and predict negative
times. Every reader goes through :func:`kit.model.io.load_model`, which runs three gates:

1. :func:`parse_model_bytes`: size cap, UTF-8, JSON, nesting depth, finite numbers.
2. :func:`check_model_dict`: a JSON Schema (``MODEL_SCHEMA``, Draft 2020-12, validated with
   ``jsonschema``) for types and parameter domains, then the cross-field rules JSON Schema
   cannot say (ordered, non-overlapping regimes; breakpoints between them; GMM weights
   summing to 1). Messages carry the JSON path of the bad field (``$.regimes[1].noise``).
3. :func:`check_physical`: the loaded model must predict finite positive times with
   p05 <= p50 <= p95 on a grid of sizes across every regime.

Known keys are strict; unknown keys are ignored, so newer writers can add keys (engine v2's
``per_size``, the uncertainty work's ``intervals``/``run_quality``/``baselines``) without
breaking older readers. ``SCHEMA_VERSION`` counts changes to this module's rules; the file's
own ``format_version`` is checked against :data:`kit.model.io.FORMAT_VERSION`.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from typing import Any

import numpy as np

from kit.core.errors import ModelError

SCHEMA_VERSION = 1
MAX_FILE_BYTES = 64 << 20  # a 64-regime model with validation tables is well below 1 MiB
MAX_REGIMES = 64
MAX_DEPTH = 64
#: Most per-size shape levels (shape_levels, and the values of each shape row).
MAX_SHAPE_LEVELS = 64
MAX_GMM_COMPONENTS = 16
GRID_PER_REGIME = 33
_HINT = "re-create it with 'pt2pt fit' (or fix the field named)"

_NUM = {"type": "number"}
_POS = {"type": "number", "exclusiveMinimum": 0}
_NONNEG = {"type": "number", "minimum": 0}
_SHARE = {"type": "number", "minimum": 0, "maximum": 1}
_COUNT = {"type": "integer", "minimum": 0}
_NUM_OR_NULL = {"type": ["number", "null"]}


def _params(required: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": required}


_CURVE_PARAMS = {
    "constant": _params({"a": _POS}),
    # fit_family keeps linear a, b >= 0; their sum is checked by the physical check.
    "linear": _params({"a": _NONNEG, "b": _NONNEG}),
    "power": _params({"a": _POS, "b": {"type": "number", "minimum": -16, "maximum": 16}}),
}
_NOISE_PARAMS = {
    "lognormal": _params({"s": _POS, "scale": _POS}),
    "gamma": _params({"a": _POS, "scale": _POS}),
    "weibull": _params({"c": _POS, "scale": _POS}),
    "invgauss": _params({"mu": _POS, "scale": _POS}),
    "fisk": _params({"c": _POS, "scale": _POS}),
    "gmm": _params({
        "weights": {"type": "array", "minItems": 1, "maxItems": MAX_GMM_COMPONENTS,
                    "items": _SHARE},
        "means": {"type": "array", "minItems": 1, "maxItems": MAX_GMM_COMPONENTS,
                  "items": {"type": "number", "minimum": -50, "maximum": 50}},
        "sds": {"type": "array", "minItems": 1, "maxItems": MAX_GMM_COMPONENTS,
                "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 50}},
    }),
}


def _by_family(table: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """``if family == X then params match table[X]`` clauses (errors point at ``params``)."""
    return [{"if": {"properties": {"family": {"const": name}}, "required": ["family"]},
             "then": {"properties": {"params": schema}}} for name, schema in table.items()]


_NOISE = {
    "type": "object",
    "required": ["family", "params"],
    "properties": {
        "family": {"enum": list(_NOISE_PARAMS)},
        "params": {"type": "object"},
        "aic": {"type": "object", "additionalProperties": _NUM_OR_NULL},
        "quantiles": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": _NUM_OR_NULL}},
        "n": _COUNT,
    },
    "allOf": _by_family(_NOISE_PARAMS),
}
_CURVE_FAMILY = {"enum": list(_CURVE_PARAMS)}
_COMPONENT = {
    "type": "object",
    "required": ["family", "params", "noise", "share"],
    "properties": {"family": _CURVE_FAMILY, "params": {"type": "object"}, "noise": _NOISE,
                   "share": _SHARE},
    "allOf": _by_family(_CURVE_PARAMS),
}
_OVERLAP = {
    "type": "object",
    "required": ["size_lo", "size_hi", "center", "slope", "share_left", "share_right",
                 "n_samples"],
    "properties": {"size_lo": _NONNEG, "size_hi": _NONNEG, "center": _POS, "slope": _NUM,
                   "share_left": _SHARE, "share_right": _SHARE, "n_samples": _COUNT},
}
_REGIME = {
    "type": "object",
    "required": ["size_min", "size_max", "family", "params", "noise"],
    "properties": {
        "size_min": _NONNEG,
        "size_max": _NONNEG,
        "family": _CURVE_FAMILY,
        "params": {"type": "object"},
        "noise": _NOISE,
        # Object keywords apply to objects only, so ``null`` passes and an object is checked.
        "mixture": {
            "type": ["object", "null"],
            "required": ["components", "weight"],
            "properties": {
                "components": {"type": "array", "minItems": 2, "maxItems": 2,
                               "items": _COMPONENT},
                "weight": {"type": "object", "required": ["intercept", "slope"],
                           "properties": {"intercept": _NUM, "slope": _NUM}},
            }},
        "overlap": {**_OVERLAP, "type": ["object", "null"]},
        "n_samples": _COUNT,
        "n_outliers": _COUNT,
        "aic": {"type": "object", "additionalProperties": _NUM_OR_NULL},
    },
    "allOf": _by_family(_CURVE_PARAMS),
}
_ESTIMATOR = {
    "type": "object",
    "properties": {
        "breakpoints": {"type": ["array", "null"], "maxItems": MAX_REGIMES, "items": _POS},
        "families": {"type": ["array", "null"], "maxItems": MAX_REGIMES,
                     "items": {"enum": [*_CURVE_PARAMS, None]}},
        "max_regimes": {"type": "integer", "minimum": 1, "maximum": MAX_REGIMES},
        "min_support": {"type": ["integer", "null"], "minimum": 1},
        "overlap": {"type": "boolean"},
        "noise": {"type": "boolean"},
        "mixture": {"type": "boolean"},
        "random_state": {"type": ["integer", "null"], "minimum": 0},
        "outlier_k": _POS,
        "per_size": {"type": "boolean"},
    },
}
#: Per-size effects (engine v2, kit.model.persize): columns over stored sizes, and the
#: variance components per regime. ``loc``/``loc_slow`` are ln shifts (|shift| <= 20, a
#: factor of 5e8, is far beyond any real size effect), ``share`` the slow-band share.
MAX_PER_SIZE = 1 << 20
_LN_SHIFT = {"type": "number", "minimum": -20, "maximum": 20}
_SD_OR_NULL = {"type": ["number", "null"], "minimum": 0, "maximum": 20}
#: A kernel-mean table for unseen sizes (per_size version 2): ln shifts on nodes x0 + k·step
#: of ln size.
MAX_TABLE_NODES = 4096
_TABLE = {"type": ["object", "null"], "required": ["x0", "step", "values"],
          "properties": {"x0": {"type": "number", "minimum": 0, "maximum": 100},
                         "step": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                         # values: _check_per_size (like the columns, at once)
                         "values": {"type": "array", "minItems": 1,
                                    "maxItems": MAX_TABLE_NODES}}}
_PER_SIZE = {
    "type": ["object", "null"],
    "required": ["estimated"],
    "properties": {
        "estimated": {"type": "boolean"},
        "reason": {"type": "string"},
        "method": {"type": "string"},
        "min_repeats": {"type": "integer", "minimum": 1},
        # 1 (absent): every repeated size with its location and share (format 1); 2: the
        # sizes that differ, as shapes around the population (kit.model.sizeshape)
        "version": {"type": "integer", "minimum": 1, "maximum": 2},
        # the per-size columns' values: _check_columns (see _COLUMNS)
        **{key: {"type": "array", "maxItems": MAX_PER_SIZE} for key in ("sizes", "n", "loc",
                                                                      "loc_slow", "share")},
        "shape_levels": {"type": "array", "minItems": 2, "maxItems": MAX_SHAPE_LEVELS,
                         "items": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}},
        "shape": {"type": "array", "maxItems": MAX_PER_SIZE},  # rows: _check_columns
        "knots": {"type": "array", "maxItems": MAX_PER_SIZE},  # rows: _check_columns
        "variance_components": {"type": "array", "maxItems": MAX_REGIMES, "items": {
            "type": "object",
            "required": ["regime", "estimated"],
            "properties": {
                "regime": {"type": "integer", "minimum": 0, "maximum": MAX_REGIMES - 1},
                "estimated": {"type": "boolean"},
                "n_sizes": _COUNT,
                "size_min": _NONNEG, "size_max": _NONNEG,
                "tau_loc": _SD_OR_NULL, "tau_loc_slow": _SD_OR_NULL,
                "tau_share": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "sigma_within": _SD_OR_NULL,
                "tau_loc_unseen": _SD_OR_NULL, "tau_loc_slow_unseen": _SD_OR_NULL,
                "tau_loc_h": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "tau_loc_slow_h": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "kernel_min_n": {"type": "integer", "minimum": 0, "maximum": 2**32},
                "kernel": _TABLE, "kernel_slow": _TABLE,
                "alpha": {"type": ["array", "null"], "maxItems": MAX_SHAPE_LEVELS,
                          "items": {"type": ["number", "null"], "minimum": 0}},
                "n_candidates": _COUNT, "n_stored": _COUNT,
            }}},
    },
}

#: The per-size columns, one value per stored size (``shape``: a row of values per size):
#: (JSON type, minimum, maximum). A fit of 1 M samples with log-uniform sizes stores ~65,000
#: sizes, 14 values each, and jsonschema's walk of each value took 4.4 s of every reader's
#: load; the schema checks them as arrays, :func:`_check_columns` checks the values at once
#: (the same rules, the same message and JSON path of the first bad value).
_COLUMNS: dict[str, tuple[str, float, float]] = {
    "sizes": ("number", 0.0, math.inf),
    "n": ("integer", 1.0, math.inf),
    "loc": ("number", -20.0, 20.0),
    "loc_slow": ("number-or-null", -20.0, 20.0),
    "share": ("number-or-null", 0.0, 1.0),
    "shape": ("number", -20.0, 20.0),
}

#: JSON Schema of a model file (format_version 1). Unknown keys are allowed everywhere.
#: One interval of kit.model.uncertainty: value and bounds (null when not estimable, then
#: ``why`` says so); lo <= value <= hi is checked across fields.
_INTERVAL: dict[str, Any] = {
    "type": "object", "required": ["value", "lo", "hi"],
    "properties": {"value": {"type": ["number", "null"]}, "lo": {"type": ["number", "null"]},
                   "hi": {"type": ["number", "null"]}, "why": {"type": "string"}}}
_INTERVALS: dict[str, Any] = {
    "type": "object", "required": ["level", "breakpoints", "regimes"],
    "properties": {
        "level": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "n_boot": {"type": "integer", "minimum": 0},
        "resample": {"enum": ["runs", "seq blocks", "samples"]},
        "breakpoints": {"type": "array", "items": _INTERVAL},
        "regimes": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "params": {"type": "object", "additionalProperties": _INTERVAL},
                "noise": {"type": "object", "additionalProperties": _INTERVAL},
                "band_shares": {"type": "array", "items": _INTERVAL}}}},
        "not_estimated": {"type": "array", "items": {"type": "string"}}}}
_RUN_QUALITY: dict[str, Any] = {
    "type": "object", "required": ["n_samples", "n_disturbed"],
    "properties": {
        "n_samples": {"type": "integer", "minimum": 0},
        "n_disturbed": {"type": "integer", "minimum": 0},
        "excluded": {"type": "boolean"},
        "windows": {"type": "array", "items": {
            "type": "object", "required": ["run_id", "seq_start", "seq_end", "n_samples"],
            "properties": {"seq_start": {"type": "integer", "minimum": 0},
                           "seq_end": {"type": "integer", "minimum": 0},
                           "n_samples": {"type": "integer", "minimum": 0},
                           "slowdown": {"type": ["number", "null"]}}}},
        "runs": {"type": "array", "items": {"type": "object"}}}}


MODEL_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://pt2pt-kit/schemas/model-v1.json",
    "title": "pt2pt-model",
    "type": "object",
    "required": ["format", "format_version", "regimes", "breakpoints", "outliers",
                 "n_samples"],
    "properties": {
        "format": {"const": "pt2pt-model"},
        "format_version": {"type": "integer", "minimum": 1},
        "kit_version": {"type": "string"},
        "estimator": _ESTIMATOR,
        "regimes": {"type": "array", "minItems": 1, "maxItems": MAX_REGIMES, "items": _REGIME},
        "breakpoints": {"type": "array", "maxItems": MAX_REGIMES - 1, "items": _POS},
        "outliers": {"type": "object", "required": ["count"],
                     "properties": {"count": _COUNT, "rule": {"type": "string"},
                                    "by_regime": {"type": "array", "items": _COUNT}}},
        "n_samples": _COUNT,
        "provenance": {"type": "object", "properties": {
            "dataset": {"type": ["string", "null"]},
            "series": {"type": ["object", "null"],
                       "additionalProperties": {"type": ["string", "null"]}}}},
        "validation": {"type": "object"},
        "per_size": _PER_SIZE,
        "intervals": _INTERVALS,
        "run_quality": _RUN_QUALITY,
    },
}


@functools.cache
def _validator() -> Any:
    """The schema's validator, made on the first read: writing a model (``pt2pt fit``)
    needs no jsonschema, ~0.05-0.08 CPU-s of imports."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(MODEL_SCHEMA)


def _fail(where: str, path: str, message: str) -> ModelError:
    if len(path) > 80:  # deep nesting: the start says where, the rest is repetition
        path = path[:77] + "..."
    return ModelError(f"malformed model file: {path}: {message}", where=where, hint=_HINT)


_SCALARS = frozenset({int, float, bool, str, type(None)})


def _scan(doc: Any, where: str) -> None:
    """Depth cap and finite numbers, iteratively (a recursive walk is what we guard against)."""
    stack: list[tuple[Any, str, int]] = [(doc, "$", 1)]
    while stack:
        obj, path, depth = stack.pop()
        if isinstance(obj, dict):
            if depth > MAX_DEPTH:
                raise _fail(where, path, f"nested deeper than {MAX_DEPTH} levels")
            stack.extend((v, f"{path}.{k}", depth + 1) for k, v in obj.items())
        elif isinstance(obj, list):
            if depth > MAX_DEPTH:
                raise _fail(where, path, f"nested deeper than {MAX_DEPTH} levels")
            if set(map(type, obj)) <= _SCALARS and _scalars_ok(obj):
                continue  # a column of plain values (per-size: ~10^5): no path per value
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj))
        elif isinstance(obj, float) and not math.isfinite(obj):
            raise _fail(where, path, "number out of range (not a finite float)")
        elif isinstance(obj, int) and not isinstance(obj, bool) and abs(obj) > 2 ** 63:
            raise _fail(where, path, "integer out of range")


def _scalars_ok(values: list[Any]) -> bool:
    """No non-finite float and no integer beyond 2**63 among plain JSON values (False: let
    the per-value walk name the first bad one)."""
    floats = [v for v in values if v.__class__ is float]
    ints = [v for v in values if v.__class__ is int]
    return all(map(math.isfinite, floats)) and (not ints or max(map(abs, ints)) <= 2 ** 63)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def parse_model_bytes(raw: bytes, where: str) -> dict[str, Any]:
    """Bytes of a model file → its top-level dict, or a ModelError naming what is wrong."""
    if len(raw) > MAX_FILE_BYTES:
        raise ModelError(f"model file larger than {MAX_FILE_BYTES >> 20} MiB", where=where,
                         hint="give a model JSON written by 'pt2pt fit'")
    try:
        text = raw.decode("utf-8-sig")  # a BOM (some editors add one) is not an error
    except UnicodeDecodeError as exc:
        raise ModelError(f"not UTF-8 text (invalid byte at offset {exc.start})", where=where,
                         hint="give a model JSON written by 'pt2pt fit'") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ModelError(f"invalid JSON at line {exc.lineno}: {exc.msg}", where=where,
                         hint="give a file written by 'pt2pt fit'") from None
    except RecursionError:
        raise _fail(where, "$", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # NaN/Infinity tokens, integers beyond Python's digit limit
        raise ModelError(f"invalid JSON: {exc}", where=where,
                         hint="give a file written by 'pt2pt fit'") from None
    if not isinstance(doc, dict):
        raise ModelError("not a pt2pt model file (the top level is not a JSON object)",
                         where=where, hint="give a model JSON written by 'pt2pt fit'")
    return doc


def check_model_dict(doc: dict[str, Any], where: str, format_version: int) -> None:
    """Schema and cross-field rules; raises ModelError with the JSON path of the bad field."""
    if doc.get("format") != "pt2pt-model":
        raise ModelError('not a pt2pt model file (no "format": "pt2pt-model")', where=where,
                         hint="give a file written by 'pt2pt fit'")
    version = doc.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > format_version:
        raise ModelError(f"model format version {version} is newer than this kit reads "
                         f"({format_version})", where=where, hint="upgrade pt2pt-kit")
    regimes = doc.get("regimes")
    if isinstance(regimes, list) and len(regimes) > MAX_REGIMES:  # before the per-item walk
        raise _fail(where, "$.regimes", f"{len(regimes)} regimes; at most {MAX_REGIMES} "
                    "are read")
    _scan(doc, where)
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(doc))
    if error is not None:
        raise _fail(where, error.json_path, _short(error.message, error.instance))
    _check_columns(doc, where)
    _check_cross_fields(doc, where)
    _check_intervals(doc, where)


def _check_columns(doc: dict[str, Any], where: str) -> None:
    """The per-size columns' values (:data:`_COLUMNS`), after the schema said they are arrays:
    jsonschema's rules (a bool is not a number; 2.0 is an integer) and its message for the
    first bad value."""
    ps = doc.get("per_size")
    if not isinstance(ps, dict):
        return
    for key, (kind, lo, hi) in _COLUMNS.items():
        column = ps.get(key)
        if not column or (key == "shape" and ps.get("version", 1) >= 2):
            continue  # version 2's shape: _check_knots
        if key == "shape":
            for i, row in enumerate(column):
                if not isinstance(row, list):
                    raise _fail(where, f"$.per_size.{key}[{i}]",
                                _short(f"{row!r} is not of type 'array'", row))
                if len(row) > MAX_SHAPE_LEVELS:
                    raise _fail(where, f"$.per_size.{key}[{i}]", f"a row of {len(row)} values "
                                f"(at most {MAX_SHAPE_LEVELS} levels are read)")
            flat = [v for row in column for v in row]
        else:
            flat = column
        bad = _first_bad(flat, kind, lo, hi)
        if bad is None:
            continue
        index, message = bad
        if key == "shape":
            widths = np.cumsum([len(row) for row in column])
            i = int(np.searchsorted(widths, index, side="right"))
            at = f"[{i}][{index - (int(widths[i - 1]) if i else 0)}]"
        else:
            at = f"[{index}]"
        raise _fail(where, f"$.per_size.{key}{at}", message)


_TYPES = {"number": {int, float}, "integer": {int, float},
          "number-or-null": {int, float, type(None)}}


def _first_bad(values: list[Any], kind: str, lo: float, hi: float) -> tuple[int, str] | None:
    """(index, jsonschema's message) of the first value breaking the column's rule."""
    allowed = _TYPES[kind]
    named = "'number', 'null'" if kind == "number-or-null" else f"'{kind}'"
    if not set(map(type, values)) <= allowed:
        i = next(i for i, v in enumerate(values) if type(v) not in allowed)
        return i, _short(f"{values[i]!r} is not of type {named}", values[i])
    x = np.array([np.nan if v is None else v for v in values] if kind == "number-or-null"
                 else values, dtype=float)
    wrong = (x < lo) | (x > hi)
    if kind == "integer":
        wrong |= x != np.floor(x)
    if not wrong.any():
        return None
    i = int(np.argmax(wrong))
    v = values[i]
    if kind == "integer" and float(v) != np.floor(float(v)):
        return i, f"{v!r} is not of type 'integer'"
    bound = _bound(lo) if v < lo else _bound(hi)
    side = "less than the minimum" if v < lo else "greater than the maximum"
    return i, f"{v!r} is {side} of {bound}"


def _bound(value: float) -> int | float:
    """A bound as the schema wrote it (1, not 1.0)."""
    return int(value) if float(value).is_integer() else value


def _short(message: str, instance: Any) -> str:
    """jsonschema's message with a long offending value replaced by its kind."""
    shown = repr(instance)
    if len(shown) > 40:
        kinds: dict[type, str] = {dict: "this object", list: f"this list of {len(instance)} items"
                                  if isinstance(instance, list) else "this list"}
        kind = kinds.get(type(instance), "this value")
        message = message.replace(shown, kind)
    return message if len(message) <= 160 else message[:157] + "..."


def _check_intervals(doc: dict[str, Any], where: str) -> None:
    """Every interval holds its value; intervals describe as many regimes as the model has."""
    iv = doc.get("intervals")
    if not isinstance(iv, dict):
        return
    if len(iv.get("regimes", [])) != len(doc.get("regimes", [])):
        raise _fail(where, "$.intervals.regimes", "describes "
                    f"{len(iv.get('regimes', []))} regimes, the model has "
                    f"{len(doc.get('regimes', []))}")
    items = [(f"$.intervals.breakpoints[{k}]", b) for k, b in enumerate(iv["breakpoints"])]
    for k, reg in enumerate(iv["regimes"]):
        for part in ("params", "noise"):
            items += [(f"$.intervals.regimes[{k}].{part}.{n}", v)
                      for n, v in (reg.get(part) or {}).items()]
    for path, b in items:
        v, lo, hi = b.get("value"), b.get("lo"), b.get("hi")
        if None not in (v, lo, hi) and not lo <= v <= hi:
            raise _fail(where, path, f"interval [{lo}, {hi}] does not hold its value {v}")


def _check_cross_fields(doc: dict[str, Any], where: str) -> None:
    regimes: list[dict[str, Any]] = doc["regimes"]
    for k, reg in enumerate(regimes):
        path = f"$.regimes[{k}]"
        if reg["size_min"] > reg["size_max"]:
            raise _fail(where, path, f"size_min {reg['size_min']} is above size_max "
                        f"{reg['size_max']}")
        if k and regimes[k - 1]["size_max"] > reg["size_min"]:
            raise _fail(where, f"{path}.size_min", f"regime starts at {reg['size_min']}, "
                        f"inside the previous regime (which ends at "
                        f"{regimes[k - 1]['size_max']}): regimes must be ordered by size "
                        "and must not overlap")
        for noise, npath in _noises(reg, path):
            if noise["family"] == "gmm":
                p = noise["params"]
                if not len(p["weights"]) == len(p["means"]) == len(p["sds"]):
                    raise _fail(where, f"{npath}.params", "weights, means and sds differ "
                                "in length")
                if abs(sum(p["weights"]) - 1.0) > 1e-6:
                    raise _fail(where, f"{npath}.params.weights", "weights do not sum to 1")
        ov = reg.get("overlap")
        if ov and ov["size_lo"] > ov["size_hi"]:
            raise _fail(where, f"{path}.overlap", "size_lo is above size_hi")
    bps = doc["breakpoints"]
    if len(bps) != len(regimes) - 1:
        raise _fail(where, "$.breakpoints", f"{len(bps)} breakpoints for {len(regimes)} "
                    f"regimes (expected {len(regimes) - 1})")
    for k, bp in enumerate(bps):
        if k and bp <= bps[k - 1]:
            raise _fail(where, f"$.breakpoints[{k}]", "breakpoints must increase")
        if not regimes[k]["size_min"] <= bp <= regimes[k + 1]["size_max"]:
            raise _fail(where, f"$.breakpoints[{k}]", f"breakpoint {bp} lies outside regimes "
                        f"{k} and {k + 1}")
    _check_per_size(doc, where)


def _check_per_size(doc: dict[str, Any], where: str) -> None:
    """Per-size columns of one length, sizes strictly increasing, regimes that exist."""
    ps = doc.get("per_size")
    if not isinstance(ps, dict):
        return
    sizes = ps.get("sizes", [])
    for key in ("n", "loc", "loc_slow", "share", "knots"):
        if key in ps and len(ps[key]) != len(sizes):
            raise _fail(where, f"$.per_size.{key}", f"{len(ps[key])} values for "
                        f"{len(sizes)} sizes")
    levels = ps.get("shape_levels", [])
    for i in range(1, len(levels)):
        if levels[i] <= levels[i - 1]:
            raise _fail(where, f"$.per_size.shape_levels[{i}]", "levels must increase")
    if ps.get("version", 1) >= 2:
        _check_knots(ps, where)
    elif "shape" in ps:
        n_lv = len(levels)
        if len(ps["shape"]) != len(sizes):
            raise _fail(where, "$.per_size.shape", f"{len(ps['shape'])} rows for "
                        f"{len(sizes)} sizes")
        for i, row in enumerate(ps["shape"]):
            if len(row) != n_lv:
                raise _fail(where, f"$.per_size.shape[{i}]", f"{len(row)} values for "
                            f"{n_lv} shape_levels")
    for i in range(1, len(sizes)):
        if sizes[i] <= sizes[i - 1]:
            raise _fail(where, f"$.per_size.sizes[{i}]", "sizes must increase")
    n_reg = len(doc["regimes"])
    for i, comp in enumerate(ps.get("variance_components", [])):
        if comp["regime"] >= n_reg:
            raise _fail(where, f"$.per_size.variance_components[{i}].regime",
                        f"regime {comp['regime']} of a model with {n_reg}")
        for key in ("kernel", "kernel_slow"):
            table = comp.get(key)
            if isinstance(table, dict):
                bad = _first_bad(table["values"], "number", -20.0, 20.0)
                if bad is not None:
                    raise _fail(where, f"$.per_size.variance_components[{i}].{key}.values"
                                f"[{bad[0]}]", bad[1])


def _check_knots(ps: dict[str, Any], where: str) -> None:
    """Version 2 rows: per stored size a bit mask of its stored levels (at least one, none
    beyond the levels), and one flat list of their shifts (in ``shape_unit``, integers) as
    long as the masks' bits, each within ±20 of ln time."""
    knots, shape = ps.get("knots", []), ps.get("shape", [])
    n_lv = len(ps.get("shape_levels", []))
    bad = _first_bad(knots, "integer", 1.0, float(2 ** n_lv - 1))
    if bad is not None:
        raise _fail(where, f"$.per_size.knots[{bad[0]}]", bad[1] + " (a bit mask of the "
                    f"{n_lv} shape_levels)")
    bits = sum(int(k).bit_count() for k in knots)
    if len(shape) != bits:
        raise _fail(where, "$.per_size.shape", f"{len(shape)} values for the {bits} levels "
                    "the knots mark")
    unit = ps.get("shape_unit", 1e-4)
    if not isinstance(unit, int | float) or isinstance(unit, bool) or not 0 < unit <= 1:
        raise _fail(where, "$.per_size.shape_unit", f"{unit!r} is not a unit in (0, 1]")
    limit = math.floor(20.0 / unit)
    bad = _first_bad(shape, "integer", -limit, limit)
    if bad is not None:
        raise _fail(where, f"$.per_size.shape[{bad[0]}]", bad[1])


def _noises(reg: dict[str, Any], path: str) -> list[tuple[dict[str, Any], str]]:
    out = [(reg["noise"], f"{path}.noise")]
    mix = reg.get("mixture")
    if mix:
        out += [(c["noise"], f"{path}.mixture.components[{i}].noise")
                for i, c in enumerate(mix["components"])]
    return out


#: The physical range of one message's time: from 1 ns (below any timer and any network)
#: to 1 day. Every time a model predicts, draws or rests its curves on must lie within it.
TIME_MIN_S = 1e-9
TIME_MAX_S = 86_400.0
#: A noise's ratio to its curve (time / curve) at p0.1 and p99.9: beyond a factor 10^6 on
#: either side it is not noise around that curve (lognormal s=400, Weibull c=0.02...).
RATIO_RANGE = (1e-6, 1e6)
#: The predictive quantiles checked at every size of the grid.
CHECK_QUANTILES = (0.001, 0.5, 0.999)
#: Draws per size of the grid (a fixed seed: the same model is always judged the same).
CHECK_DRAWS = 8
#: Stored sizes (a per-size layer's) checked besides the regime grids; above this many, an
#: evenly spaced selection of them.
MAX_CHECKED_SIZES = 20_000


def _physical_error(model: Any, where: str, what: str, at: float | None = None,
                    regime: int | None = None) -> ModelError:
    """"the model predicts ... at S B (regime k, sizes a to b B): not physical"."""
    if regime is None and at is not None:
        try:
            regime = int(np.asarray(model.regime_index([at]))[0])
        except Exception:  # naming the regime is a courtesy
            regime = None
    place = f" at {at:g} B" if at is not None else ""
    if regime is not None and 0 <= regime < len(model.regimes_):
        reg = model.regimes_[regime]
        place += f" (regime {regime}, sizes {reg.size_min:g} to {reg.size_max:g} B)"
    return ModelError(f"the model {what}{place}: it is not physical (message times lie "
                      f"between {TIME_MIN_S:g} s and {TIME_MAX_S:g} s)", where=where, hint=_HINT)


def noise_ratios(noise: Any, anchored: bool = False) -> tuple[np.ndarray, bool]:
    """A noise's p0.1, median and p99.9 (divided by its median when ``anchored``) and
    whether they are physical: finite and within :data:`RATIO_RANGE`.

    The one plausibility rule for a noise distribution: the reader applies it to every
    noise of an untrusted model file, and the fitter to each candidate family (not yet
    anchored to its median) so that it never writes a model its own reader refuses."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        r = np.asarray(noise.ppf(np.array([0.001, 0.5, 0.999])), dtype=float)
        if anchored:
            r = r / r[1] if r[1] > 0 else np.full(3, np.nan)
    lo, hi = RATIO_RANGE
    return r, bool(np.all(np.isfinite(r)) and np.all(r >= lo) and np.all(r <= hi))


def _check_noises(model: Any, where: str) -> None:
    """Each noise's p0.1, median and p99.9 ratio: finite, within RATIO_RANGE (closed forms:
    microseconds, so the commonest absurd files are refused before any prediction)."""
    for k, reg in enumerate(model.regimes_):
        named = [("noise", reg.noise)] + [(f"band {i} noise", c.noise)
                                          for i, c in enumerate(reg.components)]
        for label, noise in named:
            r, ok = noise_ratios(noise)
            if not ok:
                raise _physical_error(model, where, f"has a {noise.family} {label} whose p0.1, "
                                      f"median and p99.9 are {r[0]:.3g}, {r[1]:.3g} and "
                                      f"{r[2]:.3g} times its curve (at most "
                                      f"{RATIO_RANGE[1]:g} either way)", regime=k)


def check_sizes(model: Any) -> np.ndarray:
    """The sizes a model is judged at: a log grid across every regime (both ends) and the
    sizes it stores values of (a per-size layer, whatever its form)."""
    grid, stored = _check_grids(model)
    sizes = np.sort(np.concatenate([grid, stored]))
    # distinct sizes (np.unique would import numpy.ma, ~20 ms of a model read)
    return sizes[np.r_[True, np.diff(sizes) > 0]]


def _check_grids(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """(the regimes' log grids, the stored sizes not on them), each sorted and distinct."""
    grids = []
    for reg in model.regimes_:
        lo = max(float(reg.size_min), 1.0)
        grids.append(np.geomspace(lo, max(float(reg.size_max), lo), GRID_PER_REGIME))
    grid = np.sort(np.concatenate(grids)) if grids else np.zeros(0)
    grid = grid[np.r_[True, np.diff(grid) > 0]] if len(grid) else grid
    listed = getattr(getattr(model, "per_size_", None), "sizes", None)
    stored = np.asarray([] if listed is None else listed, dtype=float).ravel()
    stored = stored[np.isfinite(stored)]
    if len(stored) > MAX_CHECKED_SIZES:
        stored = stored[np.linspace(0, len(stored) - 1, MAX_CHECKED_SIZES).astype(int)]
    stored = np.sort(np.maximum(stored, 1.0))
    stored = stored[np.r_[True, np.diff(stored) > 0]] if len(stored) else stored
    # not on the grid (np.isin would import numpy.ma, ~20 ms of a model read)
    i = np.minimum(np.searchsorted(grid, stored), max(len(grid) - 1, 0))
    on = grid[i] == stored if len(grid) else np.zeros(len(stored), dtype=bool)
    return grid, stored[~on]


def _check_bounds(model: Any, where: str, sizes: np.ndarray) -> None:
    """:func:`check_physical`'s bounds on the predictive distribution at ``sizes``, read
    off its CDF at each bound: p0.1 >= 1 ns <=> F(1 ns) <= 0.001, p99.9 <= 1 day <=>
    F(1 day) >= 0.999, and p99.9 within :data:`RATIO_RANGE` of the curve likewise. A CDF per
    bound where quantiles need a root search each; quantiles only for the message of a
    refusal. At stored sizes first bounds on the CDF (the estimator's ``cdf_bounds``): the
    exact CDF there rests on each size's base quantiles at every shape level (0.1 of 0.15
    CPU-s of the check at 490 stored sizes), and only a size its bounds do not clear needs
    it, so the verdict is the exact CDF's."""
    if not len(sizes):
        return
    curve = np.asarray(model.curve(sizes), dtype=float)
    at = np.stack([np.full(len(sizes), TIME_MIN_S), np.full(len(sizes), TIME_MAX_S),
                   curve * RATIO_RANGE[0], curve * RATIO_RANGE[1]], axis=1)
    lo_q, hi_q = CHECK_QUANTILES[0], CHECK_QUANTILES[-1]
    bounds = getattr(model, "cdf_bounds", None)
    todo = np.arange(len(sizes))
    if bounds is not None:
        lo, hi = (np.asarray(b, dtype=float) for b in bounds(sizes, at))
        if lo.shape != at.shape or hi.shape != at.shape:
            raise _physical_error(model, where, "gives predictions of the wrong shape")
        clear = (np.all(np.isfinite(lo) & np.isfinite(hi), axis=1) & np.isfinite(curve)
                 & (hi[:, 0] <= lo_q) & (lo[:, 1] >= hi_q)
                 & (hi[:, 2] <= hi_q) & (lo[:, 3] >= hi_q))
        todo = np.flatnonzero(~clear)
        if not len(todo):
            return
    sizes, at, curve = sizes[todo], at[todo], curve[todo]
    cdf = np.asarray(model.cdf(sizes, at), dtype=float)
    if cdf.shape != at.shape:
        raise _physical_error(model, where, "gives predictions of the wrong shape")
    checks = [
        (np.any(~np.isfinite(cdf), axis=1) | ~np.isfinite(curve), "predicts non-finite times"),
        ((cdf[:, 0] > lo_q) | (cdf[:, 1] < hi_q), "predicts times out of range"),
        ((cdf[:, 2] > hi_q) | (cdf[:, 3] < hi_q),  # p99.9, as the check always read
         f"predicts a median more than {RATIO_RANGE[1]:g} times away from its regime's "
         "curve"),
    ]
    for bad, what in checks:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            q = np.asarray(model.predict_quantiles(sizes[i:i + 1], list(CHECK_QUANTILES)),
                           dtype=float).ravel()
            shown = ", ".join(f"{v:.3g}" for v in q)
            raise _physical_error(model, where, f"{what} ({shown} s)", float(sizes[i]))


def check_physical(model: Any, where: str) -> None:
    """Refuse a model that predicts a time no message can take, before any command uses it.

    Gates, cheapest first (a refusal costs well under a second): every noise's ratio
    quantiles (:data:`RATIO_RANGE`); every regime's curves (its own and its bands') on a
    dense log grid (:func:`check_sizes`); then what the model predicts there, whatever its
    layers: finite p0.1 and p99.9 within [:data:`TIME_MIN_S`, :data:`TIME_MAX_S`] and p99.9
    within :data:`RATIO_RANGE` of the regime's curve (a per-size shift of e^20 is no
    measurement), read off the CDF (:func:`_check_bounds`), and :data:`CHECK_DRAWS` finite
    draws per size of the regimes' grids within the time range too.
    """
    sizes = np.zeros(0)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            _check_noises(model, where)
            sizes = check_sizes(model)
            for k, reg in enumerate(model.regimes_):
                mine = sizes[(sizes >= max(float(reg.size_min), 1.0))
                             & (sizes <= max(float(reg.size_max), 1.0))]
                own = (np.ones(len(mine)), reg.curve(mine), None)  # what export reads
                for weight, scale, _noise in [own, *reg.terms(mine)]:
                    used = np.asarray(weight) > 1e-6
                    c = np.asarray(scale, dtype=float)[used]
                    bad = ~np.isfinite(c) | (c < TIME_MIN_S) | (c > TIME_MAX_S)
                    if bad.any():
                        i = int(np.flatnonzero(bad)[0])
                        raise _physical_error(model, where, f"has a curve of {c[i]:.3g} s",
                                              float(mine[used][i]), k)
            # Draws on the regimes' grids, then the bounds at every size through the CDF,
            # judged in that order below.
            grid, _ = _check_grids(model)
            draws = np.asarray(model.sample(grid, CHECK_DRAWS, random_state=0), dtype=float)
            _check_bounds(model, where, sizes)
            sizes = grid
    except ModelError:
        raise
    except Exception as exc:  # the model is untrusted: any failure refuses it
        raise ModelError(f"the model cannot be evaluated ({type(exc).__name__}: {exc})",
                         where=where, hint=_HINT) from None
    if draws.shape != (len(sizes), CHECK_DRAWS):
        raise _physical_error(model, where, "gives predictions of the wrong shape")
    checks = [
        (np.any(~np.isfinite(draws), axis=1), "draws non-finite times"),
        (np.any((draws < TIME_MIN_S) | (draws > TIME_MAX_S), axis=1),
         "draws times out of range"),
    ]
    for bad, what in checks:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            shown = ", ".join(f"{v:.3g}" for v in draws[i][:5])
            raise _physical_error(model, where, f"{what} ({shown} s)", float(sizes[i]))
