"""Exact discrete Gaussian releases: the lattice, its widened sensitivity, the law of the noise."""
import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import stats

from dpem_fast import accounting as acc
from dpem_fast._engine import Release, ReleaseLayer, StatSpec, Statistics, add_noise, make_plan, release_key
from dpem_fast._engine._lattice import LATTICE_RESOLUTION, lattice, noised_size, to_lattice
from dpem_fast._rng import make_key

L2 = {"add_remove": 1.0, "replace": math.sqrt(2.0)}


def _specs():
    return (StatSpec("counts", (3,), L2), StatSpec("sums", (3, 4), {"add_remove": 1.0, "replace": 2.0}),
            StatSpec("second", (3, 4, 4), L2, symmetric=True), StatSpec("hist", (2, 7), L2, integer=True))


def test_lattice_step_is_a_power_of_two_with_at_most_one_percent_widening():
    for spec in _specs():
        for rel in ("add_remove", "replace"):
            gamma, delta_int, m = lattice(spec, rel)
            delta = spec.sensitivity("l2", rel)
            assert m == noised_size(spec) and math.frexp(gamma)[0] == 0.5      # a power of two
            if spec.integer:
                assert (gamma, delta_int) == (1.0, delta)
            else:
                assert delta_int == delta / gamma + math.sqrt(m)
                assert 1.0 < gamma * delta_int / delta <= 1 + 1 / LATTICE_RESOLUTION
                assert gamma * math.sqrt(m) * 2 * LATTICE_RESOLUTION > delta      # the largest such step
    assert noised_size(_specs()[2]) == 3 * 10


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_rounding_widened_sensitivity_by_brute_force(rel):
    """Neighbouring statistics (‖s - s'‖ <= Δ) round to integer vectors at most Δ_int apart;
    adversarial pairs (every coordinate just below a half-integer, moved across) come close."""
    spec = StatSpec("sums", (3, 4), {"add_remove": 1.0, "replace": 2.0})
    gamma, delta_int, m = lattice(spec, rel)
    delta = spec.sensitivity("l2", rel)
    rng = np.random.default_rng(0)
    worst = 0.0
    for trial in range(2000):
        s = rng.normal(scale=50.0, size=spec.shape)
        step = rng.normal(size=spec.shape)
        step *= delta * rng.uniform(0.0, 1.0) ** 0.1 / np.linalg.norm(step)
        if trial % 2:       # adversarial: every coordinate just below a rounding boundary
            t = np.abs(step) / gamma
            u = np.floor(s / gamma) + 0.5 - (t - np.floor(t)) - 1e-9
            s = u * gamma
            step = np.abs(step)
        d = np.linalg.norm(to_lattice(s + step, gamma, "s") - to_lattice(s, gamma, "s"))
        assert d <= delta_int * (1 + 1e-12)
        worst = max(worst, d)
    assert worst >= 0.98 * delta_int


def test_to_lattice_rounds_to_nearest_and_refuses_the_unrepresentable():
    v = np.array([0.25, -0.375, 2.5, 3.5, 1e3])
    assert_array_equal(to_lattice(v, 0.25, "v"), [1, -2, 10, 14, 4000])     # exact multiples stay
    assert_array_equal(to_lattice(np.array([0.124, 0.126]), 0.25, "v"), [0, 1])
    with pytest.raises(ValueError, match="'big'"):
        to_lattice(np.array([1e300]), 2.0 ** -10, "big")


def _manual_release(symmetric=False, sigma_z=1.7, gamma=2.0 ** -6):
    shape = (2, 5, 5) if symmetric else (4, 3)
    spec = StatSpec("s", shape, L2, symmetric=symmetric)
    m = noised_size(spec)
    return Release("s", "discrete_gaussian", "l2", gamma * 40.0, gamma * sigma_z, shape, symmetric, 1, gamma, m)


