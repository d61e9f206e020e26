"""DPStochasticEP: moment matching, kernel vs numpy twin, SEP vs EP, sensitivity, clipping,
accounting for both sampling schemes, noise scale, determinism, bad input.

The shared conformance suite (conformance.py) drives an estimator through the private-EM
engine's hooks (statistics per iteration, ``_update``, the domain estimate); a sequential
per-step estimator has none of them, so this module covers the same properties directly
(``TestSEPConformanceEquivalent``): accounting round trip, records meet the target tightly,
noise has the recorded scale, the output is a function of the releases only, determinism
across 1 and 2 threads, bad input.
"""
import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast import DPStochasticEP
from dpem_fast import accounting as acc
from dpem_fast._dpcore import _rng as core_rng
from dpem_fast._dpcore import _sep
from dpem_fast._engine import ReleaseLayer, _groups
from dpem_fast._reference import sep as ref

from privacy_conformance import PrivacyConformance
from dpem_fast._rng import derive_key, make_key
from dpem_fast.mixture._dp_sep import sep_event, sep_rounding_factor


_QUIET = pytest.mark.filterwarnings("ignore:DPStochasticEP. the released factor:UserWarning")


def _data(n=200, J=3, d=2, sep=4.0, s=0.5, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(J, d)) * sep
    h = rng.integers(0, J, n)
    return mu[h] + s * rng.normal(size=(n, d)), mu


def _prior(J, d, scale=1.0):
    return np.concatenate([np.zeros((J, d)), np.tile(np.eye(d).ravel() * scale, (J, 1))], axis=1)


def _random_cavity(rng, J, d, N=50):
    """Cavity natural parameters of a random PSD factor."""
    A = rng.normal(size=(J, d, d))
    lam = np.einsum("jab,jcb->jac", A, A) + 0.1 * np.eye(d)
    eta = np.einsum("jab,jb->ja", lam, rng.normal(size=(J, d)) * 2)
    return ref.join(eta, lam)


# ------------------------------------------------------------------ moment matching
def _grid_moments(cav, x, w, s2, d, half=6.0, k=None):
    """Tilted mean/covariance of every component by brute-force quadrature on a grid."""
    J = cav.shape[0]
    eta, lam = ref.split(cav, d)
    V = np.linalg.inv(lam)
    m = np.einsum("jab,jb->ja", V, eta)
    sd = np.sqrt(np.diagonal(V, axis1=1, axis2=2))
    k = k or {2: 401, 3: 141, 4: 41}[J * d]
    axes = [np.linspace(m[j, a] - half * sd[j, a], m[j, a] + half * sd[j, a], k)
            for j in range(J) for a in range(d)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, J, d)
    logp = np.zeros(len(grid))
    lik = np.zeros(len(grid))
    for j in range(J):
        u = grid[:, j] - m[j]
        logp += -0.5 * np.einsum("na,ab,nb->n", u, lam[j], u)
        lik += w[j] * np.exp(-0.5 * ((x - grid[:, j]) ** 2).sum(1) / s2)
    p = np.exp(logp - logp.max()) * lik
    p /= p.sum()
    mean = np.einsum("n,nja->ja", p, grid)
    c = grid - mean
    cov = np.einsum("n,nja,njb->jab", p, c, c)
    return mean, cov


@pytest.mark.parametrize("d, J", [(1, 2), (1, 3), (2, 2)])
def test_moment_matching_equals_brute_force_integration(d, J):
    rng = np.random.default_rng(d * 10 + J)
    w = rng.dirichlet(np.ones(J))
    for _ in range(2):
        cav = _random_cavity(rng, J, d)
        x = rng.normal(size=d) * 2
        mean, cov, r = ref.moment_match(*ref.split(cav, d), x, np.log(w), 0.7)
        gm, gc = _grid_moments(cav, x, w, 0.7, d)
        tol = 1e-6 if J * d == 2 else 1e-3
        assert_allclose(mean, gm, atol=tol * np.abs(gm).max())
        assert_allclose(cov, gc, atol=tol * np.abs(gc).max())
        assert_allclose(r.sum(), 1.0)


def test_kernel_site_update_is_the_moment_matching():
    """One SEP step with step=1 from a factor puts q at the tilted moments exactly."""
    rng = np.random.default_rng(3)
    J, d, N = 3, 2, 10
    th0 = _prior(J, d)
    tf = _random_cavity(rng, J, d) / N
    X = rng.normal(size=(1, d))
    cav = th0 + (N - 1) * tf
    mean, cov, _ = ref.moment_match(*ref.split(cav, d), X[0], np.log(np.full(J, 1 / J)), 0.5)
    out = tf.copy()
    _sep.sep_loop(X, np.zeros(1, dtype=np.int64), out, th0, np.log(np.full(J, 1 / J)), 0.5, N, 1.0, math.inf)
    q = cav + out                                      # step 1: q_new = cavity x f_n
    lam = ref.split(q, d)[1]
    assert_allclose(np.linalg.inv(lam), cov, rtol=1e-9)
    assert_allclose(np.einsum("jab,jb->ja", np.linalg.inv(lam), ref.split(q, d)[0]), mean, rtol=1e-9)


