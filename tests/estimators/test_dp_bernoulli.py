"""DPBernoulliMixture: plain EM from the same start, the binary domain, API, and the conformance suite."""
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from conformance import PrivateEstimatorConformance
from dpem_fast import DPBernoulliMixture
from dpem_fast._reference.bernoulli import bernoulli_log_resp_reference
from dpem_fast._engine._sources._memory import summarize
from dpem_fast._rng import make_key
from dpem_fast.mixture._dp_bernoulli import MEAN_FLOOR


def _binary(n=3000, d=8, K=3, seed=0):
    rng = np.random.default_rng(seed)
    protos = rng.random((K, d)) < 0.5
    y = rng.integers(0, K, size=n)
    flip = rng.random((n, d)) < 0.1
    return (protos[y] ^ flip).astype(np.float64), y


def _plain_em(X, weights, means, n_iter):
    """Textbook EM for a Bernoulli mixture on the numpy reference E-step (the non-private reference)."""
    w, mu = weights.copy(), means.copy()
    for _ in range(n_iter):
        g = np.exp(bernoulli_log_resp_reference(X, w, mu)[0])
        nk = g.sum(0) + 10 * np.finfo(float).eps
        w = nk / nk.sum()
        mu = np.clip(g.T @ X / nk[:, None], MEAN_FLOOR, 1 - MEAN_FLOOR)
    return w, mu


def test_epsilon_inf_equals_plain_em_from_the_same_start():
    X, _ = _binary()
    w0 = np.array([0.2, 0.3, 0.5])
    m0 = np.random.default_rng(1).uniform(0.2, 0.8, size=(3, 8))
    est = DPBernoulliMixture(3, epsilon=float("inf"), max_iter=15, weights_init=w0, means_init=m0).fit(X)
    w, mu = _plain_em(X, w0, m0, 15)
    assert_allclose(est.weights_, w, rtol=1e-10)
    assert_allclose(est.means_, mu, rtol=1e-10, atol=1e-12)
    assert est.privacy_ is None


def test_private_fit_recovers_separated_prototypes():
    X, y = _binary(n=20000, d=16, seed=3)
    est = DPBernoulliMixture(3, epsilon=1.0, max_iter=10, random_state=0).fit(X)
    assert np.all((est.means_ >= 0) & (est.means_ <= 1))
    # each true prototype is matched by some fitted component within 0.15 per feature
    rng = np.random.default_rng(3)
    protos = (rng.random((3, 16)) < 0.5).astype(float)
    assert np.abs(protos[:, None, :] - est.means_[None]).mean(-1).min(1).max() < 0.15
    assert est.score(X) > DPBernoulliMixture(1, epsilon=float("inf"), max_iter=1).fit(X).score(X)


def test_privacy_record_and_replace_sensitivity():
    X, _ = _binary(d=5)
    est = DPBernoulliMixture(2, epsilon=1.0, max_iter=3, random_state=0).fit(X)
    rec = est.privacy_
    assert list(rec.releases) == ["counts", "first_moments"]
    assert rec.releases["first_moments"].sensitivity == pytest.approx(np.sqrt(2 * 5 - 1))
    assert rec.data_domain["source"] == "the model's fixed domain"
    ar = DPBernoulliMixture(2, epsilon=1.0, max_iter=3, neighbouring="add_remove", random_state=0).fit(X)
    # widened at the public cap on the (private) row count (issue 34); the soft counts too
    w_ar = ar._rounding_factor(5, None)
    assert 1.0 + 1e-3 < w_ar < 1.0 + 3e-3
    assert ar.privacy_.releases["first_moments"].sensitivity == pytest.approx(np.sqrt(5) * w_ar, rel=1e-15)
    assert ar.privacy_.releases["counts"].sensitivity == pytest.approx(w_ar, rel=1e-15)


def test_binary_input_is_required_or_binarised():
    X, _ = _binary(n=200)
    with pytest.raises(ValueError, match="binary"):
        DPBernoulliMixture(2, max_iter=2).fit(X * 2)
    a = DPBernoulliMixture(2, max_iter=2, binarize=1.0, random_state=0).fit(X * 2)
    b = DPBernoulliMixture(2, max_iter=2, random_state=0).fit(X)
    assert_array_equal(a.means_, b.means_)
    with pytest.raises(ValueError, match="binarize"):
        DPBernoulliMixture(2, binarize=float("nan")).fit(X)
    with pytest.raises(ValueError, match="means_init"):
        DPBernoulliMixture(2, means_init=np.full((2, 8), 1.0)).fit(X)
    with pytest.raises(ValueError, match="weights_init"):
        DPBernoulliMixture(2, weights_init=[0.7, 0.7]).fit(X)


def test_api_and_sampling():
    X, _ = _binary(n=500)
    est = DPBernoulliMixture(3, max_iter=3, random_state=0).fit(X)
    p = est.predict_proba(X)
    assert p.shape == (500, 3) and np.allclose(p.sum(1), 1.0)
    assert est.predict(X).shape == (500,) and np.isfinite(est.score(X))
    S, y = est.sample(1000, random_state=0)
    assert S.shape == (1000, 8) and set(np.unique(S)) <= {0.0, 1.0} and y.shape == (1000,)
    assert est.means_.dtype == np.float64
    assert DPBernoulliMixture(2, max_iter=2, random_state=0).fit(X.astype(np.float32)).means_.dtype == np.float32


class TestConformance(PrivateEstimatorConformance):
    estimator_class = DPBernoulliMixture
    params = dict(n_components=3, epsilon=1.0, delta=1e-5, max_iter=4)
    fitted_attributes = ("weights_", "means_")
    # scikit-learn's checks fit 20-30 rows: epsilon=10 keeps them above the refusal threshold
    sklearn_params = (dict(n_components=2, epsilon=10.0, binarize=0.5, max_iter=3, random_state=0),
                      dict(n_components=2, binarize=0.5, epsilon=float("inf"), max_iter=3, random_state=0))

    def make_data(self, n, seed=0):
        return _binary(n=n, seed=seed)[0]

    def exact_reference(self, est, X):
        w0, m0 = est._initial_parameters(summarize(X), None, make_key(est.random_state), False)
        w, mu = _plain_em(X, w0, m0, est.max_iter)
        return {"weights_": w, "means_": mu}

    refuses_huge_rows = True    # non-binary rows are refused with an error naming X

    def random_parameters(self, est, rng, d):
        K = est.n_components
        sharp = rng.random() < 0.5
        means = rng.choice([1e-9, 1 - 1e-9], size=(K, d)) if sharp else rng.uniform(0.01, 0.99, size=(K, d))
        return rng.dirichlet(np.ones(K)), means

    def random_row(self, est, rng, d):
        return (rng.random(d) < rng.uniform(0.2, 1.0)).astype(float)

    def perturb_row(self, est, rng, x):
        y = x.copy()
        j = rng.integers(x.size)
        y[j] = 1.0 - y[j]
        return y

    def adversarial_cases(self, est, rng, d):
        K = est.n_components
        ones, near = np.ones(d), np.ones(d)
        near[0] = 0.0
        means = np.full((K, d), 0.5)
        means[0], means[1] = 1 - 1e-9, np.where(near > 0, 1 - 1e-9, 1e-9)
        return [((np.full(K, 1.0 / K), means), ones, near)]


class TestConformanceDiscreteNoise(TestConformance):
    """The whole suite again with exact discrete Gaussian releases."""
    params = {**TestConformance.params, "noise": "discrete_gaussian"}
