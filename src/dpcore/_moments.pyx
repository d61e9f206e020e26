"""Blocked, thread-parallel second moment of clipped rows (factor analysis, DP-EM Sec. 6).

One pass over ``X`` computes the additive statistics of the data second moment::

    S1 = sum_i x_i          S2 = sum_i x_i x_i^T          (x_i: the row, mapped into the
                                                           unit ball of a declared domain)

as float64, with a symmetric rank-k update (BLAS ``dsyrk``/``dgemm`` through
``scipy.linalg.cython_blas``; the caller holds BLAS to one thread).  Rows are loaded and
clipped by the shared row loader (``dpc_rows.h``), as in the mixture E-step.

Work layout (part of the reproducibility contract; change only with a changelog note)
--------------------------------------------------------------------------------
Rows are cut into chunks of ``CHUNK_SIZE``.  Two layouts, chosen by ``d`` only:

* ``d < TILE_MIN_D`` ("rows"): consecutive chunks form ``n_blocks = block_count(n, d)``
  blocks (``dpc_block_count(n, d * d + d)``); block ``b`` owns row ``b`` of the partials
  and walks its chunks in order, each chunk loaded into a per-thread scratch and added by
  one ``dsyrk``.  The caller sums the partials in block order;
* ``d >= TILE_MIN_D`` ("tiles"; the d x d partials of several blocks would not fit):
  phase 1 loads every chunk (in parallel, static) into one column-major (n, d) float64
  copy of the clipped rows; phase 2 splits the lower triangle of S2 into
  ``TILE x TILE`` tiles and computes each tile with one BLAS call over all n rows
  (``dsyrk`` on the diagonal, ``dgemm`` off it), tiles handed out dynamically.  Each
  output entry is computed by one call whatever the thread count, so no reduction is
  needed.  S1 comes from per-chunk partials summed in chunk order.

Either way the result is bit-identical for every thread count.  S2 is filled in its lower
triangle (row-major); :func:`mirror_lower` copies it above the diagonal.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from scipy.linalg.cython_blas cimport dgemm, dsyrk

from .dpc_contract cimport DPC_CHUNK_SIZE, dpc_block_count, dpc_chunk_count, dpc_chunks_per_block
from .dpc_rows cimport load_rows, load_rows_domain

cdef enum:
    # d from which the "tiles" layout is used: a fixed constant of this kernel (chosen when
    # MIN_BLOCKS d x d partials first exceeded the 16 MiB budget of the time; kept when
    # the budget grew, so that factor analysis keeps its layout)
    _TILE_MIN_D = 513
    # tile edge of the "tiles" layout
    _TILE = 256

TILE_MIN_D = _TILE_MIN_D
TILE = _TILE


def block_count(Py_ssize_t n, Py_ssize_t d):
    """Rows of the partial arrays for ``n`` rows of ``d`` features; independent of threads.

    "rows" layout (d < TILE_MIN_D): ``dpc_block_count(n, d * d + d)`` S2 partials and as
    many S1 partials.  "tiles" layout: 1 S2 partial and one S1 partial per chunk.
    Returns ``(n_s2_blocks, n_s1_blocks)`` ((0, 0) when n == 0).
    """
    if n == 0:
        return 0, 0
    if d < TILE_MIN_D:
        nb = dpc_block_count(n, d * d + d)
        return nb, nb
    return 1, dpc_chunk_count(n)


cdef Py_ssize_t _load_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr, Py_ssize_t d,
                            Py_ssize_t ld, const double *dom, double inv_scale, double target,
                            double *Yt, double *s1) noexcept nogil:
    """Rows [r0, r0 + nr) into column-major Yt (ld), clipped if ``dom``; s1 += their sum."""
    cdef Py_ssize_t i, r, n_clipped = 0
    cdef double acc
    if dom == NULL:
        load_rows(X + r0 * d, d, nr, nr, ld, Yt)
    else:
        n_clipped = load_rows_domain(X + r0 * d, d, nr, nr, ld, dom, inv_scale, target, Yt)
    for i in range(d):
        acc = 0.0
        for r in range(nr):
            acc = acc + Yt[i * ld + r]
        s1[i] += acc
    return n_clipped


cdef Py_ssize_t _rows_block(const floating *X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t b,
                            Py_ssize_t cpb, const double *dom, double inv_scale, double target,
                            double *s2, double *s1, double *Xt) noexcept nogil:
    """Block ``b`` of the "rows" layout: its chunks in order, one dsyrk each."""
    cdef Py_ssize_t c, r0, nr, n_clipped = 0
    cdef Py_ssize_t c1 = min(dpc_chunk_count(n), (b + 1) * cpb)
    cdef int dd = <int> d, k, ld = <int> DPC_CHUNK_SIZE
    cdef double one = 1.0
    for c in range(b * cpb, c1):
        r0 = c * DPC_CHUNK_SIZE
        nr = min(DPC_CHUNK_SIZE, n - r0)
        n_clipped += _load_chunk(X, r0, nr, d, DPC_CHUNK_SIZE, dom, inv_scale, target, Xt, s1)
        k = <int> nr
        # column-major upper of s2 (= row-major lower) += Xt^T Xt, Xt: nr x d column-major
        dsyrk(b'U', b'T', &dd, &k, &one, Xt, &ld, &one, s2, &dd)
    return n_clipped


cdef void _tile(const double *Yt, Py_ssize_t n, Py_ssize_t d, Py_ssize_t t,
                double *s2) noexcept nogil:
    """Tile ``t`` of the lower triangle (row-major) of S2 = Y^T Y, Y column-major (n, d)."""
    cdef Py_ssize_t nt = (d + _TILE - 1) // _TILE
    cdef Py_ssize_t I = 0, J, rem = t
    cdef int m, nn, k = <int> n, ld = <int> n, ldc = <int> d
    cdef double one = 1.0, zero = 0.0
    # tiles are numbered column by column of the column-major upper triangle: (I <= J)
    J = 0
    while rem > J:
        rem -= J + 1
        J += 1
    I = rem
    m = <int> min(_TILE, d - I * _TILE)
    nn = <int> min(_TILE, d - J * _TILE)
    if I == J:
        dsyrk(b'U', b'T', &m, &k, &one, <double *> Yt + I * _TILE * n, &ld, &zero,
              s2 + I * _TILE * d + I * _TILE, &ldc)
    else:
        dgemm(b'T', b'N', &m, &nn, &k, &one, <double *> Yt + I * _TILE * n, &ld,
              <double *> Yt + J * _TILE * n, &ld, &zero, s2 + J * _TILE * d + I * _TILE, &ldc)


def second_moment(const floating[:, ::1] X,          # IN  (n, d) rows
                  double[:, :, ::1] part_s2,         # OUT (n_s2_blocks, d, d) lower triangle
                  double[:, ::1] part_s1,            # OUT (n_s1_blocks, d)
                  long long[::1] part_clipped,       # OUT (n_s1_blocks,) rows clipped
                  int n_threads,
                  const double[:, ::1] domain=None,  # IN  (3, d) lower, upper, center; None = raw X
                  double inv_scale=1.0,              # 1 / radius of the declared domain
                  double clip_target=1.0):           # norm given to rows beyond the unit ball
    """Per-block float64 partials of ``S1 = sum_i x_i`` and the lower triangle of
    ``S2 = sum_i x_i x_i^T`` (DP-EM Sec. 6, Lambda = S2 / N), rows clipped into the unit
    ball of ``domain`` while they are loaded.

    The partial arrays must have the shapes :func:`block_count` gives; the caller sums them
    over axis 0 in order and mirrors S2 (:func:`mirror_lower`).  BLAS must be held to one
    thread.

    Equivalent to: ``Z = scale_and_clip(X, domain)[0]`` (or ``X``), then
    ``(Z.T @ Z, Z.sum(0), n_clipped)`` split over blocks.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n)
    cdef Py_ssize_t nb2, nb1, cpb, b, c, t, n_tiles, nt
    cdef const double *dom = NULL
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    cdef double *Yt
    cdef long long *clip = &part_clipped[0] if part_clipped.shape[0] > 0 else NULL
    nb2, nb1 = block_count(n, d)
    if (part_s2.shape[0] != nb2 or part_s2.shape[1] != d or part_s2.shape[2] != d
            or part_s1.shape[0] != nb1 or part_s1.shape[1] != d or part_clipped.shape[0] != nb1):
        raise ValueError("partial arrays must have the shapes block_count(n, d) gives")
    if domain is not None:
        if domain.shape[0] != 3 or domain.shape[1] != d:
            raise ValueError("domain must have shape (3, n_features)")
        if not (inv_scale > 0.0 and 0.0 < clip_target <= 1.0):
            raise ValueError("inv_scale must be > 0 and clip_target in (0, 1]")
    if n == 0 or d == 0:
        return
    part_s2[:, :, :] = 0.0
    part_s1[:, :] = 0.0
    part_clipped[:] = 0
    if domain is not None:
        dom = &domain[0, 0]
    if d < _TILE_MIN_D:
        cpb = dpc_chunks_per_block(n_chunks, nb2)
        nb2 = dpc_chunks_per_block(n_chunks, cpb)    # blocks actually used; the rest stay 0
        n_threads = max(1, min(n_threads, nb2))
        with nogil, parallel(num_threads=n_threads):
            buf = <double *> malloc(DPC_CHUNK_SIZE * d * sizeof(double))
            if buf == NULL:
                failed_p[0] = 1
            for b in prange(nb2, schedule='dynamic'):
                if buf != NULL:
                    clip[b] = _rows_block(&X[0, 0], n, d, b, cpb, dom, inv_scale, clip_target,
                                          &part_s2[b, 0, 0], &part_s1[b, 0], buf)
            free(buf)
        if failed:
            raise MemoryError("could not allocate the second-moment scratch")
        return
    Yt = <double *> malloc(n * d * sizeof(double))
    if Yt == NULL:
        raise MemoryError(f"could not allocate the ({n}, {d}) row copy of the tiled second moment")
    try:
        with nogil:
            for c in prange(n_chunks, schedule='static', num_threads=max(1, min(n_threads, n_chunks))):
                clip[c] = _load_chunk(&X[0, 0], c * DPC_CHUNK_SIZE,
                                      min(DPC_CHUNK_SIZE, n - c * DPC_CHUNK_SIZE), d, n, dom,
                                      inv_scale, clip_target, Yt + c * DPC_CHUNK_SIZE,
                                      &part_s1[c, 0])
            nt = (d + _TILE - 1) // _TILE
            n_tiles = nt * (nt + 1) // 2
            for t in prange(n_tiles, schedule='dynamic', num_threads=max(1, min(n_threads, n_tiles))):
                _tile(Yt, n, d, t, &part_s2[0, 0, 0])
    finally:
        free(Yt)


def mirror_lower(double[:, ::1] S, int n_threads):   # INOUT (d, d)
    """Copy the lower triangle of ``S`` above the diagonal, in place (exact symmetry).

    Equivalent to: ``S[np.triu_indices(d, 1)] = S.T[np.triu_indices(d, 1)]``.
    """
    cdef Py_ssize_t d = S.shape[0], i, j
    if S.shape[1] != d:
        raise ValueError("S must be square")
    with nogil:
        for i in prange(d, schedule='static', num_threads=max(1, n_threads)):
            for j in range(i + 1, d):
                S[i, j] = S[j, i]
