"""Symmetric (Analyze-Gauss) noise matrices.

Row ``i`` of matrix ``m`` is one task: it draws the upper-triangle entries
``(i, j), j >= i`` from its own ChaCha20 stream ``stream0 + m * d + i`` and
writes each value to ``(i, j)`` and ``(j, i)``.  Tasks never write the same
element, so the mirror needs no synchronisation, the result is exactly
symmetric, and it is bit-identical for any thread count.
"""
from cython.parallel cimport prange, parallel
from libc.stdint cimport uint32_t, uint64_t

from ._rng cimport dpc_stream, dpc_stream_init, dpc_normal, dpc_normal_init

dpc_normal_init()


cdef void _sym_normal_row(const uint32_t *key, uint64_t stream, double sigma,
                          double *mat, Py_ssize_t d, Py_ssize_t i) noexcept nogil:
    cdef dpc_stream st
    cdef Py_ssize_t j
    cdef double v
    dpc_stream_init(&st, key, stream)
    for j in range(i, d):
        v = sigma * dpc_normal(&st)
        mat[i * d + j] = v
        mat[j * d + i] = v


def fill_symmetric_normal(const uint32_t[::1] key,      # IN  (8,)
                          uint64_t stream0,
                          double sigma,
                          double[:, :, ::1] out,         # OUT (batch, d, d)
                          int n_threads):
    """Fill each ``out[m]`` with a symmetric matrix, i.i.d. N(0, sigma²) on and above the diagonal.

    Equivalent to: ``U = np.triu(sigma * Z); U + np.triu(U, 1).T`` per matrix.
    """
    cdef Py_ssize_t nb = out.shape[0], d = out.shape[1], n_tasks = nb * d, r
    if out.shape[2] != d:
        raise ValueError("out must have shape (batch, d, d)")
    if n_tasks == 0:
        return
    n_threads = max(1, min(n_threads, n_tasks))
    with nogil, parallel(num_threads=n_threads):
        for r in prange(n_tasks, schedule='static'):
            _sym_normal_row(&key[0], stream0 + <uint64_t>r, sigma, &out[r // d, 0, 0], d, r % d)
