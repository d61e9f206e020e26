"""DPKMeans: plain Lloyd in the exact mode, privacy accounting of both methods, API, errors,
and the conformance suite."""
import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans

from conformance import PrivateEstimatorConformance
from dpem_fast import DPKMeans, accounting as acc
from dpem_fast._engine import Context, Release, make_plan
from dpem_fast._engine._sources._memory import summarize
from dpem_fast._engine._domain import DataDomain
from dpem_fast._reference.kmeans import kmeans_stats_reference
from dpem_fast._rng import make_key
from dpem_fast.cluster import nicv


def _blobs(n=3000, d=3, K=3, seed=0, dtype=np.float64, scale=0.5):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-3, 3, size=(K, d))
    y = rng.integers(0, K, size=n)
    return (centers[y] + rng.normal(scale=scale, size=(n, d))).astype(dtype), y


def _plain_lloyd(X, centers, n_iter):
    """Textbook Lloyd on the numpy twin of the kernel; an empty cluster keeps its centre."""
    C = np.array(centers, dtype=np.float64)
    for _ in range(n_iter):
        s = kmeans_stats_reference(X, C)
        full = s["counts"] > 0
        C[full] = s["sums"][full] / s["counts"][full, None]
    return C


def test_epsilon_inf_equals_sklearn_lloyd_from_the_same_start():
    X, _ = _blobs(n=4000, d=3, K=4, seed=2)
    init = X[[0, 1, 2, 3]]
    ours = DPKMeans(4, epsilon=float("inf"), init=init, max_iter=15).fit(X)
    ref = KMeans(4, init=init, n_init=1, max_iter=15, tol=0.0, algorithm="lloyd").fit(X)
    assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-10, atol=1e-12)
    assert_array_equal(ours.predict(X), ref.predict(X))
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-10)
    assert_allclose(ours.transform(X), ref.transform(X), rtol=1e-10, atol=1e-12)
    assert ours.privacy_ is None


def test_private_fit_is_close_to_lloyd_from_the_same_start():
    """eps = 1 on 200,000 rows: the noise barely moves Lloyd's iteration (the same public start,
    the same J iterations), measured by the NICV (in X's units, over X's variance)."""
    X, _ = _blobs(n=200_000, d=2, K=3, seed=4, scale=0.3)
    start = np.random.default_rng(4).uniform(-3, 3, size=(3, 2)) + 0.8     # public: near the blobs
    R = math.hypot(4, 4)
    exact = DPKMeans(3, epsilon=float("inf"), init=start, max_iter=10).fit(X)
    for seed in range(3):
        km = DPKMeans(3, epsilon=1.0, init=start, bounds=(-4, 4), random_state=seed).fit(X)
        assert km.nicv(X) <= 1.05 * exact.nicv(X)
        assert_allclose(km.cluster_centers_, exact.cluster_centers_, atol=0.01 * R)


def test_nicv_compares_fits_whatever_their_domains():
    """Issue 39: two fits with different declared boxes and the same centres have the same NICV
    (the paper's unit-ball value differs by the boxes' squared ratio), which is the objective
    over X's total variance, and does not move with the unit of X."""
    X, _ = _blobs(n=5000, d=2, K=3, seed=1, scale=0.3)
    a = DPKMeans(3, epsilon=1.0, bounds=(-4, 4), random_state=0).fit(X)
    b = DPKMeans(3, epsilon=1.0, bounds=(-16, 16), random_state=0).fit(X)
    b.cluster_centers_ = a.cluster_centers_.copy()
    assert a.nicv(X) == pytest.approx(b.nicv(X), rel=1e-12)
    d2 = ((X[:, None, :] - a.cluster_centers_[None]) ** 2).sum(-1).min(1)
    assert a.nicv(X) == pytest.approx(d2.mean() / ((X - X.mean(0)) ** 2).sum(1).mean(), rel=1e-10)
    assert 0 < a.nicv(X) < 1
    paper = [nicv(X / (4 * s * math.sqrt(2)), a.cluster_centers_ / (4 * s * math.sqrt(2))) for s in (1, 4)]
    assert paper[0] == pytest.approx(16 * paper[1])            # the unit-ball value cannot compare them
    c = DPKMeans(3, epsilon=1.0, bounds=(-400, 400), random_state=0).fit(100 * X)
    c.cluster_centers_ = 100 * a.cluster_centers_
    assert c.nicv(100 * X) == pytest.approx(a.nicv(X), rel=1e-12)
    with pytest.raises(ValueError, match="X: every row is the same"):
        a.nicv(np.ones((5, 2)))


