"""kit.core.lsq.nnls2 gives scipy.optimize.nnls's answer for two columns (the lines of
the baselines and of the SimGrid export), without importing scipy.optimize."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import nnls

from kit.core.lsq import nnls2


@pytest.mark.parametrize("seed", range(60))
def test_two_column_nnls_is_scipys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 200))
    size = np.exp(rng.uniform(0, 20, n))
    a, b = rng.choice([-1.0, 0.0, 1.0]) * 1e-5, rng.choice([-1.0, 0.0, 1.0]) * 1e-9
    time = np.abs(a + b * size + rng.normal(0, 1e-6, n)) + 1e-9
    design = np.column_stack([1.0 / time, size / time / size.max()])
    target = np.ones(n)
    got, res = nnls2(design, target)
    want, want_res = nnls(design, target)
    assert np.all(got >= 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert res == pytest.approx(want_res, rel=1e-9, abs=1e-12)


def test_bound_cases() -> None:
    design = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    x, _ = nnls2(design, np.array([3.0, 2.0, 1.0]))  # falling line: slope pinned at 0
    np.testing.assert_allclose(x, nnls(design, np.array([3.0, 2.0, 1.0]))[0])
    x, res = nnls2(design, -np.ones(3))  # everything negative: 0
    assert x.tolist() == [0.0, 0.0] and res == pytest.approx(np.sqrt(3))
    with pytest.raises(ValueError, match="two-column"):
        nnls2(np.ones((3, 3)), np.ones(3))
