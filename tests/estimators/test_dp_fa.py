"""DPFactorAnalysis: non-private exactness (numpy twin, scikit-learn), privacy mechanics, API, conformance."""
import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.decomposition import FactorAnalysis

from conformance import PrivateEstimatorConformance
from moment_cases import UNCOVERED, SecondMomentCases
from dpem_fast import DPFactorAnalysis, NoiseDominatedWarning
from dpem_fast._reference.fa import (diagonal_gaussian_loglik, fa_em_reference, fa_eigen_em_reference,
                                     fa_loglik_reference, fa_noisy_reference, private_diagonal_gaussian)
from dpem_fast.decomposition import _fa_em
from dpem_fast.decomposition._krylov import krylov_columns
from dpem_fast._kernels.moments import COUNT, SECOND, SUM


#: the warning of a fit whose release noise hides every loading (the suite's small, noisy fits)
UNRESOLVED = "ignore:DPFactorAnalysis. no loading direction is resolved:UserWarning"


def _factor_data(n=3000, d=6, k=2, seed=0, shift=1.0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(k, d))
    psi = rng.uniform(0.2, 1.0, size=d)
    X = rng.normal(size=(n, k)) @ W + rng.normal(size=(n, d)) * np.sqrt(psi) + shift
    return X, W, psi


def _exact_cov(X):
    m = X.mean(0)
    return m, (X - m).T @ (X - m) / X.shape[0]


# ------------------------------------------------------------------ non-private
@pytest.mark.parametrize("n, d, k", [(2000, 6, 2), (500, 20, 4), (300, 3, 1)])
def test_epsilon_inf_matches_sklearn_loglik(n, d, k):
    X, _, _ = _factor_data(n, d, k, seed=d)
    ours = DPFactorAnalysis(k, epsilon=float("inf")).fit(X)
    ref = FactorAnalysis(k, svd_method="lapack").fit(X)
    assert ours.privacy_ is None
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-8)
    assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-7)
    assert_allclose(ours.get_covariance(), ref.get_covariance(), rtol=1e-6, atol=1e-9)
    assert_allclose(ours.get_precision(), ref.get_precision(), rtol=1e-6, atol=1e-8)
    assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-6)
    assert_allclose(ours.mean_, ref.mean_, rtol=1e-12)
    # the factors agree up to the sign of each component
    signs = np.sign(np.sum(ours.components_ * ref.components_, axis=1))
    assert_allclose(ours.transform(X) * signs, ref.transform(X), rtol=1e-5, atol=1e-7)


def test_epsilon_inf_reaches_the_textbook_em_optimum():
    """The eigen fixed point and the classic E/M-step iteration (DP-EM Sec. 6's update on
    the exact Lambda) reach the same maximum likelihood."""
    X, _, _ = _factor_data(1500, 8, 2, seed=4)
    m, C = _exact_cov(X)
    est = DPFactorAnalysis(2, epsilon=float("inf"), tol=0.0, max_iter=3000).fit(X)
    W, psi = fa_em_reference(C, 2, 3000)
    ll_ours = fa_loglik_reference(C, est.components_, est.noise_variance_)
    assert ll_ours == pytest.approx(fa_loglik_reference(C, W, psi), abs=1e-8)
    assert_allclose(est.get_covariance(), W.T @ W + np.diag(psi), atol=1e-6)
    assert ll_ours == pytest.approx(est.score(X), rel=1e-10)


def test_subspace_path_equals_dense_path():
    """With a start basis the structured solver runs (as for d > DENSE_MAX_D): on a matrix
    with a spectral gap it gives the dense path's fit (small d)."""
    X, _, _ = _factor_data(4000, 40, 3, seed=2)
    m, C = _exact_cov(X)
    Wd, psid, _, itd = _fa_em.fa_em(C, 3, 4000, max_iter=200, tol=1e-6)
    start = np.linalg.qr(np.random.default_rng(0).normal(size=(40, 13)))[0]
    Ws, psis, _, its = _fa_em.fa_em(C, 3, 4000, max_iter=200, tol=1e-6, start=start)
    assert_allclose(Ws.T @ Ws + np.diag(psis), Wd.T @ Wd + np.diag(psid), atol=1e-6)


