"""Model files: versioned JSON with stable keys, exact round trip.

Other tools (SimGrid export, report, TUI, third parties) read these files, so the keys of
``regimes`` (``size_min``, ``size_max``, ``family``, ``params``, ``noise``) are a contract.
Floats are written with Python's shortest exact repr, so load → save reproduces the same
bytes and load → predict the same numbers.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from kit import __version__
from kit.errors import ModelError
from kit.model.estimator import RegimeModel
from kit.model.regime import Regime

FORMAT = "pt2pt-model"
FORMAT_VERSION = 1
OUTLIER_RULE = ("ln time beyond max(k*IQR/1.349, 2*(p95-p50) or 2*(p50-p05), ln 2) of the median "
                "of its size neighbourhood (>= 30 samples)")


def _clean(obj: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str | bytes):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def model_to_dict(model: RegimeModel, provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    model._check_fitted()
    prov = dict(getattr(model, "provenance_", {}) or {})
    prov.update(provenance or {})
    prov.setdefault("kit_version", __version__)
    return _clean({
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kit_version": __version__,
        "estimator": model.get_params(deep=False),
        "regimes": [r.to_dict() for r in model.regimes_],
        "breakpoints": list(model.breakpoints_),
        "outliers": {"count": model.n_outliers_, "rule": OUTLIER_RULE,
                     "by_regime": [r.n_outliers for r in model.regimes_]},
        "n_samples": getattr(model, "n_samples_", sum(r.n_samples for r in model.regimes_)),
        "provenance": prov,
        "validation": getattr(model, "validation_", {}) or {},
    })


def dumps(model: RegimeModel, provenance: dict[str, Any] | None = None) -> str:
    return json.dumps(model_to_dict(model, provenance), indent=1, allow_nan=False) + "\n"


def save_model(model: RegimeModel, path: str | Path,
               provenance: dict[str, Any] | None = None) -> Path:
    """Write the model atomically (temp file + rename) so a crash never leaves half a file."""
    path = Path(path)
    text = dumps(model, provenance)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def model_from_dict(d: dict[str, Any], where: str = "model") -> RegimeModel:
    if d.get("format") != FORMAT:
        raise ModelError('not a pt2pt model file (no "format": "pt2pt-model")', where=where,
                         hint="give a file written by 'pt2pt fit'")
    if int(d.get("format_version", 0)) > FORMAT_VERSION:
        raise ModelError(f"model format version {d.get('format_version')} is newer than this kit "
                         f"reads ({FORMAT_VERSION})", where=where, hint="upgrade pt2pt-kit")
    try:
        est = dict(d.get("estimator", {}))
        model = RegimeModel(**est)
        model.regimes_ = [Regime.from_dict(r) for r in d["regimes"]]
        model.breakpoints_ = [float(b) for b in d["breakpoints"]]
        model.n_outliers_ = int(d["outliers"]["count"])
        model.n_samples_ = int(d["n_samples"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"malformed model file ({type(exc).__name__}: {exc})", where=where,
                         hint="re-create it with 'pt2pt fit'") from None
    if not model.regimes_:
        raise ModelError("model file has no regimes", where=where)
    model.outlier_mask_ = None
    model.validation_ = d.get("validation") or {}
    model.provenance_ = d.get("provenance") or {}
    return model


def load_model(path: str | Path) -> RegimeModel:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ModelError(f"cannot read model file ({exc.strerror})", where=str(path),
                         hint="give a model JSON written by 'pt2pt fit'") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"invalid JSON at line {exc.lineno}: {exc.msg}", where=str(path),
                         hint="give a file written by 'pt2pt fit'") from None
    if not isinstance(d, dict):
        raise ModelError("not a pt2pt model file", where=str(path))
    return model_from_dict(d, where=str(path))
