"""The work-layout constants: one definition (dpc_contract.h), read by every layer."""
import pytest

from dpem_fast import random as dr
from dpem_fast._dpcore import _bernoulli, _contract, _estep


def test_values_and_python_copies():
    c = _contract
    assert (c.CHUNK_SIZE, c.LANES, c.MAX_BLOCKS, c.MIN_BLOCKS) == (256, 16, 64, 8)
    assert (c.BLAS_MIN_D, c.BERNOULLI_BLAS_MIN_D) == (16, 16)
    assert c.PARTIAL_BUDGET == 1 << 21 and c.CHUNK_SIZE % c.LANES == 0
    assert c.SAMPLER_BLOCK == 4096 == dr.SAMPLER_BLOCK == dr.DISCRETE_SAMPLER_BLOCK


def test_gmm_block_count_is_the_generic_formula():
    """The GMM's block_count is the shared dpc_block_count with its own partial size."""
    c = _contract
    for n in (0, 1, 255, 256, 257, 70 * 256 + 5, 10**7):
        for d in (1, 3, 16, 100, 400):
            for K in (1, 5, 30):
                per = K * (d * d + d + 1)
                expect = min(-(-n // c.CHUNK_SIZE), max(c.MIN_BLOCKS, min(c.MAX_BLOCKS, c.PARTIAL_BUDGET // per)))
                assert _estep.block_count(n, d, K) == c.block_count(n, per) == expect
    assert c.block_count(10**6, 0) == c.MAX_BLOCKS
    with pytest.raises(ValueError):
        c.block_count(-1, 10)


def test_bernoulli_block_count_is_the_generic_formula():
    for n in (0, 1, 257, 70 * 256 + 5, 10**7):
        for d in (1, 64, 784, 5000):
            for K in (1, 10, 50):
                assert _bernoulli.block_count(n, d, K) == _contract.block_count(n, K * (d + 1) + 1)
    assert _bernoulli.block_count(10**6, 784, 10) == _contract.MAX_BLOCKS


def test_superblock_rows_is_a_whole_number_of_chunks_near_the_budget():
    c = _contract
    assert c.SUPERBLOCK_DOUBLES == 1 << 23
    for d in (1, 2, 3, 10, 64, 784, 4096, 10**5, 10**7):
        rows = c.superblock_rows(d)
        assert rows % c.CHUNK_SIZE == 0 and rows >= c.CHUNK_SIZE
        assert rows == max(c.CHUNK_SIZE, c.SUPERBLOCK_DOUBLES // d // c.CHUNK_SIZE * c.CHUNK_SIZE)
        assert rows * d <= c.SUPERBLOCK_DOUBLES or rows == c.CHUNK_SIZE
    assert c.superblock_rows(0) == c.superblock_rows(1)