# -------------------------------------------------------------------- privacy
def test_privacy_record_sensitivities_and_one_release():
    X, _, _ = _factor_data(2000, 5)
    est = DPFactorAnalysis(2, epsilon=1.0, data_norm=8.0, random_state=0).fit(X)
    rec = est.privacy_
    assert rec.n_iter == 1 and est.n_iter_ >= 1 and len(est.loglike_) == est.n_iter_
    assert list(rec.releases) == [SUM, SECOND]
    # the exact-arithmetic values (2, √2), widened for float64 rounding at this public n (issue 34)
    declared = {sp.name: sp.sensitivity("l2", "replace") for sp in est._iteration_specs(5, np.float64, 2000)}
    assert (rec.releases[SUM].sensitivity, rec.releases[SECOND].sensitivity) == (declared[SUM], declared[SECOND])
    assert 2.0 < declared[SUM] < 2.0 * (1 + 1e-8) and math.sqrt(2.0) < declared[SECOND] < math.sqrt(2.0) * (1 + 1e-8)
    assert all(r.count == 1 for r in rec.releases.values())
    ar = DPFactorAnalysis(2, epsilon=1.0, data_norm=8.0, neighbouring="add_remove", random_state=0).fit(X)
    assert list(ar.privacy_.releases) == [COUNT, SUM, SECOND]
    # add/remove: the integer count exact, the sums widened at the public cap on the rows (issue 34)
    w_ar = ar._rounding_factor(5, None)
    assert 1.0 + 1e-3 < w_ar < 1.0 + 3e-3
    assert [r.sensitivity for r in ar.privacy_.releases.values()] == [1.0, w_ar, w_ar]
    # the split that minimises the covariance's noise edge (class docstring): a_1 = a_2 under
    # replace (Δ_1/Δ_2 = √2), a_1 = a_2/2 under add/remove (Δ_1 = Δ_2); σ_1/σ_2 = √2 in both
    for fit in (rec, ar.privacy_):
        assert fit.releases[SUM].noise_scale / fit.releases[SECOND].noise_scale == pytest.approx(math.sqrt(2.0))
    # the iterations are post-processing: more of them costs nothing (tol=0 stops only at an
    # exact fixed point)
    more = DPFactorAnalysis(2, epsilon=1.0, data_norm=8.0, tol=0.0, max_iter=300, random_state=0).fit(X)
    assert 1 <= more.n_iter_ <= 300 and more.privacy_.epsilon_spent == rec.epsilon_spent
    assert more.privacy_.releases == rec.releases


def test_joint_bound_closed_form():
    est = DPFactorAnalysis(2)
    # equal a: a/2 + a + a^2/(16 a) = 1.5625 a instead of 2a
    assert est._joint_sensitivity({SUM: 1.0, SECOND: 1.0}, "replace") == pytest.approx(1.5625)
    # a_1 > 4 a_2: a_1/2 + a_2 + a_1/2 - a_2 = a_1 (antipodal rows)
    assert est._joint_sensitivity({SUM: 10.0, SECOND: 1.0}, "replace") == pytest.approx(10.0)
    assert est._joint_sensitivity({COUNT: 1.0, SUM: 2.0, SECOND: 3.0}, "add_remove") == 6.0


def test_private_fit_approaches_the_exact_covariance_with_more_rows():
    X, _, _ = _factor_data(200_000, 6, 2, seed=5, shift=0.0)
    X = np.clip(X, -6, 6)
    _, C = _exact_cov(X)
    err = {}
    for eps in (0.3, 3.0):
        est = DPFactorAnalysis(2, epsilon=eps, bounds=(-6, 6), random_state=1).fit(X)
        err[eps] = np.abs(est.get_covariance() - C).max()
    assert err[3.0] < 0.1 * np.abs(C).max() and err[3.0] < err[0.3]


def test_heavy_noise_gives_finite_output():
    X, _, _ = _factor_data(50, 30, 3)
    with pytest.warns(UserWarning, match="no loading direction is resolved"):
        est = DPFactorAnalysis(3, epsilon=1e-3, data_norm=1.0, random_state=0).fit(X)
    for v in (est.components_, est.noise_variance_, est.mean_, est.transform(X), est.score_samples(X)):
        assert np.all(np.isfinite(v))
    assert np.all(est.noise_variance_ > 0)


