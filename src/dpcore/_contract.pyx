"""The work-layout constants of the kernels, read from ``dpc_contract.h`` (their only definition).

Python modules import them from here.  They are part of the reproducibility contract:
block ``b`` of ``SAMPLER_BLOCK`` sampler outputs draws from stream ``stream0 + b``, and the
E-step kernels sum rows in chunks of ``CHUNK_SIZE`` over ``LANES`` fixed lanes, grouped into
``block_count(n, per_block_doubles)`` blocks.  Changing one changes seeded results.
"""
from .dpc_contract cimport (
    DPC_BERNOULLI_BLAS_MIN_D, DPC_BLAS_MIN_D, DPC_CHUNK_SIZE, DPC_LANES, DPC_MAX_BLOCKS, DPC_MIN_BLOCKS,
    DPC_LDA_DOC_CHUNK, DPC_PARTIAL_BUDGET, DPC_SAMPLER_BLOCK, DPC_SUPERBLOCK_DOUBLES, dpc_block_count, dpc_lda_block_count, dpc_superblock_rows,
)

#: Rows per E-step chunk.
CHUNK_SIZE = DPC_CHUNK_SIZE
#: Fixed lanes of every in-chunk row sum.
LANES = DPC_LANES
#: Largest number of E-step blocks (partial-statistic rows).
MAX_BLOCKS = DPC_MAX_BLOCKS
#: Smallest block cap when the partials exceed PARTIAL_BUDGET.
MIN_BLOCKS = DPC_MIN_BLOCKS
#: Doubles of per-block partials allowed before the block count shrinks.
PARTIAL_BUDGET = DPC_PARTIAL_BUDGET
#: The GMM E-step uses BLAS from this number of features on.
BLAS_MIN_D = DPC_BLAS_MIN_D
#: The Bernoulli-mixture E-step uses BLAS from this number of features on.
BERNOULLI_BLAS_MIN_D = DPC_BERNOULLI_BLAS_MIN_D
#: Documents per chunk of the LDA E-step.
LDA_DOC_CHUNK = DPC_LDA_DOC_CHUNK
#: Outputs per ChaCha20 stream in the samplers.
SAMPLER_BLOCK = DPC_SAMPLER_BLOCK
#: Values (float64) per superblock, the unit in which the engine passes rows to a kernel.
SUPERBLOCK_DOUBLES = DPC_SUPERBLOCK_DOUBLES


def block_count(Py_ssize_t n, Py_ssize_t per_block_doubles):
    """Number of blocks (partial-statistic rows) for ``n`` rows; independent of threads.

    Equivalent to: ``min(ceil(n / CHUNK_SIZE), max(MIN_BLOCKS, min(MAX_BLOCKS,
    PARTIAL_BUDGET // max(1, per_block_doubles))))``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    return dpc_block_count(n, per_block_doubles)


def superblock_rows(Py_ssize_t n_features):
    """Rows per superblock for ``n_features`` columns (a whole number of chunks).

    Equivalent to: ``max(CHUNK_SIZE, SUPERBLOCK_DOUBLES // max(1, n_features) // CHUNK_SIZE
    * CHUNK_SIZE)``.
    """
    return dpc_superblock_rows(n_features)


def lda_block_count(Py_ssize_t n, Py_ssize_t per_block_doubles):
    """Blocks of the LDA E-step for ``n`` documents; independent of threads.

    Equivalent to: ``min(ceil(n / LDA_DOC_CHUNK), max(MIN_BLOCKS, min(MAX_BLOCKS,
    PARTIAL_BUDGET // max(1, per_block_doubles))))``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    return dpc_lda_block_count(n, per_block_doubles)
