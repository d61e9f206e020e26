"""The blocked second-moment kernel against its numpy twin, both layouts, any thread count."""
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _moments
from dpem_fast._preprocess import resolve_domain
from dpem_fast._reference.fa import second_moment_reference
from dpem_fast._kernels.moments import product_rows, second_moment_stats


@pytest.mark.parametrize("n, d", [(1, 1), (7, 3), (255, 5), (257, 5), (3000, 17), (600, 64),
                                  (300, _moments.TILE_MIN_D), (40, 700), (2500, _moments.TILE_MIN_D)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("declared", [False, True])
def test_matches_reference_and_is_thread_invariant(n, d, dtype, declared):
    rng = np.random.default_rng(n + d)
    X = (rng.normal(size=(n, d)) * 2 + 0.5).astype(dtype)
    dom = resolve_domain(d, 1.5 * np.sqrt(d), None) if not declared or d > 100 else \
        resolve_domain(d, None, (np.full(d, -2.0), np.full(d, 3.0)))
    dom = dom if declared else None
    a = second_moment_stats(X, dom, n_threads=1)
    b = second_moment_stats(X, dom, n_threads=2)
    for name in a:
        assert_array_equal(a[name], b[name], err_msg=name)
    S = a["second_moment"]
    assert_array_equal(S, S.T)
    cnt, s1, s2, clipped = second_moment_reference(X, dom)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert a["count"][0] == cnt == n
    assert_allclose(a["sum"], s1, rtol=tol, atol=tol * n)
    assert_allclose(S, s2, rtol=tol, atol=tol * n)
    assert a.n_clipped == clipped
    if declared:
        assert np.trace(S) <= n * (1 + 1e-12)           # every clipped row has norm <= 1


def test_tiles_sum_at_most_tile_rows_per_partial():
    """The "tiles" layout (issue 34, item 7): one S2 partial per TILE_ROWS rows, each the slice's
    own product (not a call-long sum), summed exactly; FactorAnalysis declares that b."""
    from dpem_fast import DPFactorAnalysis
    from dpem_fast._dpcore import _contract

    n, d = 2 * _moments.TILE_ROWS + 5, _moments.TILE_MIN_D
    X = np.random.default_rng(0).normal(size=(n, d))
    nb2, nb1 = _moments.block_count(n, d)
    part_s2, part_s1 = np.empty((nb2, d, d)), np.empty((nb1, d))
    _moments.second_moment(X, part_s2, part_s1, np.zeros(nb1, dtype=np.int64), 2)
    for k in range(nb2):
        rows = X[k * _moments.TILE_ROWS:(k + 1) * _moments.TILE_ROWS]
        assert_allclose(np.tril(part_s2[k]), np.tril(rows.T @ rows), rtol=1e-12, atol=1e-9)
    S = _contract.sum_blocks(part_s2)
    _moments.mirror_lower(S, 1)
    assert_array_equal(S, second_moment_stats(X, None, n_threads=1)["second_moment"])
    assert DPFactorAnalysis(2)._block_rows(10 ** 6, d) == _moments.TILE_ROWS == 1024


def test_layouts_and_block_counts():
    assert _moments.block_count(0, 10) == (0, 0)
    nb2, nb1 = _moments.block_count(100_000, 100)
    assert nb2 == nb1 == -(-100_000 // (256 * 4))
    assert _moments.block_count(5000, _moments.TILE_MIN_D) == (-(-5000 // _moments.TILE_ROWS), -(-5000 // 256))
    with pytest.raises(ValueError, match="partial"):
        _moments.second_moment(np.zeros((10, 3)), np.zeros((2, 3, 3)), np.zeros((1, 3)),
                               np.zeros(1, dtype=np.int64), 1)


@pytest.mark.parametrize("d", [1, 5, 64, 65, 200])
def test_mirror_lower(d):
    """One tile row (64) per task: exact copy of the lower triangle, any thread count."""
    L = np.tril(np.arange(d * d, dtype=np.float64).reshape(d, d))
    for nt in (1, 3):
        S = L.copy()
        _moments.mirror_lower(S, nt)
        assert_array_equal(S, L + np.tril(L, -1).T)


@pytest.mark.parametrize("m, k, p", [(1, 3, 2), (_moments.PRODUCT_ROWS, 40, 7), (300, 300, 14), (257, 5, 1)])
def test_product_rows_is_thread_invariant(m, k, p):
    """The blocked product equals ``A @ B`` to rounding and has the same bits for any thread
    count (a threaded BLAS did not)."""
    rng = np.random.default_rng(m + p)
    A, B = rng.normal(size=(m, k)), rng.normal(size=(k, p))
    outs = [product_rows(A, B, n_threads=t) for t in (1, 2, 3)]
    assert_array_equal(outs[0], outs[1])
    assert_array_equal(outs[0], outs[2])
    assert_allclose(outs[0], A @ B, rtol=1e-12, atol=1e-12 * k)
    with pytest.raises(ValueError, match="shapes"):
        _moments.product_rows(A, B, np.empty((m, p + 1)), 1)