@pytest.mark.parametrize("rel", ["replace", "add_remove"])
@pytest.mark.parametrize("d", [2, 10, 100])
@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")    # an accounting test at epsilon 0.5
def test_dplloyd_linear_spends_exactly_epsilon_with_one_laplace_scale(d, rel):
    # enough rows that replace-one (n public) does not refuse d = 100 (count noise sd 435)
    X = np.random.default_rng(d).uniform(-1, 1, size=(2000, d))
    J, eps = 7, 0.5
    km = DPKMeans(4, method="dplloyd", epsilon=eps, max_iter=J, data_norm=math.sqrt(d), neighbouring=rel,
                  random_state=0).fit(X)
    rec = km.privacy_
    # the calibration solves for the noise numerically and stays at or just below the target
    assert rec.accountant == "linear" and eps * (1 - 1e-6) <= rec.epsilon_spent <= eps * (1 + 1e-12)
    rs = rec.releases
    assert {r.mechanism for r in rs.values()} == {"laplace"}
    # the spend read off the release records alone: sum over releases of J * Delta_1 / b
    spent = sum(r.count * r.sensitivity / r.noise_scale for r in rs.values())
    assert spent == pytest.approx(rec.epsilon_spent, rel=1e-12)
    # the classic single noise level, Lap((Delta_counts + Delta_sums) J / eps), with our
    # unit-ball sensitivities: 1 + sqrt(d) (add/remove), 2 (1 + sqrt(d)) (replace)
    f = 2.0 if rel == "replace" else 1.0
    # one scale, up to the float64 rounding widening of the (non-integer) sums (issue 34; the
    # integer counts are exact): at n = 2,000 under replace, at the public cap under add/remove
    w = rs["sums"].sensitivity / (f * math.sqrt(d))
    assert w == pytest.approx(km._rounding_factor(d, km._public_rows(2000)), rel=1e-15)
    assert 1.0 < w < (1.0 + 1e-8 if rel == "replace" else 1.0 + 3e-3)
    assert rs["counts"].sensitivity == f
    assert rs["counts"].noise_scale == pytest.approx(f * (1 + math.sqrt(d)) * J / eps, rel=1e-6)
    assert rs["counts"].noise_scale * w == pytest.approx(rs["sums"].noise_scale, rel=1e-12)


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")    # an accounting test at epsilon 0.5
def test_dplloyd_zcdp_needs_less_noise_than_linear_at_the_same_target():
    X = np.random.default_rng(0).uniform(-1, 1, size=(500, 2))
    kw = dict(method="dplloyd", epsilon=0.5, delta=1e-4, max_iter=10, data_norm=1.5, random_state=0)
    lin = DPKMeans(3, accountant="linear", **kw).fit(X).privacy_
    z = DPKMeans(3, accountant="zcdp", **kw).fit(X).privacy_
    assert z.accountant == "zcdp" and z.epsilon_spent <= 0.5 * (1 + 1e-9)
    assert z.releases["sums"].noise_scale < lin.releases["sums"].noise_scale
    # zCDP of pure eps_i-DP Laplace releases: rho = J * sum eps_i^2 / 2 (Bun & Steinke Prop. 1.4),
    # the rho of one Gaussian of multiplier 1 / sqrt(2 rho)
    rho = 10 * sum((r.sensitivity / r.noise_scale) ** 2 / 2 for r in z.releases.values())
    same = acc.ZCDPAccountant(neighbouring="replace").compose(acc.GaussianEvent(1 / math.sqrt(2 * rho)))
    assert same.get_epsilon(1e-4) == pytest.approx(z.epsilon_spent, rel=1e-9)


