"""The engine's compiled kernels (kit/model/_mixture_kernels.c: the noise mixture's EM step,
Newton terms and log-density, the band EM's E- and M-step) compute what the numpy reference
computes, and refuse buffers they cannot read instead of reading past them.

The kernels are optional at install time (no compiler or Python.h: the numpy path runs), but
this suite is run where they are built (``make venv``, the Containerfile), so their absence is
a failure here, not a skip: a silently slower fit would otherwise go unnoticed.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from kit.model import noise
from tests.built import extension


def _kernels() -> ModuleType:
    return extension("kit.model._mixture_kernels")


def test_the_kernels_are_built_and_used() -> None:
    from kit.model import mixture

    assert noise._kernels is _kernels() and mixture._kernels is _kernels()


def _sample(rng: np.random.Generator, n: int) -> np.ndarray:
    x = np.where(rng.random(n) < 0.3, rng.normal(0.3, 0.15, n), rng.normal(0.0, 0.05, n))
    x[: max(1, n // 50)] += rng.exponential(2.0, max(1, n // 50))  # a slow tail
    return x


@pytest.mark.parametrize("n", [1, 7, 8, 9, 63, 1251])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_newton_terms_match_the_numpy_reference(n: int, k: int) -> None:
    rng = np.random.default_rng(100 * n + k)
    x = _sample(rng, n)
    for _ in range(5):
        th = np.concatenate([rng.normal(0, 1, k - 1), rng.normal(0.1, 0.3, k),
                             np.log(rng.uniform(0.02, 0.5, k))])
        ll0, g0, h0 = noise._gmm_newton_terms_numpy(x, th, k)
        ll1, g1, h1 = noise._gmm_newton_terms(x, th, k)
        scale = max(1.0, float(np.abs(h0).max()))
        assert ll1 == pytest.approx(ll0, rel=1e-11, abs=1e-9)
        assert np.allclose(g1, g0, rtol=1e-9, atol=1e-9 * scale)
        assert np.allclose(h1, h0, rtol=1e-9, atol=1e-9 * scale)
        assert np.array_equal(h1, h1.T)


def test_newton_terms_propagate_non_finite_values_as_numpy_does() -> None:
    x = np.array([0.1, np.nan, 0.3])
    th = np.array([0.0, 0.0, 0.2, np.log(0.1), np.log(0.1)])
    with np.errstate(all="ignore"):
        ll0 = noise._gmm_newton_terms_numpy(x, th, 2)[0]
    assert np.isnan(ll0) and np.isnan(noise._gmm_newton_terms(x, th, 2)[0])
    far = np.array([0.0, 1e300])  # every component's density underflows at 1e300
    with np.errstate(all="ignore"):
        ll0 = noise._gmm_newton_terms_numpy(far, th, 2)[0]
        ll1 = noise._gmm_newton_terms(far, th, 2)[0]
    assert (np.isnan(ll0) and np.isnan(ll1)) or ll0 == ll1


def _newton_start(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.concatenate([rng.normal(0, 0.5, k - 1), np.sort(rng.normal(0.1, 0.3, k)),
                           np.log(rng.uniform(0.03, 0.3, k))])


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("k", [2, 3])
def test_newton_loop_in_c_takes_the_numpy_loops_steps(seed: int, k: int) -> None:
    """Same evaluations, same end (to round-off): the C loop's Jacobi eigenvectors give the
    numpy loop's LAPACK steps, its backtracking accepts and rejects the same trials. (At
    the k the fit uses; with 4 components wandering on a ridge, round-off can steer the two
    loops to different points, as it steers LAPACK builds.)"""
    rng = np.random.default_rng(seed)
    x = _sample(rng, int(rng.integers(100, 2500)))
    th = _newton_start(rng, k)
    with np.errstate(all="ignore"):
        th0, ll0, ev0, ok0 = noise._gmm_newton(x, th, k, 60, kernels=False)
    th_in = th.copy()
    th1, ll1, ev1, ok1 = noise._gmm_newton(x, th, k, 60, kernels=True)
    assert np.array_equal(th, th_in)  # the caller's start is not overwritten
    if ev0 == 60:  # stopped by the budget on a ridge, where round-off steers: both climbed
        start = noise._gmm_newton_terms_numpy(x, th, k)[0]
        assert ll1 >= start and ll0 >= start
        return
    assert (ev1, ok1) == (ev0, ok0)
    assert ll1 == pytest.approx(ll0, rel=1e-10, abs=1e-8)
    assert np.allclose(th1, th0, rtol=1e-6, atol=1e-6)


def test_newton_loop_in_c_stops_at_the_sd_floor_and_at_non_finite_terms() -> None:
    kern = _kernels()
    lr = np.array([0.0] * 40 + [1.0] * 40)  # two spikes: each component collapses
    th = np.array([0.0, 0.0, 1.0, np.log(0.05), np.log(0.05)])
    with np.errstate(all="ignore"):
        want = noise._gmm_newton(lr, th, 2, 50, kernels=False)
    got = noise._gmm_newton(lr, th, 2, 50, kernels=True)
    assert got[3] is False and want[3] is False and got[2] == want[2]
    bad = np.array([0.1, np.nan, 0.3])
    th_bad = th.copy()
    ll, evals, ok = kern.gmm_newton(bad, th_bad, 2, 50, float(noise._LN_SD_MIN))
    assert np.isnan(ll) and evals == 1 and ok == 0 and np.array_equal(th_bad, th)
    with pytest.raises(ValueError, match="th"):
        kern.gmm_newton(lr, np.zeros(4), 2, 10, -9.0)
    with pytest.raises((ValueError, BufferError, TypeError)):
        kern.gmm_newton(lr, th.tobytes(), 2, 10, -9.0)  # th is written: read-only refused
    with pytest.raises(ValueError, match="k must be"):
        kern.gmm_newton(lr, np.zeros(26), 9, 10, -9.0)


@pytest.mark.parametrize("seed", range(6))
def test_em_with_kernels_ends_where_the_numpy_em_ends(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lr = _sample(rng, int(rng.integers(200, 3000)))
    for k in (2, 3):
        w0, mu0, sd0, ll0 = noise._em_gmm(lr, k, kernels=False)
        w1, mu1, sd1, ll1 = noise._em_gmm(lr, k, kernels=True)
        assert ll1 == pytest.approx(ll0, abs=1e-6)
        assert np.allclose(w1, w0, atol=1e-6) and np.allclose(mu1, mu0, atol=1e-6)
        assert np.allclose(sd1, sd0, rtol=1e-6)


def test_em_step_floors_the_sd_and_fills_every_output() -> None:
    k = 2
    lr = np.array([0.0] * 30 + [1.0] * 30)  # two spikes: each component's sd hits the floor
    out = np.full(3 * k, np.nan)
    th = np.array([0.0, 0.0, 0.0, 1.0, np.log(0.1), np.log(0.1)])
    ll = _kernels().gmm_em_step(lr, th, k, out)
    assert np.isfinite(ll) and np.all(np.isfinite(out))
    assert np.allclose(np.exp(out[2 * k:]), 1e-4) and np.allclose(out[k:2 * k], [0.0, 1.0])


def test_kernels_refuse_buffers_they_cannot_read() -> None:
    kern = _kernels()
    x = np.linspace(0, 1, 10)
    th = np.zeros(5)
    g, h = np.empty(5), np.empty((5, 5))
    with pytest.raises(ValueError, match="th"):
        kern.gmm_newton_terms(x, np.zeros(4), 2, g, h)  # 3k-1 values, not 4
    with pytest.raises(ValueError, match="h"):
        kern.gmm_newton_terms(x, th, 2, g, np.empty((4, 4)))
    with pytest.raises(ValueError, match="x"):
        kern.gmm_newton_terms(x.astype(np.float32), th, 2, g, h)
    with pytest.raises((ValueError, BufferError)):
        kern.gmm_newton_terms(np.linspace(0, 1, 20)[::2], th, 2, g, h)  # not contiguous
    with pytest.raises((ValueError, BufferError, TypeError)):
        kern.gmm_newton_terms(x, th, 2, g, np.empty((5, 5)).tobytes())  # read-only output
    with pytest.raises(ValueError, match="k must be"):
        kern.gmm_em_step(x, np.zeros(27), 9, np.empty(27))
    with pytest.raises(TypeError):
        kern.gmm_em_step(x, th, 2)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_mixture_log_density_matches_the_numpy_reference_edges_included(k: int) -> None:
    rng = np.random.default_rng(k)
    w, mu, sd = rng.dirichlet(np.ones(k)), rng.normal(size=k), rng.uniform(0.01, 1.0, k)
    gmm = noise.Noise("gmm", {"weights": list(w), "means": list(mu), "sds": list(sd)})
    r = np.concatenate([np.exp(rng.normal(size=999)),
                        [0.0, np.inf, np.nan, -1.0, 1e-300, 1e300]])
    with np.errstate(all="ignore"):
        want = noise._gmm_logpdf_numpy(np.log(r), mu, sd,
                                       np.log(w) - np.log(sd) - noise._HALF_LOG_2PI)
    got = gmm.logpdf(r)
    assert np.array_equal(np.isfinite(got), np.isfinite(want))
    assert np.array_equal(got[~np.isfinite(want)], want[~np.isfinite(want)], equal_nan=True)
    assert np.allclose(got, want, rtol=1e-13, atol=0, equal_nan=True)
    # shapes as numpy's: a scalar for a scalar, the input's shape otherwise
    assert np.ndim(gmm.logpdf(2.0)) == 0 and gmm.logpdf(np.ones((3, 2))).shape == (3, 2)
    assert gmm.logpdf(r[:12].reshape(3, 4)[:, ::2]).shape == (3, 2)  # a strided view


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_mixture_quantiles_match_the_numpy_reference(k: int) -> None:
    rng = np.random.default_rng(10 + k)
    for _ in range(30):
        w, mu, sd = rng.dirichlet(np.ones(k)), 2 * rng.normal(size=k), rng.uniform(0.005, 1, k)
        q = np.concatenate([rng.uniform(size=20), [0.0, 1.0, 0.5, 1e-12, 1 - 1e-12, np.nan]])
        gmm = noise.Noise("gmm", {"weights": list(w), "means": list(mu), "sds": list(sd)})
        got = gmm._ppf(q)
        with np.errstate(all="ignore"):
            want = noise._gmm_ppf_numpy(q, w, mu, sd)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.allclose(got, want, rtol=1e-13, atol=0, equal_nan=True)
    assert np.ndim(gmm._ppf(np.array(0.5))) == 0 and gmm._ppf(np.full((2, 3), 0.3)).shape == (2, 3)
    with pytest.raises(ValueError, match="w"):
        _kernels().gmm_ppf(q, mu, sd, np.ones(k + 1), np.empty(len(q)))


def test_log_density_kernel_refuses_what_it_cannot_read() -> None:
    kern = _kernels()
    lr, out = np.zeros(10), np.empty(10)
    with pytest.raises(ValueError, match="sd"):
        kern.gmm_logpdf(lr, np.zeros(2), np.ones(3), np.zeros(2), out)
    with pytest.raises(ValueError, match="out"):
        kern.gmm_logpdf(lr, np.zeros(2), np.ones(2), np.zeros(2), np.empty(9))
    with pytest.raises(ValueError, match="components"):
        kern.gmm_logpdf(lr, np.zeros(9), np.ones(9), np.zeros(9), out)
    with pytest.raises((ValueError, BufferError, TypeError)):
        kern.gmm_logpdf(lr, np.zeros(2), np.ones(2), np.zeros(2), out.tobytes())


def test_normal_cdf_kernels_are_the_light_python_functions_bit_for_bit() -> None:
    """kit.model.special's light ndtr and log_ndtr run in C where the kernels are built:
    the same libm calls as its Python versions (the fallback), the same values exactly."""
    from kit.model import special

    kern = _kernels()
    rng = np.random.default_rng(5)
    x = np.concatenate([np.linspace(-45.0, 40.0, 20001), rng.normal(0, 8, 20000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300]])
    for name, one in (("ndtr", special._ndtr1), ("log_ndtr", special._log_ndtr1)):
        out = np.empty_like(x)
        getattr(kern, name)(x, out)
        want = np.array([one(v) for v in x.tolist()])
        assert np.array_equal(out, want, equal_nan=True), name
        light = getattr(special.LIGHT, name)
        assert np.array_equal(light(x.reshape(4, -1)[:, ::3]), want.reshape(4, -1)[:, ::3],
                              equal_nan=True)
        assert np.ndim(light(0.5)) == 0 and light(0.5) == one(0.5)
    with pytest.raises(ValueError, match="out"):
        kern.ndtr(x, np.empty(3))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_mixture_cdf_and_density_without_scipy_match_the_numpy_formulas(
        k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model read without SciPy takes Noise.cdf_and_log_density through the kernel: the
    numpy formulas' values (with the same ndtr) to rounding, edges and shapes included."""
    from kit.model import special

    rng = np.random.default_rng(20 + k)
    w, mu, sd = rng.dirichlet(np.ones(k)), rng.normal(size=k), rng.uniform(0.01, 1.0, k)
    gmm = noise.Noise("gmm", {"weights": list(w), "means": list(mu), "sds": list(sd)})
    r = np.concatenate([np.exp(rng.normal(size=999)), [0.0, np.inf, np.nan, 1e-300, 1e300]])
    monkeypatch.setattr(special, "functions", lambda: special.LIGHT)
    got_cdf, got_dens = gmm.cdf_and_log_density(r)
    with np.errstate(all="ignore"):
        z = (np.log(r)[:, None] - mu) / sd
        want_cdf = np.sum(w * special.LIGHT.ndtr(z), axis=-1)
        want_dens = np.sum((w / sd) * np.exp(-0.5 * (z * z)), axis=-1) / np.sqrt(2 * np.pi)
    assert np.allclose(got_cdf, want_cdf, rtol=1e-14, atol=1e-300, equal_nan=True)
    assert np.allclose(got_dens, want_dens, rtol=1e-13, atol=1e-300, equal_nan=True)
    assert np.array_equal(np.isnan(got_cdf), np.isnan(r))
    c, d = gmm.cdf_and_log_density(np.array(1.3))
    assert np.ndim(c) == 0 and np.ndim(d) == 0
    assert gmm.cdf_and_log_density(np.ones((3, 2)))[0].shape == (3, 2)
    with pytest.raises(ValueError, match="sd"):
        _kernels().gmm_cdf_density(np.zeros(4), mu, np.ones(k + 1), w, np.empty(4),
                                   np.empty(4))


