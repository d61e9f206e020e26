"""DPGaussianMixture: exactness of the non-private path, privacy mechanics, API and errors."""
import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.mixture import GaussianMixture
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from dpem_fast import DPGaussianMixture
from dpem_fast._engine import DOMAIN_SHARE, ReleaseLayer
from dpem_fast._engine._sources._memory import summarize
from dpem_fast._rng import make_key
from dpem_fast.accounting import BudgetLedger, NoiseDominatedWarning, PrivacyLeakWarning
from dpem_fast.mixture._gaussian_block import COVARIANCES, start_covariances
from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky as _compute_precision_cholesky

from conformance import PrivateEstimatorConformance, random_gaussian_components


def _blobs(n=3000, d=3, K=3, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-3, 3, size=(K, d))
    y = rng.integers(0, K, size=n)
    X = centers[y] + rng.normal(scale=0.5, size=(n, d))
    return X.astype(dtype), y


def _init(X, K, seed=1):
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    means = X[rng.choice(len(X), K, replace=False)]
    prec = np.stack([np.eye(d) * (1.0 + 0.1 * k) for k in range(K)])
    return np.full(K, 1.0 / K), means, prec


@pytest.mark.parametrize("K, d, n_iter", [(1, 2, 3), (3, 3, 5), (4, 10, 4)])
def test_nonprivate_matches_sklearn(K, d, n_iter):
    X, _ = _blobs(n=2000, d=d, K=max(K, 2), seed=K + d)
    w0, m0, p0 = _init(X, K)
    ours = DPGaussianMixture(K, epsilon=float("inf"), max_iter=n_iter, weights_init=w0, means_init=m0,
                             precisions_init=p0, reg_covar=1e-6).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = GaussianMixture(K, covariance_type="full", max_iter=n_iter, tol=0.0, reg_covar=1e-6,
                              weights_init=w0, means_init=m0, precisions_init=p0,
                              init_params="random_from_data", random_state=0).fit(X)
    assert_allclose(ours.weights_, ref.weights_, rtol=1e-8)
    assert_allclose(ours.means_, ref.means_, rtol=1e-8, atol=1e-12)
    assert_allclose(ours.covariances_, ref.covariances_, rtol=1e-8, atol=1e-12)
    assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-9)
    assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-8)
    assert ours.privacy_ is None


def _precisions_of_type(p0, covariance_type):
    """scikit-learn's precisions_init of a type from (K, d, d) precision matrices."""
    diag = np.diagonal(p0, axis1=1, axis2=2)
    return {"full": p0, "tied": p0[0], "diag": diag, "spherical": diag.mean(axis=1)}[covariance_type]


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
@pytest.mark.parametrize("K, d, n_iter", [(1, 2, 3), (3, 3, 5), (4, 10, 4)])
def test_nonprivate_matches_sklearn_for_every_covariance_type(covariance_type, K, d, n_iter):
    X, _ = _blobs(n=2000, d=d, K=max(K, 2), seed=K + d)
    w0, m0, p0 = _init(X, K)
    p0 = _precisions_of_type(p0, covariance_type)
    ours = DPGaussianMixture(K, covariance_type=covariance_type, epsilon=float("inf"), max_iter=n_iter,
                             weights_init=w0, means_init=m0, precisions_init=p0, reg_covar=1e-6).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = GaussianMixture(K, covariance_type=covariance_type, max_iter=n_iter, tol=0.0, reg_covar=1e-6,
                              weights_init=w0, means_init=m0, precisions_init=p0,
                              init_params="random_from_data", random_state=0).fit(X)
    for name in ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_"):
        assert getattr(ours, name).shape == getattr(ref, name).shape, name
        assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-8, atol=1e-12, err_msg=name)
    assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-9)
    assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-8)
    assert ours.bic(X) == pytest.approx(ref.bic(X), rel=1e-9)
    assert ours._n_parameters() == ref._n_parameters()