# ------------------------------------------------------------------ kernel vs twin
@pytest.mark.parametrize("d", [1, 2, 3])
def test_kernels_equal_the_numpy_twin(d):
    rng = np.random.default_rng(d)
    J, n, S = 3, 40, 150
    X = rng.normal(size=(n, d)) * 2
    th0 = _prior(J, d)
    tf = ref.join(rng.normal(size=(J, d)) / n, np.tile(np.eye(d) / n, (J, 1, 1)))
    lw = np.log(np.full(J, 1 / J))
    order = rng.integers(0, n, S).astype(np.int64)
    a = tf.copy()
    assert _sep.sep_loop(X, order, a, th0, lw, 0.25, n, 1 / n, math.inf) == ref.sep_run(
        X, order, tf, th0, lw, 0.25, n, 1 / n)[1]
    assert_allclose(a, ref.sep_run(X, order, tf, th0, lw, 0.25, n, 1 / n)[0], rtol=1e-10, atol=1e-13)
    # private: noise large enough that the PSD floor and the clip both act
    noise = rng.normal(size=(S, J, d + d * d)) * 0.05
    a = tf.copy()
    _sep.sep_loop(X, order, a, th0, lw, 0.25, n, 1 / n, 0.3, noise)
    assert_allclose(a, ref.sep_run(X, order, tf, th0, lw, 0.25, n, 1 / n, 0.3, noise)[0], rtol=1e-9, atol=1e-12)
    sites = np.tile(tf, (n, 1, 1))
    q = th0 + sites.sum(0)
    s_, q_ = sites.copy(), q.copy()
    sk = _sep.ep_loop(X, order, s_, q_, lw, 0.25, 1.0)
    qr, sr, skr = ref.ep_run(X, order, sites, th0, lw, 0.25)
    assert sk == skr
    assert_allclose(q_, qr, rtol=1e-9, atol=1e-10)


def test_projection_floors_eigenvalues_and_clips():
    rng = np.random.default_rng(5)
    for d in (1, 2, 4):
        th = rng.normal(size=(3, d + d * d)) * 3
        a = th.copy()
        _sep.project_factor(a, d, 2.0)
        assert_allclose(a, ref.project_factor(th, d, 2.0), atol=1e-12)
        lam = ref.split(a, d)[1]
        assert np.linalg.norm(a) <= 2.0 * (1 + 1e-12)
        assert_allclose(lam, np.swapaxes(lam, 1, 2), atol=1e-15)
        assert np.linalg.eigvalsh(lam).min() > -1e-12


# ------------------------------------------------------------------ SEP vs EP, SEP vs truth
def test_nonprivate_sep_converges_to_ep_on_easy_data():
    X, mu = _data(n=300, J=3, sep=5.0, seed=2)
    kw = dict(epsilon=math.inf, component_variance=0.25, prior_covariance=25.0, random_state=1, n_epochs=30)
    ep = DPStochasticEP(3, method="ep", **kw).fit(X)
    sep = DPStochasticEP(3, **kw).fit(X)
    # the same optimum: every EP mean has a SEP mean within half a posterior standard deviation
    # (SEP's factor keeps fluctuating with the last ~N/gamma rows it saw; clusters are 5 apart)
    D = np.linalg.norm(ep.means_[:, None] - sep.means_[None], axis=-1)
    sd = np.sqrt(np.trace(ep.means_covariance_, axis1=1, axis2=2))
    assert np.all(D.min(axis=1) < 0.5 * sd)
    idx = D.argmin(axis=1)
    assert_allclose(sep.means_covariance_[idx], ep.means_covariance_, rtol=0.1, atol=1e-12)
    # and both find the truth (error of a mean of ~100 points with s = 0.5)
    assert np.linalg.norm(mu[:, None] - ep.means_[None], axis=-1).min(axis=1).max() < 0.2


# ------------------------------------------------------------------ sensitivity, clipping
def test_sensitivity_bound_is_never_exceeded_and_nearly_attained():
    """Brute force over neighbouring datasets: the step's release changes by at most 2 gamma C / N."""
    rng = np.random.default_rng(7)
    J, d, n, C, gamma = 2, 2, 30, 1.0, 0.7
    th0 = _prior(J, d)
    lw = np.log([0.3, 0.7])
    worst = 0.0
    for _ in range(150):
        tf = ref.project_factor(rng.normal(size=(J, d + d * d)), d, C) * rng.uniform(0.01, 1)
        X = rng.normal(size=(n, d))
        Xp = X.copy()
        Xp[0] = rng.normal(size=d) * 10 ** rng.uniform(-1, 3)           # replace one row
        X[0] = rng.normal(size=d) * 10 ** rng.uniform(-1, 3)
        order = np.zeros(1, dtype=np.int64)
        a, b = tf.copy(), tf.copy()
        zero = np.zeros((1, J, d + d * d))
        # the mean of the release (noise 0, projection off: clip = C only on f_n)
        _sep.sep_loop(X, order, a, th0, lw, 0.25, n, gamma / n, C, None)
        _sep.sep_loop(Xp, order, b, th0, lw, 0.25, n, gamma / n, C, None)
        worst = max(worst, np.linalg.norm(a - b))
        # a step on a row both datasets share changes nothing
        c, e = tf.copy(), tf.copy()
        _sep.sep_loop(X, order + 1, c, th0, lw, 0.25, n, gamma / n, C, zero)
        _sep.sep_loop(Xp, order + 1, e, th0, lw, 0.25, n, gamma / n, C, zero)
        assert_array_equal(c, e)
    bound = 2 * gamma * C / n
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.95 * bound
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # 30 rows: the fit itself is noise
        est = DPStochasticEP(2, epsilon=3.0, clip_norm=C, damping=gamma, n_epochs=1, random_state=0).fit(X)
    assert est.privacy_.releases["factor"].sensitivity == pytest.approx(bound)