# ------------------------------------------------- utility floor (issue 23)
def test_spike_shrink_inverts_the_bbp_map_and_drops_the_bulk():
    tau = 0.3
    ell = np.array([0.1, 0.5, 2.0])
    lam = np.where(ell > tau / 2, ell + tau ** 2 / (4 * ell), tau)     # where each spike shows
    out = _fa_em.spike_shrink(np.r_[lam, 0.29, -1.0], tau)
    assert_allclose(out[1:3], ell[1:], rtol=1e-12)
    assert_array_equal(out[[0, 3, 4]], 0.0)                        # at or below the edge: 0


def test_noise_edge_is_where_the_released_noise_ends():
    """The public edge against the spectrum of the release layer's own symmetric noise (sd σ/√2
    off the diagonal: edge 2 (σ/√2) √d = √2 σ √d)."""
    from dpem_fast._engine._release import add_noise
    from dpem_fast._engine._record import Release

    d, sigma = 300, 0.01
    r = Release("second_moment", "gaussian", "l2", 1.0, sigma, (d, d), symmetric=True)
    top = [np.linalg.eigvalsh(add_noise(np.zeros((d, d)), r, np.arange(8, dtype=np.uint32) + s))[-1]
           for s in range(3)]
    edge = _fa_em.noise_edge(r.offdiagonal_sd, 0.0, 0.0, d)
    assert edge == pytest.approx(math.sqrt(2) * sigma * math.sqrt(d))
    assert all(0.95 * edge < t < 1.05 * edge for t in top)
    # a mean error below half the edge does not move it; a larger one does (BBP)
    so = r.offdiagonal_sd
    assert _fa_em.noise_edge(so, 0.4 * so, 1.0, d) == edge
    big = _fa_em.noise_edge(so, 3 * so, 1.0, d)
    theta = 3 * so * math.sqrt(d) + 9 * so ** 2 * d
    assert big == pytest.approx(theta + edge ** 2 / (4 * theta))


def test_variance_posterior_mean_is_the_truncated_normal_mean():
    from scipy import stats

    sd = 0.5
    v = np.array([-2.0, -0.5, 0.0, 0.3, 4.0])
    expect = [stats.truncnorm(-x / sd, np.inf, loc=x, scale=sd).mean() for x in v]
    assert_allclose(_fa_em.variance_posterior_mean(v, sd), expect, rtol=1e-9)
    # far below zero (a tiny noise scale): positive, ≈ sd²/|v|, no cancellation
    far = _fa_em.variance_posterior_mean(np.array([-10.5, -1e6, -1e12]), 1.0)
    assert np.all(far > 0) and far[2] == pytest.approx(1e-12, rel=1e-9)
    # against mpmath's truncated-normal mean at 50 digits, across the three branches' cuts: the
    # old three-term series below z = -10 was 7e-5 off there
    import mpmath
    mpmath.mp.dps = 50

    def exact(z):
        z = mpmath.mpf(z)
        return float(z + mpmath.npdf(z) / mpmath.ncdf(z))

    zs = np.array([-9.99, -10.01, -10.5, -30.0, -1e3, -9.9e3, -1.01e4, -1e5])
    got = _fa_em.variance_posterior_mean(zs, 1.0)
    assert_allclose(got, [exact(z) for z in zs], rtol=1e-7)


def test_noisy_fit_subspace_path_equals_dense_path():
    """With a start basis (as for d > DENSE_MAX_D) the noise-aware fit's structured solver
    (on the shifted residual) gives the dense path's loadings and variances (small d)."""
    rng = np.random.default_rng(5)
    d = 40
    W0 = rng.normal(size=(3, d)) * np.array([[1.0], [0.7], [0.5]])
    E = rng.normal(scale=0.01, size=(d, d))
    C = W0.T @ W0 / d + np.diag(rng.uniform(0.05, 0.1, d)) + (E + E.T) / 2
    kw = dict(sigma_cov=0.01, edge=_fa_em.noise_edge(0.01, 0.0, 0.0, d), max_iter=300, tol=1e-6)
    Wd, psid, rd, _, _ = _fa_em.fa_noisy(C, 4, 1000, **kw)
    start = np.linalg.qr(rng.normal(size=(d, 14)))[0]
    Ws, psis, rs, _, _ = _fa_em.fa_noisy(C, 4, 1000, start=start, **kw)
    assert rd == rs == 3
    assert_allclose(Ws.T @ Ws, Wd.T @ Wd, atol=1e-6)
    assert_allclose(psis, psid, atol=1e-6)


