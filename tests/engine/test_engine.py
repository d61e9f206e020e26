"""The private-EM engine's pieces: statistics, plan, release layer."""
import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from dpem_fast import accounting as acc
from dpem_fast._engine import Release, ReleaseLayer, StatSpec, Statistics, add_noise, make_plan, release_key
from dpem_fast._engine._plan import PAPER_DELTA_PER_RELEASE
from dpem_fast._rng import make_key

L2 = {"add_remove": 1.0, "replace": 2.0}
L1 = {"add_remove": 3.0, "replace": 6.0}


def _specs():
    return (StatSpec("a", (3,), L2, L1), StatSpec("b", (2, 4), L2, L1), StatSpec("c", (2, 3, 3), L2, symmetric=True))


# ------------------------------------------------------------------- statistics
def test_statistics_are_named_and_additive():
    specs = _specs()
    z = Statistics.zeros(specs)
    assert list(z) == ["a", "b", "c"] and z["b"].shape == (2, 4) and not z["c"].any()
    rng = np.random.default_rng(0)
    s = Statistics({n: rng.normal(size=z[n].shape) for n in z}, 10, -3.0, 2)
    t = Statistics({n: rng.normal(size=z[n].shape) for n in z}, 5, -1.0, 1)
    u = s + t + z
    for n in z:
        assert_array_equal(u[n], s[n] + t[n])
    assert (u.n_rows, u.loglik, u.n_clipped) == (15, -4.0, 3)
    with pytest.raises(ValueError, match="named"):
        s + Statistics({"a": s["a"]})
    with pytest.raises(ValueError, match="shapes"):
        s + Statistics({"a": np.zeros(4), "b": s["b"], "c": s["c"]})


@pytest.mark.parametrize("kw, match", [
    (dict(name="", shape=(2,), l2=L2), "name"),
    (dict(name="x", shape=(2,), l2={"replace": 1.0}), "l2"),
    (dict(name="x", shape=(2,), l2={"replace": 1.0, "add_remove": 0.0}), "l2"),
    (dict(name="x", shape=(2,), l2={"replace": 1.0, "add_remove": math.inf}), "l2"),
    (dict(name="x", shape=(2, 3), l2=L2, symmetric=True), "symmetric"),
])
def test_statspec_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        StatSpec(**kw)


# ------------------------------------------------------------------------ plan
@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_gaussian_plan_shares_and_sensitivities(rel):
    specs = _specs()
    plan = make_plan(specs, 7, epsilon=1.0, delta=1e-5, neighbouring=rel, accountant="gdp",
                     shares={"a": 1.0, "b": 2.0, "c": 5.0})
    z = {n: r.noise_multiplier for n, r in plan.releases.items()}
    # multipliers z_r = s / sqrt(w_r): the mu^2 shares are the requested ones
    mu2 = {n: 1 / z[n] ** 2 for n in z}
    assert mu2["b"] / mu2["a"] == pytest.approx(2.0) and mu2["c"] / mu2["a"] == pytest.approx(5.0)
    for n, r in plan.releases.items():
        assert r.sensitivity == L2[rel] and r.count == 7 and r.mechanism == "gaussian"
    assert plan.releases["c"].symmetric
    # exact GDP: mu = sqrt(J sum 1/z^2), checked independently of the accountant code
    mu = math.sqrt(7 * sum(mu2.values()))
    from scipy.stats import norm
    delta = norm.cdf(-1.0 / mu + mu / 2) - math.exp(1.0) * norm.cdf(-1.0 / mu - mu / 2)
    assert delta <= 1e-5 * (1 + 1e-9) and plan.epsilon_spent <= 1.0 + 1e-9
    assert isinstance(plan.event, acc.NeighbouringEvent) and plan.event.neighbouring == rel


def test_one_off_releases_take_their_share_of_the_plan():
    specs = _specs()
    one = (StatSpec("h1", (5,), L2), StatSpec("h2", (6,), L2))
    plan = make_plan(specs, 10, epsilon=2.0, delta=1e-6, neighbouring="replace", accountant="gdp",
                     one_off_specs=one, one_off_share=0.2)
    assert list(plan.releases)[:2] == ["h1", "h2"]
    mu2 = {n: r.count / r.noise_multiplier ** 2 for n, r in plan.releases.items()}
    assert (mu2["h1"] + mu2["h2"]) / sum(mu2.values()) == pytest.approx(0.2, rel=1e-12)
    assert mu2["h1"] == pytest.approx(mu2["h2"], rel=1e-12)


