"""The work-layout constants of the kernels, read from ``dpc_contract.h`` (their only definition),
and the parallel passes every kernel's caller runs around a kernel: the exact sums of its
partials (:func:`sum_blocks`, :func:`sum_blocks_lower`) and the checks of its input
(:func:`all_finite`, :func:`all_binary`).

Python modules import them from here.  They are part of the reproducibility contract:
block ``b`` of ``SAMPLER_BLOCK`` sampler outputs draws from stream ``stream0 + b``, and the
E-step kernels sum rows in chunks of ``CHUNK_SIZE`` over ``LANES`` fixed lanes, grouped into
``block_count(n, per_block_doubles)`` blocks, whose partials are summed exactly and rounded once
(:func:`sum_blocks`).  Changing one changes seeded results.
"""
import numpy as np
from cython cimport floating
from cython.parallel cimport prange

from ._driver cimport run_blocks
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

from .dpc_contract cimport (
    DPC_BERNOULLI_BLAS_MIN_D, DPC_BLAS_MIN_D, DPC_F32_TILE_MIN_D, DPC_CHUNK_SIZE, DPC_LANES, DPC_BLOCK_CHUNKS, DPC_SPREAD_BLOCKS, DPC_MIN_BLOCKS,
    DPC_F32_FLUSH_CHUNKS, DPC_F32_LANE_ROWS, DPC_LDA_DOC_CHUNK, DPC_PARTIAL_BUDGET, DPC_SAMPLER_BLOCK, DPC_SUPERBLOCK_DOUBLES, dpc_block_count, dpc_lda_block_count, dpc_superblock_rows,
    dpc_block_plan, dpc_plan_blocks, dpc_plan_end, dpc_plan_first, dpc_chunk_count,
)
from .dpc_exactsum cimport DPC_XS_SPAN, dpc_xs_add, dpc_xs_init, dpc_xs_round, dpc_xs_sum_column, dpc_xsum, dpc_xs_sum_span

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
#: The GMM E-step's float32 path uses its register-tile products from this number of features on.
F32_TILE_MIN_D = DPC_F32_TILE_MIN_D
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


def max_block_rows(Py_ssize_t n, Py_ssize_t per_block_doubles):
    """The most rows one block holds in any call on at most ``n`` rows, for partials of
    ``per_block_doubles`` doubles a block: ``CHUNK_SIZE * max(BLOCK_CHUNKS, ceil(c / cap))`` with
    ``c = ceil(n / CHUNK_SIZE)`` and ``cap = max(MIN_BLOCKS, PARTIAL_BUDGET // per_block_doubles)``
    (a bound of ``ceil(c' / block_count)`` chunks for every ``c' <= c``: BLOCK_CHUNKS until the
    partial budget caps the block count).  The sensitivity proofs' ``b``
    (``dpem_fast._engine._specs``, "Rounding")."""
    if n < 0:
        raise ValueError("n must be >= 0")
    cdef Py_ssize_t per = per_block_doubles if per_block_doubles > 1 else 1
    cdef Py_ssize_t c = dpc_chunk_count(n)
    cdef Py_ssize_t cap = DPC_PARTIAL_BUDGET // per
    if cap < DPC_MIN_BLOCKS:
        cap = DPC_MIN_BLOCKS
    cdef Py_ssize_t cpb = (c + cap - 1) // cap
    if cpb < DPC_BLOCK_CHUNKS:
        cpb = DPC_BLOCK_CHUNKS
    return DPC_CHUNK_SIZE * cpb


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


# The fewest values (blocks x entries) worth a parallel region in sum_blocks (about 0.5 ms of
# work: below it the region's start and barrier cost more, on a busy machine much more).  It changes no
# result: every entry is an exact sum, rounded once.
cdef enum:
    _SUM_PARALLEL_MIN = 1 << 18
    # values per task of all_finite / all_binary (any split gives their one-bit answer; this
    # one is fixed)
    _FINITE_BLOCK = 1 << 15