def _gapped_covariance(d, seed, noise=0.0):
    """k = 3 strong directions over heteroscedastic variances, plus symmetric noise."""
    rng = np.random.default_rng(seed)
    W0 = rng.normal(size=(3, d)) * np.array([[1.0], [0.7], [0.5]]) * math.sqrt(3.0 / d)
    E = np.triu(rng.normal(scale=noise, size=(d, d)))
    return W0.T @ W0 + np.diag(rng.uniform(0.05, 0.1, d)) + E + np.triu(E, 1).T


def test_structured_solver_equals_dense_and_previous_solver_private():
    """Issue 26: at d > DENSE_MAX_D (no patch) the structured noise-aware solver reaches the
    dense path's fixed point, as the previous solver (numpy twin) does, to tight tolerance
    when both converge (tol small); the log-likelihood record agrees too."""
    d, sigma = _fa_em.DENSE_MAX_D + 44, 0.002
    assert _fa_em.uses_subspace(d, 4)
    C = _gapped_covariance(d, 5, sigma)
    kw = dict(sigma_cov=sigma, edge=_fa_em.noise_edge(sigma, 0.0, 0.0, d), max_iter=300, tol=1e-7)
    start = np.linalg.qr(np.random.default_rng(1).normal(size=(d, _fa_em.subspace_width(d, 4))))[0]
    Wd, psid, rd, lld, _ = _fa_em.fa_noisy(C, 4, 1000, **kw)
    Ws, psis, rs, lls, its = _fa_em.fa_noisy(C, 4, 1000, start=start, **kw)
    Wo, psio, ro, llo, _ = fa_noisy_reference(C, 4, 1000, start=start, **kw)
    assert rd == rs == ro == 3
    for W, psi in ((Ws, psis), (Wo, psio)):
        assert_allclose(W.T @ W, Wd.T @ Wd, atol=1e-8)
        assert_allclose(psi, psid, atol=1e-8)
    assert lls[-1] == pytest.approx(lld[-1], rel=1e-10) and lls[-1] == pytest.approx(llo[-1], rel=1e-10)
    # the same fixed point from a formed matrix or its Covariance operator
    S, m = C * 7.0, np.zeros(d)
    Wc, psic, *_ = _fa_em.fa_noisy(_fa_em.Covariance(S, 7.0, m), 4, 1000, start=start, **kw)
    assert_allclose(Wc.T @ Wc, Ws.T @ Ws, atol=1e-10)


def test_structured_solver_equals_dense_and_previous_solver_exact():
    d = _fa_em.DENSE_MAX_D + 44
    X = np.random.default_rng(3).normal(size=(3000, 3)) @ np.random.default_rng(4).normal(size=(3, d))
    X += np.random.default_rng(5).normal(size=(3000, d)) * np.random.default_rng(6).uniform(0.5, 1.0, d)
    m, C = _exact_cov(X)
    start = np.linalg.qr(np.random.default_rng(1).normal(size=(d, _fa_em.subspace_width(d, 3))))[0]
    Wd, psid, lld, _ = _fa_em.fa_em(C, 3, 3000, max_iter=500, tol=1e-9)
    Ws, psis, lls, _ = _fa_em.fa_em(_fa_em.Covariance(X.T @ X, 3000, m), 3, 3000, max_iter=500, tol=1e-9,
                                    start=start)
    Wo, psio, _ = fa_eigen_em_reference(C, 3, 3000, 500, 1e-9, start=start)
    for W, psi in ((Ws, psis), (Wo, psio)):
        assert_allclose(W.T @ W, Wd.T @ Wd, rtol=1e-6, atol=1e-7)
        assert_allclose(psi, psid, rtol=1e-6)
    assert lls[-1] == pytest.approx(lld[-1], rel=1e-10)


def test_covariance_operator_is_the_formed_matrix():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(30, 30))
    S = S + S.T
    m = rng.normal(size=30)
    op = _fa_em.Covariance(S, 4.0, m, 0.3)
    C = S / 4.0 - np.outer(m, m)
    C.flat[::31] += 0.3
    assert_array_equal(op.dense(), C)
    assert_array_equal(op.diagonal(), np.diag(C))
    Q = rng.normal(size=(30, 5))
    assert_allclose(op @ Q, C @ Q, rtol=1e-12, atol=1e-12)


