"""Native PLDAccountant: closed forms, tightness, relations, refusals."""
import functools
import itertools
import math
import sys

import numpy as np
import pytest
from scipy import special

from dpem_fast.accounting import (
    ComposedEvent, DiscreteGaussianEvent, GaussianEvent, GDPAccountant,
    LaplaceEvent, NeighbouringEvent, PLDAccountant, PoissonSampledEvent,
    RDPAccountant, SampledWithoutReplacementEvent, SelfComposedEvent,
    UnsupportedEventError, calibrate_noise_multiplier, get_accountant)
from dpem_fast.accounting import _pld, _pld_pairs


def gaussian_delta(mu, eps):
    """Exact delta(eps) of mu-GDP (Dong, Roth & Su 2019; Balle & Wang 2018)."""
    return (special.ndtr(-eps / mu + mu / 2)
            - math.exp(eps) * special.ndtr(-eps / mu - mu / 2))


def gaussian_epsilon(mu, delta):
    lo, hi = 0.0, 10.0 * mu + mu * mu
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gaussian_delta(mu, mid) > delta else (lo, mid)
    return hi


def poisson(q, z, k):
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(z)), k)


# ------------------------------------------------------ closed forms --
@pytest.mark.parametrize("z", [0.5, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_gaussian_delta_is_the_analytic_curve_from_above(z, relation):
    # a Gaussian beside a harmless event, so that the PLD is discretised
    # (Gaussian-only plans are answered from the closed form)
    acct = PLDAccountant(neighbouring=relation).compose(GaussianEvent(z))
    acct.compose(LaplaceEvent(1e-300))
    h = acct.value_discretization
    for eps in (0.0, 0.5, 1.0, 2.71, 5.0, 0.1234, 1.2345, 3.0001):
        exact = gaussian_delta(1 / z, eps)
        ours = acct.get_delta(eps)
        if exact < 1e-12:
            assert ours <= 1e-11
            continue
        assert ours >= exact * (1 - 1e-12)          # an upper bound
        # exact at grid points, the chord in e^eps in between
        lo = math.floor(eps / h + 1e-9) * h
        hi = lo + h
        t = (math.exp(eps) - math.exp(lo)) / (math.exp(hi) - math.exp(lo))
        chord = (1 - t) * gaussian_delta(1 / z, lo) + t * gaussian_delta(
            1 / z, hi)
        assert ours == pytest.approx(chord, rel=1e-6)
        if abs(eps - round(eps / h) * h) < 1e-12:
            assert ours <= exact * (1 + 1e-6)


@pytest.mark.parametrize("z, k", [(1.0, 1), (0.7, 1), (3.0, 1), (2.0, 10),
                                  (5.0, 100)])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_gaussian_epsilon_is_the_analytic_epsilon_from_above(z, k, delta):
    ev = SelfComposedEvent(GaussianEvent(z), k)
    ours = PLDAccountant().compose(ev).get_epsilon(delta)
    exact = gaussian_epsilon(math.sqrt(k) / z, delta)
    assert ours >= exact * (1 - 1e-12)
    # plain Gaussians compose in closed form: one discretisation
    assert ours <= exact * (1 + 1e-6)
    assert ours == pytest.approx(
        GDPAccountant().compose(ev).get_epsilon(delta), rel=1e-6)


@pytest.mark.parametrize("eps0", [0.1, 0.5, 1.0, 3.0])
def test_laplace_delta_is_the_analytic_curve(eps0):
    # delta(eps) = 1 - exp((eps - eps0) / 2) on [0, eps0], 0 above
    acct = PLDAccountant().compose(LaplaceEvent(eps0))
    h = acct.value_discretization
    for eps in np.linspace(0, eps0, 7):
        exact = -math.expm1((eps - eps0) / 2)
        ours = acct.get_delta(float(eps))
        assert ours >= exact - 1e-15
        assert ours <= exact + 1e-6
    assert acct.get_delta(eps0 + h) == 0.0
    # pure eps0-DP: epsilon never exceeds eps0 by more than one grid step
    assert acct.get_epsilon(1e-12) <= eps0 + h
    assert acct.get_epsilon(0.1) == pytest.approx(
        max(eps0 + 2 * math.log1p(-0.1), 0.0), abs=1e-6)


def discrete_gaussian_delta(sigma, shift, eps, k=None):
    """delta(eps) of the pair (N_Z(shift, s^2), N_Z(0, s^2)) by direct sum."""
    k = k or int(12 * sigma + shift + 5)
    x = np.arange(-k, k + 1, dtype=float)
    p0 = np.exp(-x * x / (2 * sigma * sigma))
    p0 /= p0.sum()
    p1 = np.exp(-(x - shift) ** 2 / (2 * sigma * sigma))
    p1 /= p1.sum()
    return float(np.sum(np.maximum(p1 - math.exp(eps) * p0, 0.0)))


@pytest.mark.parametrize("sigma, shift", [(1.0, 1), (3.0, 2), (10.0, 5)])
def test_discrete_gaussian_is_the_exact_curve(sigma, shift):
    acct = PLDAccountant().compose(DiscreteGaussianEvent(sigma, shift))
    for eps in (0.0, 0.2, 0.5, 1.0, 2.0):
        exact = discrete_gaussian_delta(sigma, shift, eps)
        ours = acct.get_delta(eps)
        assert ours >= exact * (1 - 1e-9) - 1e-15
        assert ours <= exact * (1 + 1e-5) + 1e-12


@pytest.mark.parametrize("sigma", [0.6, 1.0, 2.5])
def test_discrete_gaussian_smaller_shifts_are_dominated(sigma):
    # the accountant uses the shift Delta for |q(x) - q(x')| <= Delta
    for big in (2, 3):
        for small in range(1, big):
            for eps in (0.0, 0.3, 1.0, 3.0):
                assert (discrete_gaussian_delta(sigma, small, eps)
                        <= discrete_gaussian_delta(sigma, big, eps) + 1e-15)


# ------------------------------------------------- reference values --
@pytest.mark.parametrize("q, z, k, pld, rdp", [
    (0.05, 1.24, 20, 1.2192, 1.5316),
    (0.01, 1.0, 1000, 1.8282, 2.1014),
])
def test_reference_values(q, z, k, pld, rdp):
    ev = poisson(q, z, k)
    ours = PLDAccountant().compose(ev).get_epsilon(1e-5)
    assert ours == pytest.approx(pld, abs=1e-3)
    assert ours >= pld - 2e-4
    assert RDPAccountant().compose(ev).get_epsilon(1e-5) == pytest.approx(
        rdp, abs=2e-3)


# (q, z, steps, delta, dp_accounting 0.6.0 PLD at h = 1e-5 (k <= 100) or
# 2e-5: pessimistic (connect the dots), optimistic (privacy buckets))
FINE = [
    (0.05, 1.24, 20, 1e-5, 1.21916, 1.21896),
    (0.01, 1.0, 1000, 1e-5, 1.82824, 1.81824),
    (0.1, 0.8, 100, 1e-6, 12.52534, 12.52434),
    (0.2, 2.0, 500, 1e-5, 12.62121, 12.61621),
    (0.001, 0.6, 3000, 1e-7, 3.20560, 3.17576),
    (1.0, 3.0, 50, 1e-5, 12.26233, 12.26183),
]


@pytest.mark.parametrize("q, z, k, delta, pess, opt", FINE)
def test_within_a_percent_of_fine_pld_and_above_its_lower_bound(
        q, z, k, delta, pess, opt):
    ours = PLDAccountant().compose(poisson(q, z, k)).get_epsilon(delta)
    assert ours >= opt
    assert ours == pytest.approx(pess, rel=1e-2)
    # in fact far closer than 1%
    assert ours == pytest.approx(pess, rel=1e-3)


def _dpa():
    return pytest.importorskip("dp_accounting")


LIVE = [  # small plans: dp_accounting takes ~0.1 s each at h = 1e-4
    (0.05, 1.24, 20, 1e-5),
    (0.3, 1.5, 10, 1e-6),
    (0.02, 0.9, 50, 1e-3),
    (0.5, 4.0, 30, 1e-8),
]


@pytest.mark.parametrize("q, z, k, delta", LIVE)
def test_live_crosscheck_poisson_gaussian(q, z, k, delta):
    d = _dpa()
    from dp_accounting.pld import privacy_loss_distribution as pl
    pess = d.pld.PLDAccountant(value_discretization_interval=1e-4)
    pess.compose(d.SelfComposedDpEvent(
        d.PoissonSampledDpEvent(q, d.GaussianDpEvent(z)), k))
    theirs = pess.get_epsilon(delta)
    opt = pl.from_gaussian_mechanism(
        z, sampling_prob=q, value_discretization_interval=1e-4,
        pessimistic_estimate=False, use_connect_dots=False).self_compose(k)
    lower = opt.get_epsilon_for_delta(delta)
    ours = PLDAccountant().compose(poisson(q, z, k)).get_epsilon(delta)
    assert lower <= ours <= theirs * 1.002
    assert ours == pytest.approx(theirs, rel=1e-3)


@pytest.mark.parametrize("eps0, q, k, delta", [(0.5, 0.8, 3, 0.1),
                                               (0.5, 0.5, 2, 0.1),
                                               (1.0, 0.1, 20, 1e-5)])
def test_live_crosscheck_poisson_laplace_both_directions(eps0, q, k, delta):
    # here the addition direction is the worse one: dropping it would
    # fall below dp_accounting's lower bound
    d = _dpa()
    from dp_accounting.pld import privacy_loss_distribution as pl
    theirs = d.pld.PLDAccountant(value_discretization_interval=1e-4)
    theirs.compose(d.SelfComposedDpEvent(
        d.PoissonSampledDpEvent(q, d.LaplaceDpEvent(1 / eps0)), k))
    opt = pl.from_laplace_mechanism(
        1 / eps0, sampling_prob=q, value_discretization_interval=1e-4,
        pessimistic_estimate=False, use_connect_dots=False).self_compose(k)
    ev = SelfComposedEvent(PoissonSampledEvent(q, LaplaceEvent(eps0)), k)
    acct = PLDAccountant().compose(ev)
    ours = acct.get_epsilon(delta)
    assert opt.get_epsilon_for_delta(delta) <= ours
    assert ours == pytest.approx(theirs.get_epsilon(delta), rel=2e-3)
    for eps in (0.1, 0.5, 1.0):
        assert opt.get_delta_for_epsilon(eps) <= acct.get_delta(eps) * (
            1 + 1e-9)
        assert acct.get_delta(eps) == pytest.approx(
            theirs.get_delta(eps), rel=2e-3, abs=1e-12)


def test_addition_direction_is_accounted():
    # white box: the two directions differ and the worse one is reported
    ev = SelfComposedEvent(PoissonSampledEvent(0.8, LaplaceEvent(0.5)), 3)
    acct = PLDAccountant().compose(ev)
    remove, add = acct._state.remove, acct._state.add
    assert remove is not add
    assert add.epsilon(0.1) > 1.05 * remove.epsilon(0.1)
    assert acct.get_epsilon(0.1) == add.epsilon(0.1)
    assert acct.get_delta(0.5) == max(add.delta(0.5), remove.delta(0.5))


# ---------------------------------------------------- discretisation --
@pytest.mark.parametrize("q, z, k", [(0.05, 1.24, 20), (0.01, 1.0, 300),
                                     (1.0, 2.0, 5)])
def test_pessimistic_is_above_optimistic_and_converges(q, z, k):
    ev = poisson(q, z, k)
    opt = PLDAccountant(pessimistic=False, value_discretization=1e-4)
    opt = opt.compose(ev).get_epsilon(1e-5)
    pess = [PLDAccountant(value_discretization=h).compose(ev).get_epsilon(
        1e-5) for h in (1e-2, 1e-3, 1e-4)]
    assert opt <= pess[2] <= pess[1] * (1 + 1e-9) and pess[1] <= pess[0]
    assert pess[1] - opt <= 0.05 * opt
    # a coarse grid stays an upper bound: never below the fine lower bound
    assert pess[0] >= opt


def test_coarse_grid_is_still_an_upper_bound_on_the_exact_gaussian():
    # (the Laplace release of epsilon 1e-300 forces the discretised path)
    ev = ComposedEvent([PoissonSampledEvent(0.5, LaplaceEvent(1e-300)),
                        SelfComposedEvent(GaussianEvent(2.0), 30)])
    exact = gaussian_epsilon(math.sqrt(30) / 2.0, 1e-6)
    for h in (0.2, 0.05, 1e-2, 1e-3):
        eps = PLDAccountant(value_discretization=h).compose(ev).get_epsilon(
            1e-6)
        assert eps >= exact
        assert eps <= exact + 30 * h * h
    opt = PLDAccountant(value_discretization=1e-3, pessimistic=False)
    assert opt.compose(ev).get_epsilon(1e-6) <= exact


# ----------------------------------------------------- monotonicity --
def test_monotone_in_q_sigma_and_steps():
    eps = lambda q, z, k: PLDAccountant().compose(  # noqa: E731
        poisson(q, z, k)).get_epsilon(1e-5)
    by_q = [eps(q, 1.0, 100) for q in (0.001, 0.01, 0.05, 0.2, 1.0)]
    by_z = [eps(0.05, z, 100) for z in (0.6, 0.9, 1.5, 3.0, 10.0)]
    by_k = [eps(0.05, 1.0, k) for k in (1, 10, 100, 1000)]
    assert by_q == sorted(by_q) and len(set(by_q)) == 5
    assert by_z == sorted(by_z, reverse=True) and len(set(by_z)) == 5
    assert by_k == sorted(by_k) and len(set(by_k)) == 4


def test_composition_order_and_grouping_do_not_matter():
    events = [PoissonSampledEvent(0.1, GaussianEvent(1.5)), GaussianEvent(3.0),
              PoissonSampledEvent(0.3, LaplaceEvent(0.7)),
              SelfComposedEvent(GaussianEvent(5.0), 7),
              DiscreteGaussianEvent(3.0, 1.0)]
    values = []
    for perm in itertools.permutations(events):
        values.append(PLDAccountant().compose(ComposedEvent(perm))
                      .get_epsilon(1e-6))
    one_by_one = PLDAccountant()
    for ev in events[::-1]:
        one_by_one.compose(ev)
    values.append(one_by_one.get_epsilon(1e-6))
    nested = ComposedEvent([ComposedEvent(events[:2]),
                            ComposedEvent([ComposedEvent(events[2:4]),
                                           events[4]])])
    values.append(PLDAccountant().compose(nested).get_epsilon(1e-6))
    assert max(values) == pytest.approx(min(values), rel=1e-8)


def test_self_composition_matches_repeated_convolution():
    ev = PoissonSampledEvent(0.02, GaussianEvent(0.9))
    power = PLDAccountant().compose(ev, 64).get_epsilon(1e-6)
    doubling = ev
    for _ in range(6):
        doubling = ComposedEvent([doubling, doubling])
    conv = PLDAccountant().compose(doubling).get_epsilon(1e-6)
    assert power == pytest.approx(conv, rel=1e-6)


# ------------------------------------------------------- relations --
def test_replace_sampling_without_replacement():
    g = GaussianEvent(1.5)
    acct = functools.partial(PLDAccountant, neighbouring="replace")

    def eps(m, k=50, n=1000):
        return acct().compose(SampledWithoutReplacementEvent(n, m, g),
                              k).get_epsilon(1e-5)
    vals = [eps(m) for m in (10, 50, 200, 1000)]
    assert vals == sorted(vals) and len(set(vals)) == 4
    # m = n is the base event: the exact Gaussian (mu = sqrt(50) / 1.5)
    assert vals[-1] == pytest.approx(gaussian_epsilon(math.sqrt(50) / 1.5,
                                                      1e-5), rel=1e-5)
    # tighter than the general RDP bound of Wang, Balle & Kasiviswanathan
    rdp = RDPAccountant(neighbouring="replace").compose(
        SampledWithoutReplacementEvent(1000, 50, g), 50).get_epsilon(1e-5)
    assert vals[1] < rdp


def test_replace_wor_pair_is_a_valid_dominating_pair():
    # the pair X has total P and Q mass 1 and its curve is convex at 0 (a
    # non-negative atom at loss 0): check on the discretised single event
    ev = SampledWithoutReplacementEvent(100, 30, GaussianEvent(0.8))
    pld = _pld._leaf_plds(ev, "replace", 1e-3, True)[0]
    assert pld.pmf.min() >= 0
    assert pld.pmf.sum() + pld.inf == pytest.approx(1.0, abs=1e-12)
    q_mass = float(np.sum(pld.pmf * np.exp(-pld.losses)))
    assert q_mass == pytest.approx(1.0, abs=1e-6)
    # the curve at eps >= 0 is that of (g P1 + (1-g) P0, P0) (BBG 2018)
    g = 0.3
    for eps in (0.0, 0.5, 1.5):
        a = math.exp(eps)
        # H_a(gP + (1-g)Q || Q) = g H_{a'}(P||Q), a' = 1 + (a - 1) / g
        exact = g * gaussian_delta(1 / 0.8, math.log1p((a - 1) / g))
        assert pld.delta(eps) == pytest.approx(exact, rel=1e-6)
        assert pld.delta(eps) >= exact * (1 - 1e-12)


@pytest.mark.parametrize("relation, event, match", [
    ("replace", PoissonSampledEvent(0.1, GaussianEvent(1.0)), "add/remove"),
    ("add_remove", SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.0)),
     "replace"),
    ("add_remove", PoissonSampledEvent(0.1, SelfComposedEvent(
        GaussianEvent(1.0), 2)), "single Gaussian"),
    ("replace", SampledWithoutReplacementEvent(100, 10, ComposedEvent(
        [GaussianEvent(1.0)])), "single Gaussian"),
    ("add_remove", DiscreteGaussianEvent(2.0, 1.5), "integer"),
    ("add_remove", DiscreteGaussianEvent(2.0, 2.0, dimension=4),
     "dimension"),
])
def test_refusals_mirror_rdp_and_leave_state_unchanged(relation, event,
                                                       match):
    acct = PLDAccountant(neighbouring=relation).compose(GaussianEvent(2.0))
    eps = acct.get_epsilon(1e-5)
    assert not acct.supports(event)
    with pytest.raises(UnsupportedEventError, match=match):
        acct.compose(event)
    assert acct.ledger == [(GaussianEvent(2.0), 1)]
    assert acct.get_epsilon(1e-5) == eps
    # where the RDP accountant has no bound either for sampling, it refuses
    if isinstance(event, (PoissonSampledEvent,
                          SampledWithoutReplacementEvent)) and match != \
            "single Gaussian":
        assert not RDPAccountant(neighbouring=relation).supports(event)