def test_laplace_plan_ties_gaussian_releases_to_their_epsilon_share():
    specs = _specs()
    plan = make_plan(specs, 4, epsilon=2.0, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                     mechanisms={"a": "laplace", "b": "laplace", "c": "gaussian"},
                     shares={"a": 1.0, "b": 1.0, "c": 2.0})
    ra, rb, rc = (plan.releases[n] for n in "abc")
    assert (ra.mechanism, ra.norm, ra.sensitivity) == ("laplace", "l1", 3.0)
    eps_a, eps_b = ra.sensitivity / ra.noise_scale, rb.sensitivity / rb.noise_scale
    assert eps_a == pytest.approx(eps_b)
    # Gaussian: sigma = sqrt(2 ln(1.25/delta_i)) Delta / eps_c with eps_c = 2 eps_a (its share)
    c = math.sqrt(2 * math.log(1.25 / PAPER_DELTA_PER_RELEASE))
    assert rc.noise_multiplier == pytest.approx(c / (2 * eps_a), rel=1e-12)
    assert plan.epsilon_spent <= 2.0 * (1 + 1e-9)
    with pytest.raises(ValueError, match="symmetric"):
        make_plan(specs, 4, epsilon=2.0, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                  mechanisms={"a": "laplace", "b": "laplace", "c": "laplace"})


def test_joint_plan_is_one_gaussian_per_iteration_at_the_joint_multiplier():
    specs = _specs()
    shares = {"a": 1.0, "b": 2.0, "c": 5.0}
    kw = dict(epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="gdp", shares=shares)
    one = (StatSpec("h", (5,), L2),)
    sep = make_plan(specs, 7, **kw)
    seen = []

    def joint(a):
        seen.append(dict(a))
        return 0.6 * sum(a.values())

    plan = make_plan(specs, 7, joint=joint, one_off_specs=one, one_off_share=0.25, **kw)
    # the bound is evaluated at the normalised shares (a_r = Delta_r^2 / sigma_r^2 up to p^2)
    assert seen and seen[0] == pytest.approx({"a": 1 / 8, "b": 2 / 8, "c": 5 / 8})
    z = plan.joint_multiplier
    it = {n: r for n, r in plan.releases.items() if n != "h"}
    assert 1 / z ** 2 == pytest.approx(0.6 * sum(1 / r.noise_multiplier ** 2 for r in it.values()), rel=1e-12)
    # mu^2 of the plan: J / z^2 for the iterations, the one-off holds its 25 %
    mu2_it = 7 / z ** 2
    mu2_h = 1 / plan.releases["h"].noise_multiplier ** 2
    assert mu2_h / (mu2_h + mu2_it) == pytest.approx(0.25, rel=1e-12)
    from scipy.stats import norm
    mu = math.sqrt(mu2_it + mu2_h)
    delta = norm.cdf(-1.0 / mu + mu / 2) - math.exp(1.0) * norm.cdf(-1.0 / mu - mu / 2)
    assert delta <= 1e-5 * (1 + 1e-9) and delta >= 0.98e-5
    # a joint factor of 0.6 buys noise smaller by sqrt(0.6) (no one-off: same mu)
    plain = make_plan(specs, 7, joint=lambda a: 0.6 * sum(a.values()), **kw)
    for n in shares:
        assert plain.releases[n].noise_scale == pytest.approx(math.sqrt(0.6) * sep.releases[n].noise_scale,
                                                              rel=1e-6)
    assert sep.joint_multiplier is None
    inner = plain.event.event
    assert inner == acc.SelfComposedEvent(acc.GaussianEvent(plain.joint_multiplier), 7)
    for bad in (lambda a: 1.01 * sum(a.values()), lambda a: 0.0):
        with pytest.raises(ValueError, match="joint sensitivity"):
            make_plan(specs, 7, joint=bad, **kw)
    # Laplace plans compose separately whatever the model says
    lap = make_plan(specs, 4, epsilon=2.0, delta=1e-5, neighbouring="replace", accountant="rdp",
                    mechanisms={"a": "laplace", "b": "laplace", "c": "gaussian"}, joint=joint)
    assert lap.joint_multiplier is None


def test_tail_average_passes_the_running_mean_and_its_noise_scale():
    from dpem_fast._engine._base import TailAverage
    plan = make_plan(_specs(), 6, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="gdp")
    tail = TailAverage(plan.releases, 6, 3)
    rng = np.random.default_rng(0)
    released = [{n: rng.normal(size=r.shape) for n, r in plan.releases.items()} for _ in range(6)]
    for it in range(6):
        seen, rel = tail.add(it, released[it])
        k = max(0, it - 2)          # iterations 3, 4, 5 are the tail
        if k <= 1:
            assert all(seen[n] is released[it][n] for n in seen) and rel is plan.releases
            continue
        for n in seen:
            assert_array_equal(seen[n], sum(released[j][n] for j in range(3, it + 1)) / k)
            assert rel[n].noise_scale == pytest.approx(plan.releases[n].noise_scale / math.sqrt(k), rel=1e-15)
            assert rel[n].sensitivity == plan.releases[n].sensitivity
    for m in (0, 1):                # no averaging
        tail = TailAverage(plan.releases, 6, m)
        assert all(tail.add(it, released[it])[0] is released[it] for it in range(6))


def test_plan_argument_errors():
    specs = _specs()
    kw = dict(epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="gdp")
    with pytest.raises(ValueError, match="exactly the statistics"):
        make_plan(specs, 2, shares={"a": 1.0}, **kw)
    with pytest.raises(ValueError, match="mechanism"):
        make_plan(specs, 2, mechanisms={"a": "gaussian", "b": "exponential", "c": "gaussian"}, **kw)
    with pytest.raises(ValueError, match="one_off_share"):
        make_plan(specs, 2, one_off_specs=specs[:1], one_off_share=1.0, **kw)