@pytest.mark.filterwarnings(UNRESOLVED)
def test_structured_fit_is_thread_invariant_and_equals_the_dense_fit(monkeypatch):
    """A private fit above DENSE_MAX_D (start basis from the key, BLAS threads following
    n_threads in the post-processing): the same bits for 1 and 2 threads, and the dense
    path's model to rounding."""
    d = _fa_em.DENSE_MAX_D + 44
    X = _factor_data(4000, d, 3, seed=9)[0]
    fits = [DPFactorAnalysis(3, epsilon=50.0, data_norm=3.0 * math.sqrt(d), random_state=0, n_threads=t,
                             tol=1e-6).fit(X) for t in (1, 2)]
    for name in ("components_", "noise_variance_", "mean_", "loglike_"):
        assert_array_equal(getattr(fits[0], name), getattr(fits[1], name), err_msg=name)
    assert fits[0].n_resolved_ == 3
    monkeypatch.setattr(_fa_em, "DENSE_MAX_D", 10 ** 6)
    dense = DPFactorAnalysis(3, epsilon=50.0, data_norm=3.0 * math.sqrt(d), random_state=0, tol=1e-6).fit(X)
    assert_allclose(dense.get_covariance(), fits[0].get_covariance(), rtol=1e-6, atol=1e-6)


def test_a_noise_dominated_fit_warns_and_is_the_diagonal_model():
    """Independent features: no loading exists, so none may be reported (the old fit
    returned noise eigenvectors as loadings, silently)."""
    X = np.random.default_rng(3).normal(size=(400, 40))
    with pytest.warns(UserWarning, match="no loading direction is resolved"):
        est = DPFactorAnalysis(4, epsilon=1.0, data_norm=3 * math.sqrt(40), random_state=0).fit(X)
    assert_array_equal(est.components_, 0.0)
    assert est.n_resolved_ == 0
    assert np.all(np.isfinite(est.score_samples(X)))


def test_a_fit_below_the_uniform_density_warns():
    """Issue 35, item 5: coin-flip features at the box's ends (a Gaussian is 0.73 nats per
    feature worse than the uniform density there), one pair of them equal so a loading is
    resolved: the fit is below the uniform density on [-1, 1]^d, measured, and by its released
    moments it says so."""
    rng = np.random.default_rng(11)
    n, d = 4000, 10
    X = rng.choice([-1.0, 1.0], size=(n, d))
    X[:, 1] = X[:, 0]
    for seed in range(3):
        with pytest.warns(UserWarning, match="below the uniform density on the domain"):
            est = DPFactorAnalysis(1, epsilon=10.0, bounds=(-1, 1), random_state=seed).fit(X)
        assert est.n_resolved_ == 1
        assert est.score(X) < -d * math.log(2.0)


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_every_fit_below_the_uniform_density_on_digits_warns(epsilon):
    """scikit-learn's digits (a table with many near-constant pixels, box [0, 16] public): every
    seeded fit whose density on its rows is below the uniform one on the box raises a
    ``NoiseDominatedWarning``.  At ε = 1 one seed of three resolves a loading and is 4 nats
    per row below the uniform density: the plain plug-in estimate from the released moments
    put it 23 nats above (a near-constant pixel whose noisy variance came out negative counts
    as explained), the estimate on the variances' posterior means 3 below."""
    from sklearn.datasets import load_digits
    X = load_digits().data[:1347]
    uniform = -X.shape[1] * math.log(16.0)
    for seed in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = DPFactorAnalysis(2, epsilon=epsilon, bounds=(0, 16), random_state=seed).fit(X)
        warned = any(issubclass(w.category, NoiseDominatedWarning) for w in caught)
        assert warned or est.score(X) >= uniform, (seed, est.score(X), uniform)


