"""The work-layout constants: one definition (dpc_contract.h), read by every layer."""
import numpy as np
import pytest

from dpem_fast import random as dr
from dpem_fast._dpcore import _bernoulli, _contract, _estep
from dpem_fast._reference.exactsum import sum_blocks_reference


def test_values_and_python_copies():
    c = _contract
    assert (c.CHUNK_SIZE, c.LANES, c.BLOCK_CHUNKS, c.SPREAD_BLOCKS, c.MIN_BLOCKS) == (256, 16, 4, 64, 8)
    assert (c.BLAS_MIN_D, c.F32_TILE_MIN_D, c.BERNOULLI_BLAS_MIN_D) == (25, 16, 16)
    assert c.PARTIAL_BUDGET == 1 << 23 and c.CHUNK_SIZE % c.LANES == 0
    assert not hasattr(c, "MAX_BLOCKS")      # issue 14: no fixed cap on the block count
    assert c.SAMPLER_BLOCK == 4096 == dr.SAMPLER_BLOCK == dr.DISCRETE_SAMPLER_BLOCK


def test_gmm_block_count_is_the_generic_formula():
    """The GMM's block_count is the shared dpc_block_count with its own partial size."""
    c = _contract
    for n in (0, 1, 255, 256, 257, 70 * 256 + 5, 10**7):
        for d in (1, 3, 16, 100, 400):
            for K in (1, 5, 30):
                per = K * (d * d + d + 1)
                chunks = -(-n // c.CHUNK_SIZE)
                expect = min(chunks, max(c.SPREAD_BLOCKS, -(-chunks // c.BLOCK_CHUNKS)),
                             max(c.MIN_BLOCKS, c.PARTIAL_BUDGET // per))
                assert _estep.block_count(n, d, K) == c.block_count(n, per) == expect
    assert c.block_count(10**6, 0) == -(-10**6 // (c.CHUNK_SIZE * c.BLOCK_CHUNKS))
    with pytest.raises(ValueError):
        c.block_count(-1, 10)


def test_bernoulli_block_count_is_the_generic_formula():
    for n in (0, 1, 257, 70 * 256 + 5, 10**7):
        for d in (1, 64, 784, 5000):
            for K in (1, 10, 50):
                assert _bernoulli.block_count(n, d, K) == _contract.block_count(n, K * (d + 1) + 1)
    nb = _bernoulli.block_count(10**6, 784, 10)
    assert nb == -(-10**6 // (256 * _contract.BLOCK_CHUNKS)) and nb * (10 * 785 + 1) <= _contract.PARTIAL_BUDGET
    assert _bernoulli.block_count(10**7, 784, 10) == _contract.PARTIAL_BUDGET // (10 * 785 + 1)


def test_blocks_grow_with_n_and_keep_partials_in_budget():
    """Issue 14: the block count has no fixed cap (a 128-core machine gets work on 16e6 rows),
    blocks hold BLOCK_CHUNKS chunks until the partials reach the budget, and it is the same
    for every thread count (it takes no thread argument at all)."""
    c = _contract
    rows = c.CHUNK_SIZE * c.BLOCK_CHUNKS
    assert c.block_count(16 * 10**6, 5 * 7) == -(-16 * 10**6 // rows) > 15_000
    prev = 0
    for n in (10**3, 10**4, 10**5, 10**6, 10**7):
        nb = _estep.block_count(n, 2, 5)
        assert nb > prev and nb <= -(-n // c.CHUNK_SIZE)
        prev = nb
    for d, K in ((50, 10), (100, 10), (400, 5)):
        per = K * (d * d + d + 1)
        for n in (10**5, 10**6, 10**7):
            nb = _estep.block_count(n, d, K)
            assert nb == c.MIN_BLOCKS or nb * per <= c.PARTIAL_BUDGET
    assert _estep.block_count(200_000, 50, 10) > 128        # the BLAS-path shape
    # small inputs keep one block per chunk up to SPREAD_BLOCKS (as many parallel units as
    # the 64-block layout gave them)
    for chunks in (1, 7, 32, 64, 200, 256):
        assert c.block_count(chunks * c.CHUNK_SIZE, 35) == min(chunks, max(c.SPREAD_BLOCKS, -(-chunks // 4)))
    assert c.block_count(32 * c.CHUNK_SIZE, 35) == 32


def test_lda_block_count_is_the_same_rule_over_document_chunks():
    c = _contract
    for n in (0, 1, 31, 32, 33, 5000, 10**6):
        for per in (1, 50 * 8000, 10**7):
            chunks = -(-n // c.LDA_DOC_CHUNK)
            expect = min(chunks, max(c.SPREAD_BLOCKS, -(-chunks // c.BLOCK_CHUNKS)),
                         max(c.MIN_BLOCKS, c.PARTIAL_BUDGET // per))
            assert c.lda_block_count(n, per) == expect


def test_superblock_rows_is_a_whole_number_of_chunks_near_the_budget():
    c = _contract
    assert c.SUPERBLOCK_DOUBLES == 1 << 23
    for d in (1, 2, 3, 10, 64, 784, 4096, 10**5, 10**7):
        rows = c.superblock_rows(d)
        assert rows % c.CHUNK_SIZE == 0 and rows >= c.CHUNK_SIZE
        assert rows == max(c.CHUNK_SIZE, c.SUPERBLOCK_DOUBLES // d // c.CHUNK_SIZE * c.CHUNK_SIZE)
        assert rows * d <= c.SUPERBLOCK_DOUBLES or rows == c.CHUNK_SIZE
    assert c.superblock_rows(0) == c.superblock_rows(1)


@pytest.mark.parametrize("shape", [(0, 3), (1, 5), (7, 4, 3), (600, 10, 50), (4, 70_001)])
def test_sum_blocks_is_exact_for_every_thread_count(shape):
    """The callers' reduction (issue 34): each entry the correctly rounded exact sum of its
    blocks (the fsum twin), bit for bit at 1, 2 and 3 threads (the parallel path included:
    600 x 500 and 4 x 70,001 values are above its threshold) and in any block order."""
    rng = np.random.default_rng(sum(shape))
    # values spanning many magnitudes, so a float sum in any order would show in the bits
    part = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 9, size=shape)
    expect = sum_blocks_reference(part) if shape[0] else np.zeros(shape[1:])
    for nt in (1, 2, 3):
        got = _contract.sum_blocks(part, nt)
        assert got.shape == shape[1:]
        assert got.tobytes() == expect.tobytes()
        assert _contract.sum_blocks(part[::-1], nt).tobytes() == expect.tobytes()
    if shape[0] == 4:      # the data are such that the sequential float sum differs
        assert not np.array_equal(np.add.reduce(part, axis=0), expect)


@pytest.mark.parametrize("shape", [(0, 3, 3), (1, 1, 1), (3, 33, 33), (7, 40, 40), (600, 31, 31), (3, 300, 300)])
def test_sum_blocks_lower_sums_the_lower_triangles_alone(shape):
    """The second moment's reduction (issue 41): each lower entry (diagonal included) the
    correctly rounded exact sum of its blocks, bit for bit as the fsum twin at 1, 2 and 3
    threads (600 x 496 and 3 x 45,150 entries are above the parallel threshold; rows of 33 and
    40 entries cross a span of 32) and in any block order; the upper triangles of the partials
    are never read (NaN there changes nothing) and the result's is +0.0."""
    rng = np.random.default_rng(sum(shape))
    part = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 9, size=shape)
    d = shape[-1]
    lower = np.tril(np.ones((d, d), dtype=bool))
    expect = np.zeros((d, d))
    if shape[0]:
        expect[lower] = sum_blocks_reference(part[:, lower])
    poisoned = part.copy()
    poisoned[:, ~lower] = np.nan
    for nt in (1, 2, 3):
        for p in (part, part[::-1].copy(), poisoned):
            got = _contract.sum_blocks_lower(p, nt)
            assert got.shape == (d, d)
            assert got.tobytes() == expect.tobytes()
    if shape[0] > 1:       # the same entries as the full reduction
        assert np.tril(_contract.sum_blocks(part, 2)).tobytes() == expect.tobytes()
    with pytest.raises(ValueError, match="square"):
        _contract.sum_blocks_lower(np.zeros((2, 3, 4)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("size", [0, 1, 2 ** 15 - 1, 2 ** 15 + 3, 2 ** 18 + 5])
def test_all_finite_is_numpys_isfinite(dtype, size):
    """The kernels' input check (issue 41): the answer of ``np.all(np.isfinite(X))`` for NaN,
    +-inf, the largest finite values, subnormals and -0.0 at the first, last and block-edge
    positions, at 1, 2 and 3 threads (2**18 + 5 values run the parallel path); any shape, and a
    non-contiguous view."""
    rng = np.random.default_rng(size)
    x = rng.standard_normal(size).astype(dtype)
    fi = np.finfo(dtype)
    specials = [fi.max, -fi.max, fi.smallest_subnormal, -0.0, fi.tiny]
    for v, pos in zip(specials, rng.integers(0, max(size, 1), size=len(specials))):
        if size:
            x[pos] = v
    for nt in (1, 2, 3):
        assert _contract.all_finite(x, nt) is True
        assert _contract.all_finite(x.reshape(1, -1), nt) is True
    if not size:
        return
    for bad in (np.nan, np.inf, -np.inf, -np.nan):
        for pos in {0, size - 1, min(size - 1, 2 ** 15), size // 2}:
            y = x.copy()
            y[pos] = bad
            assert not np.all(np.isfinite(y))
            for nt in (1, 2, 3):
                assert _contract.all_finite(y, nt) is False, (bad, pos, nt)
    if size > 2:
        y = x.copy()
        y[1] = np.nan
        assert _contract.all_finite(y[::2], 2) is True       # the NaN is not in the view
        assert _contract.all_finite(y[1::2], 2) is False
    with pytest.raises(TypeError, match="float32 or float64"):
        _contract.all_finite(np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("size", [0, 1, 2 ** 15 + 3, 2 ** 18 + 5])
def test_all_binary_is_numpys_zero_or_one(dtype, size):
    """The Bernoulli E-step's input check (issue 41): the answer of ``np.all((X == 0) | (X ==
    1))`` with +0.0, -0.0 and 1 allowed and -1, 2, 0.5, 1 + eps, the smallest subnormal, NaN and
    +-inf refused, at the first, last and block-edge positions, at 1, 2 and 3 threads."""
    rng = np.random.default_rng(size + 7)
    x = (rng.random(size) < 0.3).astype(dtype)
    if size:
        x[rng.integers(0, size, size=3)] = -0.0
    for nt in (1, 2, 3):
        assert _contract.all_binary(x, nt) is True
    if not size:
        return
    fi = np.finfo(dtype)
    for bad in (-1.0, 2.0, 0.5, 1 + fi.eps, fi.smallest_subnormal, np.nan, np.inf, -np.inf):
        for pos in {0, size - 1, min(size - 1, 2 ** 15), size // 2}:
            y = x.copy()
            y[pos] = bad
            assert not np.all((y == 0) | (y == 1))
            for nt in (1, 2, 3):
                assert _contract.all_binary(y, nt) is False, (bad, pos, nt)
    with pytest.raises(TypeError, match="float32 or float64"):
        _contract.all_binary(np.zeros(3, dtype=np.int8))


@pytest.mark.parametrize("shape", [(0, 3, 3), (1, 1, 1), (5, 2, 2), (3, 10, 10), (2, 17, 17)])
def test_mirror_upper_is_the_masked_copy(shape):
    """The E-step's mirror of its summed second moments (issue 41): each strict upper triangle
    copied below the diagonal, in place, bit for bit as numpy's masked ``copyto``."""
    rng = np.random.default_rng(sum(shape))
    s = np.triu(rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 9, size=shape))
    expect = s.copy()
    d = shape[-1]
    np.copyto(expect, expect.transpose(0, 2, 1), where=np.tril(np.ones((d, d), dtype=bool), -1))
    _contract.mirror_upper(s)
    assert s.tobytes() == expect.tobytes()
    with pytest.raises(ValueError, match="square"):
        _contract.mirror_upper(np.zeros((1, 2, 3)))