def test_trivial_sampling_is_the_base_event():
    plain = PLDAccountant(neighbouring="replace").compose(
        ComposedEvent([GaussianEvent(1.5), LaplaceEvent(0.3)]))
    for trivial in (PoissonSampledEvent(1.0, ComposedEvent(
            [GaussianEvent(1.5), LaplaceEvent(0.3)])),
            SampledWithoutReplacementEvent(40, 40, ComposedEvent(
                [GaussianEvent(1.5), LaplaceEvent(0.3)]))):
        for rel in ("replace", "add_remove"):
            eps = PLDAccountant(neighbouring=rel).compose(
                trivial).get_epsilon(1e-5)
            assert eps == pytest.approx(plain.get_epsilon(1e-5), rel=1e-9)


def test_replace_gaussian_is_the_exact_gdp():
    # DP-EM's GGG shape: 2K + 1 releases per iteration, 20 iterations
    plan = SelfComposedEvent(ComposedEvent([
        GaussianEvent(20.0), SelfComposedEvent(GaussianEvent(20.0), 3),
        SelfComposedEvent(GaussianEvent(20.0), 3)]), 20)
    ours = PLDAccountant(neighbouring="replace").compose(plan)
    gdp = GDPAccountant(neighbouring="replace").compose(plan)
    assert ours.get_epsilon(1e-5) >= gdp.get_epsilon(1e-5) * (1 - 1e-12)
    assert ours.get_epsilon(1e-5) == pytest.approx(gdp.get_epsilon(1e-5),
                                                   rel=1e-6)