def _bands_data(seed: int, shuffled: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.log(np.repeat(np.exp(rng.uniform(0, 9, 90)).round(), 40))
    if shuffled:
        x = rng.permutation(x)
    slow = rng.random(len(x)) < 0.35 / (1 + np.exp(-(x - 4)))
    y = -11 + 0.1 * x + np.where(slow, 0.2, 0.0) + rng.normal(0, 0.08, len(x))
    return x, y


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_band_em_with_the_kernel_ends_where_the_numpy_em_ends(seed: int, shuffled: bool) -> None:
    from kit.model.mixture import fit_bands

    x, y = _bands_data(seed, shuffled)
    a, b = fit_bands(x, y, kernels=False), fit_bands(x, y, kernels=True)
    assert a is not None and b is not None
    assert b.loglik == pytest.approx(a.loglik, abs=1e-6)
    assert np.allclose(b.lines, a.lines, atol=1e-8) and np.allclose(b.sigmas, a.sigmas, rtol=1e-8)
    assert np.allclose(b.weight, a.weight, atol=1e-7) and np.allclose(b.resp, a.resp, atol=1e-8)


def test_band_size_terms_match_the_numpy_lines() -> None:
    from scipy.special import expit

    rng = np.random.default_rng(7)
    g = 40
    xu = np.sort(rng.uniform(0, 15, g))
    xu_c = xu - xu.mean()
    cnt = rng.integers(1, 60, g).astype(float)
    sy, syy = rng.normal(0, 1, g) * cnt, rng.uniform(0.5, 2, g) * cnt
    for th in (np.array([0.1, 0.5, 0.9, 0.45, -2.0, -1.5, 0.3, -0.2]),
               np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 80.0, 3.0]),  # shares at the clip
               np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.nan, 0.0])):
        beta, gam = np.empty(g), np.empty(g)
        sum_l0, quad = _kernels().band_size_terms(th, xu, xu_c, cnt, sy, syy, beta, gam)
        w1 = np.clip(expit(th[6] + th[7] * xu_c), 1e-12, 1 - 1e-12)
        mu0, mu1 = th[0] + th[1] * xu, th[2] + th[3] * xu
        p0, p1 = np.exp(-2.0 * th[4]), np.exp(-2.0 * th[5])
        a0 = np.log1p(-w1) - th[4] - noise._HALF_LOG_2PI
        a1 = np.log(w1) - th[5] - noise._HALF_LOG_2PI
        want_l0 = float(np.dot(cnt, a0)) - 0.5 * p0 * float(
            np.sum(syy - 2.0 * mu0 * sy + mu0 * mu0 * cnt))
        assert np.allclose(beta, mu1 * p1 - mu0 * p0, rtol=1e-12, equal_nan=True)
        assert np.allclose(gam, (a1 - a0) - 0.5 * (mu1 * mu1 * p1 - mu0 * mu0 * p0),
                           rtol=1e-12, atol=1e-12, equal_nan=True)
        assert quad == -0.5 * (p1 - p0)
        assert (np.isnan(sum_l0) and np.isnan(want_l0)) or sum_l0 == pytest.approx(want_l0,
                                                                                   rel=1e-12)
    with pytest.raises(ValueError, match="th"):
        _kernels().band_size_terms(np.zeros(7), xu, xu_c, cnt, sy, syy, beta, gam)
    with pytest.raises(ValueError, match="gam"):
        _kernels().band_size_terms(np.zeros(8), xu, xu_c, cnt, sy, syy, beta, np.empty(g - 1))


