"""Symmetric (Analyze-Gauss) noise matrices.

Row ``i`` of matrix ``m`` is one task: it draws the upper-triangle entries
``(i, j), j >= i`` from its own ChaCha20 stream ``stream0 + m * d + i`` and
writes each value to ``(i, j)`` and ``(j, i)``.  Tasks never write the same
element, so the mirror needs no synchronisation, the result is exactly
symmetric, and it is bit-identical for any thread count.  The tasks are run by
the kernels' one parallel driver (``_driver.pxd``).
"""
from libc.stdint cimport uint32_t, uint64_t

from ._driver cimport run_blocks
from ._rng cimport dpc_stream, dpc_stream_init, dpc_normal, dpc_normal_init

dpc_normal_init()


cdef struct _Args:
    const uint32_t *key
    uint64_t stream0              # task r draws from stream stream0 + r
    double sigma
    double *out                   # (batch, d, d)
    Py_ssize_t d


cdef int _sym_normal_row(const void *args, Py_ssize_t r, double *unused) noexcept nogil:
    """Task ``r`` (the driver's body): row ``r % d`` of matrix ``r // d``, upper triangle
    drawn and mirrored."""
    cdef const _Args *a = <const _Args *> args
    cdef dpc_stream st
    cdef Py_ssize_t j, d = a.d, i = r % a.d
    cdef double *mat = a.out + (r // d) * d * d
    cdef double v
    dpc_stream_init(&st, a.key, a.stream0 + <uint64_t> r)
    for j in range(i, d):
        v = a.sigma * dpc_normal(&st)
        mat[i * d + j] = v
        mat[j * d + i] = v
    return 0


def fill_symmetric_normal(const uint32_t[::1] key,      # IN  (8,)
                          uint64_t stream0,
                          double sigma,
                          double[:, :, ::1] out,         # OUT (batch, d, d)
                          int n_threads):
    """Fill each ``out[m]`` with a symmetric matrix, i.i.d. N(0, sigma²) on and above the diagonal.

    Equivalent to: ``U = np.triu(sigma * Z); U + np.triu(U, 1).T`` per matrix.
    """
    cdef Py_ssize_t nb = out.shape[0], d = out.shape[1], n_tasks = nb * d
    cdef _Args a
    if out.shape[2] != d:
        raise ValueError("out must have shape (batch, d, d)")
    if n_tasks == 0:
        return
    a.key, a.stream0, a.sigma, a.out, a.d = &key[0], stream0, sigma, &out[0, 0, 0], d
    run_blocks(_sym_normal_row, &a, n_tasks, 0, n_threads, "symmetric noise rows")
