# The one parallel driver of dpem_fast's kernels: every kernel that cuts its work into
# blocks runs them through run_blocks(), which owns the skeleton the drivers used to copy:
#
#   * at most min(n_threads, n_blocks) OpenMP threads, at least one;
#   * per-thread scratch of scratch_doubles doubles, malloc'ed once per thread (none when
#     scratch_doubles == 0), with a shared failure flag;
#   * one prange over the blocks, schedule='dynamic' (a thread delayed by a busy core does
#     not hold the others back), each block handed to the kernel's body;
#   * free, and MemoryError raised after the parallel region.
#
# The kernel supplies only its body: a block_body function that does block b with its
# thread's scratch, reading its arguments from a struct of its own (args).  Which thread
# runs a block, and in which order blocks run, never changes a result: block b owns row b
# of the kernel's partials (or writes outputs nobody else writes), and the caller sums the
# partials in block order.  The block count comes from the contract (dpc_contract.h):
# dpc_block_count / dpc_lda_block_count with dpc_plan_blocks for kernels with per-block
# partials; run_row_chunks cuts per-row passes by the same rule (no partials).
from cython cimport floating
from libc.stdlib cimport malloc, free
from cython.parallel cimport parallel, prange

from .dpc_contract cimport (
    dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)

# Block b of a kernel's pass, with the calling thread's scratch (NULL when the kernel asked
# for none).  Returns 0, or nonzero when the block could not allocate what it needs (the
# driver then raises MemoryError once the parallel region is over).
ctypedef int (*block_body)(const void *args, Py_ssize_t b, double *scratch) noexcept nogil


cdef inline int run_blocks(block_body body, const void *args, Py_ssize_t n_blocks,
                           Py_ssize_t scratch_doubles, int n_threads, str what) except -1:
    """Run ``body(args, b, scratch)`` for b in [0, n_blocks) over at most ``n_threads``
    threads; raise ``MemoryError("could not allocate " + what)`` if a thread's scratch or a
    block's own allocation failed (the blocks of that thread are then not run)."""
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *scratch
    cdef Py_ssize_t b
    if n_blocks <= 0:
        return 0
    if n_threads > n_blocks:
        n_threads = <int> n_blocks
    if n_threads < 1:
        n_threads = 1
    if n_threads == 1:
        # one thread: the same blocks in order, without entering an OpenMP region (its
        # fork/join and dynamic-schedule bookkeeping cost microseconds a call, which the
        # samplers of a small release and a small E-step pay every iteration)
        with nogil:
            scratch = NULL
            if scratch_doubles > 0:
                scratch = <double *> malloc(scratch_doubles * sizeof(double))
                if scratch == NULL:
                    failed = 1
            if failed == 0:
                for b in range(n_blocks):
                    if body(args, b, scratch) != 0:
                        failed = 1
            free(scratch)
        if failed:
            raise MemoryError("could not allocate " + what)
        return 0
    with nogil, parallel(num_threads=n_threads):
        scratch = NULL
        if scratch_doubles > 0:
            scratch = <double *> malloc(scratch_doubles * sizeof(double))
            if scratch == NULL:
                failed_p[0] = 1
        for b in prange(n_blocks, schedule='dynamic'):
            if scratch != NULL or scratch_doubles == 0:
                if body(args, b, scratch) != 0:
                    failed_p[0] = 1
        free(scratch)
    if failed:
        raise MemoryError("could not allocate " + what)
    return 0


# The body of a kernel over the rows X of a float32 or float64 array: block b, with X (the
# whole array) typed.  A kernel writes one fused body over ``floating`` and hands both
# specialisations (body[float], body[double]) to run_row_blocks, which calls the one that
# matches X.
ctypedef int (*rows_body_f32)(const float *X, const void *args, Py_ssize_t b,
                              double *scratch) noexcept nogil
ctypedef int (*rows_body_f64)(const double *X, const void *args, Py_ssize_t b,
                              double *scratch) noexcept nogil

cdef struct _rows_call:
    const void *X
    bint f32
    rows_body_f32 body_f32
    rows_body_f64 body_f64
    const void *args
    dpc_block_plan plan           # run_row_chunks: the chunks of each block


cdef inline int _rows_body(const void *call, Py_ssize_t b, double *scratch) noexcept nogil:
    cdef const _rows_call *r = <const _rows_call *> call
    if r.f32:
        return r.body_f32(<const float *> r.X, r.args, b, scratch)
    return r.body_f64(<const double *> r.X, r.args, b, scratch)


cdef inline int run_row_blocks(const floating *X, rows_body_f32 body_f32, rows_body_f64 body_f64,
                               const void *args, Py_ssize_t n_blocks, Py_ssize_t scratch_doubles,
                               int n_threads, str what) except -1:
    """run_blocks for a body over the rows ``X``: ``body_f32(X, args, b, scratch)`` or
    ``body_f64(...)``, as X is float32 or float64."""
    cdef _rows_call r
    _set_rows_call(&r, X, body_f32, body_f64, args)
    return run_blocks(_rows_body, &r, n_blocks, scratch_doubles, n_threads, what)


cdef inline void _set_rows_call(_rows_call *r, const floating *X, rows_body_f32 body_f32,
                                rows_body_f64 body_f64, const void *args) noexcept:
    r.X = X
    r.f32 = floating is float
    r.body_f32 = body_f32
    r.body_f64 = body_f64
    r.args = args


cdef inline int _chunks_body(const void *call, Py_ssize_t b, double *scratch) noexcept nogil:
    cdef const _rows_call *r = <const _rows_call *> call
    cdef Py_ssize_t c
    for c in range(dpc_plan_first(&r.plan, b), dpc_plan_end(&r.plan, b)):
        if _rows_body(call, c, scratch) != 0:
            return 1
    return 0


cdef inline int run_row_chunks(const floating *X, Py_ssize_t n, rows_body_f32 body_f32,
                               rows_body_f64 body_f64, const void *args,
                               Py_ssize_t scratch_doubles, int n_threads, str what) except -1:
    """A per-row pass over the n rows ``X`` (outputs per row or per chunk, no per-block
    partials): ``body(X, args, c, scratch)`` for every chunk c, the chunks grouped into the
    contract's blocks (``dpc_block_count(n, 0)``) and the blocks run by run_blocks."""
    cdef _rows_call r
    _set_rows_call(&r, X, body_f32, body_f64, args)
    r.plan = dpc_plan_blocks(dpc_chunk_count(n), dpc_block_count(n, 0))
    return run_blocks(_chunks_body, &r, r.plan.n_busy, scratch_doubles, n_threads, what)
