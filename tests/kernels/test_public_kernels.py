"""dpem_fast.kernels: each wrapper equals the estimators' kernel path and the numpy reference."""
import numpy as np
import pytest
import scipy.sparse as sp

from dpem_fast import kernels
from dpem_fast._engine._record import Release
from dpem_fast._engine._release import add_noise as engine_add_noise
from dpem_fast._preprocess import DataDomain
from dpem_fast._reference import lda as lda_ref
from dpem_fast._reference.bernoulli import bernoulli_stats_reference
from dpem_fast._reference.fa import second_moment_reference
from dpem_fast._reference.gmm import estep_stats_reference
from dpem_fast._reference.kmeans import kmeans_stats_reference
from dpem_fast._rng import make_key

rng = np.random.default_rng(0)
N, D, K = 517, 4, 3
X = rng.normal(size=(N, D)) * 2
W = np.array([0.2, 0.3, 0.5])
M = rng.normal(size=(K, D))
P = np.stack([np.linalg.cholesky(np.linalg.inv(np.eye(D) * (1 + k))) for k in range(K)])
DOMAIN = (np.full(D, 0.5), 3.0, (np.full(D, -4.0), np.full(D, 4.0)))
DOMAIN_OBJ = DataDomain(DOMAIN[0], DOMAIN[1], DOMAIN[2], False)


def _close(out, ref, names):
    for name in names:
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-10, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(out["loglik"], ref["loglik"], rtol=1e-10)


@pytest.mark.parametrize("threads", [1, 2])
def test_gmm_statistics(threads):
    out = kernels.gmm_statistics(X, W, M, P, n_threads=threads)
    _close(out, estep_stats_reference(X, W, M, P), ("counts", "first_moments", "second_moments"))
    again = kernels.gmm_statistics(X, W, M, P, n_threads=3 - threads)
    for name in ("counts", "first_moments", "second_moments"):
        np.testing.assert_array_equal(out[name], again[name])


def test_domain_is_applied_like_the_estimators():
    from dpem_fast._kernels.kmeans import kmeans_stats
    from dpem_fast._kernels.gmm import compute_stats

    out = kernels.gmm_statistics(X, W, M * 0.1, P, domain=DOMAIN, n_threads=2)
    ref = compute_stats(X, W, M * 0.1, P, 2, DOMAIN_OBJ)
    for name in ref:
        np.testing.assert_array_equal(out[name], ref[name])
    assert out["n_clipped"] == ref.n_clipped > 0
    out = kernels.kmeans_statistics(X, M * 0.1, domain=DOMAIN, n_threads=2)
    ref = kmeans_stats_reference(X, M * 0.1, DOMAIN_OBJ)
    _close(out, ref, ("counts", "sums"))
    for name, v in kmeans_stats(X, M * 0.1, 2, DOMAIN_OBJ).items():
        np.testing.assert_array_equal(out[name], v)


