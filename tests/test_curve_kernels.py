"""The curve fits' compiled kernels (kit/model/_curve_kernels.c): the bounded Huber fit of a
linear curve ends where the numpy reference (``families._huber_linear_numpy``) ends, also where
both stall and restart; the between-size variance and its robust root give numpy's values bit
for bit; both refuse buffers they cannot read.

Like the mixture kernels, it is optional at install time but built wherever this suite runs
(``make venv``, the Containerfile): its absence is a failure here, not a skip.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from kit.model import families
from tests.built import extension


def _kernel() -> ModuleType:
    return extension("kit.model._curve_kernels")


def test_the_kernel_is_built_and_used() -> None:
    from kit.model import segmentation

    assert families._curves is _kernel() and segmentation._curves is _kernel()


def _problem(rng: np.random.Generator, n: int, b_zero: bool = False
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, float]:
    """Per-size medians of a latency + size/bandwidth curve in log time, with a few sizes
    far off it (slow bands), and the fit's weights and scales as fit_family makes them."""
    s = np.unique(np.round(np.exp(rng.uniform(0, np.log(2**22), n))))
    while len(s) < n:
        s = np.unique(np.r_[s, rng.integers(1, 2**22)])
    s = s.astype(float)
    a, b = 10 ** rng.uniform(-7, -5), 0.0 if b_zero else 10 ** rng.uniform(-10, -8)
    m = (a + b * s) * np.exp(rng.normal(0, 0.05, n))
    off = rng.random(n) < 0.15
    m[off] *= rng.uniform(1.5, 4.0, off.sum())
    w = rng.uniform(0.5, 20.0, n)
    sw = np.sqrt(w / w.mean())
    y = np.log(m)
    scale_a = float(np.median(m))
    scale_b = scale_a / float(np.median(s))
    f_scale = max(float(np.median(np.abs(y - np.median(y)))) * 1.4826, 1e-3)
    return s, y, sw, f_scale, scale_a, scale_b


def _cost(p: np.ndarray, s: np.ndarray, y: np.ndarray, sw: np.ndarray, f_scale: float,
          scale_a: float, scale_b: float) -> float:
    return families._huber_cost(families._linear_resid(s, y, sw, scale_a, scale_b)(p)[0],
                                f_scale)


# 3-7 values take numpy's plain sum, 8-128 its blocks of eight, more its halving
@pytest.mark.parametrize("n", [3, 5, 8, 9, 17, 60, 129, 300])
@pytest.mark.parametrize("b_zero", [False, True])
def test_the_kernel_ends_where_the_numpy_reference_ends(n: int, b_zero: bool) -> None:
    rng = np.random.default_rng(n + 1000 * b_zero)
    for _ in range(6):
        s, y, sw, f_scale, sa, sb = _problem(rng, n, b_zero)
        for p0 in ([1.0, 1.0], [rng.uniform(0, 3), rng.uniform(0, 3)], [0.0, 0.0], [5.0, 0.0]):
            start = np.array(p0)
            fast = families._huber_linear(s, y, sw, f_scale, start, sa, sb)
            ref = families._huber_linear_numpy(s, y, sw, f_scale, start, sa, sb)
            c_fast = _cost(fast, s, y, sw, f_scale, sa, sb)
            c_ref = _cost(ref, s, y, sw, f_scale, sa, sb)
            # the same minimum: the same parameters, or (along a flat valley) the same loss
            assert np.allclose(fast, ref, rtol=1e-7, atol=1e-13) or \
                c_fast == pytest.approx(c_ref, rel=1e-12, abs=1e-300)
            assert fast[0] >= 1e-12 and fast[1] >= 0.0


def test_the_kernel_starts_from_the_clipped_start_and_reports_its_cost() -> None:
    kern = _kernel()
    s, y, sw, f_scale, sa, sb = _problem(np.random.default_rng(7), 40)
    a, b, cost = kern.huber_linear(s, y, sw, f_scale, -3.0, -1.0, sa, sb, 0)
    assert (a, b) == (1e-12, 0.0)
    assert cost == pytest.approx(_cost(np.array([a, b]), s, y, sw, f_scale, sa, sb), rel=1e-14)