def sum_blocks(part, int n_threads=1):
    """Sum of the per-block partials ``part`` (shape ``(n_blocks, ...)``) over axis 0, exactly:
    every entry is the correctly rounded (to nearest, ties to even) value of the exact sum of
    its ``n_blocks`` partials (a superaccumulator, ``dpc_exactsum.h``).

    This is the reduction every kernel's caller runs.  The result does not depend on the order
    of the blocks nor on how the entries are split over the ``n_threads`` threads: it is
    bit-identical for any thread count and to
    ``np.array([math.fsum(part[:, j]) for j in ...])`` (finite inputs; IEEE rules for
    infinities and NaN, ``-0.0`` only when every partial is ``-0.0``).  So the rounding a
    neighbour's row changes stays inside its own block: the sensitivity proofs
    (``dpem_fast._engine._specs``, "Rounding") bound it there.  Zeros of shape
    ``part.shape[1:]`` when there are no blocks.
    """
    cdef Py_ssize_t nb = part.shape[0], m, j0, nspan, t
    shape = part.shape[1:]
    if nb == 0:
        return np.zeros(shape)
    cdef double[:, ::1] p = np.ascontiguousarray(part, dtype=np.float64).reshape(nb, -1)
    m = p.shape[1]
    out = np.empty(m)
    if m == 0:
        return out.reshape(shape)
    cdef double[::1] o = out
    cdef int nt = n_threads if n_threads > 1 and nb * m >= _SUM_PARALLEL_MIN else 1
    nspan = (m + DPC_XS_SPAN - 1) // DPC_XS_SPAN
    with nogil:
        for t in prange(nspan, num_threads=nt, schedule='static'):
            j0 = t * DPC_XS_SPAN
            dpc_xs_sum_span(&p[0, 0], nb, m, j0, j0 + DPC_XS_SPAN if j0 + DPC_XS_SPAN < m else m, &o[0])
    return out.reshape(shape)


def mirror_upper(double[:, :, ::1] s):       # INOUT (m, d, d)
    """Copy each matrix's strict upper triangle below its diagonal, in place: a kernel's summed
    second moments (upper triangle summed, lower left at +0.0) made symmetric, bit for bit.

    Equivalent to: ``np.copyto(s, s.transpose(0, 2, 1), where=np.tril(np.ones((d, d), bool), -1))``.
    """
    cdef Py_ssize_t m, i, j, d = s.shape[1]
    if s.shape[2] != d:
        raise ValueError("mirror_upper: the matrices must be square")
    for m in range(s.shape[0]):
        for i in range(1, d):
            for j in range(i):
                s[m, i, j] = s[m, j, i]


def sum_segments(values, bounds):
    """Exact sums of consecutive segments of each row of ``values``: ``out[j, s]`` is the
    correctly rounded (to nearest, ties to even) value of the exact sum of
    ``values[j, bounds[s]:bounds[s + 1]]`` (a superaccumulator, ``dpc_exactsum.h``; ``math.fsum``'s
    value), for ``values`` of shape ``(m, n)`` (a 1-D array is one row) and non-decreasing
    ``bounds`` of length ``k + 1`` within ``[0, n]``.  Returns shape ``(m, k)`` (``(k,)`` for a
    1-D ``values``).  The one-off releases' per-row terms are summed this way (the private
    start's cell sums, the unigram's word counts: ``dpem_fast._engine._specs``, "Rounding"), so
    their rounding does not depend on the order or number of the terms."""
    arr = np.asarray(values, dtype=np.float64)
    one = arr.ndim == 1
    cdef double[:, ::1] v = np.ascontiguousarray(arr.reshape(1, -1) if one else arr)
    cdef Py_ssize_t[::1] bd = np.ascontiguousarray(bounds, dtype=np.intp)
    cdef Py_ssize_t m = v.shape[0], n = v.shape[1], k = bd.shape[0] - 1, j, t, i
    if k < 0:
        raise ValueError("bounds must have at least one entry")
    for t in range(k):
        if bd[t] < 0 or bd[t] > bd[t + 1] or bd[t + 1] > n:
            raise ValueError("bounds must be non-decreasing within [0, n_values]")
    out = np.zeros((m, k))
    cdef double[:, ::1] o = out
    cdef dpc_xsum a
    with nogil:
        for j in range(m):
            for t in range(k):
                dpc_xs_init(&a)
                for i in range(bd[t], bd[t + 1]):
                    dpc_xs_add(&a, v[j, i])
                o[j, t] = dpc_xs_round(&a)
    return out[0] if one else out


def _flat_partials(part):
    """``(partials as a C-contiguous float64 (n_blocks, entries) array, the entries' shape)``:
    the layout both test hooks below walk."""
    return np.ascontiguousarray(part, dtype=np.float64).reshape(part.shape[0], -1), part.shape[1:]


