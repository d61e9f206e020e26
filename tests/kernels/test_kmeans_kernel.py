"""k-means assignment kernel (dpem_fast._dpcore._kmeans) against its numpy twin."""
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _contract, _kmeans
from dpem_fast._preprocess import resolve_domain
from dpem_fast._reference.kmeans import kmeans_assign_reference, kmeans_stats_reference
from dpem_fast.cluster import nicv
from dpem_fast._kernels.kmeans import kmeans_assign, kmeans_stats

CHUNK = _contract.CHUNK_SIZE

SHAPES = [
    (1, 1, 1),
    (CHUNK - 7, 2, 5),        # n < chunk
    (3 * CHUNK + 17, 10, 3),  # n % chunk != 0
    (2000, 1, 4),             # d == 1
    (1500, 4, 1),             # K == 1
    (700, 8, 9),              # largest d with an unrolled feature loop
    (700, 9, 60),             # generic d, many clusters
    (300, 100, 7),
    (70 * CHUNK + 5, 2, 50),  # more chunks than BLOCK_CHUNKS: several chunks per block
]


def problem(n, d, K, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(K, d))
    X = C[rng.integers(K, size=n)] + 0.7 * rng.normal(size=(n, d))
    return X.astype(dtype), C


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n, d, K", SHAPES)
def test_stats_and_labels_equal_the_numpy_twin(n, d, K, dtype):
    X, C = problem(n, d, K, dtype)
    got = kmeans_stats(X, C, n_threads=2)
    ref = kmeans_stats_reference(X, C)
    assert_array_equal(got["counts"], ref["counts"])           # integers: exact
    assert_allclose(got["sums"], ref["sums"], rtol=1e-12, atol=1e-12 * n)
    assert got.loglik == pytest.approx(ref.loglik, rel=1e-12)
    assert got.n_rows == n and got["counts"].sum() == n
    lab, sq = kmeans_assign(X, C, n_threads=2)
    rlab, rsq = kmeans_assign_reference(X, C)
    assert_array_equal(lab, rlab)                               # no FMA: the same distances
    assert sq.dtype == dtype
    assert_array_equal(sq, rsq.astype(dtype))


@pytest.mark.parametrize("bounds", [None, (-1.5, 1.5)])
def test_domain_clipping_inside_the_kernel_equals_scale_and_clip(bounds):
    X, C = problem(5000, 3, 4, seed=3)
    X[::7] *= 40.0                                              # far outside the domain
    dom = resolve_domain(3, 2.0, bounds)
    Cw = C / 4.0
    got = kmeans_stats(X, Cw, n_threads=2, domain=dom)
    ref = kmeans_stats_reference(X, Cw, domain=dom)
    assert_array_equal(got["counts"], ref["counts"])
    assert_allclose(got["sums"], ref["sums"], rtol=1e-12, atol=1e-12)
    assert got.n_clipped == ref.n_clipped > 0
    # every row in the unit ball: each cluster's sum is at most its count in norm
    assert np.all(np.linalg.norm(got["sums"], axis=1) <= got["counts"] * (1 + 1e-12))


def test_thread_count_does_not_change_a_bit():
    X, C = problem(40 * CHUNK + 3, 2, 50, seed=5)
    dom = resolve_domain(2, 5.0, None)
    a = kmeans_stats(X, C / 5, n_threads=1, domain=dom)
    b = kmeans_stats(X, C / 5, n_threads=2, domain=dom)
    for name in ("counts", "sums"):
        assert_array_equal(a[name], b[name])
    assert a.loglik == b.loglik
    assert_array_equal(kmeans_assign(X, C, 1)[0], kmeans_assign(X, C, 2)[0])


def test_ties_go_to_the_lowest_index_and_empty_input():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    C = np.array([[0.5, 1.0], [0.5, -1.0], [0.5, 1.0]])   # every row equidistant from all
    assert_array_equal(kmeans_assign(X, C)[0], [0, 0])
    s = kmeans_stats(X, C)
    assert_array_equal(s["counts"], [2, 0, 0])
    e = kmeans_stats(np.zeros((0, 2)), C)
    assert_array_equal(e["counts"], np.zeros(3)) and e["sums"].shape == (3, 2)


def test_shape_errors():
    X, C = problem(100, 3, 2)
    with pytest.raises(ValueError, match="centers"):
        kmeans_stats(X, C[:, :2])
    with pytest.raises(ValueError, match="centers"):
        kmeans_assign(X, np.full((2, 3), np.nan))
    nb = _kmeans.block_count(100, 3, 2)
    with pytest.raises(ValueError, match="partial"):
        _kmeans.kmeans_stats(X, C, np.empty((nb + 1, 2)), np.empty((nb, 2, 3)), np.empty(nb), 1)


def test_nicv_equals_numpy():
    X, C = problem(3000, 4, 6, seed=9)
    expected = np.mean(np.min(((X[:, None, :] - C[None]) ** 2).sum(-1), axis=1))
    assert nicv(X, C) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="X"):
        nicv(np.array([[np.nan, 0, 0, 0]]), C)
    with pytest.raises(ValueError, match="centers"):
        nicv(X, C[:, :3])