def test_tags_select_the_relation_in_calibration():
    tagged = lambda z: NeighbouringEvent(  # noqa: E731
        "replace", SelfComposedEvent(SampledWithoutReplacementEvent(
            1000, 20, GaussianEvent(z)), 200))
    z = calibrate_noise_multiplier(tagged, 1.0, 1e-5, accountant="pld")
    acct = PLDAccountant(neighbouring="replace").compose(tagged(z))
    assert acct.get_epsilon(1e-5) <= 1.0
    assert acct.get_epsilon(1e-5) == pytest.approx(1.0, rel=1e-5)


def test_calibration_with_pld_beats_rdp():
    plan = lambda z: poisson(0.01, z, 1000)  # noqa: E731
    z_pld = calibrate_noise_multiplier(plan, 2.0, 1e-5, accountant="pld")
    z_rdp = calibrate_noise_multiplier(plan, 2.0, 1e-5)
    assert PLDAccountant().compose(plan(z_pld)).get_epsilon(1e-5) <= 2.0
    assert PLDAccountant().compose(plan(z_pld * (1 - 1e-6))).get_epsilon(
        1e-5) > 2.0
    assert z_pld < 0.96 * z_rdp
    assert z_pld == pytest.approx(calibrate_noise_multiplier(
        plan, 2.0, 1e-5, accountant=get_accountant("pld", "add_remove")))


