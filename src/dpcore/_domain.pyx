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
``(n_threads, d, n_bins)`` partials; the caller sums them.  Equivalent to the numpy twins
in ``dpem_fast._reference.domain``.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.math cimport floor, frexp
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from ._omp cimport omp_get_thread_num

E_MIN = -1073
E_MAX = 1024
ZERO_BIN = E_MAX - E_MIN + 1          # 2098 exponents on each side of the zero bin
SCALE_BINS = 2 * ZERO_BIN + 1
cdef int _E_MIN = -1073
cdef Py_ssize_t _ZERO = 2098
cdef Py_ssize_t _ROWS = 1024           # rows per work item


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


def scale_histogram(const floating[:, ::1] X,        # IN  (n, d) finite values
                    int64_t[:, :, ::1] partial,       # OUT (n_threads, d, SCALE_BINS), zeroed here
                    int n_threads):
    """Per-feature counts of the sign / binary-exponent bins, one partial per thread.

    Equivalent to: ``np.bincount`` per feature of ``ZERO_BIN + sign(x) * (frexp(x)[1] - E_MIN
    + 1)`` (``ZERO_BIN`` for 0).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nb = (n + _ROWS - 1) // _ROWS
    cdef Py_ssize_t b, r, j, t
    cdef int64_t *h
    if partial.shape[0] < n_threads or partial.shape[1] != d or partial.shape[2] != SCALE_BINS:
        raise ValueError("partial must have shape (>= n_threads, n_features, SCALE_BINS)")
    partial[:, :, :] = 0
    if n == 0:
        return
    n_threads = max(1, min(n_threads, nb))
    with nogil, parallel(num_threads=n_threads):
        for b in prange(nb, schedule='dynamic'):
            t = omp_get_thread_num()
            h = &partial[t, 0, 0]
            for r in range(b * _ROWS, min(n, (b + 1) * _ROWS)):
                for j in range(d):
                    h[j * (2 * _ZERO + 1) + _scale_bin(<double> X[r, j])] += 1


def refine_histogram(const floating[:, ::1] X,       # IN  (n, d)
                     const double[::1] lo,           # IN  (d,) box lower edges
                     const double[::1] hi,           # IN  (d,) box upper edges, hi > lo
                     int64_t[:, :, ::1] partial,     # OUT (n_threads, d, n_bins), zeroed here
                     int n_threads):
    """Per-feature counts of ``n_bins`` equal-width bins of the box, one partial per thread.

    Equivalent to: ``clip(floor((clip(x, lo, hi) / 2 - lo / 2) / (hi / 2 - lo / 2) * n_bins),
    0, n_bins - 1)`` per value, then counts per feature.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nb = (n + _ROWS - 1) // _ROWS
    cdef Py_ssize_t B = partial.shape[2], b, r, j, t, k
    cdef double v, width, f
    cdef int64_t *h
    if partial.shape[0] < n_threads or partial.shape[1] != d or lo.shape[0] != d or hi.shape[0] != d:
        raise ValueError("partial must have shape (>= n_threads, n_features, n_bins); lo, hi (n_features,)")
    for j in range(d):
        if not hi[j] > lo[j]:
            raise ValueError("every box must have hi > lo")
    partial[:, :, :] = 0
    if n == 0 or B == 0:
        return
    n_threads = max(1, min(n_threads, nb))
    with nogil, parallel(num_threads=n_threads):
        for b in prange(nb, schedule='dynamic'):
            t = omp_get_thread_num()
            h = &partial[t, 0, 0]
            for r in range(b * _ROWS, min(n, (b + 1) * _ROWS)):
                for j in range(d):
                    v = <double> X[r, j]
                    v = lo[j] if v < lo[j] else (hi[j] if v > hi[j] else v)
                    width = hi[j] / 2 - lo[j] / 2
                    f = floor((v / 2 - lo[j] / 2) / width * B)
                    k = 0 if f < 0 else (B - 1 if f > B - 1 else <Py_ssize_t> f)
                    h[j * B + k] += 1