def test_dpem_joint_accounting_beats_separate_composition():
    """Under replace, the auto split (1 : 2) gives equal noise on counts and sums and
    mu^2 = a_s per iteration (the stacked statistic's sensitivity is 2); composed separately
    the same noise would cost a_c + a_s = 1.5 a_s."""
    X, _ = _blobs(n=500)
    km = DPKMeans(3, epsilon=1.0, delta=1e-5, max_iter=5, bounds=(-6, 6), random_state=0, init=None).fit(X)
    rec = km.privacy_
    sc, ss = rec.releases["counts"].noise_scale, rec.releases["sums"].noise_scale
    # equal up to the float64 rounding widening of the sums (issue 34; the integer counts are exact)
    w = rec.releases["sums"].sensitivity / 2.0
    assert 1.0 < w < 1.0 + 1e-8
    assert sc * w == pytest.approx(ss, rel=1e-12)
    assert rec.joint_multiplier == pytest.approx(ss / 2.0 / w, rel=1e-12)
    separate = make_plan(km._statistic_specs(3), 5, epsilon=1.0, delta=1e-5, neighbouring="replace",
                         accountant="gdp", shares=km._shares())
    assert separate.releases["sums"].noise_scale / ss == pytest.approx(math.sqrt(1.5), rel=1e-6)
    assert km._joint_sensitivity({"counts": 1.0, "sums": 1.0}, "replace") == 1.5
    assert km._joint_sensitivity({"counts": 0.2, "sums": 1.0}, "replace") == 1.0
    assert km._joint_sensitivity({"counts": 1.0, "sums": 1.0}, "add_remove") == 2.0
    ar = DPKMeans(3, neighbouring="add_remove", max_iter=5, bounds=(-6, 6), random_state=0, init=None).fit(X).privacy_
    w_ar = ar.releases["sums"].sensitivity          # Δ = 1, widened at the public cap (issue 34)
    assert 1.0 + 1e-3 < w_ar < 1.0 + 3e-3
    assert ar.releases["sums"].noise_scale / ar.releases["counts"].noise_scale == pytest.approx(3 ** -0.25 * w_ar)


def test_discrete_noise_releases_integer_counts():
    X, _ = _blobs(n=800)
    km = DPKMeans(3, noise="discrete_gaussian", max_iter=3, bounds=(-6, 6), random_state=0).fit(X)
    rs = km.privacy_.releases
    assert km.privacy_.accountant == "zcdp" and {r.mechanism for r in rs.values()} == {"discrete_gaussian"}
    assert rs["counts"].granularity == 1.0 and rs["counts"].sensitivity == pytest.approx(math.sqrt(2))
    assert np.all(np.isfinite(km.cluster_centers_))


def test_small_noisy_counts_keep_the_previous_centre():
    km = DPKMeans(3)
    rel = Release("counts", "gaussian", "l2", math.sqrt(2), 10.0, (3,), False, 1, None, 3)
    prev = np.array([[0.1, 0.2], [0.3, 0.4], [-0.5, 0.0]])
    noisy = {"counts": np.array([30.0, 31.0, -4.0]), "sums": np.array([[3.0, 0.0], [62.0, 0.0], [1.0, 1.0]])}
    out = km._update(noisy, prev, Context(0, {"counts": rel}))
    assert_array_equal(out[0], prev[0])                       # 30 <= 3 sigma: kept
    assert_array_equal(out[1], [1.0, 0.0])                    # 62/31 = 2: projected onto the ball
    assert_array_equal(out[2], prev[2])                       # negative count: kept
    assert_array_equal(prev, [[0.1, 0.2], [0.3, 0.4], [-0.5, 0.0]])