def test_dtype_preserved_and_float32_close_to_float64():
    X, _ = _blobs(n=2000)
    kw = dict(epsilon=2.0, delta=1e-5, data_norm=6.0, max_iter=5, random_state=0)
    g64 = DPGaussianMixture(3, **kw).fit(X)
    g32 = DPGaussianMixture(3, **kw).fit(X.astype(np.float32))
    assert g32.means_.dtype == np.float32 and g64.means_.dtype == np.float64
    # the same noise draws, 0.4 % larger for float32 rows (FLOAT32_WIDENING): the means differ
    # by about 0.4 % of their noise (about 1 here), plus float rounding
    assert_allclose(g32.means_, g64.means_, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
def test_float32_fits_identical_for_every_thread_count(covariance_type):
    """Float32 rows run the kernels' float32 path (replace-one): a seeded fit gives the same bits
    on 1, 2 and 4 threads, as in float64."""
    X, _ = _blobs(n=6000, d=4, seed=3, dtype=np.float32)
    kw = dict(covariance_type=covariance_type, epsilon=2.0, data_norm=6.0, max_iter=4, random_state=0)
    fits = [DPGaussianMixture(3, n_threads=t, **kw).fit(X) for t in (1, 2, 4)]
    for g in fits[1:]:
        for name in ("weights_", "means_", "covariances_", "precisions_cholesky_"):
            assert_array_equal(getattr(g, name), getattr(fits[0], name), err_msg=name)


def test_float32_plan_widens_its_sensitivities_only_where_the_float32_path_runs():
    """replace-one: every iteration release of a float32 fit declares FLOAT32_WIDENING times the
    float64 sensitivity (same μ: the noise grows by that factor) and says so; add/remove: float32
    rows are computed in float64, with the float64 sensitivities, and its statistics equal the
    float64 pass over the same rows."""
    from dpem_fast._engine._specs import FLOAT32_WIDENING

    X, _ = _blobs(n=3000)
    for rel, factor in (("replace", FLOAT32_WIDENING), ("add_remove", 1.0)):
        kw = dict(epsilon=1.0, data_norm=6.0, max_iter=3, random_state=0, neighbouring=rel)
        g64 = DPGaussianMixture(3, **kw).fit(X)
        g32 = DPGaussianMixture(3, **kw).fit(X.astype(np.float32))
        assert g32._float32_path() == (rel == "replace")
        for name, r in g64.privacy_.releases.items():
            r32 = g32.privacy_.releases[name]
            assert r32.sensitivity == pytest.approx(r.sensitivity * factor, rel=1e-15), (rel, name)
            assert r32.noise_scale == pytest.approx(r.noise_scale * factor, rel=1e-12), (rel, name)
        assert g32.privacy_.epsilon_spent == pytest.approx(g64.privacy_.epsilon_spent, rel=1e-12)
        assert any("float32" in n for n in g32.privacy_.notes) == (rel == "replace")
        assert not any("float32" in n for n in g64.privacy_.notes)
    from dpem_fast._preprocess import resolve_domain

    X32 = X.astype(np.float32)       # g32: the add/remove fit; its parameters in working units
    covs = g32.covariances_.astype(np.float64) / 36.0
    p = (g32.weights_, g32.means_.astype(np.float64) / 6.0, covs, _compute_precision_cholesky(covs))
    dom = resolve_domain(3, 6.0, None)
    a = g32._statistics(X32, p, dom, 2)
    b = g32._statistics(X32.astype(np.float64), p, dom, 2)
    for name in ("counts", "first_moments", "second_moments"):
        assert_array_equal(a[name], b[name], err_msg=name)


def test_float32_person_level_fit_runs_in_float64_with_the_float64_sensitivities():
    """A person-level fit (replace one group's rows, any number of them) can move every later
    kept row to another float lane, so float32 rows take the float64 path: the same releases as
    the float64 fit, no widening, no note."""
    X, _ = _blobs(n=3000)
    groups = np.arange(3000) // 7
    kw = dict(epsilon=20.0, data_norm=6.0, max_iter=3, random_state=0, max_rows_per_group=3)
    g64 = DPGaussianMixture(3, **kw).fit(X, groups=groups)
    g32 = DPGaussianMixture(3, **kw).fit(X.astype(np.float32), groups=groups)
    assert not g32._float32_path()
    for name, r in g64.privacy_.releases.items():
        assert g32.privacy_.releases[name].sensitivity == r.sensitivity, name
        assert g32.privacy_.releases[name].noise_scale == r.noise_scale, name
    assert not any("float32" in n for n in g32.privacy_.notes)


def test_float32_held_out_score_within_noise_of_float64():
    """The same seeded private fit on float32 and on float64 rows: held-out scores far closer
    to each other than the scores of different seeds (the float32 path's rounding and its
    0.4 % wider noise are lost in the privacy noise)."""
    X, _ = _blobs(n=8000, d=3, seed=4)
    X_test, _ = _blobs(n=4000, d=3, seed=5)
    s64, s32 = [], []
    for seed in range(4):
        kw = dict(epsilon=1.0, bounds=(-6.0, 6.0), max_iter=5, random_state=seed)
        s64.append(DPGaussianMixture(3, **kw).fit(X.clip(-6, 6)).score(X_test))
        s32.append(DPGaussianMixture(3, **kw).fit(X.clip(-6, 6).astype(np.float32)).score(X_test))
    diff = np.abs(np.array(s32) - np.array(s64))
    assert diff.max() < 0.1 * np.std(s64) and np.std(s64) > 0


def test_missing_bound_is_estimated_privately_on_an_accounted_share():
    X, _ = _blobs(n=100_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = DPGaussianMixture(2, epsilon=1.0, max_iter=2, random_state=0).fit(X)
    rec = g.privacy_
    assert rec.private and rec.data_domain["source"] == "private estimate"
    assert list(rec.releases)[:3] == ["domain_scale", "domain_refine", "domain_outside"]
    # the two histograms and the outside count hold DOMAIN_SHARE of the plan's mu^2 (exact GDP
    # accounting; the iterations' releases are accounted jointly: mu^2 = J / z_joint^2)
    mu2 = {n: r.count * (r.sensitivity / r.noise_scale) ** 2 for n, r in rec.releases.items()}
    dom = mu2["domain_scale"] + mu2["domain_refine"] + mu2["domain_outside"]
    assert dom / (dom + rec.n_iter / rec.joint_multiplier ** 2) == pytest.approx(DOMAIN_SHARE, rel=1e-12)
    assert rec.epsilon_spent <= 1.0 * (1 + 1e-9)
    # the estimated box covers the bulk of the data and is not much wider than it
    lo, hi = rec.data_domain["bounds"]
    assert np.mean(np.any((X < lo) | (X > hi), axis=1)) <= 0.01
    assert np.all(hi - lo <= 1.5 * (X.max(0) - X.min(0)))


def test_domain_from_data_is_an_explicit_opt_in_marked_not_private():
    X, _ = _blobs(n=500)
    with pytest.warns(PrivacyLeakWarning, match="leaks privacy"):
        g = DPGaussianMixture(2, epsilon=1.0, max_iter=2, bounds="from_data", random_state=0).fit(X)
    assert not g.privacy_.private and g.privacy_.data_domain["from_data"]
    assert "NOT private" in g.privacy_.data_domain["source"] and "NONE" in str(g.privacy_)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = DPGaussianMixture(2, epsilon=1.0, max_iter=2, data_norm=10.0, random_state=0).fit(X)
    assert g.privacy_.private and g.privacy_.data_domain["source"] == "declared"


def test_rows_beyond_the_bound_are_clipped():
    X, _ = _blobs(n=1000)
    X[:7] *= 100.0
    g = DPGaussianMixture(2, epsilon=1.0, max_iter=1, data_norm=6.0, random_state=0).fit(X)
    assert g.diagnostics_["n_rows_clipped"] >= 7
    assert "not private" in g.diagnostics_["status"]


def _gdp_delta(eps, mu):
    # Balle & Wang 2018 / Dong, Roth, Su 2019: exact delta(eps) of mu-GDP, computed here independently.
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


# an accounting test: 1000 rows in 3 components at epsilon 0.7 leave some counts in the noise
@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")
@pytest.mark.parametrize("neighbouring, sens", [("replace", (math.sqrt(2), 2.0, math.sqrt(2))),
                                                ("add_remove", (1.0, 1.0, 1.0))])
def test_ggg_noise_meets_the_target_by_an_independent_computation(neighbouring, sens):
    X, _ = _blobs(n=1000)
    eps, delta, J = 0.7, 1e-5, 6
    g = DPGaussianMixture(3, epsilon=eps, delta=delta, max_iter=J, data_norm=6.0,
                          neighbouring=neighbouring, random_state=0).fit(X)
    rel = list(g.privacy_.releases.values())
    # the exact-arithmetic values widened for float64 rounding (issue 34): at n = 1,000 under
    # replace, at the public cap under add/remove
    w = g._rounding_factor(3, g._public_rows(1000))
    assert 1.0 < w < (1.0 + 1e-8 if neighbouring == "replace" else 1.0 + 3e-3)
    assert [r.sensitivity for r in rel] == pytest.approx([s * w for s in sens], rel=1e-15)
    # per iteration, the releases are one Gaussian mechanism: GDP with mu^2 = sup over
    # neighbours of sum_r |delta_r|^2 / sigma_r^2 -- sum_r (Delta_r/sigma_r)^2 under add/remove;
    # under replace, a_1/2 + a_2 + max(a_c, a_1^2/(16 a_2)) (a_1 <= 4 a_2 here), a_r = (Delta_r/sigma_r)^2
    a_c, a_1, a_2 = ((r.sensitivity / r.noise_scale) ** 2 for r in rel)
    assert a_1 <= 4 * a_2
    mu2 = a_c + a_1 + a_2 if neighbouring == "add_remove" else a_1 / 2 + a_2 + max(a_c, a_1 ** 2 / (16 * a_2))
    mu = math.sqrt(J * mu2)
    assert _gdp_delta(eps, mu) <= delta * (1 + 1e-9)
    # ... and the calibration is tight: 2% less noise would break the target
    assert _gdp_delta(eps, mu / 0.98) > delta
    assert g.privacy_.epsilon_spent <= eps * (1 + 1e-9)


@pytest.mark.parametrize("accountant", ["gdp", "rdp", "zcdp", "moments", "advanced", "linear"])
def test_every_accountant_spends_at_most_the_budget(accountant):
    X, _ = _blobs(n=800)
    g = DPGaussianMixture(2, epsilon=1.0, delta=1e-4, max_iter=5, data_norm=6.0, accountant=accountant,
                          random_state=0).fit(X)
    assert g.privacy_.accountant == accountant
    assert g.privacy_.epsilon_spent <= 1.0 * (1 + 1e-9)
    assert np.all(np.isfinite(g.means_))


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")    # an accounting test (the linear one is noisy)
def test_tighter_accountants_add_less_noise():
    X, _ = _blobs(n=800)
    sig = {}
    for a in ["gdp", "rdp", "zcdp", "advanced", "linear"]:
        g = DPGaussianMixture(3, epsilon=1.0, delta=1e-4, max_iter=10, data_norm=6.0, accountant=a,
                              random_state=0).fit(X)
        sig[a] = g.privacy_.releases["first_moments"].noise_scale
    # exact GDP is the tightest; RDP (grid of orders) and tight zCDP (continuous orders) agree
    # to the grid's resolution for Gaussian-only plans; both beat advanced, which beats linear
    assert sig["gdp"] < min(sig["rdp"], sig["zcdp"])
    assert sig["rdp"] == pytest.approx(sig["zcdp"], rel=1e-3)
    # (with J = 10 joint events the advanced theorem is looser than the linear one)
    assert max(sig["rdp"], sig["zcdp"]) < min(sig["advanced"], sig["linear"])


@pytest.mark.parametrize("averaging, m", [("tail", 3), ("none", 0)])
def test_tail_averaging_feeds_the_last_updates_the_running_mean(monkeypatch, averaging, m):
    """The last max_iter // 2 M-steps see the mean of the tail's noisy releases (post-processing)."""
    X, _ = _blobs(n=500)
    released, seen = [], []
    real_release = ReleaseLayer.release
    real_update = DPGaussianMixture._update

    def spy_release(layer, statistics, index):
        out = real_release(layer, statistics, index)
        released.append({k: np.array(v) for k, v in out.items()})
        return out

    def spy_update(est, noisy, params, ctx):
        seen.append(({k: np.array(v) for k, v in noisy.items()}, ctx.releases))
        return real_update(est, noisy, params, ctx)

    monkeypatch.setattr(ReleaseLayer, "release", spy_release)
    monkeypatch.setattr(DPGaussianMixture, "_update", spy_update)
    g = DPGaussianMixture(2, epsilon=1.0, max_iter=7, data_norm=6.0, averaging=averaging, random_state=0).fit(X)
    assert len(released) == len(seen) == 7
    for it, (noisy, releases) in enumerate(seen):
        k = it - (7 - m) + 1 if m else 0
        for name, value in noisy.items():
            if k <= 1:
                assert_array_equal(value, released[it][name])
                assert releases[name] == g.privacy_.releases[name]
            else:
                mean = sum(released[j][name] for j in range(7 - m, it + 1)) / k
                assert_allclose(value, mean, rtol=1e-12, atol=1e-12)
                assert releases[name].noise_scale == pytest.approx(
                    g.privacy_.releases[name].noise_scale / math.sqrt(k), rel=1e-12)


def test_covariance_eigenvalues_are_floored_at_one_noise_std():
    """The M-step floors eigenvalues at sigma_S2 / N_k (floored counts), caps them at 1."""
    import dataclasses

    from dpem_fast.mixture._gmm_mstep import private_m_step
    X, _ = _blobs(n=500)
    g = DPGaussianMixture(2, epsilon=1.0, max_iter=2, data_norm=6.0, random_state=0).fit(X)
    rel = dict(g.privacy_.releases)
    rel["counts"] = dataclasses.replace(rel["counts"], noise_scale=1.0)
    d, nk = 2, np.array([400.0, 100.0])
    for sigma_2 in (0.5, 20.0):
        rel["second_moments"] = dataclasses.replace(rel["second_moments"], noise_scale=sigma_2)
        means = np.array([[0.1, 0.0], [0.0, -0.2]])
        # second moments whose covariance is diag(0.04, 0): one unresolved direction
        s2 = np.stack([n * (np.diag([0.04, 0.0]) + np.outer(m, m)) for n, m in zip(nk, means)])
        _, mu, covs = private_m_step(nk, nk[:, None] * means, s2, rel, g.reg_covar)
        assert_allclose(mu, means, atol=1e-12)
        for k in range(2):
            w = np.linalg.eigvalsh(covs[k])
            assert w[0] == pytest.approx(sigma_2 / nk[k], rel=1e-9)
            assert w[1] == pytest.approx(max(0.04, sigma_2 / nk[k]), rel=1e-9)


def _noisy_gmm_stats(rng, K, d, sigma=(5.0, 2.0, 0.5)):
    """Noisy counts, first and (exactly symmetric) second moments of 1,000 rows in the box."""
    X = rng.uniform(-1, 1, size=(1000, d)) / math.sqrt(d)
    g = rng.dirichlet(np.ones(K), size=1000)
    E = np.triu(rng.normal(scale=sigma[2], size=(K, d, d)))
    s2 = np.einsum("nk,ni,nj->kij", g, X, X) + E + np.swapaxes(np.triu(E, 1), 1, 2)
    return g.sum(0) + rng.normal(scale=sigma[0], size=K), g.T @ X + rng.normal(scale=sigma[1], size=(K, d)), s2


@pytest.mark.parametrize("K, d", [(1, 1), (3, 2), (5, 10), (2, 12), (9, 3)])
@pytest.mark.parametrize("box", [True, False])
def test_compiled_full_m_step_equals_the_numpy_m_step(K, d, box):
    """Issue 26: the compiled M-step + precision Cholesky (the private full-covariance MLE
    update) computes the numpy M-step's values (mixture._gmm_mstep, the twin) -- bit for bit
    with fewer than 8 components, where numpy sums the weights left to right as it does."""
    from dpem_fast._engine._record import Release
    from dpem_fast._preprocess import resolve_domain
    from dpem_fast.mixture._gmm_mstep import private_full_step, private_m_step

    rel = {"counts": Release("counts", "gaussian", "l2", 1.0, 5.0, (K,)),
           "first_moments": Release("first_moments", "laplace", "l1", 1.0, 1.5, (K, d)),
           "second_moments": Release("second_moments", "gaussian", "l2", 1.0, 0.5, (K, d, d), symmetric=True)}
    dom = resolve_domain(d, None, (np.full(d, -1.0), np.full(d, 3.0))) if box else resolve_domain(d, 1.0, None)
    rng = np.random.default_rng(K * 100 + d)
    for _ in range(20):
        nk, s1, s2 = _noisy_gmm_stats(rng, K, d)
        w, m, c = private_m_step(nk, s1, s2, rel, 1e-6, None, dom, "full")
        want = (w, m, c, _compute_precision_cholesky(c))
        got = private_full_step(nk, s1, s2, rel, 1e-6, dom)
        for a, b in zip(got, want):
            if K < 8:
                assert_array_equal(a, b)
            assert_allclose(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("K, d, box", [(9, 12, True), (5, 10, False), (3, 6, True), (4, 3, False), (6, 40, True)])
def test_compiled_full_m_step_is_the_same_for_every_thread_count(K, d, box):
    """Issue 41: the compiled M-step runs its components over the kernels' driver; each
    component's outputs are its own, so 1, 2, 3 and 8 threads give the same bits, and a
    failing step raises the same error whatever thread ran it."""
    from dpem_fast._kernels.gmm import full_m_step

    rng = np.random.default_rng(41 + K * d)
    b = np.full(d, 0.3) if box else None
    for _ in range(5):
        nk, s1, s2 = _noisy_gmm_stats(rng, K, d)
        got = [full_m_step(nk, s1, s2, 15.0, 0.05, 0.5, 1e-6, b, n_threads=t) for t in (1, 2, 3, 8)]
        for other in got[1:]:
            for a, c in zip(got[0], other):
                assert_array_equal(a, c)
    s2 = s2.copy()
    s2[K // 2, 0, 0] = np.nan
    errors = []
    for t in (1, 4):
        with pytest.raises(ValueError) as e:      # (LinAlgError is one)
            full_m_step(nk, s1, s2, 15.0, 0.05, 0.5, 1e-6, b, n_threads=t)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_compiled_m_step_keeps_seeded_fits():
    """Seeded private fits through the compiled update equal those through the numpy M-step
    (the seeded-output contract, issue 26)."""
    from dpem_fast.mixture import _dp_gmm, _gmm_mstep

    def numpy_step(nk, s1, s2, releases, reg_covar, domain=None, n_threads=1):
        w, m, c = _gmm_mstep.private_m_step(nk, s1, s2, releases, reg_covar, None, domain, "full")
        return w, m, c, _gmm_mstep.compute_precision_cholesky(c)

    X, _ = _blobs(n=4000, d=4, K=3, seed=3)
    for kw in (dict(bounds=(-5, 5)), dict(data_norm=8.0, scenario="LLG", accountant="rdp")):
        fits = []
        for step in (_dp_gmm.private_full_step, numpy_step):
            with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
                warnings.simplefilter("ignore", NoiseDominatedWarning)
                mp.setattr(_dp_gmm, "private_full_step", step)
                fits.append(DPGaussianMixture(3, epsilon=2.0, max_iter=10, random_state=4, **kw).fit(X))
        for name in ("weights_", "means_", "covariances_", "precisions_cholesky_"):
            assert_array_equal(getattr(fits[0], name), getattr(fits[1], name), err_msg=name)


def test_is_upper_triangular():
    from dpem_fast._dpcore import _mstep

    P = np.triu(np.ones((3, 4, 4)))
    assert _mstep.is_upper_triangular(P)
    P[2, 3, 1] = 1e-300
    assert not _mstep.is_upper_triangular(P)
    assert _mstep.is_upper_triangular(np.zeros((0, 3, 3)))


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")     # LLG's second moments are noisy
def test_llg_and_map_fit():
    X, _ = _blobs(n=3000)
    g = DPGaussianMixture(3, epsilon=2.0, delta=1e-5, scenario="LLG", max_iter=5, data_norm=6.0,
                          random_state=0).fit(X)
    assert [r.mechanism for r in g.privacy_.releases.values()] == ["laplace", "laplace", "gaussian"]
    assert g.privacy_.epsilon_spent <= 2.0 * (1 + 1e-9)
    m = DPGaussianMixture(3, epsilon=2.0, delta=1e-5, estimator="map", max_iter=5, data_norm=6.0,
                          random_state=0).fit(X)
    for est in (g, m):
        assert np.all(np.isfinite(est.covariances_)) and np.all(np.linalg.eigvalsh(est.covariances_) > 0)
        assert est.weights_.sum() == pytest.approx(1.0)


def test_large_budget_approaches_nonprivate_fit():
    X, _ = _blobs(n=20000, d=2, K=3, seed=5)
    w0, m0, p0 = _init(X, 3, seed=2)
    kw = dict(max_iter=15, weights_init=w0, means_init=m0, precisions_init=p0, data_norm=8.0)
    exact = DPGaussianMixture(3, epsilon=float("inf"), **kw).fit(X)
    private = DPGaussianMixture(3, epsilon=50.0, delta=1e-5, random_state=0, **kw).fit(X)
    assert private.score(X) == pytest.approx(exact.score(X), abs=0.05)


def test_collapsed_components_never_give_nan():
    """Hopeless noise: under add/remove (n private) the fit degenerates to one component with a
    warning and finite parameters; under replace-one (n public) it is refused before the charge."""
    X, _ = _blobs(n=40, d=3)
    kw = dict(epsilon=0.01, delta=1e-6, max_iter=10, data_norm=6.0, random_state=0)
    with pytest.warns(NoiseDominatedWarning, match="epsilon"):
        g = DPGaussianMixture(6, neighbouring="add_remove", **kw).fit(X)
    assert g.n_components_ == 1 and g.weights_.shape == (1,) and g.means_.shape == (1, 3)
    for a in (g.weights_, g.means_, g.covariances_, g.precisions_cholesky_):
        assert np.all(np.isfinite(a))
    assert np.all(np.isfinite(g.score_samples(X)))
    assert np.all(np.isfinite(g.predict_proba(X)))
    ledger = BudgetLedger(10.0, 1e-5)
    with pytest.raises(ValueError, match="n_samples=40 is too few rows"):
        DPGaussianMixture(6, budget=ledger, **kw).fit(X)
    assert ledger.entries == []


def test_budget_ledger_refuses_before_fitting():
    from dpem_fast.accounting import BudgetExceededError, BudgetLedger, GDPAccountant

    X, _ = _blobs(n=500)
    # GDP composes two (1.0, 1e-6) fits to epsilon ~1.28 at delta=1e-5: the second one must not fit
    ledger = BudgetLedger(epsilon=1.2, delta=1e-5, accountant=GDPAccountant)
    DPGaussianMixture(2, epsilon=1.0, delta=1e-6, max_iter=3, data_norm=6.0, budget=ledger,
                      random_state=0).fit(X)
    g = DPGaussianMixture(2, epsilon=1.0, delta=1e-6, max_iter=3, data_norm=6.0, budget=ledger,
                          random_state=0)
    with pytest.raises(BudgetExceededError):
        g.fit(X)
    assert not hasattr(g, "means_")
    # a fit that fails validation charges nothing
    before = ledger.entries
    with pytest.raises(ValueError, match="means_init"):
        DPGaussianMixture(2, epsilon=0.1, delta=1e-7, max_iter=3, data_norm=6.0, budget=ledger,
                          means_init=np.zeros((5, 3))).fit(X)
    assert ledger.entries == before


def test_sklearn_api():
    X, _ = _blobs(n=600)
    g = DPGaussianMixture(2, epsilon=1.0, data_norm=6.0, max_iter=3, random_state=0)
    c = clone(g)
    assert c.get_params() == g.get_params()
    c.set_params(n_components=3)
    assert c.n_components == 3
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z * 1.0), g).fit(X)
    assert pipe.predict(X).shape == (600,)
    assert g.fit_predict(X).shape == (600,)
    Xs, ys = g.sample(100, random_state=0)
    assert Xs.shape == (100, 3) and ys.shape == (100,)
    with pytest.raises(ValueError, match="n_samples"):
        g.sample(0)
    with pytest.raises(TypeError, match="n_samples"):
        g.sample(2.5)
    assert np.isfinite(g.bic(X)) and np.isfinite(g.aic(X))
    assert g.predict_proba(X).sum(axis=1) == pytest.approx(np.ones(600))


def test_public_attributes_hold_no_data_dependent_values_beyond_the_model():
    X, _ = _blobs(n=600)
    g = DPGaussianMixture(2, epsilon=1.0, data_norm=6.0, max_iter=2, random_state=0).fit(X)
    public = {k for k in vars(g) if k.endswith("_") and not k.startswith("_")}
    assert public == {"weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_",
                      "n_iter_", "converged_", "n_features_in_", "privacy_", "diagnostics_"}


BAD = [
    (dict(n_components=0), ValueError, "n_components"),
    (dict(n_components=1.5), TypeError, "n_components"),
    (dict(epsilon=0.0), ValueError, "epsilon"),
    (dict(epsilon=-1.0), ValueError, "epsilon"),
    (dict(epsilon=float("nan")), ValueError, "epsilon"),
    (dict(delta=0.0), ValueError, "delta"),
    (dict(delta=1.0), ValueError, "delta"),
    (dict(scenario="XYZ"), ValueError, "scenario"),
    (dict(accountant="magic"), ValueError, "accountant"),
    (dict(data_norm=0.0), ValueError, "data_norm"),
    (dict(data_norm=-2.0), ValueError, "data_norm"),
    (dict(neighbouring="swap"), ValueError, "neighbouring"),
    (dict(estimator="bayes"), ValueError, "estimator"),
    (dict(max_iter=0), ValueError, "max_iter"),
    (dict(budget_split=(1, 0, 1)), ValueError, "budget_split"),
    (dict(averaging="last"), ValueError, "averaging"),
    (dict(data_norm=None, bounds=(1.0, 0.0)), ValueError, "bounds"),
    (dict(data_norm=None, bounds=(0.0, np.inf)), ValueError, "bounds"),
    (dict(data_norm=None, bounds=[0.0]), ValueError, "bounds"),
]


@pytest.mark.parametrize("params, exc, match", BAD)
def test_bad_parameters(params, exc, match):
    X, _ = _blobs(n=100)
    kw = dict(n_components=2, data_norm=6.0, max_iter=2)
    kw.update(params)
    with pytest.raises(exc, match=match):
        DPGaussianMixture(**kw).fit(X)


@pytest.mark.parametrize(
    "init, match",
    [
        (dict(precisions_init=np.stack([-np.eye(3)] * 2)), "precisions_init"),
        (dict(precisions_init=np.full((2, 3, 3), np.nan)), "precisions_init"),
        (dict(weights_init=[0.5, 0.6]), "weights_init"),
        (dict(weights_init=[np.nan, 1.0]), "weights_init"),
        (dict(means_init=np.zeros((3, 3))), "means_init"),
        (dict(means_init=np.full((2, 3), np.inf)), "means_init"),
    ],
)
def test_bad_initial_parameters(init, match):
    X, _ = _blobs(n=100)
    with pytest.raises(ValueError, match=match):
        DPGaussianMixture(2, epsilon=1.0, data_norm=6.0, max_iter=2, **init).fit(X)


def test_bad_data_specific_to_the_mixture():
    g = DPGaussianMixture(2, epsilon=10.0, data_norm=6.0, max_iter=2, random_state=0)   # 100 rows: no noise warning
    X, _ = _blobs(n=100)
    with pytest.raises(ValueError, match="n_components"):
        DPGaussianMixture(5, data_norm=6.0).fit(X[:3])
    with pytest.raises(NotFittedError):
        DPGaussianMixture(2).predict(X)
    g.fit(X)
    with pytest.raises(ValueError, match="features"):
        g.predict(X[:, :2])


class TestConformance(PrivateEstimatorConformance):
    estimator_class = DPGaussianMixture
    covariance_type = "full"
    params = dict(n_components=3, epsilon=1.0, delta=1e-5, max_iter=4, bounds=(-6.0, 6.0))
    fitted_attributes = ("weights_", "means_", "covariances_", "precisions_cholesky_")
    ball_params = dict(bounds=None, data_norm=6.0)
    # scikit-learn's checks fit 20-30 rows: epsilon=10 keeps them above the refusal threshold
    sklearn_params = (dict(n_components=2, epsilon=10.0, data_norm=50.0, bounds=None, max_iter=3, random_state=0),
                      dict(n_components=2, epsilon=float("inf"), bounds=None, max_iter=3, random_state=0))

    def make_data(self, n, seed=0):
        return _blobs(n=n, d=3, K=3, seed=seed)[0].clip(-6, 6)

    def outlier_data(self, n, seed=0):
        X = self.make_data(n, seed)
        X[::20] *= 100.0
        return X

    def exact_reference(self, est, X):
        from dpem_fast._engine._domain import DataDomain

        K, d = est.n_components, X.shape[1]
        w0, m0, _, p0 = est._initial_parameters(summarize(X), DataDomain(np.zeros(d), 1.0, None, False),
                                                make_key(est.random_state), False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            ref = GaussianMixture(K, covariance_type=est.covariance_type, max_iter=est.max_iter, tol=0.0,
                                  reg_covar=est.reg_covar, weights_init=w0, means_init=m0,
                                  precisions_init=_precisions_of_type(p0 @ np.swapaxes(p0, 1, 2), est.covariance_type),
                                  random_state=0).fit(X)
        return {"weights_": ref.weights_, "means_": ref.means_, "covariances_": ref.covariances_}

    def _unit(self, est):
        dom = est.privacy_.data_domain
        return dom["center"], dom["scale"]

    # a_1 <= 4 a_2 and a_1^2 / (16 a_2) > a_c: the same-component, obtuse-angle case is on top
    joint_splits = ((0.001, 1.0, 0.26),)

    def random_parameters(self, est, rng, d):
        return random_gaussian_components(rng, est.n_components, d)

    def random_row(self, est, rng, d):
        c, R = self._unit(est)
        u = rng.normal(size=d) if rng.random() < 0.7 else np.eye(d)[rng.integers(d)] * rng.choice([-1, 1])
        return c + R * u / np.linalg.norm(u) * rng.uniform(0.5, 1.5)

    def perturb_row(self, est, rng, x):
        c, R = self._unit(est)
        return x + 0.1 * R * rng.normal(size=x.size)

    def adversarial_cases(self, est, rng, d):
        c, R = self._unit(est)
        K = est.n_components
        e1, e2 = np.eye(d)[0], np.eye(d)[1]
        far = 50.0 * np.ones(d)

        def params(means, scales):
            covs = np.stack([np.eye(d) * s for s in scales])
            return np.full(K, 1.0 / K), np.asarray(means, dtype=float), covs, _compute_precision_cholesky(covs)

        sharp = params([e1, -e1] + [far] * (K - 2), [1e-6] * K)      # gamma = e_1 at x, e_2 at -x
        broad = params([np.zeros(d)] + [far] * (K - 1), [10.0] + [1e-6] * (K - 1))   # gamma = e_1 everywhere
        axes = params([e1, e2] + [far] * (K - 2), [1e-6] * K)        # orthogonal rows, distinct components
        # diag's same-component maximiser: x = (a, b), x' = (-b, -a), x^T x' = -2ab (the _specs docstring)
        swapped = [(broad, c + R * (a * e1 + b * e2), c - R * (b * e1 + a * e2))
                   for a, b in ((np.cos(t), np.sin(t)) for t in (0.06, 0.13, 0.26))]
        return [(sharp, c + R * e1, c - R * e1), (broad, c + R * e1, c - R * e1), (axes, c + R * e1, c + R * e2)] + swapped

    def rounding_cases(self, est, rng, d):
        """The attaining cases above in rotated axes (isotropic covariances: the same sups), so
        that the rows' coordinates are not exact in float32: their rounding then lifts half of
        them just beyond the unit ball, and an attained sensitivity just beyond its exact value."""
        c, R = self._unit(est)
        K = est.n_components
        far = 50.0 * np.ones(d)
        out = []
        for _ in range(6):
            q1, q2 = np.linalg.qr(rng.normal(size=(d, d)))[0].T[:2]
            covs = np.stack([np.eye(d) * 1e-6] * K)
            sharp = (np.full(K, 1.0 / K), np.array([q1, -q1] + [far] * (K - 2)), covs,
                     _compute_precision_cholesky(covs))
            axes = (np.full(K, 1.0 / K), np.array([q1, q2] + [far] * (K - 2)), covs, _compute_precision_cholesky(covs))
            broad_covs = np.stack([np.eye(d) * 10.0] + [np.eye(d) * 1e-6] * (K - 1))
            broad = (np.full(K, 1.0 / K), np.array([np.zeros(d)] + [far] * (K - 1)), broad_covs,
                     _compute_precision_cholesky(broad_covs))
            out += [(sharp, c + R * q1, c - R * q1), (broad, c + R * q1, c - R * q1), (axes, c + R * q1, c + R * q2)]
        return out

    def check_statistics_bounded(self, stats, n_rows):
        nk, s1, s2 = stats["counts"], stats["first_moments"], stats["second_moments"]
        assert abs(nk.sum() - n_rows) <= 1e-9 * n_rows
        assert np.all(np.linalg.norm(s1, axis=1) <= nk * (1 + 1e-12))
        ct = self.covariance_type
        # sum of the squared norms of the rows: the traces (full, tied) or sums (diag, spherical)
        total = {"full": lambda: np.trace(s2, axis1=1, axis2=2).sum(), "tied": lambda: np.trace(s2),
                 "diag": lambda: s2.sum(), "spherical": lambda: s2.sum()}[ct]()
        assert s2.shape == {"full": (len(nk), s1.shape[1], s1.shape[1]), "tied": (s1.shape[1],) * 2,
                            "diag": s1.shape, "spherical": nk.shape}[ct]
        assert total <= n_rows * (1 + 1e-12)
        if ct in ("diag", "spherical"):
            assert np.all(s2 >= 0) and np.all(s2 <= nk * (1 + 1e-12) if ct == "spherical" else True)


def test_random_initial_means_draw_directions_and_radii_from_separate_keys():
    # K * d > SAMPLER_BLOCK: the directions use streams 0 and 1 of their key, so radii drawn
    # from stream 1 of that same key (the old layout) would reuse those keystream words
    from dpem_fast._dpcore import _rng as core
    from dpem_fast._engine._components import random_means
    from dpem_fast._rng import derive_key

    K, d = 3, 2000
    key = make_key(5)
    means = random_means(K, d, key)
    u = (2 * np.linalg.norm(means, axis=1)) ** d
    own, shared = np.empty(K), np.empty(K)
    core.fill_uniform(derive_key(key, "init", "radii"), 0, own, 1)
    core.fill_uniform(derive_key(key, "init", "means"), 1, shared, 1)
    assert_allclose(u, own, rtol=1e-9)
    assert not np.allclose(u, shared)


class TestConformanceDiscreteNoise(TestConformance):
    """The whole suite again with exact discrete Gaussian releases."""
    params = {**TestConformance.params, "noise": "discrete_gaussian"}


class TestConformanceDiag(TestConformance):
    """The whole suite for diagonal covariances (K x d diagonal second moments)."""
    covariance_type = "diag"
    params = {**TestConformance.params, "covariance_type": "diag"}
    scale_transforms = {"covariances_": "variance", "precisions_": "inverse_variance",
                        "precisions_cholesky_": "inverse_sd"}
    sklearn_params = tuple({**p, "covariance_type": "diag"} for p in TestConformance.sklearn_params)


class TestConformanceTied(TestConformance):
    """The whole suite for one tied covariance (one pooled d x d second moment)."""
    covariance_type = "tied"
    params = {**TestConformance.params, "covariance_type": "tied"}
    sklearn_params = tuple({**p, "covariance_type": "tied"} for p in TestConformance.sklearn_params)


class TestConformanceSpherical(TestConformance):
    """The whole suite for spherical covariances (K traces of the second moments)."""
    covariance_type = "spherical"
    params = {**TestConformance.params, "covariance_type": "spherical"}
    scale_transforms = {"covariances_": "isotropic_variance", "precisions_": "isotropic_precision",
                        "precisions_cholesky_": "isotropic_inverse_sd"}
    # one variance for all features: equivariant under a common factor (the working map uses
    # the largest per-feature scale, _working_domain), not under per-feature ones
    equivariance_factors = np.array([30.0])
    sklearn_params = tuple({**p, "covariance_type": "spherical"} for p in TestConformance.sklearn_params)
    # a_1 > 2 a_2 + 2 a_c: the same-component antipodal case (a_1) is on top of a_c + a_1/2 + a_2;
    # a_1 = 2 a_2, a_c small: the full bound (1.125) is 12 % above spherical's (1.001), so a
    # search that cannot come within 5 % of the declared bound catches a loose one
    joint_splits = ((0.01, 4.0, 0.5), (0.001, 1.0, 0.5))


# ------------------------------------------------------------- issue 23: M-step floors
def test_james_stein_shrinkage_lowers_the_mean_error_and_vanishes_with_the_noise():
    """shrink_means is the positive-part James–Stein estimator: over noisy means of any true
    mean it has a smaller mean squared error than the noisy mean itself (d >= 3), it leaves
    d < 3 alone, and its factor tends to 1 as the noise vanishes."""
    from dpem_fast.mixture._gmm_mstep import shrink_means
    rng = np.random.default_rng(0)
    d, sd = 8, 0.05
    for true in (np.zeros(d), np.full(d, 0.02), rng.uniform(-0.3, 0.3, d)):
        noisy = true + sd * rng.normal(size=(4000, d))
        shrunk = shrink_means(noisy, np.full(4000, sd))
        assert np.mean((shrunk - true) ** 2) < np.mean((noisy - true) ** 2)
    assert np.array_equal(shrink_means(noisy[:, :2], np.full(4000, sd)), noisy[:, :2])
    big = rng.uniform(-0.3, 0.3, (5, d))
    assert np.allclose(shrink_means(big, np.full(5, 1e-9)), big, rtol=1e-12)


def test_fitted_feature_variances_stay_within_the_declared_box():
    """Each feature's fitted variance is at most its declared half-width squared, however noisy
    the release (before issue 23 it could reach d half-widths squared: a density worse than
    uniform on the box)."""
    from dpem_fast.mixture._gmm_mstep import cap_feature_variances
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 5, 5))
    covs = A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(5)
    box = np.array([0.1, 0.2, 0.3, 5.0, 0.05])
    capped = cap_feature_variances(covs, box)
    assert np.all(np.diagonal(capped, axis1=1, axis2=2) <= np.minimum(box, 1.0) ** 2 * (1 + 1e-12))
    assert np.all(np.linalg.eigvalsh(capped) > 0)
    X, _ = _blobs(n=400, d=4, K=3, seed=2)
    lo, hi = X.min(axis=0) - 1.0, X.max(axis=0) + 1.0
    for seed in range(3):
        g = DPGaussianMixture(3, epsilon=0.5, max_iter=5, bounds=(lo, hi), neighbouring="add_remove",
                              random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatedWarning)
            g.fit(X)
        var = np.diagonal(g.covariances_, axis1=1, axis2=2)
        assert np.all(var <= ((hi - lo) / 2) ** 2 * (1 + 1e-9)), var


def test_covariances_the_release_cannot_resolve_are_announced():
    """Where the second moments' noise (σ₂/Ñ_k) reaches the uniform distribution's variance on
    the declared box, the fit says so (its density may be no better than uniform; the 13-column
    wine table at ε = 1 was 3 nats per row below it, silently); a large fit does not."""
    X, _ = _blobs(n=300, d=6, K=3, seed=4)
    box = (X.min(axis=0) - 1.0, X.max(axis=0) + 1.0)
    g = DPGaussianMixture(1, epsilon=0.2, max_iter=10, bounds=box, random_state=0)
    with pytest.warns(NoiseDominatedWarning, match="second moments cannot resolve the covariances"):
        g.fit(X)
    X, _ = _blobs(n=20000, d=6, K=3, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatedWarning)
        DPGaussianMixture(3, epsilon=5.0, max_iter=10, bounds=box, random_state=0).fit(X.clip(*box))


# ------------------------------------------------------------- issue 24: covariance types
_TYPE_SHAPES = {"full": lambda K, d: (K, d, d), "diag": lambda K, d: (K, d), "tied": lambda K, d: (d, d),
                "spherical": lambda K, d: (K,)}


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
@pytest.mark.parametrize("kw", [dict(), dict(scenario="LLG"), dict(noise="discrete_gaussian"),
                                dict(neighbouring="add_remove")])
def test_private_fit_of_every_type_has_sklearns_shapes_and_releases_only_its_moments(covariance_type, kw):
    X, _ = _blobs(n=4000, d=4, K=2)
    g = DPGaussianMixture(2, covariance_type=covariance_type, epsilon=2.0, max_iter=4, bounds=(-6, 6),
                          random_state=0, **kw).fit(X)
    K, d = g.n_components_, X.shape[1]
    shape = _TYPE_SHAPES[covariance_type](K, d)
    for name in ("covariances_", "precisions_", "precisions_cholesky_"):
        assert getattr(g, name).shape == shape, name
        assert np.all(np.isfinite(getattr(g, name))), name
    # the released second moment is the type's own: (K, d, d), (K, d), (d, d) or (K,) coordinates
    assert g.privacy_.releases["second_moments"].shape == _TYPE_SHAPES[covariance_type](2, d)
    # precisions_ and covariances_ are inverses of each other, in the type's shape
    if covariance_type in ("diag", "spherical"):
        assert_allclose(g.precisions_ * g.covariances_, 1.0, rtol=1e-10)
    else:
        c = g.covariances_.reshape(-1, d, d)
        p = g.precisions_.reshape(-1, d, d)
        assert_allclose(c @ p, np.broadcast_to(np.eye(d), c.shape), atol=1e-8)
    Xs, ys = g.sample(500, random_state=0)
    assert Xs.shape == (500, d) and np.all(np.isfinite(Xs))
    assert np.all(np.isfinite(g.score_samples(X[:50])))


def test_fewer_released_coordinates_get_less_total_noise_at_the_same_budget():
    # the auto split gives the second moments a share ∝ sqrt(m): the total noise variance in units
    # of each sensitivity, sum_r m_r sigma_r^2 / Delta_r^2, falls with m (d = 10, K = 3)
    X, _ = _blobs(n=3000, d=10, K=3)
    total = {}
    for ct in ("full", "diag", "tied", "spherical"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatedWarning)    # the plan is what is tested here
            g = DPGaussianMixture(3, covariance_type=ct, epsilon=1.0, max_iter=5, bounds=(-6, 6),
                                  random_state=0).fit(X)
        rel = g.privacy_.releases
        total[ct] = sum(int(np.prod(r.shape)) * (r.noise_scale / r.sensitivity) ** 2 for r in rel.values())
        m2 = {"full": 3 * 55, "diag": 30, "tied": 55, "spherical": 3}[ct]
        shares = np.sqrt([3, 30, m2])
        s1 = rel["first_moments"].noise_scale / rel["first_moments"].sensitivity
        s2 = rel["second_moments"].noise_scale / rel["second_moments"].sensitivity
        # sigma_r / Delta_r ∝ 1 / sqrt(share_r)
        assert (s2 / s1) ** 2 == pytest.approx(shares[1] / shares[2], rel=1e-6)
    assert total["spherical"] < total["diag"] < total["tied"] < total["full"]


@pytest.mark.parametrize("covariance_type", ["tied", "spherical"])
def test_map_is_refused_where_no_prior_is_derived(covariance_type):
    X, _ = _blobs(n=500)
    with pytest.raises(ValueError, match="estimator='map' supports covariance_type 'full' and 'diag'"):
        DPGaussianMixture(2, covariance_type=covariance_type, estimator="map", data_norm=6.0).fit(X)


def test_map_diag_is_the_diagonal_of_the_full_posterior_mode():
    from dpem_fast.mixture._gmm_mstep import map_prior, private_m_step

    rng = np.random.default_rng(0)
    K, d = 2, 3
    g = DPGaussianMixture(2, epsilon=1.0, max_iter=2, data_norm=6.0, random_state=0).fit(_blobs(n=2000, d=d)[0])
    rel = g.privacy_.releases
    nk = np.array([900.0, 1100.0])
    s1 = rng.normal(size=(K, d)) * 10
    x = rng.normal(size=(K, 50, d)) * 0.1
    s2 = np.einsum("kni,knj->kij", x, x) * 30
    prior = map_prior({"psi0": np.diag([0.01, 0.02, 0.03])}, d)
    _, m_full, c_full = private_m_step(nk, s1, s2, rel, 1e-6, prior, None, "full")
    _, m_diag, c_diag = private_m_step(nk, s1, np.diagonal(s2, axis1=1, axis2=2).copy(), rel, 1e-6, prior, None,
                                       "diag")
    assert_allclose(m_diag, m_full)
    # without floors binding, the diag MAP variance is the full MAP covariance's diagonal
    S = (prior["psi0"] + s2 - (nk + 1.0)[:, None, None] * m_full[:, :, None] * m_full[:, None, :])
    S /= (nk + prior["nu0"] + d + 2)[:, None, None]
    expected = np.clip(np.diagonal(S, axis1=1, axis2=2), 0, 1)
    floor = np.maximum(1e-6, np.minimum(1.0, rel["second_moments"].noise_scale / nk))
    assert_allclose(c_diag, np.maximum(expected, floor[:, None]))
    m = DPGaussianMixture(3, covariance_type="diag", epsilon=2.0, estimator="map", max_iter=5, data_norm=6.0,
                          random_state=0).fit(_blobs(n=3000)[0])
    assert m.covariances_.shape == (m.n_components_, 3) and np.all(m.covariances_ > 0)


@pytest.mark.parametrize("kw, match", [
    (dict(covariance_type="banana"), "covariance_type must be one of"),
    (dict(covariance_type="diag", precisions_init=np.ones((2, 3, 3))), r"precisions_init must have shape \(2, 3\)"),
    (dict(covariance_type="spherical", precisions_init=-np.ones(2)), "precisions_init must be finite and > 0"),
    (dict(covariance_type="tied", precisions_init=-np.eye(3)), "precisions_init is not positive definite"),
    (dict(covariance_type="tied", precisions_init=np.ones((2, 3))), r"precisions_init must have shape \(3, 3\)"),
])
def test_bad_covariance_type_parameters(kw, match):
    X, _ = _blobs(n=500)
    with pytest.raises(ValueError, match=match):
        DPGaussianMixture(2, epsilon=1.0, data_norm=6.0, max_iter=2, **kw).fit(X)
    with pytest.raises(TypeError, match="covariance_type must be one of"):     # not a str: a wrong type
        DPGaussianMixture(2, covariance_type=None, data_norm=6.0).fit(X)


def test_spherical_works_on_one_scale_for_every_feature():
    # per-feature boxes of different widths: spherical covariances are spherical in the original
    # units because the working map uses the largest scale for every feature
    X, _ = _blobs(n=3000, d=3)
    X[:, 0] *= 10
    lo, hi = np.array([-60.0, -6, -6]), np.array([60.0, 6, 6])
    g = DPGaussianMixture(2, covariance_type="spherical", epsilon=5.0, max_iter=5, bounds=(lo, hi),
                          random_state=0).fit(X.clip(lo, hi))
    scale = g.privacy_.data_domain["scale"]
    assert np.all(scale == scale.max())
    assert g.covariances_.shape == (g.n_components_,)


class TestConformancePrivateStart(TestConformance):
    """The whole suite again with the means from the private start (issue 24)."""

    params = {**TestConformance.params, "means_init": "private"}
    sklearn_params = (dict(n_components=2, epsilon=10.0, data_norm=50.0, bounds=None, max_iter=3, random_state=0,
                           means_init="private"),)

    def statistic_sites(self):
        from dpem_fast._engine import _start
        return [*super().statistic_sites(), (_start, "cell_counts"), (_start, "cell_sums")]


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
@pytest.mark.parametrize("n, d, K", [(6000, 3, 3), (2_000_000, 300, 10), (10**7, 40, 30)])
def test_block_rows_bound_the_blocks_of_the_kernel_the_type_runs(covariance_type, n, d, K):
    # the b of the float64 rounding bound (_engine._specs, "Rounding"): tied runs the full kernel, so
    # its blocks are the full kernel's (K (d² + d + 1) doubles of partials), not the diagonal one's
    from dpem_fast._dpcore import _contract, _estep, _estep_diag

    kernel = _estep_diag if covariance_type in ("diag", "spherical") else _estep
    chunks = -(-n // _contract.CHUNK_SIZE)
    rows = _contract.CHUNK_SIZE * -(-chunks // kernel.block_count(n, d, K))
    assert DPGaussianMixture(K, covariance_type=covariance_type)._block_rows(n, d) >= rows


def test_means_init_private_is_refused_in_other_spellings():
    X = np.random.default_rng(0).normal(size=(300, 2))
    with pytest.raises(ValueError, match="means_init must be None, 'private'"):
        DPGaussianMixture(2, means_init="kmeans", data_norm=5.0).fit(X)


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
def test_private_start_covariances_are_a_quarter_of_the_distance_to_the_nearest_centre(covariance_type):
    # post-processing of the start's centres: v_k = clip((rho_k / 4)^2, v0 / 100, v0), v0 = 1 / (4d)
    d = 4
    means = np.zeros((4, d))
    means[1, 0], means[2, 0], means[3, 1] = 0.2, 0.6, 0.01
    covs, prec_chol = start_covariances(COVARIANCES[covariance_type], means)
    v0 = 1.0 / (4 * d)
    rho = np.array([0.01, 0.2, 0.4, 0.01])
    v = np.clip((rho / 4) ** 2, v0 / 100, v0)
    if covariance_type == "tied":
        v = np.full(4, v.mean())
    assert_allclose(np.einsum("kij,klj->kil", prec_chol, prec_chol),
                    np.stack([np.eye(d) / vk for vk in v]), rtol=1e-12)
    expected = {"full": np.stack([np.eye(d) * vk for vk in v]), "diag": np.repeat(v[:, None], d, axis=1),
                "spherical": v, "tied": np.eye(d) * v[0]}[covariance_type]
    assert_allclose(covs, expected, rtol=1e-12)


class TestConformanceAuto(TestConformance):
    """The whole suite again with ``n_components="auto"`` (issue 24): one fit at
    ``max_components`` from the private start, pruned."""

    params = {**TestConformance.params, "n_components": "auto", "max_components": 3}
    sklearn_params = (dict(n_components="auto", max_components=2, epsilon=10.0, data_norm=50.0, bounds=None,
                           max_iter=3, random_state=0),)

    def statistic_sites(self):
        from dpem_fast._engine import _start
        return [*super().statistic_sites(), (_start, "cell_counts"), (_start, "cell_sums")]

    @pytest.mark.parametrize("epsilon", [1.0, float("inf")])
    @pytest.mark.parametrize("declared", [True, False])
    def test_huge_finite_rows_give_finite_output_or_a_clear_error(self, epsilon, declared):
        if epsilon == float("inf"):         # "auto" is a private choice: a clear refusal
            with pytest.raises(ValueError, match="finite epsilon"):
                self.make_estimator(epsilon=epsilon).fit(self.make_data(500))
            return
        super().test_huge_finite_rows_give_finite_output_or_a_clear_error(epsilon, declared)


def _not_for_auto(reason):
    def skipped(self, *args, **kwargs):
        pytest.skip(reason)
    return skipped


# checks that read the statistic specs of an integer n_components (the fit behind "auto" is
# TestConformancePrivateStart's, which runs them), or fit at epsilon=inf, which "auto" refuses
# with a clear error (tests/estimators/test_model_selection.py::test_bad_auto_parameters)
for _name in ("test_release_records_alone_meet_the_target_tightly", "test_every_release_draws_its_recorded_noise",
              "test_sensitivities_are_never_exceeded_and_nearly_attained",
              "test_joint_sensitivity_is_never_exceeded_and_nearly_attained", "test_clipping_holds_end_to_end",
              "test_person_sensitivities_are_never_exceeded_and_attained",
              "test_person_joint_change_is_within_the_recorded_joint_multiplier",
              "test_person_level_one_off_releases_are_scaled_too"):
    setattr(TestConformanceAuto, _name, _not_for_auto(
        "reads the specs of an integer n_components: TestConformancePrivateStart runs it on the fit behind 'auto'"))
for _name in ("test_a_ledger_of_the_other_relation_or_a_non_private_fit_is_refused",
              "test_not_private_fits_refuse_a_ledger", "test_epsilon_inf_equals_the_nonprivate_reference"):
    setattr(TestConformanceAuto, _name, _not_for_auto("n_components='auto' refuses epsilon=inf (a private choice)"))
