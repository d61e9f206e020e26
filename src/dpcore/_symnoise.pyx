"""Symmetric Gaussian noise matrices: N(0, sigma²) on the diagonal and N(0, (offdiag sigma)²)
above it, mirrored (``offdiag = 1``: Analyze-Gauss; ``1/√2``: the release layer's
Frobenius-weighted draw, :mod:`dpem_fast._engine._release`).

Row ``i`` of matrix ``m`` draws the upper-triangle entries ``(i, j), j >= i``
from its own ChaCha20 stream ``stream0 + m * d + i`` and writes them to row
``i`` (contiguous); eight consecutive rows are one task, whose short rows'
first key-stream blocks are one 8-lane pass (issue 41; the same draws).  A second pass copies each upper entry
below the diagonal, one tile row per task (``_symmetric.pxd``), adding the
statistic ``value`` when one is given (the release: ``value + noise`` in one
pass, no noise matrix of its own).  Tasks never write the same element, so the
result is exactly symmetric and bit-identical for any thread count (the values
are those the draw-and-mirror of each row gave before issue 26).  The tasks are
run by the kernels' one parallel driver (``_driver.pxd``).
"""
from libc.stdint cimport uint32_t, uint64_t

from ._driver cimport run_blocks
from ._rng cimport (dpc_chacha20_streams8, dpc_normal, dpc_normal_init, dpc_prefill_blocks, dpc_stream,
                   dpc_stream_from_lanes, dpc_stream_init, dpc_stream_prefill)
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
    Py_ssize_t n_rows             # batch * d


cdef enum:
    _GROUP = 8        # rows a draw task: their streams' first blocks in one 8-lane pass


cdef int _sym_normal_rows(const void *args, Py_ssize_t g, double *unused) noexcept nogil:
    """Task ``g`` (the driver's body): rows ``r`` in ``[8 g, 8 g + 8)`` (row ``r % d`` of
    matrix ``r // d``), their upper triangles drawn, each from its own stream as before.
    A short row's first blocks (``dpc_stream_prefill``'s one or two) come from one 8-lane
    pass over the group's consecutive streams per block counter: the same key stream, so
    the same draws, for about a third of the scalar blocks' cost."""
    cdef const _Args *a = <const _Args *> args
    cdef dpc_stream st
    cdef uint32_t lanes[2 * 128]
    cdef Py_ssize_t j, r, d = a.d, i, r0 = g * _GROUP, r1 = min(a.n_rows, r0 + _GROUP)
    cdef int c, nb, need = 0
    cdef double *row
    for r in range(r0, r1):
        nb = dpc_prefill_blocks(<int> (2 * (d - r % d)))
        if nb <= 2 and nb > need:
            need = nb
    for c in range(need):
        dpc_chacha20_streams8(a.key, <uint64_t> c, a.stream0 + <uint64_t> r0, lanes + 128 * c)
    for r in range(r0, r1):
        i = r % d
        row = a.out + (r // d) * d * d + i * d
        dpc_stream_init(&st, a.key, a.stream0 + <uint64_t> r)
        if dpc_prefill_blocks(<int> (2 * (d - i))) <= 2:
            dpc_stream_from_lanes(&st, lanes, <int> (r - r0), <int> (2 * (d - i)))
        elif d - i < 256:           # a short row: two words a normal, no 16-block refill
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
    a.key, a.stream0, a.sigma, a.out, a.d, a.n_rows = &key[0], stream0, sigma, &out[0, 0, 0], d, n_tasks
    a.sigma_off = sigma * offdiag
    a.value = NULL if value is None else &value[0, 0, 0]
    if a.value != NULL and a.value < a.out + nb * d * d and a.out < a.value + nb * d * d:
        raise ValueError("out must not overlap value")
    run_blocks(_sym_normal_rows, &a, (n_tasks + _GROUP - 1) // _GROUP, 0, n_threads, "symmetric noise rows")
    run_blocks(_sym_mirror, &a, nb * sym_tile_rows(d), 0, n_threads, "symmetric noise tiles")