def test_api_dtype_and_inference():
    X, _ = _blobs(n=1000)
    km = DPKMeans(3, max_iter=3, bounds=(-6, 6), random_state=0).fit(X.astype(np.float32))
    assert km.cluster_centers_.dtype == np.float32 and km.transform(X.astype(np.float32)).dtype == np.float32
    km = DPKMeans(3, max_iter=3, bounds=(-6, 6), random_state=0).fit(X)
    D = np.sqrt(((X[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1))
    assert_allclose(km.transform(X), D, rtol=1e-12)
    assert_array_equal(km.predict(X), D.argmin(1))
    assert km.score(X) == pytest.approx(-np.sum(D.min(1) ** 2), rel=1e-12)
    assert_allclose(km.score_samples(X), -D.min(1) ** 2, rtol=1e-12)
    assert_array_equal(km.fit_predict(X), km.predict(X))
    assert km.n_iter_ == 3 and not hasattr(km, "labels_") and not hasattr(km, "inertia_")
    assert "not private" in km.privacy_.notes[-1]


@pytest.mark.parametrize("kw, match", [
    (dict(n_clusters=0), "n_clusters"),
    (dict(n_clusters=2.5), "n_clusters"),
    (dict(n_clusters=600), "n_clusters"),
    (dict(method="kmeans++"), "method"),
    (dict(method="dplloyd", noise="discrete_gaussian"), "noise"),
    (dict(data_norm=0.0), "data_norm"),
    (dict(data_norm=-1.0), "data_norm"),
    (dict(init=np.zeros((3, 2))), "init"),
    (dict(init=np.full((3, 3), np.nan)), "init"),
    (dict(budget_split=(1.0, 0.0)), "budget_split"),
    (dict(budget_split="equal"), "budget_split"),
    (dict(method="dplloyd", accountant="gdp"), "gdp"),
])
def test_bad_parameters_name_the_parameter(kw, match):
    X, _ = _blobs(n=500)
    with pytest.raises((ValueError, TypeError), match=match):
        DPKMeans(**{"n_clusters": 3, **kw}).fit(X)


def test_public_init_is_used_as_given():
    X, _ = _blobs(n=500)
    init = np.array([[1.0, 1.0, 1.0], [-1.0, 0.0, 2.0], [0.0, -2.0, 0.5]])
    km = DPKMeans(3, init=init, max_iter=1, bounds=(-6, 6), random_state=0)
    w = km._initial_parameters(summarize(X), DataDomain(np.zeros(3), 2.0, None, False), make_key(0), True)
    assert_allclose(w, init / 2.0)
    assert "user-supplied" in km.fit(X).privacy_.notes[0]


class TestConformance(PrivateEstimatorConformance):
    estimator_class = DPKMeans
    params = dict(n_clusters=3, epsilon=1.0, delta=1e-5, max_iter=4, bounds=(-6.0, 6.0))
    fitted_attributes = ("cluster_centers_",)
    ball_params = dict(bounds=None, data_norm=6.0)
    # scikit-learn's checks fit 20-30 rows: epsilon=10 keeps them above the refusal threshold
    sklearn_params = (dict(n_clusters=2, epsilon=10.0, data_norm=50.0, bounds=None, max_iter=3, random_state=0),
                      dict(n_clusters=2, epsilon=10.0, method="dplloyd", data_norm=50.0, bounds=None, max_iter=3,
                           random_state=0),
                      dict(n_clusters=2, epsilon=float("inf"), bounds=None, max_iter=3, random_state=0))

    def make_data(self, n, seed=0):
        return _blobs(n=n, d=3, K=3, seed=seed)[0].clip(-6, 6)

    def statistic_sites(self):
        from dpem_fast._engine import _start      # the private start's passes (init="auto")
        return [*super().statistic_sites(), (_start, "cell_counts"), (_start, "cell_sums")]

    def outlier_data(self, n, seed=0):
        X = self.make_data(n, seed)
        X[::20] *= 100.0
        return X

    def exact_reference(self, est, X):
        C0 = est._initial_parameters(summarize(X), DataDomain(np.zeros(X.shape[1]), 1.0, None, False),
                                     make_key(est.random_state), False)
        return {"cluster_centers_": _plain_lloyd(X, C0, est.max_iter)}

    def _unit(self, est):
        dom = est.privacy_.data_domain
        return dom["center"], dom["scale"]

    def random_parameters(self, est, rng, d):
        C = rng.normal(size=(est.n_clusters, d))
        return C * rng.uniform(0, 1.2, size=(est.n_clusters, 1)) / np.linalg.norm(C, axis=1, keepdims=True)

    def random_row(self, est, rng, d):
        c, R = self._unit(est)
        u = rng.normal(size=d)
        return c + R * u / np.linalg.norm(u) * rng.uniform(0.5, 1.5)

    def perturb_row(self, est, rng, x):
        c, R = self._unit(est)
        return x + 0.1 * R * rng.normal(size=x.size)

    def adversarial_cases(self, est, rng, d):
        c, R = self._unit(est)
        K = est.n_clusters
        e1, far = np.eye(d)[0], np.full(d, 50.0)
        same = np.array([np.zeros(d)] + [far] * (K - 1))          # x and -x in cluster 0: |d sums| = 2
        split = np.array([e1, -e1] + [far] * (K - 2))              # x in 0, -x in 1: |d counts| = sqrt 2
        return [(same, c + R * e1, c - R * e1), (split, c + R * e1, c - R * e1)]

    def check_statistics_bounded(self, stats, n_rows):
        nk, s = stats["counts"], stats["sums"]
        assert nk.sum() == n_rows and np.all(nk == np.rint(nk))
        assert np.all(np.linalg.norm(s, axis=1) <= nk * (1 + 1e-12))


class TestConformanceDiscreteNoise(TestConformance):
    """The whole suite again with exact discrete Gaussian releases."""
    params = {**TestConformance.params, "noise": "discrete_gaussian"}
    sklearn_params = (dict(epsilon=10.0, max_iter=3),)      # 20-30 rows: above the refusal threshold


class TestConformanceDPLloyd(TestConformance):
    """The whole suite again for DPLloyd (Laplace releases, linear composition)."""
    params = {**TestConformance.params, "method": "dplloyd"}
    estimate_rows = 20000        # the Laplace plan's histograms are noisier at the same epsilon
    sklearn_params = (dict(epsilon=10.0, max_iter=3),)      # 20-30 rows: above the refusal threshold


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_l1_sensitivities_of_the_laplace_releases_hold_and_are_attained(rel):
    """DPLloyd's Laplace releases use the l1 sensitivities (the conformance suite searches l2)."""
    d, K = 4, 3
    km = DPKMeans(K, method="dplloyd", neighbouring=rel)
    specs = {s.name: s for s in km._statistic_specs(d)}
    dom = DataDomain(np.zeros(d), 1.0, None, False)
    rng = np.random.default_rng(0)

    def change(C, x, xp):
        a = km._statistics(x[None], C, dom, 1)
        if rel == "add_remove":
            return {n: np.abs(a[n]).sum() for n in specs}
        b = km._statistics(xp[None], C, dom, 1)
        return {n: np.abs(a[n] - b[n]).sum() for n in specs}

    u = np.full(d, 1 / math.sqrt(d))
    far = np.full(d, 50.0)
    worst = [change(np.array([np.zeros(d), far, far]), u, -u),        # same cluster: sums 2 sqrt(d)
             change(np.array([u, -u, far]), u, -u)]                   # moved: counts 2
    for _ in range(300):
        C = rng.normal(size=(K, d))
        x, xp = rng.normal(size=d) * 3, rng.normal(size=d) * 3
        worst.append(change(C, x, xp))
    for n, spec in specs.items():
        top = max(w[n] for w in worst)
        assert top <= spec.sensitivity("l1", rel) * (1 + 1e-12)
        assert top >= spec.sensitivity("l1", rel) * (1 - 1e-9)


class TestConformanceDataIndependentStart(TestConformance):
    """The whole suite again with the data-independent start (``init=None``; the default
    ``"auto"`` starts ``"dpem"`` privately: two more one-off releases in the plan)."""

    params = {**TestConformance.params, "init": None}
    sklearn_params = (dict(n_clusters=2, epsilon=10.0, data_norm=50.0, bounds=None, max_iter=3, random_state=0,
                           init=None),)