def _sum_blocks_superaccumulator(part):
    """Test hook: :func:`sum_blocks` with every entry summed by the superaccumulator (its
    general path), without the certified fast path; the same values."""
    cdef Py_ssize_t nb = part.shape[0], m, j
    if nb == 0:
        return np.zeros(part.shape[1:])
    flat, shape = _flat_partials(part)
    cdef double[:, ::1] p = flat
    m = p.shape[1]
    out = np.empty(m)
    cdef double[::1] o = out
    with nogil:
        for j in range(m):
            o[j] = dpc_xs_sum_column(&p[0, 0], nb, m, j)
    return out.reshape(shape)


def _sum_blocks_sequential(part):
    """The reduction before issue 34: ``part[0] + part[1] + ... + part[n_blocks - 1]`` in
    float64, in block order (``np.add.reduce(part, axis=0)``).  Kept for the benchmark
    (``bench/bench_block_sum.py``) and for the test that shows why it was replaced: a change
    in one partial grows by about one ulp of the running sum per later block."""
    cdef Py_ssize_t nb = part.shape[0], m, j, b
    if nb == 0:
        return np.zeros(part.shape[1:])
    flat, shape = _flat_partials(part)
    cdef double[:, ::1] p = flat
    m = p.shape[1]
    out = np.empty(m)
    cdef double[::1] o = out
    with nogil:
        for j in range(m):
            o[j] = p[0, j]
        for b in range(1, nb):
            for j in range(m):
                o[j] = o[j] + p[b, j]
    return out.reshape(shape)


cdef struct _LowerArgs:
    const double *part
    double *out
    Py_ssize_t nb, d


cdef int _lower_row(const void *args, Py_ssize_t i, double *unused) noexcept nogil:
    """Row ``i`` of the lower triangle, span by span (the driver's body)."""
    cdef const _LowerArgs *a = <const _LowerArgs *> args
    cdef Py_ssize_t j0 = 0, j1, d = a.d
    while j0 <= i:
        j1 = j0 + DPC_XS_SPAN if j0 + DPC_XS_SPAN <= i + 1 else i + 1
        dpc_xs_sum_span(a.part, a.nb, d * d, i * d + j0, i * d + j1, a.out)
        j0 = j1
    return 0


