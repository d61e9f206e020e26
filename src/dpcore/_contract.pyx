"""The work-layout constants of the kernels, read from ``dpc_contract.h`` (their only definition).

Python modules import them from here.  They are part of the reproducibility contract:
block ``b`` of ``SAMPLER_BLOCK`` sampler outputs draws from stream ``stream0 + b``, and the
E-step kernels sum rows in chunks of ``CHUNK_SIZE`` over ``LANES`` fixed lanes, grouped into
``block_count(n, per_block_doubles)`` blocks, whose partials are summed in block order
(:func:`sum_blocks`).  Changing one changes seeded results.
"""
import numpy as np
from cython.parallel cimport prange

from .dpc_contract cimport (
    DPC_BERNOULLI_BLAS_MIN_D, DPC_BLAS_MIN_D, DPC_CHUNK_SIZE, DPC_LANES, DPC_BLOCK_CHUNKS, DPC_SPREAD_BLOCKS, DPC_MIN_BLOCKS,
    DPC_F32_FLUSH_CHUNKS, DPC_F32_LANE_ROWS, DPC_LDA_DOC_CHUNK, DPC_PARTIAL_BUDGET, DPC_SAMPLER_BLOCK, DPC_SUPERBLOCK_DOUBLES, dpc_block_count, dpc_lda_block_count, dpc_superblock_rows,
    dpc_block_plan, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)

#: Rows per E-step chunk.
CHUNK_SIZE = DPC_CHUNK_SIZE
#: Fixed lanes of every in-chunk row sum.
LANES = DPC_LANES
#: Chunks per block: the number of blocks grows with n (no fixed cap).
BLOCK_CHUNKS = DPC_BLOCK_CHUNKS
#: Blocks of a small input (when there are that many chunks): it is spread over many threads.
SPREAD_BLOCKS = DPC_SPREAD_BLOCKS
#: Fewest blocks under the partial budget (when there are that many chunks).
MIN_BLOCKS = DPC_MIN_BLOCKS
#: Doubles of per-block partials allowed before blocks take more chunks.
PARTIAL_BUDGET = DPC_PARTIAL_BUDGET
#: The GMM E-step uses BLAS from this number of features on.
BLAS_MIN_D = DPC_BLAS_MIN_D
#: The Bernoulli-mixture E-step uses BLAS from this number of features on.
BERNOULLI_BLAS_MIN_D = DPC_BERNOULLI_BLAS_MIN_D
#: The float32 path: chunks between the flushes of its float lanes into float64 lanes ...
F32_FLUSH_CHUNKS = DPC_F32_FLUSH_CHUNKS
#: ... so that a float lane (or one float ssyrk) never sums more than this many rows.
F32_LANE_ROWS = DPC_F32_LANE_ROWS
#: Documents per chunk of the LDA E-step.
LDA_DOC_CHUNK = DPC_LDA_DOC_CHUNK
#: Outputs per ChaCha20 stream in the samplers.
SAMPLER_BLOCK = DPC_SAMPLER_BLOCK
#: Values (float64) per superblock, the unit in which the engine passes rows to a kernel.
SUPERBLOCK_DOUBLES = DPC_SUPERBLOCK_DOUBLES


def block_count(Py_ssize_t n, Py_ssize_t per_block_doubles):
    """Number of blocks (partial-statistic rows) for ``n`` rows; independent of threads.

    Equivalent to: ``min(c, max(SPREAD_BLOCKS, ceil(c / BLOCK_CHUNKS)), max(MIN_BLOCKS,
    PARTIAL_BUDGET // max(1, per_block_doubles)))`` with ``c = ceil(n / CHUNK_SIZE)``
    chunks: it grows with ``n`` without a cap until the partials reach the budget.
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

    Equivalent to :func:`block_count` over ``ceil(n / LDA_DOC_CHUNK)`` chunks of documents.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    return dpc_lda_block_count(n, per_block_doubles)


def block_plan(Py_ssize_t n_chunks, Py_ssize_t n_blocks):
    """The chunks every block walks (``dpc_plan_blocks``, the one plan of every kernel with
    per-block partials): a list of ``(first, end)`` chunk ranges, one per block that has
    chunks, in block order.  ``n_blocks`` is the partial count (:func:`block_count`).

    Equivalent to: ``c = ceil(n_chunks / n_blocks)``, then ``[(b c, min(n_chunks, (b + 1) c))
    for b in range(ceil(n_chunks / c))]`` (empty when there are no chunks or no blocks).
    """
    if n_chunks < 0 or n_blocks < 0:
        raise ValueError("n_chunks and n_blocks must be >= 0")
    cdef dpc_block_plan p = dpc_plan_blocks(n_chunks, n_blocks)
    return [(dpc_plan_first(&p, b), dpc_plan_end(&p, b)) for b in range(p.n_busy)]


# Entries per parallel task of sum_blocks, and the fewest values (blocks x entries) worth a
# parallel region.  Neither changes a result: every entry is summed in block order.
cdef enum:
    _SUM_SPAN = 2048
    _SUM_PARALLEL_MIN = 1 << 16


def sum_blocks(part, int n_threads=1):
    """Sum of the per-block partials ``part`` (shape ``(n_blocks, ...)``) over axis 0, in
    block order: ``part[0] + part[1] + ... + part[n_blocks - 1]`` for every entry.

    This is the reduction every kernel's caller runs; entries are summed in parallel (over
    ``n_threads``), each in block order, so the result is bit-identical for any thread
    count and to ``np.add.reduce(part, axis=0)``.  Zeros of shape ``part.shape[1:]`` when
    there are no blocks.
    """
    cdef Py_ssize_t nb = part.shape[0], m, j0, j, j1, b
    shape = part.shape[1:]
    if nb == 0:
        return np.zeros(shape)
    cdef double[:, ::1] p = np.ascontiguousarray(part, dtype=np.float64).reshape(nb, -1)
    m = p.shape[1]
    out = np.empty(m)
    cdef double[::1] o = out
    cdef int nt = n_threads if n_threads > 1 and nb * m >= _SUM_PARALLEL_MIN else 1
    with nogil:
        for j0 in prange(0, m, _SUM_SPAN, num_threads=nt, schedule='static'):
            j1 = j0 + _SUM_SPAN if j0 + _SUM_SPAN < m else m
            for j in range(j0, j1):
                o[j] = p[0, j]
            for b in range(1, nb):
                for j in range(j0, j1):
                    o[j] = o[j] + p[b, j]
    return out.reshape(shape)