# Found by random searches over few-size series (latencies near zero): the Gauss-Newton loop
# stalls on these. On the first two a step promises more than the cost's rounding lets the
# line search see (rounding decides on which side of the stall rule the loop lands: the
# reference no longer stalls on the second); on the others the latency heads for its bound and
# every step clipped there goes uphill (before the restart, the loop stopped with a cost up
# to 2.7x the optimum's and handed over to scipy).
_STALLING = [
    ([1.0, 64.0, 65536.0], [-15.481333725560322, -14.691037126615765, -8.348547224935038],
     [1.1550666565384409, 0.9575604246180882, 0.8653895378142347], 0.0635742085928816,
     [0.10304634177501981, 0.47841407147051607], 4.1664257098941914e-07,
     6.510040171709674e-09),
    ([1.0, 2.0, 8.0, 64.0, 1024.0, 65536.0],
     [-18.67087764875541, -18.6617623034649, -18.598337173688424, -18.151393647008096,
      -16.183363797152158, -12.105905079798134],
     [0.3435873184510705, 0.8367134119764391, 1.1950035888422141, 1.4625266636654954,
      0.37454759191870385, 1.214312440407308], 0.32213878912316657,
     [0.36087469197429334, 0.5170328748292277], 1.0731304636483912e-08,
     2.9809179545788643e-10),
    ([339620.10293307644, 384769.3296611384, 882491.1913250684],
     [-4.288535346120932, -4.653759845633691, -2.525686592872361],
     [1.1254861406711583, 1.1395273377732096, 0.6593621111533811], 0.7265345818493797,
     [7.285967610454181e-11, 1.5836154456088485], 0.01372501297652164,
     3.5670756264822585e-08),
    ([443306.6095495008, 574130.5894278454, 622020.4452433576, 826793.4166847958],
     [-7.147302472809415, -6.914622378506499, -6.729565160810956, -5.333749339057026],
     [0.7319843487111829, 0.9423711827181956, 0.9958000435100259, 1.2587762869428407],
     0.07779286227347655, [9.13989508165369e-10, 2.8907922834269897],
     0.0010941044629793157, 1.8293751060961332e-09),
    ([242344.18934086905, 477642.6503872593, 553949.8401903167],
     [-8.990649545708882, -8.012489061007427, -8.186859015224632],
     [0.823784743587586, 1.2444076542924318, 0.8791065272028998], 0.0339880441808229,
     [3.5934176318730427e-09, 1.1171125178176924], 0.00027828660691430883,
     5.826251208695074e-10),
]


def _scipy_from(p: np.ndarray, s: np.ndarray, y: np.ndarray, sw: np.ndarray, f_scale: float,
                sa: float, sb: float) -> float:
    """The cost scipy's bounded trust region reaches from ``p`` (an independent solver, used
    here as the referee only)."""
    from scipy.optimize import least_squares

    resid = families._linear_resid(s, y, sw, sa, sb)
    out = least_squares(lambda q: resid(q)[0], np.maximum(p, families._LINEAR_LO),
                        loss="huber", f_scale=f_scale, bounds=(families._LINEAR_LO, np.inf),
                        xtol=1e-12, ftol=1e-12, gtol=1e-12)
    return _cost(np.maximum(out.x, families._LINEAR_LO), s, y, sw, f_scale, sa, sb)


