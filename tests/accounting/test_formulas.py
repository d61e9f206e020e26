"""Closed forms and the equations of Park et al. (2017), Sec. 5."""
import math

import numpy as np
import pytest

from dpem_fast.accounting import (
    AdvancedAccountant, GaussianEvent, GDPAccountant, LaplaceEvent,
    LinearAccountant, MomentsAccountant, RDPAccountant,
    ZCDPAccountant, DiscreteGaussianEvent)
from dpem_fast.accounting import _rdp
from dpem_fast.mixture import dpem_plan
from dpem_fast.accounting._gdp import gaussian_delta
from dpem_fast.accounting._zcdp import discrete_gaussian_rho

K, J, DELTA = 3, 10, 1e-4


def eq19(eps, lam):
    return math.log((lam + 1) / (2 * lam + 1) * math.exp(lam * eps)
                    + lam / (2 * lam + 1) * math.exp(-eps * (lam + 1)))


def eq20(z, lam):
    return (lam * lam + lam) / (2 * z * z)


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 3.0])
def test_eq19_laplace_log_moment(eps):
    acct = MomentsAccountant(max_lambda=40).compose(LaplaceEvent(eps))
    expected = [eq19(eps, lam) for lam in range(1, 41)]
    np.testing.assert_allclose(acct.log_moments, expected, rtol=1e-12)


@pytest.mark.parametrize("z", [0.5, 1.24, 7.0])
def test_eq20_gaussian_log_moment(z):
    acct = MomentsAccountant(max_lambda=40).compose(GaussianEvent(z))
    np.testing.assert_allclose(acct.log_moments,
                               [eq20(z, lam) for lam in range(1, 41)],
                               rtol=1e-13)


@pytest.mark.parametrize("z", [2.0, 10.0, 40.0])
def test_ma_ggg_tail_bound_eq3(z):
    acct = MomentsAccountant().compose(dpem_plan("GGG", K, J, z))
    for eps in (0.5, 1.0, 4.0):
        log_d = min(J * (2 * K + 1) * eq20(z, lam) - lam * eps
                    for lam in range(1, 257))
        assert acct.get_delta(eps) == pytest.approx(math.exp(min(log_d, 0)),
                                                    rel=1e-9)


def test_ma_llg_tail_bound_eq3():
    eps_i, d_i = 0.05, 1e-8
    z3 = math.sqrt(2 * math.log(1.25 / d_i)) / eps_i
    acct = MomentsAccountant().compose(
        dpem_plan("LLG", K, J, eps_i, delta_per_release=d_i))
    for eps in (1.0, 3.0):
        log_d = min(J * (K + 1) * eq19(eps_i, lam)
                    + J * K * eq20(z3, lam) - lam * eps
                    for lam in range(1, 257))
        assert acct.get_delta(eps) == pytest.approx(math.exp(min(log_d, 0)),
                                                    rel=1e-9)


def test_zcdp_ggg_and_llg_rho_and_prop_1_3():
    z = 6.0
    acct = ZCDPAccountant(conversion="classic").compose(
        dpem_plan("GGG", K, J, z))
    rho = J / (2 * z * z) + 2 * J * K / (2 * z * z)
    assert acct.rho == pytest.approx(rho, rel=1e-14)
    assert acct.get_epsilon(DELTA) == pytest.approx(
        rho + 2 * math.sqrt(rho * math.log(1 / DELTA)), rel=1e-14)
    eps_i, d_i = 0.05, 1e-8
    z3 = math.sqrt(2 * math.log(1.25 / d_i)) / eps_i
    acct = ZCDPAccountant().compose(
        dpem_plan("LLG", K, J, eps_i, delta_per_release=d_i))
    assert acct.rho == pytest.approx(J * (K + 1) * eps_i ** 2 / 2
                                     + J * K / (2 * z3 ** 2), rel=1e-14)


def test_zcdp_tight_never_worse_than_classic():
    for rho in (1e-4, 0.01, 0.5, 5.0, 100.0):
        for delta in (1e-10, 1e-5, 1e-2):
            t = ZCDPAccountant()
            c = ZCDPAccountant(conversion="classic")
            t._state = c._state = rho  # white-box: same rho
            t._ledger = c._ledger = [None]
            assert t.get_epsilon(delta) <= c.get_epsilon(delta)
            assert t.get_epsilon(delta) < c.get_epsilon(delta)


