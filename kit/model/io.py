"""Model files: versioned JSON with stable keys, exact round trip.

Other tools (SimGrid export, report, TUI, third parties) read these files, so the keys of
``regimes`` (``size_min``, ``size_max``, ``family``, ``params``, ``noise``) are a contract.
Floats are written with Python's shortest exact repr, so load → save reproduces the same
bytes and load → predict the same numbers.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kit.core.atomicwrite import write_text
from kit.core.errors import ModelError
from kit.core.inputs import refuse_special
from kit.model.contract import ModelFile
from kit.model.schema import (
    MAX_FILE_BYTES,
    check_model_dict,
    check_physical,
    parse_model_bytes,
)

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

FORMAT = "pt2pt-model"
#: 2: the per-size layer stores only the sizes that differ, as shapes around the population
#: (kit.model.sizeshape), and tables for unseen sizes; files of format 1 are still read.
FORMAT_VERSION = 2


_PLAIN = frozenset({int, float, str, bool, type(None)})


def _clean(obj: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, list | tuple):
        if set(map(type, obj)) <= _PLAIN and all(
                map(math.isfinite, [v for v in obj if v.__class__ is float])):
            return list(obj)  # a per-size column (10^5 values): nothing to convert
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str | bytes):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def model_to_dict(model: RegimeModel, provenance: Mapping[str, Any] | None = None,
                  validation: Mapping[str, Any] | None = None,
                  about: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The file's JSON object. ``provenance`` and ``validation`` are kept beside the model
    (kit.model.contract.ModelFile), never read off it. ``about`` holds further top-level
    keys about the fit (``intervals``, ``run_quality``), written only when non-empty."""
    from kit import __version__  # importlib.metadata: only where a file is written
    from kit.model.outliers import RULE  # the engine is loaded: the model is fitted

    model._check_fitted()
    per_size = getattr(model, "per_size_", None)
    prov = dict(provenance or {})
    prov.setdefault("kit_version", __version__)
    return _clean({
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kit_version": __version__,
        "estimator": model.get_params(deep=False),
        "regimes": [r.to_dict() for r in model.regimes_],
        "breakpoints": list(model.breakpoints_),
        "outliers": {"count": model.n_outliers_, "rule": RULE,
                     "by_regime": [r.n_outliers for r in model.regimes_]},
        "n_samples": getattr(model, "n_samples_", sum(r.n_samples for r in model.regimes_)),
        "provenance": prov,
        "validation": dict(validation or {}),
        # Per-size effects (kit.model.persize): adjusted sizes and variance components;
        # null when the model was fitted with per_size=False.
        "per_size": per_size.to_dict() if per_size is not None else None,
        **{k: v for k, v in (about or {}).items() if v},
    })


#: Per-size columns: a value per stored size (~65,000 sizes for 1 M samples whose sizes are
#: drawn log-uniformly). Each is written on one line by json's C encoder (indenting every
#: value goes through its Python encoder: 0.6 of 1 s to write such a model, and 3 MB).
_ONE_LINE = ("sizes", "n", "loc", "loc_slow", "share", "knots", "shape")


def dumps(model: RegimeModel, provenance: Mapping[str, Any] | None = None,
          validation: Mapping[str, Any] | None = None,
          about: Mapping[str, Any] | None = None) -> str:
    doc = model_to_dict(model, provenance, validation, about)
    ps = doc.get("per_size")
    lines: dict[str, str] = {}
    if isinstance(ps, dict):
        # each column goes in as a unique placeholder string, replaced once indented
        nonce = uuid.uuid4().hex
        lists = [(ps, key, key) for key in _ONE_LINE]
        for i, comp in enumerate(ps.get("variance_components") or []):
            lists.append((comp, "alpha", f"alpha{i}"))
            lists += [(comp[k], "values", f"{k}{i}") for k in ("kernel", "kernel_slow")
                      if isinstance(comp.get(k), dict)]
        for holder, key, name in lists:
            if key in holder:
                placeholder = f"pt2pt-column-{name}-{nonce}"
                lines[json.dumps(placeholder)] = json.dumps(holder[key], allow_nan=False)
                holder[key] = placeholder
    text = json.dumps(doc, indent=1, allow_nan=False)
    for placeholder, line in lines.items():
        text = text.replace(placeholder, line, 1)
    return text + "\n"