@pytest.mark.statistical
@pytest.mark.parametrize("symmetric", [False, True])
def test_noise_is_exactly_discrete_gaussian_on_the_lattice(symmetric):
    """(release - value)/γ is integer, exactly N_Z(0, σ²): chi-square against the exact pmf."""
    r = _manual_release(symmetric)
    rng = np.random.default_rng(1)
    value = rng.normal(scale=3.0, size=r.shape)
    if symmetric:
        value = value + np.swapaxes(value, -1, -2)
    base = to_lattice(value, r.granularity, "s")
    ints = []
    for i in range(3000):
        out = add_noise(value, r, release_key(make_key(9), i, "s"))
        k = out / r.granularity
        assert_array_equal(k, np.rint(k))
        z = np.rint(k).astype(np.int64) - base
        if symmetric:
            assert_array_equal(out, np.swapaxes(out, -1, -2))
            iu = np.triu_indices(r.shape[-1])
            z = z[..., iu[0], iu[1]]
        ints.append(z.ravel())
    z = np.concatenate(ints)
    sigma2 = (r.noise_scale / r.granularity) ** 2
    support = np.arange(-12, 13)
    pmf = np.exp(-support.astype(float) ** 2 / (2 * sigma2))
    pmf /= np.exp(-np.arange(-60, 61) ** 2 / (2 * sigma2)).sum()
    counts = np.array([(z == k).sum() for k in support])
    tail = z.size - counts.sum()
    observed = np.append(counts, tail)
    expected = np.append(pmf, 1 - pmf.sum()) * z.size
    keep = expected > 5
    chi2 = (((observed - expected) ** 2 / expected)[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_plan_accounts_discrete_releases_with_their_own_bound():
    specs = _specs()[:3]
    plan = make_plan(specs, 6, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="zcdp",
                     noise="discrete_gaussian")
    leaves = []
    for spec in specs:
        r = plan.releases[spec.name]
        gamma, delta_int, m = lattice(spec, "replace")
        ev = r.event()
        assert isinstance(ev, acc.DiscreteGaussianEvent) and (ev.sensitivity, ev.dimension) == (delta_int, m)
        assert r.mechanism == "discrete_gaussian" and r.granularity == gamma
        leaves.append(acc.SelfComposedEvent(ev, 6))
    # independent zCDP: rho = J sum Delta_int^2 / (2 sigma_Z^2), classic conversion bounds the tight one
    rho = sum(6 * (lv.event.sensitivity / lv.event.sigma) ** 2 / 2 for lv in leaves)
    assert plan.epsilon_spent <= 1.0 + 1e-9
    assert rho + 2 * math.sqrt(rho * math.log(1e5)) > 1.0        # the tight conversion was needed
    # the same multipliers as a continuous plan under zCDP (equal rho per release)
    cont = make_plan(specs, 6, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="zcdp")
    for name in cont.releases:
        assert plan.releases[name].noise_multiplier == pytest.approx(cont.releases[name].noise_multiplier,
                                                                     rel=1e-9)


@pytest.mark.parametrize("accountant", ["gdp", "pld"])
def test_accountants_without_a_discrete_gaussian_bound_are_refused(accountant):
    # GDP's curve is exact for the continuous Gaussian only; the PLD accountant refuses a discrete
    # Gaussian whose sensitivity is not an integer shift (here widened by the lattice rounding)
    with pytest.raises(ValueError, match="accountant"):
        make_plan(_specs()[:1], 2, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant=accountant,
                  noise="discrete_gaussian")


@pytest.mark.parametrize("accountant", ["zcdp", "rdp", "moments", "linear", "advanced"])
def test_accountants_with_a_discrete_gaussian_bound_calibrate_it(accountant):
    plan = make_plan(_specs()[:2], 3, epsilon=2.0, delta=1e-5, neighbouring="add_remove",
                     accountant=accountant, noise="discrete_gaussian")
    again = acc.get_accountant(accountant, "add_remove")().compose(plan.event).get_epsilon(1e-5)
    assert again == pytest.approx(plan.epsilon_spent) and again <= 2.0 * (1 + 1e-9)


def test_discrete_plans_refuse_laplace_and_unknown_noise():
    specs = (StatSpec("a", (2,), L2, {"add_remove": 1.0, "replace": 2.0}),)
    with pytest.raises(ValueError, match="Laplace"):
        make_plan(specs, 2, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="rdp",
                  mechanisms={"a": "laplace"}, noise="discrete_gaussian")
    with pytest.raises(ValueError, match="noise"):
        make_plan(specs, 2, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="rdp", noise="uniform")


def test_integer_statistics_are_released_without_rounding():
    spec = StatSpec("hist", (2, 7), L2, integer=True)
    plan = make_plan((), 1, epsilon=2.0, delta=1e-5, neighbouring="replace", accountant="zcdp",
                     one_off_specs=(spec,), one_off_share=0.5, noise="discrete_gaussian")
    r = plan.releases["hist"]
    assert r.granularity == 1.0 and r.sensitivity == spec.sensitivity("l2", "replace")
    h = np.arange(14.0).reshape(2, 7)
    out = ReleaseLayer(plan, make_key(0)).release(Statistics({"hist": h}), 0)["hist"]
    assert_array_equal(out, np.rint(out)) and not np.array_equal(out, h)