def test_linear_and_advanced_reproduce_paper_formulas():
    eps_i, d_i = 0.2, 1e-8
    z = math.sqrt(2 * math.log(1.25 / d_i)) / eps_i  # classic calibration
    n = J * (2 * K + 1)
    lin = LinearAccountant(delta_per_release=d_i).compose(
        dpem_plan("GGG", K, J, z))
    assert lin.get_epsilon(DELTA) == pytest.approx(n * eps_i, rel=1e-12)
    assert lin.get_delta(n * eps_i * (1 + 1e-12)) == pytest.approx(n * d_i)
    llg = LinearAccountant(delta_per_release=d_i).compose(
        dpem_plan("LLG", K, J, eps_i, delta_per_release=d_i))
    assert llg.get_epsilon(DELTA) == pytest.approx(n * eps_i, rel=1e-12)
    assert llg.get_delta(n * eps_i * (1 + 1e-12)) == pytest.approx(
        J * K * d_i)
    slack = DELTA - n * d_i
    adv = AdvancedAccountant(delta_per_release=d_i).compose(
        dpem_plan("GGG", K, J, z))
    expected = (n * eps_i * math.expm1(eps_i)
                + math.sqrt(2 * n * math.log(1 / slack)) * eps_i)
    assert adv.get_epsilon(DELTA) == pytest.approx(expected, rel=1e-12)
    fixed = AdvancedAccountant(delta_slack=1e-5, delta_per_release=d_i)
    fixed.compose(dpem_plan("GGG", K, J, z))
    assert fixed.get_epsilon(DELTA) == pytest.approx(
        n * eps_i * math.expm1(eps_i)
        + math.sqrt(2 * n * math.log(1e5)) * eps_i, rel=1e-12)
    assert fixed.get_epsilon(1e-5) == math.inf  # slack + sum delta_i > 1e-5


@pytest.mark.parametrize("mu, eps", [(0.1, 0.05), (1.0, 0.5), (3.6, 19.2),
                                     (10.0, 60.0), (0.5, 3.0)])
def test_gdp_delta_matches_mpmath(mu, eps):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    phi = lambda x: mp.ncdf(x)  # noqa: E731
    exact = phi(-eps / mu + mu / 2) - mp.exp(eps) * phi(-eps / mu - mu / 2)
    assert gaussian_delta(mu, eps) == pytest.approx(float(exact), rel=1e-9)


def test_gdp_exact_is_tightest_for_ggg():
    plan = dpem_plan("GGG", K, J, 5.0)
    e_gdp = GDPAccountant().compose(plan).get_epsilon(DELTA)
    mu = math.sqrt(J * (2 * K + 1)) / 5.0
    assert gaussian_delta(mu, e_gdp) <= DELTA
    assert gaussian_delta(mu, e_gdp * (1 - 1e-9)) > DELTA
    e_rdp = RDPAccountant().compose(plan).get_epsilon(DELTA)
    assert e_gdp < e_rdp


def test_discrete_gaussian_rho():
    acct = ZCDPAccountant().compose(DiscreteGaussianEvent(3.0, 2.0), 5)
    assert acct.rho == pytest.approx(5 * 4 / 18)
    # independent coordinates: the l2 sensitivity alone sets rho
    multi = ZCDPAccountant().compose(DiscreteGaussianEvent(0.8, 1.0, 10))
    assert multi.rho == pytest.approx(1 / (2 * 0.64), rel=1e-15)


@pytest.mark.parametrize("sigma", [0.3, 0.8, 2.5])
@pytest.mark.parametrize("shift", [(1,), (1, 2), (0, 3, -1)])
def test_discrete_gaussian_renyi_divergence_is_within_the_zcdp_bound(sigma, shift):
    # Exact Renyi divergence of product discrete Gaussians shifted by an integer vector,
    # by direct summation over the lattice, against alpha * |shift|^2 / (2 sigma^2).
    x = np.arange(-80, 81, dtype=float)
    delta2 = float(np.sum(np.square(shift)))
    rho = discrete_gaussian_rho(DiscreteGaussianEvent(sigma, math.sqrt(delta2), len(shift)))
    for alpha in (1.1, 2.0, 7.5):
        d_alpha = 0.0
        for m in shift:
            logp = -x ** 2 / (2 * sigma ** 2)
            logq = -(x - m) ** 2 / (2 * sigma ** 2)
            log_z = np.logaddexp.reduce(logp)  # same normaliser for p and q (integer shift)
            d_alpha += np.logaddexp.reduce(alpha * logp + (1 - alpha) * logq - log_z) / (alpha - 1)
        assert d_alpha <= alpha * rho * (1 + 1e-12)


def test_laplace_rdp_is_mironov_and_capped():
    a = np.array([1.5, 2.0, 10.0, 1000.0])
    eps = 0.7
    expected = np.log(a / (2 * a - 1) * np.exp((a - 1) * eps)
                      + (a - 1) / (2 * a - 1) * np.exp(-a * eps)) / (a - 1)
    np.testing.assert_allclose(_rdp.laplace_rdp(eps, a), expected, rtol=1e-12)
    assert np.all(_rdp.laplace_rdp(eps, a) <= eps)


