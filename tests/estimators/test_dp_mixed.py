"""DPMixedMixture: the mixed-table kernel against its numpy twin, the non-private EM against an
independent reference, the privacy mechanics (the conformance suite), tables in and out."""
import math
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import dpem_fast
from dpem_fast import DPMixedMixture
from dpem_fast._engine import ReleaseLayer
from dpem_fast._engine._sources._memory import summarize
from dpem_fast._kernels.mixed import CATEGORIES, MixedLayout, mixed_log_resp, mixed_stats
from dpem_fast._preprocess import DataDomain, box_domain
from dpem_fast._reference.gmm import _normalised
from dpem_fast._reference.mixed import log_prob_reference, mixed_stats_reference
from dpem_fast._rng import make_key
from dpem_fast.accounting import PrivacyLeakWarning
from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky

from conformance import PrivateEstimatorConformance, random_gaussian_components

# the conformance tables: x0 numeric, x1 three categories, x2 numeric, x3 two categories
CATS = {"x1": 3, "x3": 2}
LAYOUT = MixedLayout((0, 2), (1, 3), (3, 2))


def _table(n, seed=0):
    """Rows of three latent classes: two numeric columns (in [-6, 6]) and two code columns
    whose distributions depend on the class."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 3, n)
    centres = np.array([[-3.0, 2.0], [0.0, -3.0], [3.0, 2.0]])
    num = (centres[z] + rng.normal(scale=0.7, size=(n, 2))).clip(-6, 6)
    c1 = np.where(rng.random(n) < 0.8, z, rng.integers(0, 3, n))
    c3 = (rng.random(n) < np.array([0.1, 0.5, 0.9])[z]).astype(float)
    return np.column_stack([num[:, 0], c1, num[:, 1], c3])


def _frame(n, seed=0):
    X = _table(n, seed)
    return pd.DataFrame({"delay": X[:, 0], "carrier": pd.Categorical(np.array(["AA", "B6", "UA"])[X[:, 1].astype(int)],
                                                                    categories=["AA", "B6", "UA"]),
                         "distance": np.rint(100 * (X[:, 2] + 6)).astype(np.int64),
                         "night": X[:, 3].astype(bool)})


FRAME_BOUNDS = {"delay": (-6.0, 6.0), "distance": (0.0, 1200.0)}


# ------------------------------------------------------------------------------ kernel
def _random_model(rng, layout, K, ct):
    d, M = layout.d, layout.n_slots
    w = rng.dirichlet(np.ones(K))
    mu = rng.normal(size=(K, d))
    if ct == "full":
        A = rng.normal(size=(K, d, d)) * 0.3
        P = np.triu(A) + 1.5 * np.eye(d)
    else:
        P = rng.uniform(0.4, 2.0, (K, d))
    theta = np.log(rng.dirichlet(np.ones(M), K))
    return w, mu, P, theta


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ct", ["full", "diag"])
@pytest.mark.parametrize("n", [0, 1, 255, 3000])
def test_kernel_equals_the_numpy_twin_and_is_thread_count_invariant(n, ct, dtype):
    rng = np.random.default_rng(n)
    X = _table(max(n, 1), seed=n)[:n].astype(dtype)
    if n > 10:
        X[3, 1], X[4, 3], X[5, 1] = 2.5, -1.0, 7.0          # not a code: "other"
    w, mu, P, th = _random_model(rng, LAYOUT, 3, ct)
    dom = box_domain(np.array([-5.0, -4.0]), np.array([5.0, 4.0]))
    tol = 1e-9 if dtype == np.float64 else 1e-5
    for domain in (None, dom):
        a = mixed_stats(X, LAYOUT, w, mu, P, th, ct, 1, domain)
        b = mixed_stats(X, LAYOUT, w, mu, P, th, ct, 2, domain)
        ref, ll = mixed_stats_reference(X, LAYOUT, w, mu, P, th, ct, domain)
        for name in ref:
            assert_array_equal(a[name], b[name], err_msg=name)
            assert_allclose(a[name], ref[name], rtol=tol, atol=tol * max(1, n), err_msg=name)
        assert a.loglik == pytest.approx(ll, rel=tol, abs=tol)
        if ct == "full":
            assert_array_equal(a["second_moments"], np.swapaxes(a["second_moments"], 1, 2))
    lr, ll = mixed_log_resp(X, LAYOUT, w, mu, P, th, ct, 2)
    want_r, want_ll = _normalised(log_prob_reference(X, LAYOUT, mu, P, th, ct)[0], w)
    assert_allclose(lr, want_r, rtol=tol, atol=tol)
    assert_allclose(ll, want_ll, rtol=tol, atol=tol)


def test_kernel_categorical_only_and_numeric_only_tables():
    rng = np.random.default_rng(3)
    X = _table(1000)
    for layout in (MixedLayout((), (1, 3), (3, 2)), MixedLayout((0, 2), (), ())):
        for ct in ("full", "diag"):
            w, mu, P, th = _random_model(rng, layout, 2, ct)
            got = mixed_stats(X, layout, w, mu, P, th, ct, 2)
            ref, ll = mixed_stats_reference(X, layout, w, mu, P, th, ct)
            for name in ref:
                assert_allclose(got[name], ref[name], rtol=1e-9, atol=1e-9, err_msg=name)
            assert got.loglik == pytest.approx(ll, rel=1e-10)


def test_kernel_category_sums_are_the_soft_counts_per_column():
    """Every row falls in exactly one slot of every column (its category or "other")."""
    rng = np.random.default_rng(4)
    X = _table(2000)
    X[::7, 1] = -3.0
    w, mu, P, th = _random_model(rng, LAYOUT, 4, "full")
    s = mixed_stats(X, LAYOUT, w, mu, P, th, "full", 2)
    T = s[CATEGORIES]
    off = LAYOUT.offset
    for j in range(2):
        assert_allclose(T[:, off[j]:off[j + 1]].sum(axis=1), s["counts"], rtol=1e-12)
    assert T[:, off[1] - 1].sum() == pytest.approx(len(X[::7]), rel=1e-12)     # the "other" slot


def test_kernel_refuses_bad_layouts():
    X = _table(10)
    w, mu, P, th = _random_model(np.random.default_rng(0), LAYOUT, 2, "full")
    with pytest.raises(ValueError, match="layout names column"):
        mixed_stats(X[:, :3], LAYOUT, w, mu, P, th)
    with pytest.raises(ValueError, match="shape"):
        mixed_stats(X, LAYOUT, w, mu, P, th[:, :-1])
    with pytest.raises(ValueError, match="at least one declared category"):
        MixedLayout((0,), (1,), (0,))


# ---------------------------------------------------------------------------- exact mode
def _exact_em(est, X, n_iter):
    """Non-private EM from the estimator's initial parameters, with the numpy twin's statistics
    and an M-step written here (the reference of the epsilon=inf fit)."""
    lay, ct = est._layout, est.covariance_type
    d = lay.d
    w, mu, _, pc, theta = est._initial_parameters(summarize(X), DataDomain(np.zeros(d), 1.0, None, False),
                                                  make_key(est.random_state), False)
    for _ in range(n_iter):
        prec = np.diagonal(pc, axis1=1, axis2=2) if ct == "diag" else pc
        s, _ = mixed_stats_reference(X, lay, w, mu, prec, np.log(theta), ct)
        nk = s["counts"] + 10 * np.finfo(float).eps
        w = nk / nk.sum()
        mu = s["first_moments"] / nk[:, None]
        if ct == "diag":
            covs = s["second_moments"] / nk[:, None] - mu ** 2 + est.reg_covar
            pc = np.stack([np.diag(1 / np.sqrt(c)) for c in covs])
        else:
            covs = s["second_moments"] / nk[:, None, None] - mu[:, :, None] * mu[:, None, :]
            covs += est.reg_covar * np.eye(d)
            pc = compute_precision_cholesky(covs)
        T = s[CATEGORIES] + 10 * np.finfo(float).eps
        off = lay.offset
        theta = np.concatenate([T[:, off[j]:off[j + 1]] / T[:, off[j]:off[j + 1]].sum(1, keepdims=True)
                                for j in range(len(off) - 1)], axis=1)
    return w, mu, covs, theta


@pytest.mark.parametrize("ct", ["full", "diag"])
def test_epsilon_inf_is_exact_em_with_category_probabilities(ct):
    X = _table(2000)
    est = DPMixedMixture(3, epsilon=np.inf, categories=CATS, covariance_type=ct, max_iter=6, marginals=None,
                         random_state=0).fit(X)
    w, mu, covs, theta = _exact_em(est, X, 6)
    assert_allclose(est.weights_, w, rtol=1e-8)
    assert_allclose(est.means_, mu, rtol=1e-8, atol=1e-10)
    assert_allclose(est.covariances_, covs, rtol=1e-8, atol=1e-10)
    assert_allclose(np.concatenate(est.category_probs_, axis=1), theta, rtol=1e-8, atol=1e-12)
    assert est.privacy_ is None
    # EM on a well-separated table: the classes are found
    assert sorted(np.round(est.means_[:, 0]).astype(int)) == [-3, 0, 3]


# ------------------------------------------------------------------------- conformance
class TestConformance(PrivateEstimatorConformance):
    estimator_class = DPMixedMixture
    covariance_type = "full"
    # the mixture on the values (marginals=None); the marginals-first model: TestConformanceMarginals
    params = dict(n_components=3, epsilon=1.0, delta=1e-5, max_iter=4, bounds=(-6.0, 6.0), categories=CATS,
                  marginals=None)
    fitted_attributes = ("weights_", "means_", "covariances_", "precisions_cholesky_", "category_probs_")
    ball_params = dict(bounds=None, data_norm=6.0)
    sklearn_params = (dict(n_components=2, epsilon=10.0, data_norm=50.0, bounds=None, categories=None, max_iter=3,
                           random_state=0),
                      dict(n_components=2, epsilon=float("inf"), bounds=None, categories=None, max_iter=3,
                           random_state=0, marginals=None))
    # a_1 <= 4 a_2 and a_1^2 / (16 a_2) > a_c: the same-component obtuse case on top (the category
    # sums' a_T added to every case); a_T alone on top (a split that puts it first is in the suite)
    joint_splits = ((0.001, 1.0, 0.26, 0.3), (2.0, 0.5, 0.5, 0.2))

    def _fitted(self, est):
        out = {a: np.array(getattr(est, a)) for a in self.fitted_attributes if a != "category_probs_"}
        out["category_probs_"] = np.concatenate(est.category_probs_, axis=1)
        return out

    def domain_columns(self, X):
        return np.array([0, 2])

    def make_data(self, n, seed=0):
        return _table(n, seed)

    def outlier_data(self, n, seed=0):
        X = self.make_data(n, seed)
        X[::20, [0, 2]] *= 100.0
        return X

    def exact_reference(self, est, X):
        w, mu, covs, _ = _exact_em(est, X, est.max_iter)
        return {"weights_": w, "means_": mu, "covariances_": covs}

    def _unit(self, est):
        dom = est.privacy_.data_domain
        return dom["center"], dom["scale"]

    def random_parameters(self, est, rng, d):
        K, lay = est.n_components, est._layout
        theta = rng.dirichlet(np.full(lay.n_slots, 0.5), K)
        return (*random_gaussian_components(rng, K, lay.d), theta)

    def _codes(self, rng):
        return [rng.integers(-1, 4), rng.integers(-1, 3)]

    def random_row(self, est, rng, d):
        c, R = self._unit(est)
        u = rng.normal(size=2) if rng.random() < 0.7 else np.eye(2)[rng.integers(2)] * rng.choice([-1, 1])
        z = c + R * u / np.linalg.norm(u) * rng.uniform(0.5, 1.5)
        a, b = self._codes(rng)
        return np.array([z[0], a, z[1], b], dtype=float)

    def perturb_row(self, est, rng, x):
        c, R = self._unit(est)
        y = x.copy()
        y[[0, 2]] += 0.1 * R * rng.normal(size=2)
        if rng.random() < 0.3:
            y[[1, 3]] = self._codes(rng)
        return y

    def adversarial_cases(self, est, rng, d):
        c, R = self._unit(est)
        K, lay = est.n_components, est._layout
        e1, e2 = np.eye(2)
        far = 50.0 * np.ones(2)
        flat = np.full((K, lay.n_slots), 1.0)

        def params(means, scales):
            covs = np.stack([np.eye(2) * s for s in scales])
            return (np.full(K, 1.0 / K), np.asarray(means, dtype=float), covs, compute_precision_cholesky(covs),
                    flat)

        def row(z, a, b):
            return np.array([z[0], a, z[1], b], dtype=float)

        sharp = params([e1, -e1] + [far] * (K - 2), [1e-6] * K)      # gamma = e_1 at x, e_2 at -x
        broad = params([np.zeros(2)] + [far] * (K - 1), [10.0] + [1e-6] * (K - 1))   # gamma = e_1 everywhere
        axes = params([e1, e2] + [far] * (K - 2), [1e-6] * K)
        swapped = [(broad, row(c + R * (a * e1 + b * e2), 0, 0), row(c - R * (b * e1 + a * e2), 2, 1))
                   for a, b in ((np.cos(t), np.sin(t)) for t in (0.06, 0.13, 0.26))]
        return [(sharp, row(c + R * e1, 0, 0), row(c - R * e1, 1, 1)),
                (broad, row(c + R * e1, 0, 0), row(c - R * e1, 2, 1)),
                (broad, row(c + R * e1, 0, 1), row(c + R * e1, 1, 0)),
                (axes, row(c + R * e1, 0, 0), row(c + R * e2, 0, 0))] + swapped

    def check_statistics_bounded(self, stats, n_rows):
        nk, s1, s2, T = stats["counts"], stats["first_moments"], stats["second_moments"], stats[CATEGORIES]
        assert abs(nk.sum() - n_rows) <= 1e-9 * n_rows
        assert np.all(np.linalg.norm(s1, axis=1) <= nk * (1 + 1e-12))
        total = np.trace(s2, axis1=1, axis2=2).sum() if s2.ndim == 3 else s2.sum()
        assert total <= n_rows * (1 + 1e-12)
        assert np.all(T >= 0) and T.sum() == pytest.approx(2 * n_rows, rel=1e-12)


class TestConformanceDiag(TestConformance):
    covariance_type = "diag"
    params = {**TestConformance.params, "covariance_type": "diag"}
    scale_transforms = {"covariances_": "variance", "precisions_": "inverse_variance",
                        "precisions_cholesky_": "inverse_sd"}
    sklearn_params = tuple({**p, "covariance_type": "diag"} for p in TestConformance.sklearn_params)


class TestConformancePrivateStart(TestConformance):
    """The whole suite again with the numeric means from the private start (issue 35): its two
    releases read the numeric columns only and are charged with the plan."""

    params = {**TestConformance.params, "means_init": "private"}
    sklearn_params = tuple({**p, "means_init": "private"} for p in TestConformance.sklearn_params)

    def statistic_sites(self):
        from dpem_fast._engine import _start
        return [*super().statistic_sites(), (_start, "cell_counts"), (_start, "cell_sums")]


class TestConformanceMarginals(TestConformance):
    """The whole suite with the marginals first (issue 37, the default): one more one-off
    release, the mixture in the copula's space.  Its Gaussian block is not in the units of X,
    so the geometry checks of the value-space model do not apply (skipped, named below)."""

    params = {**TestConformance.params, "marginals": "auto"}     # the default: the plain mixture with data_norm alone
    sklearn_params = (TestConformance.sklearn_params[0],
                      {**TestConformance.sklearn_params[1], "marginals": "auto"})

    @pytest.mark.skip(reason="the copula's means and covariances are in z-units: invariant, not equivariant, "
                             "under a scaling of X")
    def test_scale_equivariance(self):
        pass

    @pytest.mark.skip(reason="the copula's means and covariances are in z-units, whatever each feature's scale")
    def test_each_feature_on_its_own_scale(self):
        pass

    @pytest.mark.skip(reason="the exact reference is the value-space EM; the copula's epsilon=inf fit is "
                             "tested in test_mixed_marginals.py")
    def test_epsilon_inf_equals_the_nonprivate_reference(self):
        pass


def test_the_private_start_reads_only_the_numeric_columns_and_is_in_the_record():
    """The start's releases are in the plan (record, 20 % of it) and sized by the numeric block;
    changing only the categorical columns of the rows leaves the start's statistics unchanged."""
    from dpem_fast._engine import _start
    X = _table(3000)
    seen = []
    real = _start.cell_sums

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(out[_start.START_SUMS].copy())
        return out

    for codes in (X[:, [1, 3]], np.zeros((X.shape[0], 2))):
        Y = X.copy()
        Y[:, [1, 3]] = codes
        try:
            _start.cell_sums = spy
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = DPMixedMixture(3, epsilon=1.0, bounds=(-6.0, 6.0), categories=CATS, max_iter=3,
                                     means_init="private", random_state=0).fit(Y)
        finally:
            _start.cell_sums = real
    # equal up to float rounding: the copula's released CDFs are normalised by the mean of all
    # columns' noisy totals (released values, categorical ones included), whose last bits move
    assert len(seen) == 2 and seen[0].shape[1] == 2
    np.testing.assert_allclose(seen[0], seen[1], rtol=1e-12, atol=1e-9)
    rel = est.privacy_.releases
    assert {"start_counts", "start_sums"} <= set(rel) and rel["start_sums"].shape[1] == 2
    assert "private start" in " ".join(est.privacy_.notes)
    with pytest.raises(ValueError, match="means_init must be None or 'private'"):
        DPMixedMixture(3, bounds=(-6.0, 6.0), categories=CATS, means_init="kmeans").fit(X)


