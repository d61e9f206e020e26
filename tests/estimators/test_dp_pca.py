"""DPPCA: scikit-learn's PCA at epsilon=inf, the release's noise, determinism, the interface, conformance."""
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.decomposition import PCA

from conformance import PrivateEstimatorConformance
from moment_cases import UNCOVERED, SecondMomentCases
from dpem_fast import DPPCA
from dpem_fast._engine import ReleaseLayer
from dpem_fast._kernels.moments import COUNT, SECOND, SUM
from dpem_fast.decomposition import _dp_pca
from dpem_fast.decomposition._fa_em import fix_signs


def _data(n=2000, d=6, k=2, seed=0, shift=1.0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(k, d)) * np.linspace(2.0, 1.0, k)[:, None]
    return rng.normal(size=(n, k)) @ W + 0.3 * rng.normal(size=(n, d)) + shift


def _projector(V):
    Q = np.linalg.qr(np.asarray(V, dtype=np.float64).T)[0]
    return Q @ Q.T


def _reference(X, k, center=None):
    """Eigenvectors of the covariance about the mean (N − 1) or about a public centre (N)."""
    n, d = X.shape
    c = X.mean(0) if center is None else np.broadcast_to(np.asarray(center, dtype=np.float64), (d,))
    Z = X - c
    C = Z.T @ Z / (n - 1 if center is None else n)
    lam, V = np.linalg.eigh(C)
    lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    return {"components_": fix_signs(V.T), "explained_variance_": lam, "mean_": c,
            "explained_variance_ratio_": lam / np.trace(C)}


# ------------------------------------------------------------------ non-private
@pytest.mark.parametrize("n, d, k", [(2000, 6, 2), (500, 20, 4), (300, 3, 3), (400, 300, 5)])
def test_epsilon_inf_is_sklearn_pca(n, d, k):
    X = _data(n, d, min(k, 3), seed=d)
    ours = DPPCA(k, epsilon=float("inf"), random_state=0).fit(X)
    ref = PCA(k, svd_solver="full").fit(X)
    assert ours.privacy_ is None
    assert_allclose(_projector(ours.components_), _projector(ref.components_), atol=1e-8)
    assert_allclose(np.abs(np.sum(ours.components_ * ref.components_, axis=1)), 1.0, atol=1e-8)
    assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-8)
    assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-8)
    assert_allclose(ours.singular_values_, ref.singular_values_, rtol=1e-8)
    assert_allclose(ours.mean_, ref.mean_, rtol=1e-12)
    if k < d:
        assert ours.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-7)
    signs = np.sign(np.sum(ours.components_ * ref.components_, axis=1))
    assert_allclose(ours.transform(X) * signs, ref.transform(X), atol=1e-7)
    assert_allclose(ours.get_covariance(), ref.get_covariance(), atol=1e-7)
    if k < d:
        assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-7)


def test_epsilon_inf_with_a_public_centre_on_centred_data_is_sklearn_pca():
    """Centred data and the public centre 0: the second moment about 0 is the covariance (N
    in place of N − 1), so the subspace is scikit-learn's."""
    X = _data(1500, 8, 3, seed=3)
    X = X - X.mean(0)
    ours = DPPCA(3, center=0.0, epsilon=float("inf")).fit(X)
    ref = PCA(3, svd_solver="full").fit(X)
    assert_allclose(_projector(ours.components_), _projector(ref.components_), atol=1e-8)
    assert_allclose(ours.explained_variance_, ref.explained_variance_ * (1500 - 1) / 1500, rtol=1e-8)
    assert_allclose(ours.mean_, 0.0)
    # an off-centre public centre: the second moment about it
    Y = X + 2.0
    got = DPPCA(3, center=1.5, epsilon=float("inf")).fit(Y)
    want = _reference(Y, 3, center=1.5)
    for name in ("components_", "explained_variance_", "mean_"):
        assert_allclose(getattr(got, name), want[name], rtol=1e-8, atol=1e-10, err_msg=name)


# -------------------------------------------------------------------- privacy
@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")
@pytest.mark.parametrize("center, neighbouring", [(None, "replace"), (0.0, "replace"), (None, "add_remove"),
                                                  (0.0, "add_remove")])