def test_band_kernel_refuses_indices_it_cannot_use() -> None:
    kern = _kernels()
    y = np.linspace(-1, 1, 6)
    beta, gam = np.zeros(2), np.zeros(2)
    out = [np.empty(6), np.empty(2), np.empty(2), np.empty(2)]
    # d = 0 everywhere: r = 1/2, softplus(0) = ln 2, each size's r sums to 3/2
    sp = kern.band_e_step(y, np.array([0, 0, 0, 1, 1, 1]), beta, gam, 0.0, *out)
    assert sp == pytest.approx(6 * np.log(2))
    assert np.allclose(out[0], 0.5) and np.allclose(out[1], [1.5, 1.5])
    assert np.allclose(out[2], [0.5 * y[:3].sum(), 0.5 * y[3:].sum()])
    with pytest.raises(IndexError, match="inv"):
        kern.band_e_step(y, np.array([0, 0, 0, 1, 1, 2]), beta, gam, -0.5, *out)
    with pytest.raises(IndexError, match="inv"):
        kern.band_e_step(y, np.array([0, 0, -1, 1, 1, 1]), beta, gam, -0.5, *out)
    with pytest.raises(ValueError, match="inv"):
        kern.band_e_step(y, np.array([0, 0, 0, 1, 1, 1], dtype=np.int32), beta, gam, -0.5, *out)
    with pytest.raises(ValueError, match="gam"):
        kern.band_e_step(y, np.array([0, 0, 0, 1, 1, 1]), beta, np.zeros(3), -0.5, *out)