def test_clipping_invariants_hold_after_every_step():
    X, _ = _data(n=60, J=3, seed=4)
    X[:3] *= 1e4                                       # outliers
    J, d, C = 3, 2, 0.8
    rng = np.random.default_rng(0)
    th0 = _prior(J, d)
    tf = ref.project_factor(rng.normal(size=(J, d + d * d)), d, C)
    lw = np.log(np.full(J, 1 / J))
    for s in range(200):
        i = np.array([s % 60], dtype=np.int64)
        noise = rng.normal(size=(1, J, d + d * d)) * 0.05
        _sep.sep_loop(X, i, tf, th0, lw, 0.25, 60.0, 1 / 60, C, noise)
        assert np.linalg.norm(tf) <= C * (1 + 1e-12)
        lam = ref.split(tf, d)[1]
        assert_array_equal(lam, np.swapaxes(lam, 1, 2))
        assert np.linalg.eigvalsh(lam).min() >= -1e-12
        assert np.linalg.eigvalsh(th0[:, d:].reshape(J, d, d) + 59 * lam).min() > 0   # cavity PD
    # f_n is clipped before the damped update: with zero noise the step moves at most gamma C / N
    a = tf.copy()
    _sep.sep_loop(X, np.zeros(1, dtype=np.int64), a, th0, lw, 0.25, 60.0, 1 / 60, C, None)
    assert np.linalg.norm(a - (1 - 1 / 60) * tf) <= C / 60 * (1 + 1e-12)


# ------------------------------------------------------------------ accounting
@_QUIET
def test_shuffle_accounting_is_T_gaussian_releases_in_closed_form():
    X, _ = _data(n=100)
    est = DPStochasticEP(3, epsilon=2.0, delta=1e-5, n_epochs=7, random_state=0).fit(X)
    rec = est.privacy_
    r = rec.releases["factor"]
    z = rec.event.event.event.noise_multiplier
    assert r.noise_multiplier == pytest.approx(z, rel=1e-14)
    # 4 releases per epoch (batch_size ceil(N / 4)); each row in one of them per epoch
    assert rec.neighbouring == "replace" and r.count == 28 and est.n_steps_ == 700
    assert rec.event == acc.NeighbouringEvent("replace", acc.SelfComposedEvent(acc.GaussianEvent(z), 7))
    # mu-GDP with mu = sqrt(T)/z (Dong, Roth & Su): delta(eps) in closed form
    from scipy.stats import norm
    mu = math.sqrt(7) / z
    dlt = norm.cdf(-2.0 / mu + mu / 2) - math.exp(2.0) * norm.cdf(-2.0 / mu - mu / 2)
    assert dlt == pytest.approx(1e-5, rel=1e-4)
    # the PLD accountant agrees; 2 % less noise misses the target
    assert acc.get_accountant("pld", "replace")().compose(rec.event).get_epsilon(1e-5) <= 2.0 + 1e-3
    tighter = sep_event(0.98 * z, 100, 7, "shuffle", 25)
    assert acc.get_accountant("gdp", "replace")().compose(tighter).get_epsilon(1e-5) > 2.0
    with pytest.raises(acc.NeighbouringMismatchError):
        acc.get_accountant("gdp", "add_remove")().compose(rec.event)


@_QUIET
def test_uniform_accounting_is_the_subsampled_rdp_bound():
    X, _ = _data(n=100)
    est = DPStochasticEP(3, epsilon=2.0, delta=1e-5, n_epochs=3, sampling="uniform", random_state=0).fit(X)
    rec = est.privacy_
    z = rec.event.event.event.event.noise_multiplier
    assert rec.releases["factor"].noise_multiplier == pytest.approx(z, rel=1e-14)
    # 4 releases per epoch, each on 25 distinct rows drawn uniformly
    inner = acc.SelfComposedEvent(acc.SampledWithoutReplacementEvent(100, 25, acc.GaussianEvent(z)), 12)
    assert rec.event == acc.NeighbouringEvent("replace", inner) and rec.accountant == "rdp"
    assert rec.releases["factor"].count == 12 and est.n_steps_ == 300
    eps = acc.RDPAccountant(neighbouring="replace").compose(rec.event).get_epsilon(1e-5)
    assert eps == pytest.approx(rec.epsilon_spent) and eps <= 2.0
    assert acc.RDPAccountant(neighbouring="replace").compose(
        sep_event(0.98 * z, 100, 3, "uniform", 25)).get_epsilon(1e-5) > 2.0
    sh = DPStochasticEP(3, epsilon=2.0, delta=1e-5, n_epochs=3, random_state=0).fit(X)
    # each uniform release draws 25 distinct rows; the shuffle is a permutation per epoch
    order = est._order(make_key(0), 100, 3, 25)
    assert order.shape == (300,) and order.min() >= 0 and order.max() < 100
    for r in range(12):
        assert len(np.unique(order[r * 25:(r + 1) * 25])) == 25
    assert len(np.unique(order[:100])) < 100
    perm = sh._order(make_key(0), 100, 3, 25)
    for t in range(3):
        assert_array_equal(np.sort(perm[t * 100:(t + 1) * 100]), np.arange(100))