def test_the_private_start_keeps_well_separated_components():
    """Issue 35, item 3: on five well-separated clusters with n public and ε = 1, the fit from the
    private start keeps all five components (the counts resolve them: σ_N ≈ 30 rows against
    4,000) and is within 0.5 nats/row of the non-private fit on held-out rows (seeds 0-7: all
    keep 5, gaps 0.00-0.39).  From the data-independent start the same fits keep 3 or 4 in 7 of
    the 8 seeds (gaps up to 0.96): the first E-steps put two clusters under one component
    (bench/mixture_collapse.py)."""
    rng = np.random.default_rng(3)
    centres = np.array([[-6.0, -6.0, 0.0], [6.0, -6.0, 0.0], [0.0, 6.0, -6.0], [0.0, 6.0, 6.0], [0.0, 0.0, 0.0]])
    y = rng.integers(0, 5, 25000)
    num = centres[y] + rng.standard_normal((25000, 3))
    X = np.column_stack([num, (y + (rng.random(25000) < 0.2)) % 3])
    train, test = X[:20000], X[20000:]
    kw = dict(bounds=(-11.0, 11.0), categories={"x3": 3}, max_iter=20, random_state=0)
    kw["marginals"] = None          # the value-space mixture (the copula's clusters: test_mixed_marginals.py)
    ref = DPMixedMixture(5, epsilon=math.inf, **kw).fit(train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = DPMixedMixture(5, epsilon=1.0, means_init="private", **kw).fit(train)
    assert ref.n_components_ == 5 and est.n_components_ == 5
    assert est.score(test) > ref.score(test) - 0.5


# --------------------------------------------------------------------------- privacy
@pytest.mark.parametrize("rel, ct", [("replace", "full"), ("add_remove", "full"), ("replace", "diag")])
def test_the_joint_bound_is_the_mixtures_plus_the_category_sums(rel, ct):
    """μ² = moments_joint_bound + a_T (replace; add/remove: the sum), by an independent formula."""
    est = DPMixedMixture(3, categories=CATS, covariance_type=ct, bounds=(-6, 6), max_iter=2, random_state=0,
                         neighbouring=rel, marginals=None).fit(_table(500))
    a = {"counts": 0.3, "first_moments": 1.0, "second_moments": 0.26, CATEGORIES: 0.7}
    if rel == "add_remove":
        want = sum(a.values())
    else:
        phi = a["first_moments"] ** 2 / (16 * a["second_moments"])
        want = 0.5 + 0.26 + 0.7 + max(0.3, phi)
    assert est._joint_sensitivity(a, rel) == pytest.approx(want, rel=1e-12)
    specs = {s.name: s for s in est._statistic_specs(4)}
    assert specs[CATEGORIES].sensitivity("l2", rel) == pytest.approx(math.sqrt(2 * 2 if rel == "replace" else 2))
    only = DPMixedMixture(2, categories={"x0": 3, "x1": 2}, max_iter=2, random_state=0, marginals=None,
                          neighbouring=rel).fit(_table(500)[:, [1, 3]])
    assert only._joint_sensitivity({"counts": 0.3, CATEGORIES: 0.7}, rel) == pytest.approx(1.0)
    assert set(only.privacy_.releases) == {"counts", CATEGORIES}


def test_the_private_domain_estimate_covers_the_numeric_columns_only(monkeypatch):
    seen = []
    from dpem_fast._engine import _domain

    real = _domain._histogram

    def spy(fill, n_threads, shape, args, X, columns=None):
        out = real(fill, n_threads, shape, args, X, columns=columns)
        seen.append((X.shape[1], list(columns), out.shape, out.sum()))
        return out

    monkeypatch.setattr(_domain, "_histogram", spy)
    X = _table(6000)
    est = DPMixedMixture(3, categories=CATS, max_iter=2, random_state=0).fit(X)
    assert [s[:3] for s in seen] == [(4, [0, 2], (2, _domain.SCALE_BINS)), (4, [0, 2], (2, _domain.REFINE_BINS))]
    assert seen[0][3] == 2 * len(X)              # one count per numeric column and row
    rec = est.privacy_
    assert rec.releases["domain_scale"].sensitivity == pytest.approx(math.sqrt(2 * 2))   # replace: sqrt(2 d)
    lo, hi = est.bounds_
    assert np.all(lo >= -8) and np.all(hi <= 8) and lo.shape == (2,)


# ---------------------------------------------------------------------------- tables
def test_a_data_frame_round_trips_through_sample_save_and_pickle(tmp_path):
    df = _frame(4000)
    m = DPMixedMixture(3, epsilon=2.0, bounds=FRAME_BOUNDS, dtypes={"distance": "int64"}, max_iter=8,
                       random_state=0).fit(df)
    assert list(m.feature_names_in_) == list(df.columns)
    S, y = m.sample(500, other="drop", random_state=1)
    assert list(S.columns) == list(df.columns) and len(S) == 500 and y.shape == (500,)
    assert [str(t) for t in S.dtypes] == list(m.dtypes_) == ["float64", "category", "int64", "category"]
    M, _ = m.sample(20000, other="missing", random_state=1)       # opt-in: "other" drawn as missing, at its rate
    assert set(M["night"].dropna()) <= {False, True}     # the released "other" rate: zero here, after raking
    assert M["carrier"].isna().mean() == pytest.approx(np.sum(m.weights_ * m.category_probs_[0][:, -1]), abs=0.005)
    assert list(S["carrier"].cat.categories) == ["AA", "B6", "UA"]
    assert S["delay"].between(-6, 6).all() and S["distance"].between(0, 1200).all()
    path = tmp_path / "m.npz"
    m.save(path)
    for other in (dpem_fast.load(path), pickle.loads(pickle.dumps(m))):
        assert_allclose(other.score_samples(df), m.score_samples(df), rtol=1e-12)
        S2, _ = other.sample(500, other="drop", random_state=1)
        pd.testing.assert_frame_equal(S2, S)


def test_the_fitted_dependence_is_reproduced_in_the_sample():
    """Class-dependent categories and numeric columns: the synthetic table keeps the relation
    between carrier and delay (a product of marginals would not)."""
    df = _frame(30000)
    m = DPMixedMixture(3, epsilon=1.0, bounds=FRAME_BOUNDS, max_iter=15, random_state=0).fit(df)
    S, _ = m.sample(30000, random_state=2)
    real = df.groupby("carrier", observed=True)["delay"].mean()
    synth = S.groupby("carrier", observed=True)["delay"].mean()
    assert_allclose(synth.to_numpy(), real.to_numpy(), atol=0.3)
    assert abs(S["night"].dropna().astype(bool).mean() - df["night"].mean()) < 0.03


def test_unknown_and_missing_categories_fall_in_other():
    df = _frame(3000)
    est = DPMixedMixture(2, epsilon=np.inf, categories={"carrier": ["AA", "B6"]}, max_iter=3, random_state=0)
    est.fit(df)
    other = np.concatenate(est.category_probs_[:1], axis=1)[:, -1]          # carrier's "other" slot
    share = (df["carrier"] == "UA").mean()
    assert np.sum(est.weights_ * other) == pytest.approx(share, abs=1e-9)
    S, _ = est.sample(2000, other="missing", random_state=0)
    assert S["carrier"].isna().mean() == pytest.approx(share, abs=0.04)
    assert not est.sample(2000, random_state=0)[0]["carrier"].isna().any()     # the default: declared ones only


def test_text_columns_without_declared_categories_are_refused():
    df = _frame(200)
    df["carrier"] = df["carrier"].astype(str)
    with pytest.raises(ValueError, match="carrier.*declare its categories"):
        DPMixedMixture(2, bounds=FRAME_BOUNDS).fit(df)
    m = DPMixedMixture(2, bounds=FRAME_BOUNDS, categories={"carrier": ["AA", "B6", "UA"]}, epsilon=5.0,
                       random_state=0).fit(df)
    assert m.sample(10)[0]["carrier"].dtype == pd.Series(["a"]).dtype    # pandas' text dtype (issue 37)


def test_released_dtypes_come_from_declarations_not_from_one_row():
    """``read_csv`` infers dtypes from values: one age of 30.5 makes an int column float, one
    missing value makes a bool column object.  Neighbours differing in that one row release
    the same ``dtypes_`` and samples of the same dtypes (issue 34, item 8)."""
    df = _frame(600)
    df["night"] = df["night"].astype(object)
    other = df.copy()
    other["distance"] = other["distance"].astype(np.float64)
    other.loc[0, "distance"] = 630.5
    other.loc[1, "night"] = None
    assert (df.dtypes != other.dtypes).any()
    kw = dict(epsilon=2.0, bounds=FRAME_BOUNDS, categories={"night": [False, True]}, max_iter=2, random_state=0)
    fits = [DPMixedMixture(2, **kw).fit(t) for t in (df, other)]
    assert list(fits[0].dtypes_) == list(fits[1].dtypes_) == ["float64", "category", "float64", "category"]
    assert [str(t) for t in fits[0].sample(50)[0].dtypes] == [str(t) for t in fits[1].sample(50)[0].dtypes]
    declared = [DPMixedMixture(2, dtypes={"distance": "int32"}, **kw).fit(t) for t in (df, other)]
    assert list(declared[0].dtypes_) == list(declared[1].dtypes_) == ["float64", "category", "int32", "category"]
    assert declared[1].sample(50)[0]["distance"].dtype == np.int32
    ordered = df.assign(carrier=df["carrier"].cat.as_ordered())
    assert DPMixedMixture(2, **kw).fit(ordered).dtypes_[1] == "category[ordered]"


@pytest.mark.parametrize("dtypes, exc, match", [
    ({"carrier": "int64"}, ValueError, "dtypes: 'carrier' is not a numeric column"),
    ({"nope": "int64"}, ValueError, "dtypes: 'nope' is not a numeric column"),
    ({"distance": "datetime64[ns]"}, ValueError, "dtypes: 'distance'.*not an integer or float"),
    ({"distance": "no such dtype"}, ValueError, "dtypes: 'distance'.*not a numpy number dtype"),
    (["distance"], TypeError, "dtypes must be a dict"),
    ({"distance": np.int32}, TypeError, "dtypes: 'distance'.*by its name"),
])
def test_bad_dtypes_name_dtypes(dtypes, exc, match):
    with pytest.raises(exc, match=match):
        DPMixedMixture(2, bounds=FRAME_BOUNDS, dtypes=dtypes).fit(_frame(100))
    with pytest.raises(ValueError, match="dtypes: declared output dtypes apply to a data frame"):
        DPMixedMixture(2, bounds=(-6, 6), categories=CATS, dtypes={"x0": "int64"}).fit(_table(100))


@pytest.mark.parametrize("bounds, match", [
    ({"delay": (-6, 6)}, "missing \\['distance'\\]"),
    ({**FRAME_BOUNDS, "carrier": (0, 1)}, "not numeric columns \\['carrier'\\]"),
    ({"delay": (-6, 6), "distance": 3.0}, "pair"),
])
def test_bad_bounds_dicts_name_the_columns(bounds, match):
    with pytest.raises(ValueError, match=match):
        DPMixedMixture(2, bounds=bounds).fit(_frame(200))


@pytest.mark.parametrize("categories, exc, match", [
    ({"x9": 3}, ValueError, "no column named 'x9'"),
    ({1: 3}, TypeError, "keys are column names"),
    ({"x1": []}, ValueError, "empty"),
    ({"x1": ["a", 1]}, TypeError, "all strings or all numbers"),
    ({"x1": ["a", "a"]}, ValueError, "unique"),
    (["x1"], TypeError, "categories must be a dict"),
])
def test_bad_categories_are_refused_naming_the_parameter(categories, exc, match):
    with pytest.raises(exc, match=match):
        DPMixedMixture(2, bounds=(-6, 6), categories=categories).fit(_table(100))


def test_data_domain_from_data_is_flagged_and_covers_numeric_columns():
    with pytest.warns(PrivacyLeakWarning):
        m = DPMixedMixture(2, bounds="from_data", categories=CATS, max_iter=2, random_state=0).fit(_table(500))
    assert not m.privacy_.private and m.bounds_.shape == (2, 2)


def test_noise_reaches_the_category_probabilities(monkeypatch):
    """The update reads the released category sums: changing only their release moves θ."""
    X = _table(3000)
    base = DPMixedMixture(3, bounds=(-6, 6), categories=CATS, max_iter=4, random_state=5).fit(X)
    real = ReleaseLayer.release

    def shifted(layer, statistics, index):
        out = real(layer, statistics, index)
        if CATEGORIES in out:
            out[CATEGORIES] = out[CATEGORIES] + 200.0 * (np.arange(out[CATEGORIES].shape[1]) % 2)
        return out

    monkeypatch.setattr(ReleaseLayer, "release", shifted)
    other = DPMixedMixture(3, bounds=(-6, 6), categories=CATS, max_iter=4, random_state=5).fit(X)
    assert not np.allclose(np.concatenate(base.category_probs_, 1), np.concatenate(other.category_probs_, 1))


def test_category_probabilities_shrink_towards_the_pooled_distribution_under_heavy_noise():
    from dpem_fast.mixture._dp_mixed import _probabilities
    from dpem_fast._engine._record import Release

    lay = MixedLayout((), (0,), (3,))
    rel = {"counts": Release("counts", "gaussian", "l2", 1.0, 1e4, (2,)),
           CATEGORIES: Release(CATEGORIES, "gaussian", "l2", 1.0, 1e4, (2, 4))}
    T = np.array([[100.0, 0, 0, 0], [0, 0, 100.0, 0]])
    p = _probabilities(T, np.array([100.0, 100.0]), rel, lay)
    assert_allclose(p.sum(axis=1), 1.0)
    assert np.all(np.abs(p - 0.25) < 0.01)      # noise 1e4 per entry: nothing resolved, near uniform
    rel_small = {k: Release(r.name, r.mechanism, r.norm, r.sensitivity, 1e-3, r.shape) for k, r in rel.items()}
    p = _probabilities(T, np.array([100.0, 100.0]), rel_small, lay)
    assert p[0, 0] > 0.99 and p[1, 2] > 0.99


def test_utility_beats_independent_columns_on_a_dependent_table():
    """At eps = 1 on 20k rows the K = 3 model scores clearly above K = 1 (independent categories
    given one Gaussian) held out."""
    X, X_test = _table(20000, seed=1), _table(5000, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m3 = DPMixedMixture(3, categories=CATS, bounds=(-6, 6), random_state=0).fit(X)
        m1 = DPMixedMixture(1, categories=CATS, bounds=(-6, 6), random_state=0).fit(X)
    assert m3.score(X_test) > m1.score(X_test) + 0.5