def test_bernoulli_statistics():
    B = (X > 0).astype(float)
    means = rng.uniform(0.2, 0.8, size=(K, D))
    _close(kernels.bernoulli_statistics(B, W, means, n_threads=2), bernoulli_stats_reference(B, W, means),
           ("counts", "first_moments"))
    with pytest.raises(ValueError, match="binary"):
        kernels.bernoulli_statistics(X, W, means)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_every_face_refuses_non_finite_rows_at_any_thread_count(bad):
    """The public faces' threaded input check (issue 41): a NaN or infinity anywhere in X is
    refused before the kernel runs, at 1 and 2 threads, in float64 and float32; binary rows may
    hold -0.0 (it equals 0), and -1 is refused as not binary."""
    means = rng.uniform(0.2, 0.8, size=(K, D))
    P = np.stack([np.eye(D)] * K)
    for dtype in (np.float64, np.float32):
        Y = X.astype(dtype)
        Y[len(Y) // 2, D - 1] = bad
        for nt in (1, 2):
            for call in (lambda: kernels.gmm_statistics(Y, W, M, P, n_threads=nt),
                         lambda: kernels.kmeans_statistics(Y, M, n_threads=nt),
                         lambda: kernels.second_moments(Y, n_threads=nt),
                         lambda: kernels.bernoulli_statistics(Y, W, means, n_threads=nt)):
                with pytest.raises(ValueError, match="NaN or infinity"):
                    call()
    B = (X > 0).astype(float)
    B[B == 0] = -0.0
    kernels.bernoulli_statistics(B, W, means, n_threads=2)
    B[0, 0] = -1.0
    with pytest.raises(ValueError, match="binary"):
        kernels.bernoulli_statistics(B, W, means, n_threads=2)


def test_kmeans_statistics():
    _close(kernels.kmeans_statistics(X, M, n_threads=2), kmeans_stats_reference(X, M), ("counts", "sums"))


def test_second_moments():
    out = kernels.second_moments(X, domain=DOMAIN, n_threads=2)
    count, s, s2, clipped = second_moment_reference(X, DOMAIN_OBJ)
    np.testing.assert_allclose(out["count"], [count])
    np.testing.assert_allclose(out["sum"], s, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out["second_moment"], s2, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(out["second_moment"], out["second_moment"].T)
    assert out["n_clipped"] == clipped


def test_lda_estep():
    counts = sp.random(40, 30, density=0.2, random_state=1, format="csr") * 5
    counts.data = np.ceil(counts.data)
    eb = rng.uniform(0.01, 1.0, size=(3, 30))
    gamma0 = np.ones((40, 3))
    gamma, sstats, clipped = kernels.lda_estep(counts, eb, gamma0, 0.1, max_iter=50, tol=1e-6, clip=2.0,
                                               n_threads=2)
    g_ref, s_ref, norms = lda_ref.estep(counts, eb, 0.1, gamma0, 50, 1e-6, clip=2.0)
    np.testing.assert_allclose(gamma, g_ref, rtol=1e-8)
    np.testing.assert_allclose(sstats, s_ref, rtol=1e-8, atol=1e-12)
    assert clipped == int(np.sum(norms > 2.0)) > 0
    np.testing.assert_array_equal(gamma0, 1.0)                 # the input is not modified


@pytest.mark.parametrize("mechanism, symmetric, granularity",
                         [("gaussian", False, None), ("gaussian", "frobenius", None), ("laplace", False, None),
                          ("discrete_gaussian", False, 2.0 ** -10)])
def test_add_noise_is_the_engine_release(mechanism, symmetric, granularity):
    value = np.eye(5)[None].repeat(2, axis=0) if symmetric else rng.normal(size=(4, 6))
    key = make_key(5)
    out = kernels.add_noise(value, 0.7, key, mechanism=mechanism, symmetric=symmetric,
                            granularity=granularity, n_threads=1)
    release = Release("x", mechanism, "l1" if mechanism == "laplace" else "l2", 1.0, 0.7, value.shape,
                      bool(symmetric), 1, granularity)
    np.testing.assert_array_equal(out, engine_add_noise(value, release, key, 2))
    np.testing.assert_array_equal(out, kernels.add_noise(value, 0.7, key, mechanism=mechanism,
                                                         symmetric=symmetric, granularity=granularity,
                                                         n_threads=2))
    assert not np.array_equal(out, kernels.add_noise(value, 0.7, make_key(6), mechanism=mechanism,
                                                     symmetric=symmetric, granularity=granularity))
    if symmetric:
        np.testing.assert_array_equal(out, np.swapaxes(out, -1, -2))


def test_symmetric_true_is_analyze_gauss_and_frobenius_halves_the_off_diagonal_variance():
    """``symmetric=True`` keeps σ on every upper entry (a caller calibrated for ‖upper(δ)‖ must
    not get less noise); ``"frobenius"`` is the same draws with σ/√2 above the diagonal."""
    key, d = make_key(8), 40
    upper = kernels.add_noise(np.zeros((d, d)), 2.0, key, symmetric=True)
    frob = kernels.add_noise(np.zeros((d, d)), 2.0, key, symmetric="frobenius")
    iu = np.triu_indices(d, 1)
    np.testing.assert_array_equal(np.diag(upper), np.diag(frob))
    np.testing.assert_allclose(frob[iu], upper[iu] / np.sqrt(2.0), rtol=1e-15)
    assert abs(upper[iu].std() / 2.0 - 1) < 0.06
    with pytest.raises(ValueError, match="symmetric"):
        kernels.add_noise(np.zeros((3, 3)), 1.0, key, symmetric="upper")


def test_add_noise_scale_is_the_one_asked_for():
    z = kernels.add_noise(np.zeros(200_000), 3.0, make_key(1), n_threads=2)
    assert abs(z.std() - 3.0) < 0.03 and abs(z.mean()) < 0.03


def test_bad_arguments():
    with pytest.raises(ValueError, match="noise_scale"):
        kernels.add_noise(np.zeros(3), 0.0, make_key(1))
    with pytest.raises(ValueError, match="key"):
        kernels.add_noise(np.zeros(3), 1.0, np.zeros(8))
    with pytest.raises(ValueError, match="granularity"):
        kernels.add_noise(np.zeros(3), 1.0, make_key(1), mechanism="discrete_gaussian")
    with pytest.raises(ValueError, match="X"):
        kernels.kmeans_statistics(np.array([[np.nan, 1.0]]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="2-D"):
        kernels.second_moments(np.zeros(3))
    with pytest.raises(ValueError, match="scale"):
        kernels.second_moments(X, domain=(np.zeros(D), -1.0))


def test_samplers_are_dpem_fast_random():
    import dpem_fast.random as r

    for name in ("uniform", "standard_normal", "laplace", "integers", "symmetric_gaussian",
                 "discrete_laplace", "discrete_gaussian", "symmetric_discrete_gaussian"):
        assert getattr(kernels, name) is getattr(r, name)
    assert set(kernels.__all__) <= set(dir(kernels))