class TestSEPConformanceEquivalent(PrivacyConformance):
    """The privacy part of the conformance suite (inherited; DP-SEP's sequential loop adds the
    released noise inside its compiled step, so 'update sees only releases' is checked here
    by its own test) and the per-step properties below."""
    estimator_class = DPStochasticEP
    # a budget at which the small fits below carry signal (no noise-dominated warning): the
    # privacy properties checked here hold at every epsilon
    params = dict(n_components=3, epsilon=20.0, n_epochs=5, component_variance=0.25, bounds=(-8.0, 8.0))
    fitted_attributes = ("means_", "means_covariance_", "factor_")
    noise_fits = 3
    sklearn_params = (dict(n_components=2, n_epochs=2, epsilon=1e3, random_state=0),
                      dict(n_components=2, n_epochs=2, epsilon=float("inf"), random_state=0))
    releases_statistics = False
    # person-level: the factor's sensitivity is over the G m slots (its own test below), and the
    # slot count G m is in the record (replace-one-group keeps G fixed, as N is for rows)
    releases_scale_by_m = False
    record_independent_of_group_count = False

    def make_data(self, n, seed=0):
        return _data(n=n, seed=seed)[0]

    def statistic_sites(self):
        from dpem_fast._kernels import sep as ksep
        return [(ksep, "sep_loop")]

    # the relation is replace-one (of rows, or of a group's slots): N is public, no cap
    rounding_fits = ("replace", "group")
    cap_widening = 0.0

    def exact_specs(self, est, X):
        """Prop. 1's 2 γ C / N from the fit's public setup (N: the rows, or the G m slots)."""
        from dpem_fast._engine import StatSpec

        n, d = X.shape
        m = est.privacy_.max_rows_per_group
        slots = None if m is None else np.unique(self.make_groups(n)).size * m
        st = est._setup(n, d, make_key(0), slots)
        sens = 2.0 * st.gamma * st.C / st.n
        return {"factor": StatSpec("factor", (st.J, d + d * d), {"add_remove": sens, "replace": sens})}

    @_QUIET
    def test_sklearn_estimator_checks(self):
        """scikit-learn's checks fit tiny arbitrary data sets: a component with no signal warns."""
        super().test_sklearn_estimator_checks()

    def _fit(self, **kw):
        X, _ = _data(n=kw.pop("n", 300), seed=kw.pop("seed", 0))
        p = dict(epsilon=20.0, n_epochs=5, component_variance=0.25, bounds=(-8.0, 8.0), random_state=11)
        p.update(kw)
        return DPStochasticEP(3, **p).fit(X)

    def test_seeded_fit_is_reproducible_and_thread_count_invariant(self):
        a = self._fit(n_threads=1)
        b = self._fit(n_threads=2)
        for name in ("means_", "means_covariance_", "factor_"):
            assert_array_equal(getattr(a, name), getattr(b, name))
        assert not np.array_equal(a.means_, self._fit(random_state=12).means_)

    def test_event_reaccounts_to_the_spent_epsilon(self):
        rec = self._fit().privacy_
        eps = acc.get_accountant(rec.accountant, "replace")().compose(rec.event).get_epsilon(rec.delta)
        assert eps == pytest.approx(rec.epsilon_spent, rel=1e-9)
        assert 0.99 * rec.epsilon <= rec.epsilon_spent <= rec.epsilon
        # from the release record alone: T = count / 4 releases per row (4 releases per epoch)
        r = rec.releases["factor"]
        ev = sep_event(r.noise_multiplier, 300, r.count // 4, "shuffle", 75)
        assert acc.GDPAccountant(neighbouring="replace").compose(ev).get_epsilon(rec.delta) <= rec.epsilon

    @staticmethod
    def _working(X, bounds, s2, J, d, key, n):
        """The estimator's working units, prior and initial factor, rebuilt from public values."""
        lo, hi = np.full(d, bounds[0]), np.full(d, bounds[1])
        c, R = (lo + hi) / 2, float(np.linalg.norm((hi - lo) / 2))
        U = (np.clip(X, lo, hi) - c) / R
        S0u = np.diag(((hi - lo) / 4) ** 2) / R ** 2              # the prior the bounds imply
        lam0 = np.linalg.inv(S0u)
        th0 = ref.join(np.zeros((J, d)), np.tile(lam0, (J, 1, 1)))
        z = np.empty(J * d)
        core_rng.fill_normal(derive_key(key, "init"), 0, 1.0, z, 1)
        mu0 = z.reshape(J, d) @ np.linalg.cholesky(S0u).T
        tf = ref.join(mu0 @ lam0 / n, np.tile(lam0 / n, (J, 1, 1)))
        return U, th0, tf, s2 / R ** 2, (lo - c) / R, (hi - c) / R, c, R

    def test_noise_has_the_recorded_scale_and_the_output_only_sees_releases(self, monkeypatch):
        blocks = []
        real = ReleaseLayer.noise_block

        def capture(layer, name, start, stop):
            out = real(layer, name, start, stop)
            blocks.append(out)
            return out

        monkeypatch.setattr(ReleaseLayer, "noise_block", capture)
        est = self._fit(n_epochs=40)
        noise = np.concatenate(blocks)
        r = est.privacy_.releases["factor"]
        assert noise.shape == (160, *r.shape)                  # 4 releases per epoch
        C = r.sensitivity * 300 / 2
        U, th0, tf, s2u, lo, hi, c, R = self._working(_data(n=300, seed=0)[0], (-8.0, 8.0), 0.25, 3, 2,
                                                      make_key(11), 300)
        assert C == pytest.approx(math.sqrt(3) / s2u)            # the default clip norm
        assert r.noise_scale == pytest.approx(r.noise_multiplier * 2 * C / 300)
        assert np.std(noise) == pytest.approx(r.noise_scale, rel=0.05)     # 2,880 draws
        assert abs(np.corrcoef(noise[:-1, 0, 0], noise[1:, 0, 0])[0, 1]) < 0.2
        # the fitted factor is the twin's run on these very noise rows (3 epochs: over many
        # steps the mixture's dynamics amplify the last-bit differences of two eigen-solvers)
        blocks.clear()
        est = self._fit(n_epochs=3)
        noise = np.concatenate(blocks)
        tf = ref.project_factor(tf, 2, C, lo, hi)
        want, _ = ref.sep_run(U, est._order(make_key(11), 300, 3, 75), tf, th0, np.log(np.full(3, 1 / 3)), s2u,
                              300, 1 / 300, C, noise, 75, lo, hi)
        from dpem_fast.mixture._dp_sep import _to_raw
        assert_allclose(est.factor_, _to_raw(want, c, R, 2), rtol=1e-8, atol=1e-12)

    def test_epsilon_inf_is_plain_sep_of_the_twin(self):
        est = self._fit(epsilon=math.inf, n_epochs=3)
        assert est.privacy_ is None
        U, th0, tf, s2u, lo, hi, c, R = self._working(_data(n=300, seed=0)[0], (-8.0, 8.0), 0.25, 3, 2,
                                                      make_key(11), 300)
        tf = ref.project_factor(tf, 2, math.inf, lo, hi)
        want, _ = ref.sep_run(U, est._order(make_key(11), 300, 3, 75), tf, th0, np.log(np.full(3, 1 / 3)), s2u,
                              300, 1 / 300, math.inf, None, 75, lo, hi)
        from dpem_fast.mixture._dp_sep import _to_raw
        assert_allclose(est.factor_, _to_raw(want, c, R, 2), rtol=1e-9, atol=1e-13)

    @pytest.mark.parametrize("kw, exc, match", [
        (dict(epsilon=0.0), ValueError, "epsilon"),
        (dict(epsilon=-1.0), ValueError, "epsilon"),
        (dict(epsilon="1"), TypeError, "epsilon"),
        (dict(delta=0.0), ValueError, "delta"),
        (dict(delta=1.0), ValueError, "delta"),
        (dict(clip_norm=0.0), ValueError, "clip_norm"),
        (dict(clip_norm=math.inf), ValueError, "clip_norm"),
        (dict(damping=1.5), ValueError, "damping"),
        (dict(n_epochs=0), ValueError, "n_epochs"),
        (dict(sampling="poisson"), ValueError, "sampling"),
        (dict(method="vi"), ValueError, "method"),
        (dict(method="ep"), ValueError, "method='ep' is non-private"),
        (dict(component_variance=-1.0), ValueError, "component_variance"),
        (dict(prior_mean=[0.0, np.nan]), ValueError, "prior_mean"),
        (dict(prior_mean=[0.0, 0.0, 0.0]), ValueError, "prior_mean"),
        (dict(prior_covariance=-1.0), ValueError, "prior_covariance"),
        (dict(prior_covariance=np.ones((3, 3))), ValueError, "prior_covariance"),
        (dict(weights=[0.5, 0.5]), ValueError, "weights"),
        (dict(weights=[0.5, 0.6, -0.1]), ValueError, "weights"),
        (dict(n_components=0), ValueError, "n_components"),
        (dict(n_components=100), ValueError, "n_components"),
    ])
    def test_bad_parameters(self, kw, exc, match):
        X, _ = _data(n=20)
        p = dict(n_epochs=1, random_state=0)
        p.update(kw)
        n_comp = p.pop("n_components", 3)
        with pytest.raises(exc, match=match):
            DPStochasticEP(n_comp, **p).fit(X)

    def test_bad_data(self):
        est = DPStochasticEP(2, n_epochs=1, epsilon=math.inf, random_state=0)
        X, _ = _data(n=20)
        for bad, match in [(np.array([[np.nan, 0.0]] * 5), "NaN"), (np.array([[np.inf, 0.0]] * 5), "infinity"),
                           (np.zeros((0, 2)), "0 sample"), (np.zeros(5), "2D array")]:
            with pytest.raises(ValueError, match=match):
                est.fit(bad)
        est.fit(X)
        with pytest.raises(ValueError, match="features"):
            est.predict(np.zeros((3, 3)))

    @_QUIET
    @pytest.mark.parametrize("epsilon", [1.0, math.inf])
    def test_huge_finite_rows_give_finite_output(self, epsilon):
        X, _ = _data(n=200)
        X[:5] = 1e300
        X[5] = -1e300
        est = DPStochasticEP(3, epsilon=epsilon, n_epochs=2, random_state=0).fit(X)
        assert np.all(np.isfinite(est.means_)) and np.all(np.isfinite(est.means_covariance_))
        assert np.all(np.isfinite(est.predict_proba(X[6:])))

    def test_predict_and_score(self):
        X, mu = _data(n=300, J=3, sep=5.0, seed=2)
        est = DPStochasticEP(3, epsilon=math.inf, component_variance=0.25, prior_covariance=25.0,
                             n_epochs=20, random_state=1).fit(X)
        p = est.predict_proba(X)
        assert_allclose(p.sum(1), 1.0)
        assert_array_equal(est.predict(X), p.argmax(1))
        assert est.score(X) == pytest.approx(est.score_samples(X).mean())
        worse = DPStochasticEP(3, epsilon=math.inf, component_variance=0.25, prior_mean=[50.0, 50.0],
                               n_epochs=1, random_state=1).fit(X)
        assert est.score(X) > worse.score(X)


@_QUIET
def test_the_budget_is_charged_before_any_step_and_a_refusal_reads_nothing(monkeypatch):
    """DP-SEP on the engine's base: one charge of the whole plan before the first step."""
    from dpem_fast._kernels import sep as ksep
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    ledger = acc.BudgetLedger(5.0, 1e-5, accountant="gdp", neighbouring="replace")   # the fit's accountant
    seen = []
    real = ksep.sep_loop

    def spy(*args):
        seen.append(len(ledger.entries))
        return real(*args)
    monkeypatch.setattr(ksep, "sep_loop", spy)
    m = DPStochasticEP(2, epsilon=1.0, n_epochs=2, budget=ledger, random_state=0).fit(X)
    assert seen and all(k == 1 for k in seen) and len(ledger.entries) == 1
    assert ledger.spent()[0] == pytest.approx(m.privacy_.epsilon_spent, rel=1e-9)
    seen.clear()
    tight = acc.BudgetLedger(0.5, 1e-5, neighbouring="replace")
    with pytest.raises(acc.BudgetExceededError):
        DPStochasticEP(2, epsilon=1.0, n_epochs=2, budget=tight, random_state=0).fit(X)
    assert seen == [] and tight.entries == []
    with pytest.raises(ValueError, match="budget"):
        DPStochasticEP(2, epsilon=float("inf"), method="ep", budget=ledger).fit(X)
    with pytest.raises(ValueError, match="budget"):
        DPStochasticEP(2, epsilon=1.0, budget=acc.BudgetLedger(5.0, 1e-5, neighbouring="add_remove")).fit(X)
    with pytest.raises(TypeError, match="budget"):
        DPStochasticEP(2, epsilon=1.0, budget="ledger").fit(X)


# ------------------------------------------------------------------ issue 23: utility
def _paper_data(seed, n=1000, J=4, d=2):
    """The DP-SEP paper's Section 4 data: means ~ N(0, I), isotropic sd 0.5, uniform labels."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(J, d))
    return mu[rng.integers(0, J, n)] + 0.5 * rng.normal(size=(n, d)), mu


def _fnorm(mu, est):
    """The paper's F-norm: each true mean paired with its closest estimated mean."""
    idx = np.argmin(((mu[:, None] - est[None]) ** 2).sum(-1), axis=1)
    return float(np.linalg.norm(mu - est[idx]))


def _prior_predictive_score(X, m0, S0, s2):
    """Held-out score of the trivial model: every mean at the prior mean (the prior predictive)."""
    from scipy.stats import multivariate_normal
    return float(multivariate_normal(m0, S0 + s2 * np.eye(len(m0))).logpdf(X).mean())


@_QUIET
def test_means_stay_in_the_domain_when_the_factor_is_noisy():
    """Unit-scaled data at epsilon = 1: the noise enters the posterior through one damped
    release chain (not N T of them) and a noisy precision direction takes its eta with it, so
    the means stay inside the box the prior implies (before: Λ⁻¹η ≈ η, means in the ±100s)."""
    c = 5.0
    errs, triv = [], []
    for seed in range(3):
        X, mu = _paper_data(seed)
        est = DPStochasticEP(4, epsilon=1.0, component_variance=0.25 / c ** 2, prior_covariance=1 / c ** 2,
                             random_state=seed).fit(X / c)
        half = 3.0 * (1 / c + 0.5 / c)                       # the prior's box: ±3 (prior sd + s)
        assert np.all(np.abs(est.means_) <= half * (1 + 1e-12))
        assert np.all(np.isfinite(est.means_covariance_))
        assert np.all(np.linalg.eigvalsh(est.means_covariance_) > 0)
        errs.append(_fnorm(mu, c * est.means_))
        triv.append(_fnorm(mu, np.zeros_like(mu)))
    assert np.mean(errs) < np.mean(triv)


def test_the_projection_keeps_eta_consistent_with_a_floored_precision():
    """Kernel: a precision direction floored at 0 keeps no eta, the factor's mean is clamped into
    the box, and the norm clip preserves it (equal to the numpy twin)."""
    d, lo, hi = 2, -np.ones(2) * 0.5, np.ones(2) * 0.5
    lam = np.array([[4.0, 0.0], [0.0, -3.0]])                 # the second direction is pure noise
    eta = np.array([1.0, 250.0])                               # and eta carries noise along it
    th = ref.join(eta[None], lam[None])
    a = th.copy()
    _sep.project_factor(a, d, 1e9, lo, hi)
    assert_allclose(a, ref.project_factor(th, d, 1e9, lo, hi), atol=1e-12)
    e2, l2 = ref.split(a, d)
    assert_allclose(l2[0], [[4.0, 0.0], [0.0, 0.0]], atol=1e-12)
    assert_allclose(e2[0], [4.0 * 0.25, 0.0], atol=1e-12)     # mean 0.25 kept, the noise gone
    b = th.copy()
    _sep.project_factor(b, d, 1.0, lo, hi)                     # the clip scales eta and Lambda alike
    e3, l3 = ref.split(b, d)
    assert np.linalg.norm(b) <= 1.0 + 1e-12 and e3[0, 0] / l3[0, 0, 0] == pytest.approx(0.25)
    # without a box (the kernel's old behaviour) the noise stays in eta
    c_ = th.copy()
    _sep.project_factor(c_, d, 1e9)
    assert ref.split(c_, d)[0][0, 1] == pytest.approx(250.0)


@_QUIET
def test_default_clip_norm_holds_one_site_and_sets_the_sensitivity():
    """C = sqrt(d + 1) R² / s²: one fully responsible site [x/s², I/s²] of a row in the domain
    (working units, ‖x‖ <= 1) fits inside it, with equality on the sphere; the recorded
    sensitivity is 2 γ C / N (before: C = 1, five times below one site at d = 2, s² = 0.25)."""
    from dpem_fast.mixture._dp_sep import default_clip_norm
    d, s2u = 2, 0.25 / 50.0
    C = default_clip_norm(d, s2u)
    rng = np.random.default_rng(0)
    cav = ref.join(np.zeros((1, d)), np.eye(d)[None] * 10.0)
    norms = []
    for _ in range(50):
        x = rng.normal(size=d)
        x *= rng.uniform(0, 1) ** 0.5 / np.linalg.norm(x)
        fn = ref.site_update(cav, x, np.zeros(1), s2u, d)     # J = 1: r = 1, the exact likelihood
        assert_allclose(fn[0], np.concatenate([x / s2u, (np.eye(d) / s2u).ravel()]), rtol=1e-8)
        norms.append(np.linalg.norm(fn))
    assert max(norms) <= C and max(norms) >= 0.85 * C
    X, _ = _paper_data(0, n=400)
    est = DPStochasticEP(4, epsilon=1.0, component_variance=0.25, bounds=(-5.0, 5.0), n_epochs=2,
                         random_state=0).fit(X)
    R2 = 50.0                                                  # half-diagonal² of [-5, 5]²
    assert est.privacy_.releases["factor"].sensitivity == pytest.approx(2 * math.sqrt(3) * R2 / 0.25 / 400)


@_QUIET
@pytest.mark.parametrize("declared", ["bounds", "prior", "variance"])
@pytest.mark.parametrize("c", [37.0, 2.0 ** -5])
def test_fitting_scaled_data_gives_the_scaled_model(declared, c):
    """X / c with whatever is declared (the domain, the prior, or the component variance only:
    issue 40, the default prior is then s² I) scaled by c: the same model up to c.  The fit runs
    in the domain's units, so a power of two gives it bit for bit; another c equals it up to
    the rounding of X / c, which the mixture's dynamics amplify (as they do a 1-ulp change of
    X) to ~1e-6 here.  The score shifts by d log c."""
    X, _ = _paper_data(1, n=600)
    fits = []
    for k in (1.0, c):
        kw = {"bounds": dict(bounds=(-5.0 / k, 5.0 / k)),
              "prior": dict(prior_mean=[0.5 / k, -0.2 / k], prior_covariance=1.0 / k ** 2),
              "variance": {}}[declared]
        fits.append(DPStochasticEP(4, epsilon=5.5, component_variance=0.25 / k ** 2, random_state=3, **kw).fit(X / k))
    a, b = fits
    if math.frexp(c)[0] == 0.5:                      # a power of two: every step scales exactly
        assert_array_equal(b.means_ * c, a.means_)
        assert_array_equal(b.means_covariance_ * c * c, a.means_covariance_)
    assert_allclose(b.means_ * c, a.means_, rtol=1e-4, atol=1e-6)
    assert_allclose(b.means_covariance_ * c * c, a.means_covariance_, rtol=1e-4, atol=1e-12)
    assert b.score(X / c) == pytest.approx(a.score(X) + 2 * math.log(c), rel=1e-6)
    assert b.privacy_.releases["factor"].sensitivity == pytest.approx(a.privacy_.releases["factor"].sensitivity)


def test_the_default_prior_without_bounds_is_in_the_units_of_the_component_variance():
    """Issue 40: no bounds, no prior: N(0, s² I), and the box it implies is ± 6 s (at s² = 1 the
    former N(0, I), so a default fit is unchanged)."""
    st = DPStochasticEP(2, component_variance=0.09)._setup(100, 3, make_key(0))
    assert_allclose(st.S0u * st.R ** 2, 0.09 * np.eye(3), rtol=1e-12)
    assert_allclose(st.hi, 6 * 0.3 * np.ones(3), rtol=1e-12)
    one = DPStochasticEP(2)._setup(100, 3, make_key(0))
    assert_allclose(one.S0u * one.R ** 2, np.eye(3), rtol=1e-12)


def test_never_below_the_prior_and_a_warning_when_noise_dominates():
    """At a budget where the released factor is noise, the model is the prior (the trivial
    model) up to the comparison's noise, with a UserWarning naming what to declare; with signal,
    it beats the trivial model."""
    X, mu = _paper_data(2, n=2000)
    Xtr, Xte = X[:300], X[1000:]
    m0, S0 = np.zeros(2), np.eye(2)
    trivial = _prior_predictive_score(Xte, m0, S0, 0.25)
    kw = dict(component_variance=0.25, bounds=(-5.0, 5.0), prior_mean=m0, prior_covariance=S0)
    for seed in range(3):
        with pytest.warns(UserWarning, match="bounds.*epsilon"):
            weak = DPStochasticEP(4, epsilon=1.0, random_state=seed, **kw).fit(Xtr)
        assert weak.score(Xte) >= trivial - 0.05
        assert _fnorm(mu, weak.means_) <= _fnorm(mu, np.zeros_like(mu)) + 0.5
    strong = DPStochasticEP(4, epsilon=5.5, random_state=0, **kw).fit(X[:1000])
    assert strong.score(Xte) > trivial + 0.1
    assert _fnorm(mu, strong.means_) < 0.75 * _fnorm(mu, np.zeros_like(mu))


def test_a_hopeless_plan_is_refused_before_the_budget_is_charged():
    """n = 40 at epsilon = 0.3: no released factor could rise above its noise; a clear error from
    public quantities, and the ledger is untouched."""
    X, _ = _paper_data(0, n=40)
    ledger = acc.BudgetLedger(5.0, 1e-5, accountant="gdp", neighbouring="replace")
    with pytest.raises(ValueError, match="n_samples=40 is too small.*epsilon"):
        DPStochasticEP(2, epsilon=0.3, component_variance=0.25, bounds=(-5.0, 5.0), budget=ledger).fit(X)
    assert ledger.entries == []


# ------------------------------------------------------------------ person-level (issue 27)
def test_empty_slots_step_with_a_zero_site_in_the_kernel_and_the_twin():
    rng = np.random.default_rng(5)
    J, d, n, S = 3, 2, 30, 90
    X = rng.normal(size=(n, d))
    th0 = _prior(J, d)
    tf = ref.join(rng.normal(size=(J, d)) / n, np.tile(np.eye(d) / n, (J, 1, 1)))
    lw = np.log(np.full(J, 1 / J))
    order = rng.integers(-1, n, S).astype(np.int64)                   # about one step in 31 empty
    order[:5] = -1
    noise = rng.normal(size=(S // 3, J, d + d * d)) * 0.01
    a = tf.copy()
    skipped = _sep.sep_loop(X, order, a, th0, lw, 0.25, n, 1 / n, 0.3, noise, 3)
    want, sk = ref.sep_run(X, order, tf, th0, lw, 0.25, n, 1 / n, 0.3, noise, 3)
    assert_allclose(a, want, rtol=1e-9, atol=1e-12) and skipped == sk
    # an empty slot is the step with f_n = 0 (it counts in the batch: b is public)
    b = tf.copy()
    _sep.sep_loop(X, np.full(3, -1, dtype=np.int64), b, th0, lw, 0.25, n, 1 / n, 0.3, noise[:1], 3)
    c = tf.copy()
    ref_b = ref.project_factor((1 - 3 / n) * tf + noise[0], d, 0.3, None, None)
    assert_allclose(b, ref_b, rtol=1e-12, atol=1e-15) and not np.array_equal(b, c)
    with pytest.raises(ValueError, match="empty slot"):
        _sep.sep_loop(X, np.full(3, -1, dtype=np.int64), tf.copy(), th0, lw, 0.25, n, 1 / n, math.inf)


def test_person_level_sep_runs_over_g_m_slots_with_the_group_sensitivity():
    X, _ = _data(n=300, seed=0)
    groups = np.random.default_rng(1).integers(0, 70, 300)
    G, m = np.unique(groups).size, 3
    kw = dict(epsilon=20.0, n_epochs=4, component_variance=0.25, bounds=(-8.0, 8.0), random_state=3)
    est = DPStochasticEP(3, max_rows_per_group=m, **kw).fit(X, groups=groups)
    r = est.privacy_.releases["factor"]
    B = -(-G * m // 4)
    C = math.sqrt(X.shape[1] + 1.0) / (0.25 / 8.0 ** 2 / 2)      # default_clip_norm in the box's units
    assert est.n_steps_ == 4 * G * m
    # Prop. 1's group sensitivity, widened by the release's float rounding (issue 34, item 7)
    widening = sep_rounding_factor(B, m, 3 * (X.shape[1] + X.shape[1] ** 2))
    assert widening > 1.0
    assert r.sensitivity == pytest.approx(m * 2.0 * C / (G * m) * widening, rel=1e-14)
    assert est.privacy_.event == sep_event(r.noise_multiplier, G * m, 4, "shuffle", B, "group")
    assert (est.privacy_.privacy_unit, est.privacy_.max_rows_per_group) == ("group", m)
    # every group has m slots: its kept rows once each, then empty ones
    slots = est._slots(_groups.check_groups(groups, 300), make_key(3), m, 1)
    assert slots.size == G * m
    rows = slots[slots >= 0]
    assert np.unique(rows).size == rows.size
    assert np.sum(slots < 0) == np.sum(np.maximum(m - np.bincount(groups), 0)[np.bincount(groups) > 0])
    assert_array_equal(np.bincount(groups[rows], minlength=70), np.minimum(np.bincount(groups, minlength=70), m))
    with pytest.raises(ValueError, match="sampling"):
        DPStochasticEP(3, max_rows_per_group=m, sampling="uniform", **kw).fit(X, groups=groups)


def test_a_batch_of_sites_is_summed_in_blocks_then_exactly():
    """Issue 34, item 7: a batch's clipped sites are summed in floats over blocks of SITE_BLOCK
    steps and the block partials exactly (rounded once), so a replaced row's rounding stays in its
    block; the release is ``fl(step * sum)`` before the noise and the public damped factor.  From
    a zero factor and without noise or projection the update is that release itself: it must equal
    ``step * fsum(block partials)`` built from the sites one by one (a batch of one step from the
    zero factor with step 1 returns its clipped site), bit for bit.  Main's one sequential float
    sum over the whole batch differs."""
    J, d, C = 3, 2, 3.0
    X, _ = _data(n=700, J=J, d=d, seed=9)
    X *= np.random.default_rng(9).uniform(0.01, 30.0, (700, 1))          # sites of many sizes
    th0 = _prior(J, d)
    lw = np.log(np.full(J, 1 / J))
    zero = np.zeros((J, d + d * d))
    order = np.arange(700, dtype=np.int64)
    sites = []
    for i in order:
        one = zero.copy()
        _sep.sep_loop(X, order[i:i + 1], one, th0, lw, 0.25, 700.0, 1.0, C, None)
        sites.append(one)
    L = _sep.SITE_BLOCK
    partials = []
    for a in range(0, 700, L):
        tot = np.zeros_like(zero)
        for s in sites[a:a + L]:
            tot = tot + s
        partials.append(tot.ravel())
    P = np.stack(partials)
    exact = np.array([math.fsum(P[:, j]) for j in range(P.shape[1])]).reshape(zero.shape)
    step = 1.0 / 700
    got = zero.copy()
    _sep.sep_loop(X, order, got, th0, lw, 0.25, 700.0, step, C, None, 700)
    assert_array_equal(got, step * exact)
    sequential = np.zeros_like(zero)
    for s in sites:
        sequential = sequential + s
    assert not np.array_equal(step * sequential, step * exact)     # the data shows the difference
    # the twin (numpy) sums the same way
    twin, _ = ref.sep_run(X, order, zero, th0, lw, 0.25, 700.0, step, C, None, 700)
    assert_allclose(twin, got, rtol=1e-12, atol=1e-15)


def test_the_declared_sensitivity_carries_the_rounding_widening():
    """Prop. 1's 2 γ C / N times sep_rounding_factor (issue 34): > 1, growing with the batch."""
    assert 1.0 < sep_rounding_factor(1, 1, 6) < sep_rounding_factor(250_000, 1, 6) < 1.0 + 1e-10
    assert sep_rounding_factor(250_000, 3, 6) < sep_rounding_factor(250_000, 1, 6)
    X, _ = _data(n=400, seed=1)
    est = DPStochasticEP(3, epsilon=2.0, component_variance=0.25, bounds=(-8.0, 8.0), n_epochs=2,
                         random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(X)
    r = est.privacy_.releases["factor"]
    C = math.sqrt(3.0) / (0.25 / (2 * 8.0 ** 2))          # default_clip_norm in the box's units
    assert r.sensitivity == pytest.approx(2.0 * C / 400 * sep_rounding_factor(100, 1, 18), rel=1e-15)
    assert r.sensitivity > 2.0 * C / 400
