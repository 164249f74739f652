"""What a fitted regime is: a size range, a central curve, its noise, and optionally bands.

A regime's predictive distribution at size s is a mixture of *terms*, each a curve value
times a ratio distribution: one term for an ordinary regime (curve × noise), or one per
band for a mixture regime (band curve × band noise, weighted by a logistic share in
ln size). Keeping this in one place lets prediction, sampling, CDFs (for scores) and the
overlap EM all agree on the same density.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kit.model.families import effective_size, evaluate
from kit.model.noise import Noise
from kit.model.special import expit


@dataclass
class Component:
    """One band of a mixture regime: its own curve and ratio noise."""

    family: str
    params: dict[str, float]
    noise: Noise
    share: float  # overall share of the regime's samples

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": self.params, "noise": self.noise.to_dict(),
                "share": self.share}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Component:
        return cls(d["family"], dict(d["params"]), Noise.from_dict(d["noise"]), float(d["share"]))


@dataclass
class Overlap:
    """Sizes near a boundary where samples follow either neighbouring regime.

    The share of the next regime is logistic(slope · (ln s − ln center)); outside
    [size_lo, size_hi] it is taken as 0 (left) or 1 (right).
    """

    size_lo: float
    size_hi: float
    center: float
    slope: float
    share_left: float
    share_right: float
    n_samples: int

    def weight(self, size: NDArray) -> NDArray:
        x = np.log(effective_size(size))
        return expit(self.slope * (x - np.log(self.center)))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Overlap:
        fields: dict[str, Any] = {k: (int(v) if k == "n_samples" else float(v))
                                  for k, v in d.items()}
        return cls(**fields)


@dataclass
class Regime:
    """One regime. ``family``/``params`` fit the per-size medians; ``noise`` is time/curve."""

    size_min: float
    size_max: float
    family: str
    params: dict[str, float]
    noise: Noise
    components: list[Component] = field(default_factory=list)
    weight: dict[str, float] = field(default_factory=dict)
    overlap: Overlap | None = None
    n_samples: int = 0
    n_outliers: int = 0
    aic: dict[str, float] = field(default_factory=dict)

    @property
    def is_mixture(self) -> bool:
        return len(self.components) > 1

    def curve(self, size: NDArray) -> NDArray:
        return evaluate(self.family, self.params, size)

    def component_shares(self, size: NDArray) -> NDArray:
        """(len(size), n_components) band shares; [1] for an ordinary regime."""
        s = np.asarray(size, dtype=float)
        if not self.is_mixture:
            return np.ones((len(s), 1))
        w1 = expit(self.weight["intercept"] + self.weight["slope"] * np.log(effective_size(s)))
        return np.stack([1.0 - w1, w1], axis=1)

    def terms(self, size: NDArray) -> list[tuple[NDArray, NDArray, Noise]]:
        """(weight, scale, noise) per term: time = scale · ratio with ratio ~ noise."""
        if not self.is_mixture:
            return [(np.ones(len(size)), self.curve(size), self.noise)]
        shares = self.component_shares(size)
        return [(shares[:, k], evaluate(c.family, c.params, size), c.noise)
                for k, c in enumerate(self.components)]

    def logpdf(self, size: NDArray, time: NDArray) -> NDArray:
        """Log density of ``time`` at ``size`` under this regime alone (curves extrapolate)."""
        acc = np.full(len(size), -np.inf)
        for w, scale, noise in self.terms(size):
            with np.errstate(divide="ignore"):
                lp = np.log(w) + noise.logpdf(time / scale) - np.log(scale)
            acc = np.logaddexp(acc, lp)
        return acc

    def to_dict(self) -> dict[str, Any]:
        return {
            "size_min": self.size_min, "size_max": self.size_max, "family": self.family,
            "params": self.params, "noise": self.noise.to_dict(),
            "mixture": ({"components": [c.to_dict() for c in self.components],
                         "weight": self.weight} if self.is_mixture else None),
            "overlap": self.overlap.to_dict() if self.overlap else None,
            "n_samples": self.n_samples, "n_outliers": self.n_outliers, "aic": self.aic,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Regime:
        mix = d.get("mixture")
        return cls(
            size_min=float(d["size_min"]), size_max=float(d["size_max"]), family=d["family"],
            params={k: float(v) for k, v in d["params"].items()},
            noise=Noise.from_dict(d["noise"]),
            components=[Component.from_dict(c) for c in mix["components"]] if mix else [],
            weight={k: float(v) for k, v in mix["weight"].items()} if mix else {},
            overlap=Overlap.from_dict(d["overlap"]) if d.get("overlap") else None,
            n_samples=int(d.get("n_samples", 0)), n_outliers=int(d.get("n_outliers", 0)),
            # JSON has no infinity: an AIC that could not be computed is written as null.
            aic={k: float("inf") if v is None else float(v) for k, v in d.get("aic", {}).items()},
        )