@pytest.mark.parametrize("q, z", [(0.05, 1.24), (0.01, 1.0), (0.3, 4.0)])
def test_mtz_integer_equals_abadi_numerical_integration(q, z):
    orders = (2.0, 3.0, 5.0, 8.0, 16.0)
    curve = _rdp.subsampled_gaussian_rdp(q, z, orders)
    for a, r in zip(orders, curve):
        assert (a - 1) * r == pytest.approx(
            _rdp.abadi_log_moment_numerical(q, z, a - 1), rel=1e-7)


@pytest.mark.parametrize("q, z", [(0.05, 1.24), (0.5, 3.0), (1e-4, 0.7)])
def test_fractional_series_matches_mpmath_and_is_conservative(q, z):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    orders = (1.01, 1.5, 2.5, 7.3)
    ours = _rdp.subsampled_gaussian_rdp(q, z, orders)
    for a, r in zip(orders, ours):
        f = lambda x: (mp.exp(-x * x / (2 * z * z)) / (z * mp.sqrt(2 * mp.pi))  # noqa: E731
                       * (1 + q * (mp.exp((2 * x - 1) / (2 * z * z)) - 1)) ** a)
        z0 = 0.5 + z * z * mp.log(1 / q - 1)
        exact = float(mp.log(mp.quad(f, [-mp.inf, 0, 1, z0, a + 5, mp.inf]))
                      / (a - 1))
        assert r == pytest.approx(exact, rel=1e-6)
        assert r >= exact * (1 - 1e-12)


def test_subsampled_curve_robust_for_large_orders_and_tiny_q():
    orders = _rdp.DEFAULT_ORDERS
    for q, z in [(1e-8, 0.5), (1e-3, 0.05), (0.999, 20.0)]:
        curve = _rdp.subsampled_gaussian_rdp(q, z, orders)
        assert not np.any(np.isnan(curve))
        assert np.all(curve >= 0)
        assert np.all(curve <= np.asarray(orders) / (2 * z * z) * (1 + 1e-12))


def test_sampling_without_replacement_is_between_none_and_full():
    g = GaussianEvent(2.0)
    from dpem_fast.accounting import SampledWithoutReplacementEvent
    sub = RDPAccountant(neighbouring="replace").compose(
        SampledWithoutReplacementEvent(1000, 10, g), 100).get_epsilon(1e-5)
    full = RDPAccountant(neighbouring="replace").compose(
        g, 100).get_epsilon(1e-5)
    assert 0 < sub < full


# ------------------------------------------------ RDP order infinity --
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.1])
def test_rdp_pure_order_gives_a_laplace_release_its_epsilon(eps, delta):
    from dpem_fast.accounting import LaplaceEvent, RDPAccountant
    acct = RDPAccountant().compose(LaplaceEvent(eps))
    assert acct.pure_epsilon == eps
    assert acct.get_epsilon(delta) <= eps
    assert acct.get_delta(eps) == 0.0
    # the finite orders alone are looser (12% for eps = 0.01, delta 1e-10)
    finite = RDPAccountant(orders=[2, 8, 64, 1e4])
    finite._pure_order = False
    finite.compose(LaplaceEvent(eps))
    assert finite.get_epsilon(delta) >= acct.get_epsilon(delta)


def test_rdp_pure_order_composes_and_amplifies():
    import math as m
    from dpem_fast.accounting import (ComposedEvent, GaussianEvent,
                                      LaplaceEvent, MomentsAccountant,
                                      RDPAccountant,
                                      SampledWithoutReplacementEvent,
                                      SelfComposedEvent)
    plan = ComposedEvent([LaplaceEvent(0.2), SelfComposedEvent(
        LaplaceEvent(0.1), 3)])
    assert RDPAccountant().compose(plan).pure_epsilon == pytest.approx(0.5)
    # without replacement, replace-one: log(1 + g (e^eps - 1))
    wor = SampledWithoutReplacementEvent(100, 10, LaplaceEvent(1.0))
    acct = RDPAccountant(neighbouring="replace").compose(wor, 4)
    assert acct.pure_epsilon == pytest.approx(4 * m.log1p(0.1 * m.expm1(1)))
    assert acct.get_epsilon(1e-12) <= acct.pure_epsilon
    # any Gaussian makes the composition non-pure
    mixed = RDPAccountant().compose(plan).compose(GaussianEvent(10.0))
    assert mixed.pure_epsilon == m.inf
    # the moments accountant (Park et al.) is unchanged
    mom = MomentsAccountant().compose(LaplaceEvent(0.01))
    assert mom.get_epsilon(1e-10) > 0.011