def test_the_release_and_its_noise_are_the_calibrated_ones(monkeypatch, center, neighbouring):
    """One release; the second moment's noise is symmetric with the recorded scale (its
    sensitivities: √2 replace, 1 add/remove); the sum only where the mean is the centre, the
    count only where it is private."""
    d = 60
    X = np.random.default_rng(1).normal(size=(800, d))
    seen = []
    real = ReleaseLayer.release

    def spy(layer, statistics, index):
        out = real(layer, statistics, index)
        seen.append(({k: np.array(v) for k, v in statistics.items()}, out))
        return out

    monkeypatch.setattr(ReleaseLayer, "release", spy)
    est = DPPCA(3, center=center, epsilon=1.0, data_norm=30.0, neighbouring=neighbouring, random_state=2).fit(X)
    assert len(seen) == 1 and est.privacy_.n_iter == 1
    exact, noisy = seen[0]
    names = {SECOND} | ({SUM} if center is None else set()) | ({COUNT} if neighbouring == "add_remove" else set())
    assert set(exact) == names
    rec = est.privacy_.releases
    assert rec[SECOND].sensitivity == pytest.approx(math.sqrt(2.0) if neighbouring == "replace" else 1.0,
                                                    rel=1e-2)
    E = noisy[SECOND] - exact[SECOND]
    assert_allclose(E, E.T, atol=0)
    iu = np.triu_indices(d, 1)
    sigma = rec[SECOND].noise_scale     # on the diagonal, σ/√2 above it (the weighted draw)
    assert np.std(np.diag(E)) == pytest.approx(sigma, rel=0.25)
    assert np.std(E[iu]) == pytest.approx(sigma / math.sqrt(2.0), rel=0.06)
    assert abs(np.mean(E[iu])) < 4 * sigma / math.sqrt(iu[0].size)


def test_a_public_centre_puts_the_whole_budget_on_the_second_moment():
    X = _data(3000, 10, 2, seed=5)
    private = DPPCA(2, epsilon=1.0, data_norm=20.0, random_state=0).fit(X)
    public = DPPCA(2, center=1.0, epsilon=1.0, data_norm=20.0, random_state=0).fit(X)
    s_priv = private.privacy_.releases[SECOND].noise_scale
    s_pub = public.privacy_.releases[SECOND].noise_scale
    assert s_pub < s_priv / 1.2      # replace: 1.25 (the sum and its joint term gone)
    assert_allclose(public.mean_, 1.0)


@pytest.mark.parametrize("d, k", [(12, 3), (300, 4)])
def test_seeded_fits_are_identical_across_thread_counts(d, k):
    X = _data(3000, d, 3, seed=7)
    fits = [DPPCA(k, epsilon=1.0, data_norm=30.0, random_state=3, n_threads=t).fit(X) for t in (1, 2, 3)]
    for f in fits[1:]:
        for name in ("components_", "explained_variance_", "explained_variance_ratio_", "mean_"):
            assert np.array_equal(getattr(f, name), getattr(fits[0], name)), name
    other = DPPCA(k, epsilon=1.0, data_norm=30.0, random_state=4).fit(X)
    assert not np.array_equal(other.components_, fits[0].components_)


def test_lanczos_equals_the_dense_eigenvectors():
    """Above DENSE_MAX_D features the top-k pairs come from Lanczos: the dense solver's."""
    rng = np.random.default_rng(0)
    d, k = 400, 6
    M = rng.normal(size=(d, d))
    M = (M + M.T) / 2 + np.diag(np.r_[np.linspace(60.0, 30.0, k), np.zeros(d - k)])
    A = _dp_pca.scaled_covariance(M, np.ones(d))
    v0 = rng.normal(size=d)
    lam, V = _dp_pca.top_eigenpairs(A, k, v0)
    lam_d, V_d = _dp_pca.top_eigenpairs(A, k, None)
    assert_allclose(lam, lam_d, rtol=1e-9)
    assert_allclose(_projector(V.T), _projector(V_d.T), atol=1e-7)


def test_private_fit_recovers_a_strong_subspace_and_post_processing_is_clipped():
    X = _data(20000, 10, 2, seed=8)
    est = DPPCA(4, epsilon=1.0, data_norm=25.0, random_state=0).fit(X)
    ref = PCA(2).fit(X)
    P = _projector(est.components_[:2])
    assert np.linalg.norm(P - _projector(ref.components_)) < 0.2
    assert np.all(est.explained_variance_ >= 0)
    assert np.all(np.diff(est.explained_variance_) <= 0)
    assert np.sum(est.explained_variance_ratio_) <= 1.0 + 1e-12
    assert_allclose(est.components_ @ est.components_.T, np.eye(4), atol=1e-10)