@pytest.mark.parametrize("case", range(len(_STALLING)))
def test_a_stalled_fit_restarts_and_ends_at_the_optimum(case: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop restarts a stalled fit (the parameter heading for its bound put on it, or a
    scaled steepest descent step) and ends where scipy's trust region, started there or
    from the same start, finds nothing lower; the kernel ends where the reference does."""
    s, y, sw, f_scale, p0, sa, sb = (np.asarray(v, dtype=float) if isinstance(v, list) else v
                                     for v in _STALLING[case])
    restarts: list[int] = []
    restart = families._restart

    def spy(*args):  # type: ignore[no-untyped-def]
        restarts.append(1)
        return restart(*args)

    monkeypatch.setattr(families, "_restart", spy)
    ref = families._huber_linear_numpy(s, y, sw, f_scale, p0, sa, sb)
    assert bool(restarts) == (case != 1)
    fast = families._huber_linear(s, y, sw, f_scale, p0, sa, sb)
    cost = _cost(fast, s, y, sw, f_scale, sa, sb)
    assert np.allclose(fast, ref, rtol=1e-7, atol=1e-13) or \
        cost == pytest.approx(_cost(ref, s, y, sw, f_scale, sa, sb), rel=1e-12)
    for start in (fast, p0):
        assert cost <= _scipy_from(start, s, y, sw, f_scale, sa, sb) * (1 + 1e-9)


@pytest.mark.parametrize("kernel", [True, False])
def test_a_fit_without_a_curvature_restarts_by_a_descent_step(kernel: bool,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Every median at one size: latency and bandwidth cannot be told apart and neither
    curvature has an inverse, so no Newton step exists; the restart's scaled steepest descent
    steps reach the data from a start far off, in the kernel as in the reference."""
    if not kernel:
        monkeypatch.setattr(families, "_curves", None)
    s = np.full(10, 1000.0)
    m = np.full(10, 1e-5) * np.exp(np.linspace(-0.1, 0.1, 10))
    far, _ = families.fit_family("linear", s, m, np.ones(10), {"a": 1e-6, "b": 1e-9})
    # the Huber location of log medians symmetric about ln 1e-5 is their centre
    assert far["a"] + far["b"] * 1000.0 == pytest.approx(1e-5, rel=1e-6)


def test_the_kernel_refuses_buffers_it_cannot_read() -> None:
    kern = _kernel()
    s = np.array([1.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="equally long"):
        kern.huber_linear(s, s[:2].copy(), s, 0.1, 1.0, 1.0, 1.0, 1.0, 10)
    with pytest.raises(ValueError, match="equally long"):
        kern.huber_linear(b"1234567", b"1234567", b"1234567", 0.1, 1.0, 1.0, 1.0, 1.0, 10)
    with pytest.raises(ValueError, match="equally long"):
        kern.huber_linear(b"", b"", b"", 0.1, 1.0, 1.0, 1.0, 1.0, 10)
    with pytest.raises(ValueError, match="contiguous"):  # a strided view is not one buffer
        kern.huber_linear(np.arange(12.0)[::2], s, s, 0.1, 1.0, 1.0, 1.0, 1.0, 10)


def test_a_whole_fit_and_its_intervals_without_the_kernel_agree(monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    from kit.fit import synth
    from kit.model import RegimeModel
    from kit.model.memo import clear_all
    from kit.model.uncertainty import bootstrap_intervals

    s, t = synth.sample(synth.ethernet_like(), 8000, lo=1, hi=2**22, seed=5, grid=40)
    clear_all()
    fast = RegimeModel().fit(s, t)
    iv_fast = bootstrap_intervals(fast, s, t, n_boot=30)
    clear_all()
    monkeypatch.setattr(families, "_curves", None)
    slow = RegimeModel().fit(s, t)
    iv_slow = bootstrap_intervals(slow, s, t, n_boot=30)
    clear_all()
    assert [r.family for r in fast.regimes_] == [r.family for r in slow.regimes_]
    assert np.allclose(fast.breakpoints_, slow.breakpoints_)
    sizes = np.unique(s)
    assert np.allclose(fast.predict(sizes), slow.predict(sizes), rtol=1e-7)
    for a, b in zip(iv_fast["regimes"], iv_slow["regimes"], strict=True):
        for name, iv in a["params"].items():
            other = b["params"][name]
            for k in ("value", "lo", "hi"):
                assert (iv[k] is None) == (other[k] is None)
                if iv[k] is not None:
                    assert iv[k] == pytest.approx(other[k], rel=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_robust_tau2_in_c_is_numpys_bit_for_bit(seed: int) -> None:
    from kit.model import segmentation as sg

    rng = np.random.default_rng(seed)
    positive = 0
    for n in [*range(0, 24), 59, 60, 61, 400, 2001]:  # odd and even counts: two branches
        for infl in (1.0, 1.2618):
            v = 10 ** rng.uniform(-6, -1, n)
            d = rng.normal(0, np.sqrt(v * rng.uniform(0.2, 5.0)), n)
            if n:
                d[rng.integers(0, n)] *= 50.0  # a wild size
            fast, ref = sg.robust_tau2(d, v, infl), sg._robust_tau2_numpy(d, v, infl)
            assert fast == ref, (n, infl)
            positive += fast > 0
    assert positive > 20  # the root search ran, not only the zero answers


def test_robust_tau2_leaves_nan_and_infinities_to_numpy() -> None:
    from kit.model import segmentation as sg

    kern = _kernel()
    d, v = np.array([0.1, -0.2, 0.3, np.nan]), np.full(4, 1e-3)
    assert kern.robust_tau2(d, v, 1.0) is None
    assert kern.robust_tau2(d[:3], np.array([1e-3, np.inf, 1e-3]), 1.0) is None
    with np.errstate(all="ignore"):
        got = sg.robust_tau2(d, v)
        ref = sg._robust_tau2_numpy(d, v)
    assert got == ref or (np.isnan(got) and np.isnan(ref))


@pytest.mark.parametrize("seed", range(3))
def test_between_size_variance_in_c_is_numpys_bit_for_bit(seed: int) -> None:
    from kit.model import segmentation as sg

    rng = np.random.default_rng(seed)
    infl = 1.0 + (np.pi / 2) / (2 * sg.SMOOTH_HALF)
    for n_bins in (9, 10, 33, 60, 61, 500):
        y = np.cumsum(rng.normal(0, 0.1, n_bins)) + rng.normal(0, 0.05, n_bins)
        y[rng.integers(0, n_bins)] += 1.0  # a regime's jump
        v = 10 ** rng.uniform(-5, -2, n_bins)
        for holes in (0, 2):
            yy = y.copy()
            yy[rng.integers(0, n_bins, holes)] = np.nan  # bins without a median
            for local in (False, True):
                fast = sg.between_size_variance(np.zeros(n_bins), yy, v, local)
                ref = sg._between_size_variance_numpy(yy, v, infl, local)
                assert fast[0] == ref[0]
                assert np.array_equal(fast[1], ref[1], equal_nan=True)


def test_between_size_kernel_refuses_what_it_cannot_use() -> None:
    kern = _kernel()
    y, v = np.linspace(0.0, 1.0, 12), np.full(12, 1e-3)
    with pytest.raises(ValueError, match="equally long"):
        kern.between_size(y, v[:11].copy(), 1.0, 3, np.empty(12))
    with pytest.raises(ValueError, match="equally long"):
        kern.between_size(y, v, 1.0, 3, np.empty(11))
    with pytest.raises(ValueError, match=r"half in 1\.\.64"):
        kern.between_size(y, v, 1.0, 0, np.empty(12))
    with pytest.raises(TypeError):  # the differences are written: a read-only buffer is refused
        kern.between_size(y, v, 1.0, 3, b"x" * 96)
    out = np.empty(12)
    assert kern.between_size(np.full(12, np.nan), v, 1.0, 3, out) is None  # no difference


def test_the_kernels_constants_are_the_python_modules() -> None:
    import re
    from pathlib import Path

    from kit.model import segmentation

    src = (Path(families.__file__).parent / "_curve_kernels.c").read_text()
    defined = {m[1]: float(m[2]) for m in re.finditer(r"#define (\w+) ([0-9.e+-]+)", src)}
    assert defined["ROUNDING"] == families._ROUNDING
    assert defined["STALLED"] == families._STALLED
    assert defined["EXACT"] == families._EXACT
    assert defined["CHI2_1_MEDIAN"] == segmentation.CHI2_1_MEDIAN
    lo = re.search(r"LO\[2\] = \{([^}]*)\}", src)
    assert lo is not None
    assert [float(v) for v in lo[1].split(",")] == families._LINEAR_LO.tolist()