def test_loadings_are_found_and_spurious_ones_dropped_at_epsilon_1():
    """One strong factor on 60 features, k = 3 asked: the private fit finds it (|cos| with the
    true loading near 1) and reports no noise direction beside it."""
    rng = np.random.default_rng(7)
    d, n = 60, 5000
    w = rng.normal(size=d)
    X = np.clip(rng.normal(size=(n, 1)) * w + rng.normal(size=(n, d)) * 0.5, -4, 4)
    for seed in range(3):
        est = DPFactorAnalysis(3, epsilon=1.0, bounds=(-4, 4), random_state=seed).fit(X)
        nonzero = np.any(est.components_ != 0, axis=1)
        assert nonzero.sum() == 1 and est.n_resolved_ == 1
        W = est.components_[nonzero]
        assert abs(W[0] @ w) / (np.linalg.norm(W[0]) * np.linalg.norm(w)) > 0.97


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_held_out_score_is_not_below_the_trivial_diagonal_model(epsilon):
    """The private factor model against one diagonal Gaussian fitted privately with the same
    (ε, δ), relation and domain (replace-one), on held-out rows, mean of 3 seeds.  Feature
    scales spread over e² (as pixels or mixed units do), 1,000 rows: the old fit, EM on the
    raw noisy covariance, was 1-4 nats per row below the diagonal model at ε ≤ 1."""
    rng = np.random.default_rng(11)
    d, n, k = 30, 1000, 3
    s = np.exp(rng.uniform(-2.0, 0.0, size=d))
    W = rng.normal(size=(k, d)) * 0.7 * s
    X = rng.normal(size=(2 * n, k)) @ W + rng.normal(size=(2 * n, d)) * 0.6 * s
    tr, te = X[:n], X[n:]
    norm = 2.5 * math.sqrt(d)
    fa, diag = [], []
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "DPFactorAnalysis. no loading direction", UserWarning)
            est = DPFactorAnalysis(k, epsilon=epsilon, data_norm=norm, random_state=seed).fit(tr)
        fa.append(est.score(te))
        m, v = private_diagonal_gaussian(tr, epsilon=epsilon, delta=1e-5, data_norm=norm, random_state=seed)
        diag.append(diagonal_gaussian_loglik(te, m, v))
    assert np.mean(fa) >= np.mean(diag) - 0.2


def test_the_trivial_baselines_noise_is_the_engines():
    """The trivial baseline (numpy: mu-GDP from the exact conversion, the joint bound written
    out, noise drawn by the streams' twin) releases what the engine's plan and release layer
    release for the same two statistics: the same noise scales to the engine's calibration
    tolerance, so the same fit to about 1e-7."""
    import math

    from dpem_fast._engine import ReleaseLayer, StatSpec, make_plan
    from dpem_fast._engine._specs import moments_joint_bound
    from dpem_fast._reference.fa import gdp_mu_reference
    from dpem_fast._rng import make_key

    X = np.random.default_rng(4).normal(size=(400, 5)) * 2
    for epsilon in (0.3, 1.0, 8.0):
        specs = (StatSpec("sum", (5,), l2={"add_remove": 1.0, "replace": 2.0}),
                 StatSpec("sumsq", (5,), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)}))
        plan = make_plan(specs, 1, epsilon=epsilon, delta=1e-5, neighbouring="replace", accountant="gdp",
                         shares={"sum": 1.0, "sumsq": 1.0},
                         joint=lambda a: moments_joint_bound(a["sum"], a["sumsq"], neighbouring="replace"))
        s = 5.0 / (4.0 * gdp_mu_reference(epsilon, 1e-5))
        assert plan.releases["sum"].noise_scale == pytest.approx(2.0 * s, rel=1e-6)
        assert plan.releases["sumsq"].noise_scale == pytest.approx(math.sqrt(2.0) * s, rel=1e-6)
        # the engine's release of the same clipped rows, post-processed as the baseline does
        Z = X / 10.0
        Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1.0)
        noisy = ReleaseLayer(plan, make_key(3)).release({"sum": Z.sum(0), "sumsq": np.sum(Z * Z, 0)}, 0)
        mean, _ = private_diagonal_gaussian(X, epsilon=epsilon, delta=1e-5, data_norm=10.0, random_state=3)
        m = noisy["sum"] / 400
        assert_allclose(mean, 10.0 * m / max(1.0, np.linalg.norm(m)), rtol=1e-6)