# ---------------------------------------------------------------- release layer
def _layer(J=3):
    plan = make_plan(_specs(), J, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="gdp")
    return plan, ReleaseLayer(plan, make_key(0), n_threads=2)


def test_release_layer_refuses_what_the_plan_does_not_account_for():
    plan, layer = _layer()
    z = Statistics.zeros(_specs())
    out = layer.release(z, 0)
    assert set(out) == {"a", "b", "c"}
    with pytest.raises(ValueError, match="already released"):
        layer.release({"a": z["a"]}, 0)
    with pytest.raises(ValueError, match="outside"):
        layer.release({"a": z["a"]}, 3)
    with pytest.raises(ValueError, match="not in the privacy plan"):
        layer.release({"d": z["a"]}, 1)
    with pytest.raises(ValueError, match="shape"):
        layer.release({"a": np.zeros(4)}, 1)
    # a refused call releases nothing: index 1 is still free for every statistic
    assert set(layer.release(z, 1)) == {"a", "b", "c"}


def test_noise_is_addressed_by_index_and_name_and_thread_count_free():
    plan, layer = _layer()
    z = Statistics.zeros(_specs())
    first = layer.release(z, 0)
    again = ReleaseLayer(plan, make_key(0), n_threads=1).release(z, 0)
    for n in first:
        assert_array_equal(first[n], again[n])
    second = layer.release(z, 1)
    assert not np.array_equal(first["a"], second["a"])
    # each draw is add_noise with its own derived key
    r = plan.releases["b"]
    assert_array_equal(first["b"], add_noise(np.zeros(r.shape), r, release_key(make_key(0), 0, "b")))
    c = first["c"]
    assert_array_equal(c, np.swapaxes(c, 1, 2)) and not np.array_equal(c[0], c[1])


def test_dense_noise_is_the_value_plus_the_zero_release_draw():
    """A dense release is ``value + noise`` bit for bit, the noise that of a zero value under the
    same key (issue 41 draws it into the result); a 0-d value still gives a scalar."""
    key = release_key(make_key(4), 0, "v")
    for mech in ("gaussian", "laplace"):
        for shape in [(), (1,), (3, 4)]:
            r = Release("v", mech, "l1" if mech == "laplace" else "l2", 1.0, 0.7, shape, False, 1)
            value = np.random.default_rng(1).standard_normal(shape) * 1e3
            got = add_noise(value, r, key)
            noise = add_noise(np.zeros(shape), r, key)
            assert np.asarray(got).tobytes() == np.asarray(value + noise).tobytes()
            assert type(got) is (np.float64 if shape == () else np.ndarray)


@pytest.mark.statistical
def test_laplace_and_gaussian_noise_have_their_scale():
    plan = make_plan(_specs()[:2], 1, epsilon=1.0, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                     mechanisms={"a": "laplace", "b": "gaussian"})
    key = make_key(1)
    for name in ("a", "b"):
        r = plan.releases[name]
        draws = np.concatenate([add_noise(np.zeros(r.shape), r, release_key(key, i, name)).ravel()
                                for i in range(4000)])
        expected = r.noise_scale * (math.sqrt(2) if r.mechanism == "laplace" else 1.0)
        assert abs(draws.std() / expected - 1) < 0.02


@pytest.mark.statistical
def test_symmetric_gaussian_noise_is_sigma_on_the_diagonal_and_sigma_over_root2_off_it():
    """The symmetric release is the Gaussian mechanism on ``(S_ii; √2 S_ij)``, whose norm is
    ``‖S‖_F`` (the specs' Δ): every coordinate of that vector has sd σ, so an off-diagonal
    entry has σ/√2 (a scaled GOE: ``uᵀ E u`` has sd σ for every unit u).  A release with σ
    above the diagonal (Analyze-Gauss) or σ/2 (too little noise for the Δ) fails here."""
    plan = make_plan(_specs()[2:], 1, epsilon=1.0, delta=1e-5, neighbouring="add_remove", accountant="rdp")
    r = plan.releases["c"]
    assert r.offdiagonal_sd == pytest.approx(r.noise_scale / math.sqrt(2))
    key = make_key(3)
    E = np.stack([add_noise(np.zeros(r.shape), r, release_key(key, i, "c")) for i in range(3000)]).reshape(-1, 3, 3)
    iu = np.triu_indices(3, 1)
    diag = E[:, [0, 1, 2], [0, 1, 2]].ravel()
    off = E[:, iu[0], iu[1]].ravel()
    assert abs(diag.std() / r.noise_scale - 1) < 0.03
    assert abs(off.std() * math.sqrt(2) / r.noise_scale - 1) < 0.03
    u = np.array([1.0, 2.0, -2.0]) / 3.0
    quad = np.einsum("i,nij,j->n", u, E, u)
    assert abs(quad.std() / r.noise_scale - 1) < 0.04
