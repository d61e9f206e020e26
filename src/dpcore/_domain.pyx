"""Per-feature histograms of the private domain estimate (dpem_fast._engine._domain).

Two bin maps, both data-independent:

* ``scale_histogram``: the bin of a value is its sign and binary exponent — ``ZERO_BIN``
  for 0, ``ZERO_BIN ± (e - E_MIN + 1)`` for a value with ``frexp`` exponent e (so
  ``2^(e-1) <= |x| < 2^e``), e in [E_MIN, E_MAX] = [-1073, 1024]: every double has a bin.
* ``refine_histogram``: ``B`` equal-width bins of ``[lo_j, hi_j]`` per feature, rows clipped
  to the box first: ``floor((clip(x, lo, hi) / 2 - lo / 2) / (hi / 2 - lo / 2) * B)``,
  clamped to [0, B - 1] (halves: no overflow when ``hi - lo`` exceeds DBL_MAX).

Counts are int64, so the partial histograms of the threads add exactly in any order: the
result does not depend on the thread count.  Each thread owns one slice of the
``(n_threads, d, n_bins)`` partials; the caller sums them.  Rows are cut into the
contract's blocks (``dpc_block_count(n, 0)``: no per-block partials) and the blocks run by
the kernels' one parallel driver (``_driver.pxd``).  Equivalent to the numpy twins in
``dpem_fast._reference.domain``.
"""
from cython cimport floating
from libc.math cimport floor, frexp
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from ._driver cimport run_row_blocks
from ._omp cimport omp_get_thread_num
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_plan_blocks,
    dpc_plan_end, dpc_plan_first,
)

E_MIN = -1073
E_MAX = 1024
ZERO_BIN = E_MAX - E_MIN + 1          # 2098 exponents on each side of the zero bin
SCALE_BINS = 2 * ZERO_BIN + 1
cdef int _E_MIN = -1073
cdef Py_ssize_t _ZERO = 2098


cdef inline Py_ssize_t _scale_bin(double v) noexcept nogil:
    """The bin of v; the exponent of a normal double read from its bits (frexp's e is the
    biased exponent minus 1022), frexp itself for zeros and subnormals."""
    cdef uint64_t bits
    cdef int e
    memcpy(&bits, &v, 8)
    e = <int> ((bits >> 52) & 0x7FF)
    if e == 0:
        if v == 0.0:
            return _ZERO
        frexp(v, &e)
    else:
        e -= 1022
    if bits >> 63:
        return _ZERO - (e - _E_MIN + 1)
    return _ZERO + (e - _E_MIN + 1)


cdef struct _Args:
    # what a block reads (from the driver's arguments) and writes
    Py_ssize_t n, d, B            # B: bins per feature
    dpc_block_plan plan           # the chunks of each block
    const double *lo              # refine_histogram: (d,) box edges
    const double *hi
    int64_t *partial              # (n_threads, d, B): the calling thread's slice is its own


cdef void _set_args(_Args *a, Py_ssize_t n, Py_ssize_t d, Py_ssize_t B, int64_t *partial) noexcept:
    a.n, a.d, a.B, a.partial = n, d, B, partial
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), dpc_block_count(n, 0))
    a.lo = a.hi = NULL


cdef int _scale_block(const floating *X, const void *args, Py_ssize_t b,
                      double *unused) noexcept nogil:
    """Block ``b`` of scale_histogram (the driver's body), into the thread's partial."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, r, j
    cdef Py_ssize_t r1 = min(a.n, dpc_plan_end(&a.plan, b) * DPC_CHUNK_SIZE)
    cdef int64_t *h = a.partial + omp_get_thread_num() * d * a.B
    for r in range(dpc_plan_first(&a.plan, b) * DPC_CHUNK_SIZE, r1):
        for j in range(d):
            h[j * a.B + _scale_bin(<double> X[r * d + j])] += 1
    return 0


def scale_histogram(const floating[:, ::1] X,        # IN  (n, d) finite values
                    int64_t[:, :, ::1] partial,       # OUT (n_threads, d, SCALE_BINS), zeroed here
                    int n_threads):
    """Per-feature counts of the sign / binary-exponent bins, one partial per thread.

    Equivalent to: ``np.bincount`` per feature of ``ZERO_BIN + sign(x) * (frexp(x)[1] - E_MIN
    + 1)`` (``ZERO_BIN`` for 0).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef _Args a
    if partial.shape[0] < n_threads or partial.shape[1] != d or partial.shape[2] != SCALE_BINS:
        raise ValueError("partial must have shape (>= n_threads, n_features, SCALE_BINS)")
    partial[:, :, :] = 0
    if n == 0 or d == 0:
        return
    _set_args(&a, n, d, SCALE_BINS, &partial[0, 0, 0])
    run_row_blocks(&X[0, 0], _scale_block[float], _scale_block[double], &a, a.plan.n_busy, 0,
                   n_threads, "histogram blocks")


cdef int _refine_block(const floating *X, const void *args, Py_ssize_t b,
                       double *unused) noexcept nogil:
    """Block ``b`` of refine_histogram (the driver's body), into the thread's partial."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, B = a.B, r, j, k
    cdef Py_ssize_t r1 = min(a.n, dpc_plan_end(&a.plan, b) * DPC_CHUNK_SIZE)
    cdef const double *lo = a.lo
    cdef const double *hi = a.hi
    cdef double v, width, f
    cdef int64_t *h = a.partial + omp_get_thread_num() * d * B
    for r in range(dpc_plan_first(&a.plan, b) * DPC_CHUNK_SIZE, r1):
        for j in range(d):
            v = <double> X[r * d + j]
            v = lo[j] if v < lo[j] else (hi[j] if v > hi[j] else v)
            width = hi[j] / 2 - lo[j] / 2
            f = floor((v / 2 - lo[j] / 2) / width * B)
            k = 0 if f < 0 else (B - 1 if f > B - 1 else <Py_ssize_t> f)
            h[j * B + k] += 1
    return 0


def refine_histogram(const floating[:, ::1] X,       # IN  (n, d)
                     const double[::1] lo,           # IN  (d,) box lower edges
                     const double[::1] hi,           # IN  (d,) box upper edges, hi > lo
                     int64_t[:, :, ::1] partial,     # OUT (n_threads, d, n_bins), zeroed here
                     int n_threads):
    """Per-feature counts of ``n_bins`` equal-width bins of the box, one partial per thread.

    Equivalent to: ``clip(floor((clip(x, lo, hi) / 2 - lo / 2) / (hi / 2 - lo / 2) * n_bins),
    0, n_bins - 1)`` per value, then counts per feature.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], B = partial.shape[2], j
    cdef _Args a
    if partial.shape[0] < n_threads or partial.shape[1] != d or lo.shape[0] != d or hi.shape[0] != d:
        raise ValueError("partial must have shape (>= n_threads, n_features, n_bins); lo, hi (n_features,)")
    for j in range(d):
        if not hi[j] > lo[j]:
            raise ValueError("every box must have hi > lo")
    partial[:, :, :] = 0
    if n == 0 or B == 0 or d == 0:
        return
    _set_args(&a, n, d, B, &partial[0, 0, 0])
    a.lo, a.hi = &lo[0], &hi[0]
    run_row_blocks(&X[0, 0], _refine_block[float], _refine_block[double], &a, a.plan.n_busy, 0,
                   n_threads, "histogram blocks")