# ------------------------------------------------------- bad input --
@pytest.mark.parametrize("bad", [0.0, -1e-3, float("nan"), float("inf")])
def test_bad_discretisation_is_refused(bad):
    with pytest.raises(ValueError, match="value_discretization"):
        PLDAccountant(value_discretization=bad)


def test_bad_arguments_name_the_parameter():
    acct = PLDAccountant().compose(GaussianEvent(1.0))
    for bad in (0.0, 1.0, -0.5, 2.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            acct.get_epsilon(bad)
    for bad in (-1.0, -1e-9, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="epsilon"):
            acct.get_delta(bad)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="epsilon"):
            calibrate_noise_multiplier(GaussianEvent, bad, 1e-5,
                                       accountant="pld")
    with pytest.raises(ValueError, match="delta"):
        calibrate_noise_multiplier(GaussianEvent, 1.0, 1.0, accountant="pld")
    with pytest.raises(TypeError, match="pessimistic"):
        PLDAccountant(pessimistic="yes")
    with pytest.raises(ValueError, match="neighbouring"):
        PLDAccountant(neighbouring="swap")


def test_no_dp_accounting_at_run_time(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    acct = PLDAccountant().compose(poisson(0.05, 1.24, 20))
    assert acct.get_epsilon(1e-5) == pytest.approx(1.2192, abs=1e-3)


def test_infinite_epsilon_when_delta_is_below_the_infinite_mass():
    # Laplace releases are pure DP: finite down to round-off allowances
    acct = PLDAccountant().compose(LaplaceEvent(2.0), 3)
    assert acct.get_epsilon(1e-12) <= 6.0 + 3e-3
    assert PLDAccountant().compose(LaplaceEvent(2.0)).get_epsilon(
        1e-300) <= 2.0 + 1e-3
    huge = PLDAccountant(value_discretization=0.5).compose(GaussianEvent(0.05))
    assert math.isfinite(huge.get_epsilon(1e-5))
    assert huge.get_epsilon(1e-5) >= gaussian_epsilon(20.0, 1e-5)


@pytest.fixture
def coarse_tails(monkeypatch):
    """Single events truncated at 1.5 standard deviations of the noise: the
    truncated mass is no longer negligible and must go the safe way."""
    monkeypatch.setattr(_pld_pairs, "_Z_TAIL", 1.5)   # set where it is read
    _pld._leaf_plds.cache_clear()
    _pld._gaussian_pld.cache_clear()
    yield
    _pld._leaf_plds.cache_clear()
    _pld._gaussian_pld.cache_clear()


@pytest.mark.parametrize("q, z, k, delta, pess, opt", FINE[:2])
def test_truncated_tails_stay_an_upper_bound(coarse_tails, q, z, k, delta,
                                            pess, opt):
    pld = _pld._leaf_plds(PoissonSampledEvent(q, GaussianEvent(z)),
                          "add_remove", 1e-3, True)
    for direction in pld:
        assert direction.pmf.sum() + direction.inf == pytest.approx(1.0,
                                                                   abs=1e-12)
        assert direction.inf > 1e-3     # the upper tail went to +inf
    assert PLDAccountant().compose(poisson(q, z, k)).get_epsilon(delta) > opt
