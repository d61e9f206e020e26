"""Symmetric Gaussian noise matrices: N(0, sigma²) on the diagonal and N(0, (offdiag sigma)²)
above it, mirrored (``offdiag = 1``: Analyze-Gauss; ``1/√2``: the release layer's
Frobenius-weighted draw, :mod:`dpem_fast._engine._release`).

Row ``i`` of matrix ``m`` is one task: it draws the upper-triangle entries
``(i, j), j >= i`` from its own ChaCha20 stream ``stream0 + m * d + i`` and
writes them to row ``i`` (contiguous).  A second pass copies each upper entry
below the diagonal, one tile row per task (``_symmetric.pxd``), adding the
statistic ``value`` when one is given (the release: ``value + noise`` in one
pass, no noise matrix of its own).  Tasks never write the same element, so the
result is exactly symmetric and bit-identical for any thread count (the values
are those the draw-and-mirror of each row gave before issue 26).  The tasks are
run by the kernels' one parallel driver (``_driver.pxd``).
"""
from libc.stdint cimport uint32_t, uint64_t

from ._driver cimport run_blocks
from ._rng cimport dpc_stream, dpc_stream_init, dpc_stream_prefill, dpc_normal, dpc_normal_init
from ._symmetric cimport sym_from_upper, sym_tile_rows

dpc_normal_init()


cdef struct _Args:
    const uint32_t *key
    uint64_t stream0              # task r draws from stream stream0 + r
    double sigma
    double sigma_off              # sd above the diagonal (sigma * offdiag)
    double *out                   # (batch, d, d)
    const double *value           # (batch, d, d) or NULL
    Py_ssize_t d


cdef int _sym_normal_row(const void *args, Py_ssize_t r, double *unused) noexcept nogil:
    """Task ``r`` (the driver's body): row ``r % d`` of matrix ``r // d``, its upper
    triangle drawn."""
    cdef const _Args *a = <const _Args *> args
    cdef dpc_stream st
    cdef Py_ssize_t j, d = a.d, i = r % a.d
    cdef double *row = a.out + (r // d) * d * d + i * d
    dpc_stream_init(&st, a.key, a.stream0 + <uint64_t> r)
    if d - i < 256:                 # a short row: two words a normal, no 16-block refill
        dpc_stream_prefill(&st, <int> (2 * (d - i)))
    row[i] = a.sigma * dpc_normal(&st)
    for j in range(i + 1, d):
        row[j] = a.sigma_off * dpc_normal(&st)
    return 0


cdef int _sym_mirror(const void *args, Py_ssize_t t, double *unused) noexcept nogil:
    """Task ``t`` (the driver's body): tile row ``t % tiles`` of matrix ``t // tiles``, the
    drawn upper triangle mirrored (and added to the value)."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, tiles = sym_tile_rows(a.d), m = t // tiles
    sym_from_upper(a.out + m * d * d, NULL if a.value == NULL else a.value + m * d * d, d, t % tiles)
    return 0


def fill_symmetric_normal(const uint32_t[::1] key,           # IN  (8,)
                          uint64_t stream0,
                          double sigma,
                          double[:, :, ::1] out,              # OUT (batch, d, d)
                          int n_threads,
                          const double[:, :, ::1] value=None,  # IN  (batch, d, d) or None
                          double offdiag=1.0):
    """Fill each ``out[m]`` with a symmetric matrix, i.i.d. N(0, sigma²) on the diagonal and
    N(0, (sigma offdiag)²) above it, plus ``value[m]`` when given (``out`` must not share
    memory with it).  The draws do not depend on ``offdiag`` (it scales the same normals).

    Equivalent to: ``U = np.triu(Z, 1) * (sigma * offdiag) + diag(sigma * diag(Z));
    value + (U + np.triu(U, 1).T)`` per matrix.
    """
    cdef Py_ssize_t nb = out.shape[0], d = out.shape[1], n_tasks = nb * d
    cdef _Args a
    if out.shape[2] != d:
        raise ValueError("out must have shape (batch, d, d)")
    if value is not None and (value.shape[0] != nb or value.shape[1] != d or value.shape[2] != d):
        raise ValueError("value must have the shape of out")
    if n_tasks == 0:
        return
    a.key, a.stream0, a.sigma, a.out, a.d = &key[0], stream0, sigma, &out[0, 0, 0], d
    a.sigma_off = sigma * offdiag
    a.value = NULL if value is None else &value[0, 0, 0]
    if a.value != NULL and a.value < a.out + nb * d * d and a.out < a.value + nb * d * d:
        raise ValueError("out must not overlap value")
    run_blocks(_sym_normal_row, &a, n_tasks, 0, n_threads, "symmetric noise rows")
    run_blocks(_sym_mirror, &a, nb * sym_tile_rows(d), 0, n_threads, "symmetric noise tiles")