def sum_blocks_lower(const double[:, :, ::1] part, int n_threads=1):
    """The exact sum over axis 0 of the lower triangles (diagonal included) of the ``(d, d)``
    partials ``part`` (shape ``(n_blocks, d, d)``): entry ``(i, j <= i)`` is the correctly
    rounded sum of ``part[:, i, j]``, the value :func:`sum_blocks` gives it; the upper triangle
    of ``part`` is never read (a kernel may leave it unwritten), and the result's is +0.0
    (``_moments.mirror_lower`` copies the lower triangle above).  Half the reads of
    :func:`sum_blocks` for a symmetric statistic kept in its lower triangle.  One row of the
    triangle a task of the kernels' driver (rows handed out one at a time balance it).

    Bit-identical for every thread count (each entry is one exact sum, rounded once).
    Equivalent to: ``np.tril(sum_blocks(np.tril(part)))`` (finite partials).
    """
    cdef Py_ssize_t nb = part.shape[0], d = part.shape[1]
    cdef _LowerArgs a
    if part.shape[2] != d:
        raise ValueError(f"part must hold square matrices, got shape {tuple(part.shape)}")
    out = np.zeros((d, d))
    if nb == 0 or d == 0:
        return out
    cdef double[:, ::1] o = out
    a.part, a.out, a.nb, a.d = &part[0, 0, 0], &o[0, 0], nb, d
    run_blocks(_lower_row, &a, d, 0,
               n_threads if nb * d * (d + 1) // 2 >= _SUM_PARALLEL_MIN else 1, "the lower-triangle sum")
    return out


cdef inline uint64_t _nonfinite(const floating *x, Py_ssize_t m) noexcept nogil:
    """1 when some ``x[:m]`` is NaN or infinite, else 0.  Such a value has every exponent bit
    set, so its exponent field plus one carries into the bit above the field: an OR of integers
    over the values, with no branch and no float operation (vectorisable)."""
    cdef Py_ssize_t i
    cdef uint64_t acc = 0, u
    cdef uint32_t v
    if floating is double:
        for i in range(m):
            memcpy(&u, &x[i], 8)
            acc |= ((u >> 52) & 0x7FF) + 1
        return (acc >> 11) & 1
    else:
        for i in range(m):
            memcpy(&v, &x[i], 4)
            acc |= ((v >> 23) & 0xFF) + 1
        return (acc >> 8) & 1


cdef inline uint64_t _nonbinary(const floating *x, Py_ssize_t m) noexcept nogil:
    """1 when some ``x[:m]`` is neither 0 (+0.0 or -0.0) nor 1, else 0: a value is refused when
    its bits without the sign are nonzero and its bits are not those of +1.0.  ``(y | -y) >>
    (width - 1)`` is 1 exactly when ``y != 0``: integer or, negate and shift alone, which the
    baseline (SSE2) build vectorises (64-bit compares it cannot)."""
    cdef Py_ssize_t i
    cdef uint64_t acc = 0, u, w, e
    cdef uint32_t v, wv, ev, acc32 = 0
    if floating is double:
        for i in range(m):
            memcpy(&u, &x[i], 8)
            w = u & 0x7FFFFFFFFFFFFFFFULL
            e = u ^ 0x3FF0000000000000ULL
            acc |= ((w | (0 - w)) >> 63) & ((e | (0 - e)) >> 63)
        return acc
    else:
        for i in range(m):
            memcpy(&v, &x[i], 4)
            wv = v & 0x7FFFFFFFU
            ev = v ^ 0x3F800000U
            acc32 |= ((wv | (0 - wv)) >> 31) & ((ev | (0 - ev)) >> 31)
        return acc32


cdef struct _FiniteArgs:
    const void *x
    Py_ssize_t m
    bint f32
    bint binary                   # the test: 0 or 1 (all_binary), else finite (all_finite)
    uint64_t *bad                 # (n_tasks,) one flag a task


cdef int _finite_block(const void *args, Py_ssize_t t, double *unused) noexcept nogil:
    """Block ``t`` of ``_FINITE_BLOCK`` values (the driver's body): its flag."""
    cdef const _FiniteArgs *a = <const _FiniteArgs *> args
    cdef Py_ssize_t lo = t * _FINITE_BLOCK
    cdef Py_ssize_t hi = lo + _FINITE_BLOCK if lo + _FINITE_BLOCK < a.m else a.m
    if a.f32:
        a.bad[t] = (_nonbinary(<const float *> a.x + lo, hi - lo) if a.binary
                    else _nonfinite(<const float *> a.x + lo, hi - lo))
    else:
        a.bad[t] = (_nonbinary(<const double *> a.x + lo, hi - lo) if a.binary
                    else _nonfinite(<const double *> a.x + lo, hi - lo))
    return 0


def _check_values(X, int n_threads, bint binary):
    """The one pass of :func:`all_finite` / :func:`all_binary`."""
    arr = np.asarray(X)
    if arr.dtype != np.float64 and arr.dtype != np.float32:
        raise TypeError(f"X must be float32 or float64, got {arr.dtype}")
    arr = np.ascontiguousarray(arr).reshape(-1)
    cdef Py_ssize_t m = arr.shape[0]
    if m == 0:
        return True
    cdef Py_ssize_t nblk = (m + _FINITE_BLOCK - 1) // _FINITE_BLOCK
    flags = np.zeros(nblk, dtype=np.uint64)
    cdef uint64_t[::1] f = flags
    cdef _FiniteArgs a
    cdef const double[::1] x64
    cdef const float[::1] x32
    a.m, a.bad, a.f32, a.binary = m, &f[0], arr.dtype == np.float32, binary
    if a.f32:
        x32 = arr
        a.x = &x32[0]
    else:
        x64 = arr
        a.x = &x64[0]
    run_blocks(_finite_block, &a, nblk, 0, n_threads if m >= _SUM_PARALLEL_MIN else 1,
               "the value check")
    return not flags.any()


def all_finite(X, int n_threads=1):
    """True when no value of the float32 or float64 array ``X`` (any shape) is NaN or infinite.

    The check every kernel's public face runs on its input, over ``n_threads`` threads: the
    values are cut into fixed blocks of ``2**15``, one task of the kernels' driver each, so the
    check scales with the kernel it guards (numpy's ``isfinite`` is one serial pass, and a bool
    array as large as the input).  A non-contiguous ``X`` is copied first.  The answer is the
    same for every thread count.

    Equivalent to: ``bool(np.all(np.isfinite(X)))``.
    """
    return _check_values(X, n_threads, False)


def all_binary(X, int n_threads=1):
    """True when every value of the float32 or float64 array ``X`` (any shape) is 0 (+0.0 or
    -0.0) or 1: the Bernoulli E-step's input check, threaded as :func:`all_finite` is.

    Equivalent to: ``bool(np.all((X == 0) | (X == 1)))``.
    """
    return _check_values(X, n_threads, True)