# ------------------------------------------------------------------ interface
def test_sklearn_interface():
    X = _data(1000, 7, 2, seed=9)
    est = DPPCA(3, epsilon=2.0, data_norm=15.0, random_state=0)
    Z = est.fit_transform(X)
    assert Z.shape == (1000, 3) and est.n_components_ == 3 and est.n_features_in_ == 7
    assert_allclose(Z, est.transform(X))
    back = est.inverse_transform(Z)
    assert back.shape == X.shape
    # the round trip is the projection onto mean_ + span(components_)
    P = _projector(est.components_)
    assert_allclose(back, (X - est.mean_) @ P + est.mean_, atol=1e-9)
    assert list(est.get_feature_names_out()) == ["dppca0", "dppca1", "dppca2"]
    assert DPPCA(epsilon=float("inf")).fit(X).components_.shape == (7, 7)


@pytest.mark.parametrize("kw, match", [
    (dict(n_components=8), "n_components"),
    (dict(center=np.zeros(3)), "center"),
    (dict(center=0.0, data_norm=None, bounds=(-5.0, 5.0)), "center"),
    (dict(center=np.inf), "center"),
    (dict(center=0.0, data_norm=None), "center"),
])
def test_bad_parameters_are_refused_before_the_charge(kw, match):
    X = _data(200, 7, 2)
    with pytest.raises(ValueError, match=match):
        DPPCA(**{**dict(n_components=2, epsilon=1.0, data_norm=10.0), **kw}).fit(X)


# ----------------------------------------------------------------- conformance


@pytest.mark.filterwarnings(UNCOVERED)
class TestConformance(SecondMomentCases, PrivateEstimatorConformance):
    estimator_class = DPPCA
    params = dict(n_components=2, epsilon=1.0, delta=1e-5, data_norm=8.0)
    fitted_attributes = ("components_", "explained_variance_", "mean_")
    sklearn_params = (dict(n_components=1, data_norm=5.0, random_state=0),
                      dict(n_components=1, epsilon=float("inf"), random_state=0))
    ball_params = dict(data_norm=8.0, bounds=None)
    # PCA is equivariant under one common factor (not per feature): components unchanged,
    # variances times its square
    equivariance_factors = np.array([30.0])
    scale_transforms = {"components_": "invariant", "explained_variance_": "isotropic_variance"}

    def make_data(self, n, seed=0):
        return _data(n, 5, 2, seed=seed)

    def make_noise_data(self, n):
        # 300 features: the dense release (above 256: Lanczos), whose noise matrix the shared
        # suite reads; from 320 (k = 1) an in-memory fit releases an operator instead, whose
        # noise law tests/engine/test_operator.py checks
        return np.random.default_rng(0).normal(size=(n, 300))

    def exact_reference(self, est, X):
        return _reference(X, est.n_components, est.center)



class TestConformancePublicCentre(TestConformance):
    """The whole suite with a public centre: the second moment about it is the only release."""
    params = {**TestConformance.params, "center": 0.0}
    sklearn_params = (dict(n_components=1, center=0.0, data_norm=5.0, random_state=0),
                      dict(n_components=1, epsilon=float("inf"), random_state=0))

    def make_noise_data(self, n):
        # the one release is d x d: d = 40 gives 20 fits' draws (independence is checked across them)
        return np.random.default_rng(0).normal(size=(n, 40))

    def _ball_model_or_skip(self):
        pytest.skip("a public centre is declared with data_norm, not a box")

    def test_bounds_of_the_wrong_shape_name_bounds(self):
        pytest.skip("a public centre is declared with data_norm, not a box")

    def _domain_kw(self, declared):
        if not declared:
            pytest.skip("a public centre needs data_norm: no private domain estimate")
        return {}

    @pytest.mark.parametrize("epsilon", [1.0, float("inf")])
    @pytest.mark.parametrize("declared", [True, False])
    def test_huge_finite_rows_give_finite_output_or_a_clear_error(self, epsilon, declared):
        self._domain_kw(declared)
        super().test_huge_finite_rows_give_finite_output_or_a_clear_error(epsilon, declared)