def test_a_whole_fit_without_kernels_gives_the_same_model(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    from kit.fit import synth
    from kit.model import RegimeModel, mixture
    from kit.model.memo import clear_all

    s, t = synth.sample(synth.ethernet_like(), 6000, lo=1, hi=2**22, seed=3, grid=30)
    clear_all()  # the engine's memos would hand the second fit the first one's mixtures
    fast = RegimeModel().fit(s, t)
    clear_all()
    monkeypatch.setattr(noise, "_kernels", None)
    monkeypatch.setattr(mixture, "_kernels", None)
    slow = RegimeModel().fit(s, t)
    clear_all()
    assert len(fast.regimes_) == len(slow.regimes_)
    sizes = np.unique(s)
    assert np.allclose(fast.predict(sizes), slow.predict(sizes), rtol=1e-6)
    q = np.array([0.05, 0.5, 0.95])
    assert np.allclose(fast.predict_quantiles(sizes, q), slow.predict_quantiles(sizes, q),
                       rtol=1e-5)
    assert [r.noise.family for r in fast.regimes_] == [r.noise.family for r in slow.regimes_]


def test_band_m_step_kernel_matches_numpy_and_declines_what_it_cannot_solve() -> None:
    from kit.model.mixture import SLOPE_PRECISION, _group_line, logistic_step

    kern = _kernels()
    rng = np.random.default_rng(5)
    xu = np.sort(rng.uniform(0, 9, 40))
    xc = xu - xu.mean()
    cnt = rng.integers(20, 60, 40).astype(float)
    rs = cnt * rng.uniform(0, 1, 40)
    sy, ry = cnt * rng.normal(0, 0.1, 40), rs * rng.normal(0.2, 0.1, 40)
    syy, ryy = sy * sy / cnt + cnt * 0.01, ry * ry / rs + rs * 0.02
    out = np.empty(8)
    assert kern.band_m_step(xu, xc, cnt, sy, syy, rs, ry, ryy, 0.1, 0.2, SLOPE_PRECISION, out)
    for k, (w, wy, wyy) in enumerate(((cnt - rs, sy - ry, syy - ryy), (rs, ry, ryy))):
        line = _group_line(xu, w, wy)
        mu = line[0] + line[1] * xu
        ss = float(np.sum(wyy - 2.0 * mu * wy + mu * mu * w))
        assert np.allclose(out[2 * k:2 * k + 2], line, rtol=1e-10, atol=1e-12)
        sd = np.sqrt(max(ss, 0.0) / max(w.sum(), 1e-12))
        assert out[4 + k] == pytest.approx(np.log(max(sd, 1e-3)), rel=1e-10)
    c = logistic_step(xc, rs, np.array([0.1, 0.2]), n=cnt, slope_precision=SLOPE_PRECISION)
    assert np.allclose(out[6:], c, rtol=1e-10, atol=1e-12)
    bad = rs.copy()
    bad[3] = np.nan  # the logistic system is then not positive definite: numpy takes over
    assert not kern.band_m_step(xu, xc, cnt, sy, syy, bad, ry, ryy, 0.1, 0.2, 1e-6, out)
    with pytest.raises(ValueError, match="ryy"):
        kern.band_m_step(xu, xc, cnt, sy, syy, rs, ry, ryy[:-1], 0.1, 0.2, 1e-6, out)
    with pytest.raises(ValueError, match="out"):
        kern.band_m_step(xu, xc, cnt, sy, syy, rs, ry, ryy, 0.1, 0.2, 1e-6, np.empty(7))
