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
    # partials full of NaN on entry: every task writes (or zeroes) its own, the upper triangles
    # of S2 are left as they were and never read (issue 41: no serial zeroing first)
    part_s2, part_s1 = np.full((nb2, d, d), np.nan), np.full((nb1, d), np.nan)
    clipped = np.full(nb1, -1, dtype=np.int64)
    _moments.second_moment(X, part_s2, part_s1, clipped, 2)
    upper = np.triu(np.ones((d, d), dtype=bool), 1)
    assert np.isnan(part_s2[:, upper]).all() and not np.isnan(part_s2[:, ~upper]).any()
    assert_array_equal(clipped, 0)
    assert_allclose(part_s1.sum(0), X.sum(0), rtol=1e-12, atol=1e-9)
    for k in range(nb2):
        rows = X[k * _moments.TILE_ROWS:(k + 1) * _moments.TILE_ROWS]
        assert_allclose(np.tril(part_s2[k]), np.tril(rows.T @ rows), rtol=1e-12, atol=1e-9)
    S = _contract.sum_blocks_lower(part_s2)
    _moments.mirror_lower(S, 1)
    assert_array_equal(S, second_moment_stats(X, None, n_threads=1)["second_moment"])
    assert DPFactorAnalysis(2)._block_rows(10 ** 6, d) == _moments.TILE_ROWS == 1024


def test_rows_layout_writes_every_partial_itself():
    """The "rows" layout (issue 41): each block zeroes its own partials before it adds its
    chunks, and the blocks the plan leaves idle (70 chunks over 64 blocks: 35 busy) are zeroed
    by the call, so partials full of NaN on entry give the same sums as fresh ones."""
    from dpem_fast._dpcore import _contract

    n, d = 70 * _contract.CHUNK_SIZE, 3
    X = np.random.default_rng(1).normal(size=(n, d))
    nb2, nb1 = _moments.block_count(n, d)
    busy = len(_contract.block_plan(-(-n // _contract.CHUNK_SIZE), nb2))
    assert nb2 == nb1 == 64 and busy == 35
    part_s2, part_s1 = np.full((nb2, d, d), np.nan), np.full((nb1, d), np.nan)
    clipped = np.full(nb1, -1, dtype=np.int64)
    _moments.second_moment(X, part_s2, part_s1, clipped, 2)
    assert_array_equal(part_s2[busy:], 0.0)
    assert_array_equal(part_s1[busy:], 0.0)
    assert_array_equal(clipped, 0)
    S = _contract.sum_blocks_lower(part_s2, 2)
    _moments.mirror_lower(S, 2)
    ref = second_moment_stats(X, None, n_threads=1)
    assert_array_equal(S, ref["second_moment"])
    assert_array_equal(_contract.sum_blocks(part_s1, 1), ref["sum"])
    assert_allclose(S, X.T @ X, rtol=1e-12)


def test_tiles_read_rows_in_place_or_from_one_row_copy():
    """The "tiles" layout (issue 41) reads raw float64 rows in place and copies (row-major)
    only float32 rows and mapped ones: the same S1 and S2 bits from the copy as from the
    rows themselves (float32 rows against their float64 values; rows an identity domain
    leaves alone), into the caller's ``work`` when given (its shape checked)."""
    n, d = 1500, _moments.TILE_MIN_D + 20
    X32 = (np.random.default_rng(3).normal(size=(n, d)) * 1e-3).astype(np.float32)
    X = X32.astype(np.float64)
    raw = second_moment_stats(X, None, n_threads=2)
    assert_array_equal(second_moment_stats(X32, None, n_threads=1)["second_moment"], raw["second_moment"])
    ident = resolve_domain(d, 1.0, None)       # centre 0, scale 1, every row inside the ball
    mapped = second_moment_stats(X, ident, n_threads=3)
    assert mapped.n_clipped == 0
    for name in ("sum", "second_moment"):
        assert_array_equal(mapped[name], raw[name], err_msg=name)
    nb2, nb1 = _moments.block_count(n, d)
    parts = (np.empty((nb2, d, d)), np.empty((nb1, d)), np.zeros(nb1, dtype=np.int64))
    work = np.full((n, d), np.nan)
    _moments.second_moment(X32, *parts, 2, work=work)
    assert_array_equal(work, X)                 # the copy went where it was asked to
    with pytest.raises(ValueError, match="work must have shape"):
        _moments.second_moment(X32, *parts, 2, work=np.empty((n, d - 1)))


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