@pytest.mark.parametrize("rotation", ["varimax", "quartimax"])
def test_rotation_is_orthogonal_and_post_processing(rotation):
    X, _, _ = _factor_data(2000, 8, 3, seed=1)
    plain = DPFactorAnalysis(3, epsilon=2.0, data_norm=10.0, max_iter=100, random_state=0).fit(X)
    rot = DPFactorAnalysis(3, epsilon=2.0, data_norm=10.0, max_iter=100, random_state=0, rotation=rotation).fit(X)
    assert_allclose(rot.get_covariance(), plain.get_covariance(), atol=1e-10)
    assert_array_equal(rot.noise_variance_, plain.noise_variance_)
    gamma = 1.0 if rotation == "varimax" else 0.0

    def crit(W):
        L2 = W.T ** 2
        return np.sum(np.sum(L2 ** 2, 0) - gamma / L2.shape[0] * np.sum(L2, 0) ** 2)

    assert crit(rot.components_) >= crit(plain.components_) - 1e-12
    ref = FactorAnalysis(3, rotation=rotation, svd_method="lapack").fit(X)
    ours = DPFactorAnalysis(3, epsilon=float("inf"), rotation=rotation).fit(X)
    assert crit(ours.components_) == pytest.approx(crit(ref.components_), rel=1e-4)


@pytest.mark.parametrize("kw, match", [
    (dict(n_components=7), "n_components"), (dict(n_components=0), "n_components"),
    (dict(rotation="promax"), "rotation"), (dict(tol=-1.0), "tol"), (dict(data_norm=0.0), "data_norm"),
    (dict(data_norm=-2.0), "data_norm"),
])
def test_bad_model_parameters(kw, match):
    X, _, _ = _factor_data(100, 6)
    with pytest.raises(ValueError, match=match):
        DPFactorAnalysis(**{"n_components": 2, **kw}).fit(X)