def write_model(fitted: ModelFile, path: str | Path | None = None) -> Path:
    """Write a :class:`ModelFile` (to ``path``, default its own ``path``)."""
    target = path if path is not None else fitted.path
    if target is None:
        raise ModelError("no path to write the model to", where="write_model",
                         hint="pass path= or set ModelFile.path")
    return save_model(fitted.model, target, provenance=fitted.provenance,
                      validation=fitted.validation,
                      about={"intervals": fitted.intervals, "run_quality": fitted.run_quality})


def save_model(model: RegimeModel, path: str | Path,
               provenance: Mapping[str, Any] | None = None,
               validation: Mapping[str, Any] | None = None,
               about: Mapping[str, Any] | None = None) -> Path:
    """Write the model atomically (temp file + rename) so a crash never leaves half a file."""
    return write_text(path, dumps(model, provenance, validation, about))


_OVERLAP_KEYS = ("size_lo", "size_hi", "center", "slope", "share_left", "share_right",
                 "n_samples")


def _known_overlap(regime: dict[str, Any]) -> dict[str, Any]:
    """The regime with its overlap's unknown keys dropped (Overlap takes its fields only)."""
    ov = regime.get("overlap")
    if not isinstance(ov, dict) or set(ov) <= set(_OVERLAP_KEYS):
        return regime
    return {**regime, "overlap": {k: ov[k] for k in _OVERLAP_KEYS if k in ov}}


def model_from_dict(d: dict[str, Any], where: str = "model") -> RegimeModel:
    """A model from a parsed file: schema-checked (kit.model.schema), built, physics-checked."""
    check_model_dict(d, where, FORMAT_VERSION)
    # The engine (scikit-learn, SciPy) only for a file that passed its schema.
    from kit.model.estimator import RegimeModel
    from kit.model.persize import PerSize
    from kit.model.regime import Regime

    try:
        # Unknown estimator keys (from a newer writer) are ignored, like unknown file keys.
        est = {k: v for k, v in dict(d.get("estimator") or {}).items()
               if k in RegimeModel._get_param_names()}
        model = RegimeModel(**est)
        model.regimes_ = [Regime.from_dict(_known_overlap(r)) for r in d["regimes"]]
        model.breakpoints_ = [float(b) for b in d["breakpoints"]]
        model.n_outliers_ = int(d["outliers"]["count"])
        model.n_samples_ = int(d["n_samples"])
        ps = d.get("per_size")
        model.per_size_ = PerSize.from_dict(ps) if isinstance(ps, dict) else None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise ModelError(f"malformed model file ({type(exc).__name__}: {exc})", where=where,
                         hint="re-create it with 'pt2pt fit'") from None
    model.outlier_mask_ = None
    check_physical(model, where)
    return model


def model_file_from_dict(d: dict[str, Any], where: str = "model",
                         path: Path | None = None) -> ModelFile:
    """:func:`model_from_dict` plus the file's provenance and validation, kept beside it."""
    model = model_from_dict(d, where)
    prov = d.get("provenance")
    validation = d.get("validation")
    intervals, quality = d.get("intervals"), d.get("run_quality")
    return ModelFile(model, provenance=dict(prov) if isinstance(prov, dict) else {},
                     validation=dict(validation) if isinstance(validation, dict) else {},
                     path=path, intervals=dict(intervals) if isinstance(intervals, dict) else {},
                     run_quality=dict(quality) if isinstance(quality, dict) else {})


def read_model(path: str | Path) -> ModelFile:
    """The one way to read a model file: every reader (CLI, report, export, TUI) calls this
    (or :func:`load_model` for the estimator alone).

    Size cap, UTF-8, JSON, schema with JSON paths, then the physical check; anything wrong
    is a ModelError naming the file (see kit.model.schema).
    """
    path = Path(path)
    return model_file_from_dict(_read_dict(path), where=str(path), path=path)


def load_model(path: str | Path) -> RegimeModel:
    """The estimator of a model file (:func:`read_model` without provenance/validation)."""
    return read_model(path).model


def _read_dict(path: Path) -> dict[str, Any]:
    refuse_special(path, "model file", ModelError)  # a FIFO would block the open for ever
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        hint = "give a model JSON written by 'pt2pt fit'"
        if path.is_dir():  # a dataset or a models folder given where one model is expected
            hint = (f"{path} is a folder; fit a model first with 'pt2pt fit {path} -o "
                    "MODEL.json' and give MODEL.json" if (path / "runs.parquet").is_file()
                    else f"{path} is a folder; give one of its *.json model files")
        raise ModelError(f"cannot read model file ({exc.strerror})", where=str(path),
                         hint=hint) from None
    return parse_model_bytes(raw, str(path))
