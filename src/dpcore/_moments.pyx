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
  one ``dsyrk``;
* ``d >= TILE_MIN_D`` ("tiles"; the d x d partials of many blocks would not fit):
  phase 1 (in parallel, one task per chunk) sums each chunk into its S1 partial, first
  copying its rows into one row-major (n, d) float64 copy where the tiles cannot read X as
  it is (float32 rows; rows mapped into the ball of a domain, by the loader's own map);
  phase 2 cuts the rows into slices of ``TILE_ROWS`` (1,024) rows and the lower triangle of
  S2 into ``TILE x TILE`` tiles (512: issue 41, 256 before), and computes each (tile, slice)
  with one BLAS call over the slice's rows (``dsyrk`` on the diagonal, ``dgemm`` off it)
  into the slice's own S2 partial, one task each.  Each output entry of a partial is computed
  by one call whatever the thread count.  A block of either layout sums at most 1,024 rows in
  floats (the ``b`` of the float64 rounding bound, ``dpem_fast._engine._specs``, "Rounding";
  before issue 34 item 7 a tile summed every row of the call).  Raw float64 rows are read in
  place: no copy, and no transposition for any input (before issue 41, phase 1 wrote a
  column-major copy of every input, a quarter of the call's time at d = 784).

Every task writes its own partials (the "rows" layout zeroes them first); S2 partials are
written in their lower triangle alone.  The caller sums the partials exactly
(``_contract.sum_blocks``; ``_contract.sum_blocks_lower`` for S2).  Either way the result is
bit-identical for every thread count.  Blocks, chunks and tiles
are all run by the kernels' one parallel driver (``_driver.pxd``).  S2 is filled in its lower
triangle (row-major); :func:`mirror_lower` copies it above the diagonal.
"""
import numpy as np
from cython cimport floating
from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm, dsyrk

from ._driver cimport run_blocks, run_row_blocks, run_row_chunks
from .dpc_contract cimport (
    DPC_BLOCK_CHUNKS, DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_chunk_rows,
    dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_rows cimport check_domain, load_rows_simd, map_row, rows_f64
from ._symmetric cimport sym_from_lower, sym_tile_rows

cdef enum:
    # d from which the "tiles" layout is used: a fixed constant of this kernel (chosen when
    # MIN_BLOCKS d x d partials first exceeded the 16 MiB budget of the time; kept when
    # the budget grew, so that factor analysis keeps its layout)
    _TILE_MIN_D = 513
    # tile edge of the "tiles" layout (512: three tasks a slice at d = 784, each a BLAS call
    # large enough to run near the DGEMM rate; 256 ran ~30 % slower; issue 41)
    _TILE = 512
    # rows of one task of the blocked product (a fixed constant: the bits of each output
    # row come from the one dgemm call of its block, whatever the thread count)
    _PRODUCT_ROWS = 128
    # rows of one S2 partial of the "tiles" layout (the contract's 1,024-row block)
    _TILE_ROWS = DPC_CHUNK_SIZE * DPC_BLOCK_CHUNKS

cdef extern from "dpc_avx2fma.h" nogil:
    int dpc_avx2fma()

# the row loader's lane-wise path (dpc_rows.h) where this CPU runs AVX2 and FMA
cdef int _SIMD = dpc_avx2fma()

TILE_MIN_D = _TILE_MIN_D
TILE = _TILE
TILE_ROWS = _TILE_ROWS
PRODUCT_ROWS = _PRODUCT_ROWS


def block_count(Py_ssize_t n, Py_ssize_t d):
    """Rows of the partial arrays for ``n`` rows of ``d`` features; independent of threads.

    "rows" layout (d < TILE_MIN_D): ``dpc_block_count(n, d * d + d)`` S2 partials and as
    many S1 partials.  "tiles" layout: one S2 partial per ``TILE_ROWS`` rows and one S1
    partial per chunk.
    Returns ``(n_s2_blocks, n_s1_blocks)`` ((0, 0) when n == 0).
    """
    if n == 0:
        return 0, 0
    if d < TILE_MIN_D:
        nb = dpc_block_count(n, d * d + d)
        return nb, nb
    return (n + _TILE_ROWS - 1) // _TILE_ROWS, dpc_chunk_count(n)


cdef struct _Args:
    # what a block of either layout reads (from the driver's arguments) and writes
    Py_ssize_t n, d
    dpc_block_plan plan           # "rows": the chunks of each block
    const double *dom             # NULL: raw rows
    double target
    double *s2                    # (n_s2_blocks, d, d) partials, lower triangle
    double *s1                    # (n_s1_blocks, d) partials
    int64_t *clipped              # (n_s1_blocks,) rows clipped
    double *Ybuf                  # "tiles": a row-major float64 copy of the rows (mapped into
                                  # the ball if dom), where X cannot be read as it is
    const double *Y               # "tiles": the rows the tiles read (X itself or Ybuf)
    Py_ssize_t n_tiles            # "tiles": TILE x TILE tiles of the lower triangle of S2


cdef Py_ssize_t _load_chunk(const floating *X, const _Args *a, Py_ssize_t c, Py_ssize_t ld,
                            double *Yt, double *s1) noexcept nogil:
    """Rows of chunk ``c`` into column-major Yt (ld), clipped if ``a.dom``; s1 += their
    sum.  Returns the rows clipped."""
    cdef Py_ssize_t i, r, n_clipped = 0, d = a.d
    cdef Py_ssize_t nr = dpc_chunk_rows(a.n, c)
    cdef const floating *Xc = X + c * DPC_CHUNK_SIZE * d
    cdef double acc
    # the lane-wise (AVX2) loader where this CPU runs it (as k-means loads its rows): the same
    # numbers bit for bit as the scalar one
    n_clipped = load_rows_simd(Xc, d, nr, nr, ld, a.dom, a.target, Yt, _SIMD)
    for i in range(d):
        acc = 0.0
        for r in range(nr):
            acc = acc + Yt[i * ld + r]
        s1[i] += acc
    return n_clipped


cdef int _rows_block(const floating *X, const void *args, Py_ssize_t b,
                     double *Xt) noexcept nogil:
    """Block ``b`` of the "rows" layout (the driver's body): its chunks in order, one dsyrk
    each, into its partial row."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, n_clipped = 0, d = a.d
    cdef double *s2 = a.s2 + b * d * d
    cdef double *s1 = a.s1 + b * d
    cdef int dd = <int> d, k, ld = <int> DPC_CHUNK_SIZE
    cdef double one = 1.0
    # the block's own partials, zeroed by the thread that fills them (no serial pass over all
    # of them first; each page first touched where it is used)
    memset(s2, 0, d * d * sizeof(double))
    memset(s1, 0, d * sizeof(double))
    for c in range(dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)):
        n_clipped += _load_chunk(X, a, c, DPC_CHUNK_SIZE, Xt, s1)
        k = <int> dpc_chunk_rows(a.n, c)
        # column-major upper of s2 (= row-major lower) += Xt^T Xt, Xt: nr x d column-major
        dsyrk(b'U', b'T', &dd, &k, &one, Xt, &ld, &one, s2, &dd)
    a.clipped[b] = n_clipped
    return 0


cdef inline void _sum_rows(const double *Y, Py_ssize_t nr, Py_ssize_t d, double *s1) noexcept nogil:
    """s1[i] = sum of Y[r, i] over the nr rows, each feature from 0.0 in row order (the order,
    so the bits, of :func:`_load_chunk`'s sum)."""
    cdef Py_ssize_t r, i
    memset(s1, 0, d * sizeof(double))
    for r in range(nr):
        for i in range(d):
            s1[i] = s1[i] + Y[r * d + i]


cdef int _copy_chunk(const floating *X, const void *args, Py_ssize_t c,
                     double *unused) noexcept nogil:
    """Chunk ``c`` of the "tiles" layout (the driver's body): its rows into the row-major
    float64 copy where X cannot be read as it is (float32 rows, or rows mapped into the ball
    of ``a.dom`` by the loader's own map), then the chunk's sum into S1 partial ``c``."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t r, d = a.d, nr = dpc_chunk_rows(a.n, c), n_clipped = 0
    cdef const floating *Xc = X + c * DPC_CHUNK_SIZE * d
    cdef double *Yc
    if a.Ybuf != NULL:
        Yc = a.Ybuf + c * DPC_CHUNK_SIZE * d
        if a.dom == NULL:
            rows_f64(Xc, nr, d, Yc)         # (float32 rows: float64 ones are never copied)
        else:
            for r in range(nr):
                n_clipped += map_row(Xc + r * d, d, a.dom, a.target, Yc + r * d)
    _sum_rows(a.Y + c * DPC_CHUNK_SIZE * d, nr, d, a.s1 + c * d)
    a.clipped[c] = n_clipped
    return 0


cdef int _tile(const void *args, Py_ssize_t task, double *unused) noexcept nogil:
    """Tile ``task % n_tiles`` of the lower triangle (row-major) of slice ``task // n_tiles``'s
    S2 partial, ``Y_s^T Y_s`` with ``Y_s`` the slice's rows of ``a.Y`` (row-major float64: X
    itself or its copy) (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t n = a.n, d = a.d
    # tasks numbered slice by slice: tasks that run together share a slice's rows in cache
    # (issue 41: at d = 784, 10 % faster on one thread than tile by tile, as fast on 16)
    cdef Py_ssize_t t = task % a.n_tiles, sl = task // a.n_tiles
    cdef const double *M = a.Y + sl * _TILE_ROWS * d
    cdef double *s2 = a.s2 + sl * d * d
    cdef Py_ssize_t I = 0, J, rem = t
    cdef int m, nn, k = <int> min(<Py_ssize_t> _TILE_ROWS, n - sl * _TILE_ROWS), ldc = <int> d
    cdef double one = 1.0, zero = 0.0
    # tiles are numbered column by column of the column-major upper triangle: (I <= J)
    J = 0
    while rem > J:
        rem -= J + 1
        J += 1
    I = rem
    m = <int> min(_TILE, d - I * _TILE)
    nn = <int> min(_TILE, d - J * _TILE)
    # the slice's rows, row-major, are the column-major (d, k) matrix M (leading dimension d),
    # and its S2 partial is M M^T: tile (I, J) of its column-major upper triangle (the
    # row-major lower one) is M_I M_J^T
    if I == J:
        dsyrk(b'U', b'N', &m, &k, &one, <double *> M + I * _TILE, &ldc, &zero,
              s2 + I * _TILE * d + I * _TILE, &ldc)
    else:
        dgemm(b'N', b'T', &m, &nn, &k, &one, <double *> M + I * _TILE, &ldc,
              <double *> M + J * _TILE, &ldc, &zero, s2 + J * _TILE * d + I * _TILE, &ldc)
    return 0


def second_moment(const floating[:, ::1] X,          # IN  (n, d) rows
                  double[:, :, ::1] part_s2,         # OUT (n_s2_blocks, d, d) lower triangle
                  double[:, ::1] part_s1,            # OUT (n_s1_blocks, d)
                  int64_t[::1] part_clipped,         # OUT (n_s1_blocks,) rows clipped
                  int n_threads,
                  const double[:, ::1] domain=None,  # IN  (4, d) lower, upper, center, 1/scale
                  double clip_target=1.0,            # norm given to rows beyond the unit ball
                  double[:, ::1] work=None):         # SCRATCH (n, d) the "tiles" row copy
    """Per-block float64 partials of ``S1 = sum_i x_i`` and the lower triangle of
    ``S2 = sum_i x_i x_i^T`` (DP-EM Sec. 6, Lambda = S2 / N), rows clipped into the unit
    ball of ``domain`` while they are loaded.

    The partial arrays must have the shapes :func:`block_count` gives; their contents on entry
    are not read (each task zeroes or overwrites its own).  Each S2 partial is written in its
    lower triangle (diagonal included) alone; the "tiles" layout leaves the upper triangle as
    it found it, so the caller sums the lower triangles over axis 0 (exactly:
    ``_contract.sum_blocks_lower``) and mirrors S2 (:func:`mirror_lower`).  BLAS must be held
    to one thread.

    Equivalent to: ``Z = scale_and_clip(X, domain)[0]`` (or ``X``), then
    ``(Z.T @ Z, Z.sum(0), n_clipped)`` split over blocks.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef Py_ssize_t nb2, nb1, nt
    cdef _Args a
    nb2, nb1 = block_count(n, d)
    if (part_s2.shape[0] != nb2 or part_s2.shape[1] != d or part_s2.shape[2] != d
            or part_s1.shape[0] != nb1 or part_s1.shape[1] != d or part_clipped.shape[0] != nb1):
        raise ValueError("partial arrays must have the shapes block_count(n, d) gives")
    check_domain(domain, d, clip_target)
    if n == 0 or d == 0:
        return
    # every partial is written by its own task (below); only the blocks the plan leaves idle
    # ("rows" layout, fewer chunks than blocks) are zeroed here
    a.n, a.d = n, d
    a.dom, a.target = NULL, 1.0
    if domain is not None:
        a.dom, a.target = &domain[0, 0], clip_target
    a.s2, a.s1, a.clipped = &part_s2[0, 0, 0], &part_s1[0, 0], &part_clipped[0]
    a.Ybuf, a.Y = NULL, NULL
    if d < _TILE_MIN_D:
        a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb2)
        part_s2[a.plan.n_busy:, :, :] = 0.0
        part_s1[a.plan.n_busy:, :] = 0.0
        part_clipped[a.plan.n_busy:] = 0
        run_row_blocks(&X[0, 0], _rows_block[float], _rows_block[double], &a, a.plan.n_busy,
                       DPC_CHUNK_SIZE * d, n_threads, "the second-moment scratch")
        return
    a.plan = dpc_plan_blocks(0, 0)
    nt = (d + _TILE - 1) // _TILE
    a.n_tiles = nt * (nt + 1) // 2
    if floating is double:
        if a.dom == NULL:
            a.Y = &X[0, 0]              # raw float64 rows: the tiles read X in place
    if a.Y == NULL:
        # the row copy: the caller's scratch, else numpy's (as fast as dpem_fast._workspace's
        # here; a malloc, as before issue 41, made the call ~20 % slower on the 2-core
        # machine: not its 4 KiB pages, which numpy's copy runs as fast on; not pinned down)
        if work is None:
            work = np.empty((n, d))
        elif work.shape[0] != n or work.shape[1] != d:
            raise ValueError(f"work must have shape ({n}, {d})")
        a.Ybuf = &work[0, 0]
        a.Y = a.Ybuf
    run_row_chunks(&X[0, 0], n, _copy_chunk[float], _copy_chunk[double], &a, 0, n_threads,
                   "the tiled second moment")
    run_blocks(_tile, &a, a.n_tiles * nb2, 0, n_threads, "the tiled second moment")


cdef int _mirror_tiles(const void *args, Py_ssize_t t, double *unused) noexcept nogil:
    """Tile row ``t`` of the lower triangle copied above the diagonal (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    sym_from_lower(a.s2, a.d, t)
    return 0


def mirror_lower(double[:, ::1] S, int n_threads):   # INOUT (d, d)
    """Copy the lower triangle of ``S`` above the diagonal, in place (exact symmetry), one
    tile row per task (``_symmetric.pxd``).

    Equivalent to: ``S[np.triu_indices(d, 1)] = S.T[np.triu_indices(d, 1)]``.
    """
    cdef Py_ssize_t d = S.shape[0]
    cdef _Args a
    if S.shape[1] != d:
        raise ValueError("S must be square")
    if d == 0:
        return
    a.d, a.s2 = d, &S[0, 0]
    run_blocks(_mirror_tiles, &a, sym_tile_rows(d), 0, n_threads, "the mirrored second moment")


cdef struct _ProductArgs:
    const double *A               # (m, kk) row-major
    const double *B               # (kk, p) row-major
    double *out                   # (m, p) row-major
    Py_ssize_t m, kk, p


cdef int _product_rows(const void *args, Py_ssize_t b, double *unused) noexcept nogil:
    """Rows ``b * PRODUCT_ROWS ...`` of ``A @ B`` by one dgemm (the driver's body)."""
    cdef const _ProductArgs *a = <const _ProductArgs *> args
    cdef Py_ssize_t r0 = b * _PRODUCT_ROWS
    cdef int rows = <int> min(<Py_ssize_t> _PRODUCT_ROWS, a.m - r0), p = <int> a.p, kk = <int> a.kk
    cdef double one = 1.0, zero = 0.0
    # column-major view: out^T (p x rows) = B^T (p x kk) A^T (kk x rows)
    dgemm(b'N', b'N', &p, &rows, &kk, &one, <double *> a.B, &p, <double *> a.A + r0 * a.kk, &kk,
          &zero, a.out + r0 * a.p, &p)
    return 0


def product_rows(const double[:, ::1] A,     # IN  (m, kk)
                 const double[:, ::1] B,     # IN  (kk, p)
                 double[:, ::1] out,         # OUT (m, p)
                 int n_threads):
    """``out = A @ B`` in fixed blocks of ``PRODUCT_ROWS`` rows, one single-threaded dgemm
    per block, the blocks over ``n_threads`` threads: bit-identical for every thread count
    (a threaded BLAS is not: its bits changed with the thread count at d = 300).  BLAS must
    be held to one thread.  The large products of factor analysis's post-processing.

    Equivalent to: ``A @ B``.
    """
    cdef Py_ssize_t m = A.shape[0], kk = A.shape[1], p = B.shape[1]
    cdef _ProductArgs a
    if B.shape[0] != kk or out.shape[0] != m or out.shape[1] != p:
        raise ValueError("shapes must be A (m, k), B (k, p), out (m, p)")
    if m == 0 or p == 0:
        return
    if kk == 0:
        out[:, :] = 0.0
        return
    a.A, a.B, a.out, a.m, a.kk, a.p = &A[0, 0], &B[0, 0], &out[0, 0], m, kk, p
    run_blocks(_product_rows, &a, (m + _PRODUCT_ROWS - 1) // _PRODUCT_ROWS, 0, n_threads, "the blocked product")