@pytest.mark.filterwarnings(UNRESOLVED)
def test_api():
    X, _, _ = _factor_data(500, 6)
    est = DPFactorAnalysis(2, data_norm=8.0, random_state=0)
    Z = est.fit_transform(X)
    assert Z.shape == (500, 2)
    assert list(est.get_feature_names_out()) == ["dpfactoranalysis0", "dpfactoranalysis1"]
    assert_allclose(est.get_precision() @ est.get_covariance(), np.eye(6), atol=1e-8)
    assert est.components_.dtype == np.float64
    e32 = DPFactorAnalysis(2, data_norm=8.0, random_state=0).fit(X.astype(np.float32))
    assert e32.components_.dtype == np.float32
    assert_allclose(e32.components_, est.components_, rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------- conformance
# The factor data (features of mean ~1 with a 12-25 % tail below 0 spread over many binary
# exponents) at epsilon 1 on 5,000 rows: the private domain estimate cannot see that tail
# above the noise, and its released outside count says so (issue 35: before, the rows were
# clipped silently).  These tests check the privacy plumbing of undeclared fits, not coverage
# (moment_cases.UNCOVERED).


@pytest.mark.filterwarnings(UNRESOLVED)
@pytest.mark.filterwarnings(UNCOVERED)
class TestConformance(SecondMomentCases, PrivateEstimatorConformance):
    estimator_class = DPFactorAnalysis
    params = dict(n_components=2, epsilon=1.0, delta=1e-5, data_norm=8.0)
    fitted_attributes = ("components_", "noise_variance_", "mean_")
    sklearn_params = (dict(n_components=1, data_norm=5.0, random_state=0),
                      dict(n_components=1, epsilon=float("inf"), random_state=0))
    ball_params = dict(data_norm=8.0, bounds=None)

    def make_data(self, n, seed=0):
        return _factor_data(n, 5, 2, seed=seed)[0]

    def make_noise_data(self, n):
        # the smallest release (the sum, d entries) needs 32,000 / d fits: d = 300 keeps it at 107
        # and the release dense (from 320 features, k = 2, an in-memory fit releases an operator,
        # whose noise law tests/engine/test_operator.py checks)
        return np.random.default_rng(0).normal(size=(n, 300))

    def exact_reference(self, est, X):
        m, C = _exact_cov(X)
        W, psi, _ = fa_eigen_em_reference(C, est.n_components, X.shape[0], est.max_iter, est.tol)
        return {"components_": W, "noise_variance_": psi, "mean_": m}



class TestConformanceMatrixFree(TestConformance):
    """The whole suite on 320 features (k = 2: the matrix-free path wherever the row count is
    public and the rows in memory; the noise-law tests keep the dense release, above).  The
    white-box audit stacks 20,000 dense releases of the kernel's statistic (16 GB at d = 320):
    it audits the dense release, which the d = 5 suite does."""
    audit_kwargs = None

    def make_data(self, n, seed=0):
        return _factor_data(n, 4 * krylov_columns(2), 2, seed=seed)[0]

    def test_epsilon_inf_equals_the_nonprivate_reference(self):
        pytest.skip("epsilon=inf never takes the matrix-free path; above 256 features the structured "
                    "solver stops at tol, not at the reference's 1e-8 (the d = 5 suite checks the exact mode)")

    @pytest.mark.parametrize("declared", [True, False])
    def test_memmap_and_block_sources_give_the_in_memory_fit(self, tmp_path, monkeypatch, declared):
        """Memory maps and block sources keep the dense release (bit for bit one another's fit);
        the in-memory fit on the operator is another sampler of the same single release (the
        same record: the widening applies wherever the path may run)."""
        from dpem_fast._engine._sources import _memory as engine_data
        from dpem_fast.io import NpyBlocks
        monkeypatch.setattr(engine_data, "superblock_rows", lambda d: 512)
        kw = self._domain_kw(declared)
        X = np.ascontiguousarray(self.make_data(self._rows(1500, declared)))
        path = tmp_path / "x.npy"
        np.save(path, X)
        free = self.make_estimator(random_state=4, **kw).fit(X)
        ref = self.make_estimator(random_state=4, **kw).fit(np.load(path, mmap_mode="r"))
        assert free.privacy_.epsilon_spent == ref.privacy_.epsilon_spent
        assert {k: r.noise_scale for k, r in free.privacy_.releases.items()} == \
            {k: r.noise_scale for k, r in ref.privacy_.releases.items()}
        for src in (NpyBlocks(path, block_rows=7), NpyBlocks(path, block_rows=700)):
            est = self.make_estimator(random_state=4, **kw).fit(src)
            for name, v in self._fitted(ref).items():
                assert_array_equal(self._fitted(est)[name], v, err_msg=f"{type(src).__name__}: {name}")


class TestConformanceDiscreteNoise(TestConformance):
    """The whole suite again with exact discrete Gaussian releases."""
    params = {**TestConformance.params, "noise": "discrete_gaussian"}


# ------------------------------------------------------ matrix-free path (issue 41)
class _DenseAsOperator:
    """A dense release read as the operator reads it (products, then the diagonal with the cover):
    what the matrix-free path sees, in law, paired with the dense path on the same draw."""

    def __init__(self, A, sigma):
        self.A, self.shape, self.sigma = A, A.shape, sigma

    def reserve(self, cols):
        pass

    def __matmul__(self, V):
        return self.A @ V

    def diagonal(self):
        from dpem_fast._engine._diagonal import DIAGONAL_TAU
        return np.diagonal(self.A) + np.random.default_rng(1).normal(scale=DIAGONAL_TAU * self.sigma,
                                                                      size=self.shape[0])


@pytest.mark.filterwarnings(UNRESOLVED)
@pytest.mark.parametrize("epsilon", [2.0, 20.0])
def test_matrix_free_post_processing_matches_the_dense_one_on_the_same_release(monkeypatch, epsilon):
    """Paired utility: the Krylov-space iterations on the dense path's own release (read through
    products and the diagonal) give nearly its held-out likelihood."""
    d, k = 4 * krylov_columns(2), 2
    X, _, _ = _factor_data(3000, d, k, seed=1)
    tr, te = X[:2000], X[2000:]
    original, seen = DPFactorAnalysis._update, {}

    def both(self, noisy, params, ctx):
        start = np.random.default_rng(0).normal(size=(d, 8))
        op = _DenseAsOperator(noisy[SECOND], ctx.releases[SECOND].noise_scale)
        seen["free"], seen["domain"] = original(self, {**noisy, SECOND: op}, {**params, "krylov": start}, ctx), ctx.domain
        return original(self, noisy, params, ctx)

    monkeypatch.setattr(DPFactorAnalysis, "_operator_path", False)
    monkeypatch.setattr(DPFactorAnalysis, "_update", both)
    dense = DPFactorAnalysis(k, epsilon=epsilon, data_norm=40.0, random_state=0).fit(tr)
    free = DPFactorAnalysis(k, epsilon=epsilon, data_norm=40.0, random_state=0).fit(tr)
    free._set_fitted(seen["free"], seen["domain"], np.float64)
    assert dense.n_resolved_ == free.n_resolved_ == k
    # measured: +0.08 nats per row (of ~ -400 .. -500) at both epsilons
    assert abs(free.score(te) - dense.score(te)) < 0.5
