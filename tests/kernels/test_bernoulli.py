"""Fused Bernoulli-mixture E-step kernel (dpem_fast._dpcore._bernoulli) against its numpy twin."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dpem_fast._reference.exactsum import sum_blocks_reference
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _bernoulli, _contract
from dpem_fast._engine import Statistics
from dpem_fast._reference.bernoulli import bernoulli_log_resp_reference, bernoulli_stats_reference
from dpem_fast._kernels.bernoulli import _params, bernoulli_log_resp, bernoulli_stats
from plain_stats import plain

CHUNK = _contract.CHUNK_SIZE
RTOL = {np.float32: 1e-4, np.float64: 1e-10}


def make_problem(n, d, K, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.03, 0.97, size=(K, d))
    weights = rng.dirichlet(np.ones(K))
    comp = rng.integers(K, size=n)
    X = (rng.random((n, d)) < means[comp]).astype(dtype)
    return X, weights, means


def assert_stats_close(got, ref, rtol):
    got, ref = plain(got), plain(ref)
    n = max(1, ref["n_rows"])
    assert got["n_rows"] == ref["n_rows"]
    assert got["counts"].dtype == np.float64 and got["first_moments"].dtype == np.float64
    assert_allclose(got["counts"], ref["counts"], rtol=rtol, atol=rtol * n)
    assert_allclose(got["first_moments"], ref["first_moments"], rtol=rtol, atol=rtol * n)
    assert_allclose(got["loglik"], ref["loglik"], rtol=rtol, atol=rtol)


def raw_stats(X, w, means, n_threads, path=-1):
    """The kernel called directly (path: -1 by d, 0 hand loops, 1 BLAS), partials summed."""
    from threadpoolctl import threadpool_limits

    Xc, theta, lc = _params(X, w, means)
    n, d = Xc.shape
    K = theta.shape[0]
    nb = _bernoulli.block_count(n, d, K)
    parts = [np.empty((nb, K)), np.empty((nb, K, d)), np.empty(nb)]
    with threadpool_limits(1, "blas"):
        _bernoulli.bernoulli_stats(Xc, theta, lc, *parts, n_threads, path)
    return [sum_blocks_reference(p) for p in parts]


SHAPES = [
    (0, 3, 2),
    (1, 1, 1),
    (CHUNK - 7, 2, 5),        # n < chunk
    (3 * CHUNK + 17, 10, 3),  # n % chunk != 0
    (2000, 1, 4),             # d == 1
    (1500, 4, 1),             # K == 1
    (700, 15, 3),             # largest hand-loop d
    (700, 16, 3),             # smallest BLAS d
    (900, 64, 6),             # d = 64
    (400, 784, 3),            # d = 784 (MNIST-sized rows)
    (70 * CHUNK + 5, 3, 2),   # more chunks than BLOCK_CHUNKS: several chunks per block
    (70 * CHUNK + 5, 20, 2),  # the same on the BLAS path
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", SHAPES)
def test_matches_reference(n, d, K, dtype):
    X, w, means = make_problem(n, d, K, dtype)
    got = bernoulli_stats(X, w, means, n_threads=2)
    ref = bernoulli_stats_reference(X, w, means)
    assert set(got) == {"counts", "first_moments"}
    assert isinstance(got.loglik, float) and isinstance(got.n_rows, int)
    assert got["counts"].shape == (K,) and got["first_moments"].shape == (K, d)
    assert_stats_close(got, ref, RTOL[dtype])
    assert_allclose(got["counts"].sum(), n, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(3 * CHUNK + 17, 3, 5), (3 * CHUNK + 17, 16, 3), (500, 64, 4), (300, 784, 2)])
@pytest.mark.parametrize("path", [0, 1])
def test_both_code_paths_match_reference(n, d, K, dtype, path):
    """Hand loops and BLAS each agree with the reference on every d (the choice is by d only)."""
    X, w, means = make_problem(n, d, K, dtype, seed=9)
    nk, s1, ll = raw_stats(X, w, means, 2, path)
    ref = bernoulli_stats_reference(X, w, means)
    got = Statistics({"counts": nk, "first_moments": s1}, n, float(ll))
    assert_stats_close(got, ref, RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(70 * CHUNK + 5, 3, 4), (50 * CHUNK + 3, 12, 3), (30 * CHUNK + 9, 64, 5),
                                   (10 * CHUNK + 1, 784, 3)])
def test_thread_count_invariance(n, d, K, dtype):
    X, w, means = make_problem(n, d, K, dtype, seed=3)
    runs = [bernoulli_stats(X, w, means, n_threads=t) for t in (1, 2, 4)]
    for r in runs[1:]:
        assert_array_equal(r["counts"], runs[0]["counts"])
        assert_array_equal(r["first_moments"], runs[0]["first_moments"])
        assert r.loglik == runs[0].loglik
    lrs = [bernoulli_log_resp(X, w, means, n_threads=t) for t in (1, 2, 4)]
    for lr, ll in lrs[1:]:
        assert_array_equal(lr, lrs[0][0])
        assert_array_equal(ll, lrs[0][1])


@pytest.mark.parametrize("path", [0, 1])
def test_thread_count_invariance_each_path(path):
    X, w, means = make_problem(40 * CHUNK + 77, 20, 4, seed=5)
    runs = [raw_stats(X, w, means, t, path) for t in (1, 2, 4)]
    for r in runs[1:]:
        for a, b in zip(runs[0], r):
            assert_array_equal(a, b)


def test_concurrent_calls():
    problems = [make_problem(4000, d, 3, seed=s) for s, d in enumerate([2, 16, 64, 2, 16, 64])]
    expected = [bernoulli_stats(*p, n_threads=1) for p in problems]
    with ThreadPoolExecutor(max_workers=4) as ex:
        got = list(ex.map(lambda p: bernoulli_stats(*p, n_threads=2), problems * 2))
    for i, g in enumerate(got):
        e = expected[i % len(problems)]
        assert_array_equal(g["counts"], e["counts"])
        assert_array_equal(g["first_moments"], e["first_moments"])
        assert g.loglik == e.loglik


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(3 * CHUNK + 17, 10, 3), (500, 100, 2), (1, 2, 2), (700, 784, 4)])
def test_log_resp(n, d, K, dtype):
    X, w, means = make_problem(n, d, K, dtype)
    log_resp, ll = bernoulli_log_resp(X, w, means, n_threads=2)
    ref_lr, ref_ll = bernoulli_log_resp_reference(X, w, means)
    assert log_resp.dtype == dtype and ll.dtype == dtype
    assert log_resp.shape == (n, K) and ll.shape == (n,)
    rtol = RTOL[dtype]
    assert_allclose(ll, ref_ll, rtol=rtol, atol=rtol * 10)
    assert_allclose(log_resp, ref_lr, rtol=rtol, atol=rtol * max(1.0, np.abs(ref_lr).max()))
    # rows sum to 1 in probability space
    assert_allclose(np.exp(log_resp.astype(np.float64)).sum(axis=1), 1.0, rtol=10 * rtol)
    # consistent with the fused statistics
    stats = bernoulli_stats(X, w, means)
    assert_allclose(stats.loglik, ref_ll.sum(), rtol=rtol)


def test_log_resp_empty():
    X, w, means = make_problem(0, 3, 2)
    lr, ll = bernoulli_log_resp(X, w, means)
    assert lr.shape == (0, 2) and ll.shape == (0,)


@pytest.mark.parametrize("d", [5, 40])
def test_zero_weight_component(d):
    X, _, means = make_problem(900, d, 3, seed=2)
    w = np.array([0.5, 0.5, 0.0])
    stats = bernoulli_stats(X, w, means, n_threads=2)
    assert stats["counts"][2] == 0.0 and np.all(stats["first_moments"][2] == 0.0)
    assert_stats_close(stats, bernoulli_stats_reference(X, w, means), 1e-10)
    lr, _ = bernoulli_log_resp(X, w, means)
    assert np.all(lr[:, 2] == -np.inf) and np.all(np.isfinite(lr[:, :2]))


def test_extreme_means_are_finite():
    """Means close to 0 and 1 give large |theta|: still finite and as the reference."""
    X, w, means = make_problem(2000, 30, 3, seed=4)
    means[0, :10] = 1e-12
    means[1, 10:20] = 1 - 1e-12
    stats = bernoulli_stats(X, w, means, n_threads=2)
    assert np.all(np.isfinite(stats["counts"])) and np.isfinite(stats.loglik)
    assert_stats_close(stats, bernoulli_stats_reference(X, w, means), 1e-9)


def test_additivity():
    X, w, means = make_problem(5 * CHUNK + 31, 20, 3, seed=7)
    whole = bernoulli_stats(X, w, means)
    m = 2 * CHUNK + 100
    parts = bernoulli_stats(X[:m], w, means) + bernoulli_stats(X[m:], w, means)
    assert parts.n_rows == whole.n_rows
    assert_stats_close(parts, whole, 1e-12)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, np.nan, np.inf])
def test_means_outside_open_interval_raise(bad):
    X, w, means = make_problem(10, 3, 2)
    means[1, 2] = bad
    with pytest.raises(ValueError, match="means"):
        bernoulli_stats(X, w, means)
    with pytest.raises(ValueError, match="means"):
        bernoulli_log_resp(X, w, means)


@pytest.mark.parametrize("w", [[0.5], [0.5, np.nan], [0.5, -0.1], [0.0, 0.0]])
def test_bad_weights_raise(w):
    X, _, means = make_problem(10, 3, 2)
    with pytest.raises(ValueError, match="weights"):
        bernoulli_stats(X, w, means)


def test_bad_shapes_raise():
    X, w, means = make_problem(10, 3, 2)
    with pytest.raises(ValueError, match="means"):
        bernoulli_stats(X, w, means[:, :2])
    with pytest.raises(ValueError, match="X"):
        bernoulli_stats(X[0], w, means)
    Xc, theta, lc = _params(X, w, means)
    nb = _bernoulli.block_count(10, 3, 2)
    with pytest.raises(ValueError):
        _bernoulli.bernoulli_stats(Xc, theta, lc, np.empty((nb + 1, 2)), np.empty((nb, 2, 3)), np.empty(nb), 1)
    with pytest.raises(ValueError):
        _bernoulli.bernoulli_log_resp(Xc, theta, lc, np.empty((10, 3)), np.empty(10), 1)
