"""The scikit-learn estimator contract without importing scikit-learn.

``RegimeModel`` and the baselines follow scikit-learn's rules (constructor arguments stored
verbatim, ``get_params`` / ``set_params``, ``clone`` makes an unfitted copy) so that
scikit-learn's tools work on them; ``sklearn.base.clone`` accepts any object with
``get_params``. Inheriting ``sklearn.base.BaseEstimator`` for these three methods imported
scikit-learn and, through it, ``scipy.stats``, ``scipy.sparse`` and more: 0.8-1.0 CPU-s
before ``pt2pt predict`` printed one line, most of a 33 k-sample ``pt2pt fit``.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Self, TypeVar


class Params:
    """``get_params``, ``set_params`` and a repr of the non-default parameters, as
    ``sklearn.base.BaseEstimator`` defines them for estimators whose parameters are plain
    values (no nested estimators)."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The constructor's keyword parameters, sorted (scikit-learn's order)."""
        init = cls.__init__
        if init is object.__init__:
            return []
        params = inspect.signature(init).parameters.values()
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            raise TypeError(f"{cls.__name__} must not take *args (scikit-learn contract)")
        return sorted(p.name for p in params if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments as stored (``deep`` is accepted for scikit-learn's
        signature; no parameter here is itself an estimator)."""
        del deep
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> Self:
        valid = set(self._get_param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for estimator "
                                 f"{type(self).__name__}; valid parameters: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        signature = inspect.signature(type(self).__init__).parameters
        changed = []
        for name, value in self.get_params().items():
            default = signature[name].default
            if default is inspect.Parameter.empty or not _same(value, default):
                changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except Exception:  # e.g. numpy arrays: compare by identity only
        return False


E = TypeVar("E")


def clone(estimator: E) -> E:
    """An unfitted copy with the same parameters (``sklearn.base.clone`` for parameters
    that are plain values: each is deep-copied, as scikit-learn does for non-estimators)."""
    try:
        params = estimator.get_params(deep=False)  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"cannot clone {type(estimator).__name__}: it has no get_params()") \
            from None
    return type(estimator)(**{k: copy.deepcopy(v) for k, v in params.items()})


__all__ = ["Params", "clone"]
