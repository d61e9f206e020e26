"""Fused Gaussian-mixture E-step and moment accumulation (DP-EM, Park et al. 2017, Eq. 10-11).

One pass over ``X`` computes, per row, ``log N(x | mu_k, Sigma_k) + log pi_k`` for every
component, the log-sum-exp (per-row log-likelihood) and the responsibilities ``gamma_ik``
(Eq. 10), and accumulates the additive statistics of Eq. 11 into float64 partials::

    N_k  = sum_i gamma_ik          S1_k = sum_i gamma_ik x_i
    S2_k = sum_i gamma_ik x_i x_i^T (upper triangle only)          LL = sum_i log p(x_i)

The n x K responsibility matrix is never materialised.

Where the code lives
--------------------
This module holds the GMM's block and chunk bodies (BLAS calls); the parallel driver that
runs the blocks (threads, per-thread scratch, ``MemoryError``) is ``run_blocks`` in
``_driver.pxd``, shared by every kernel.  The C it runs is in headers shared with the
other E-step kernels (``_bernoulli.pyx``, ...), each with a ``.pxd``:
``dpc_contract.h`` (CHUNK_SIZE, lanes, block counts), ``dpc_simd.h`` (vector types,
``target_clones``, exp/log, lane sums), ``dpc_rows.h`` (chunk loader, declared-domain
clipping), ``dpc_lse.h`` (log-sum-exp), ``dpc_lanes.h`` (moment accumulators),
``dpc_scratch.h`` (per-thread scratch layout); the Gaussian-only code is in ``dpc_gmm.h``.
Python reads the constants from ``dpem_fast._dpcore._contract``.

Work layout (part of the reproducibility contract; change only with a changelog note)
--------------------------------------------------------------------------------
Rows are cut into chunks of ``CHUNK_SIZE`` consecutive rows.  Consecutive chunks are grouped
into ``n_blocks = block_count(n, d, K)`` blocks of ``BLOCK_CHUNKS`` chunks (so their number
grows with n, with no cap below the machine; at least ``SPREAD_BLOCKS`` when there are that
many chunks; larger blocks only when the K*d*d partials would exceed ``PARTIAL_BUDGET``
doubles, never fewer than ``MIN_BLOCKS``).
Block ``b`` owns row ``b`` of every partial array and walks its chunks in order
(``dpc_plan_blocks``); blocks are handed to OpenMP threads with a dynamic schedule (a
thread delayed by a busy core does not hold the others back; which thread runs a block
never affects its numbers).  The caller
sums the rows in block order, so the result is bit-identical for any thread count.
``block_count`` depends on ``(n, d, K)`` only: it is ``dpc_block_count(n, K (d^2 + d + 1))``.

Inside a chunk the rows are transposed into a float64 scratch ``Xt`` of shape
``(d, CHUNK_SIZE)`` (float32 input is upcast here), so every inner loop runs along rows and
vectorises.  Two code paths, chosen by ``d`` only (never by the thread count):

* ``d < BLAS_MIN_D``: hand-written loops (triangular multiply fused with the squared norm,
  register tiles of 16 rows), compiled for AVX-512 / AVX2 / baseline with ``target_clones``.
  For a triangular factor the centred 16-row tile is held in registers (code specialised for
  each constant d = 1..15); S2 is accumulated in 2 x 4 register blocks; the chunk load is
  unrolled per constant d.  These change the instruction stream, not the arithmetic: every
  sum keeps its order and its FMA contractions, so the results are bit-identical to the
  plain loops (which remain the path for a non-triangular factor, and for d = 16 ..
  BLAS_MIN_D - 1, past the register tiles: BLAS_MIN_D is 25 since issue 41, where those
  plain loops ran 1.1-2.0x faster than the 2K small BLAS calls a chunk);
* ``d >= BLAS_MIN_D``: ``dtrmm`` (or ``dgemm`` for a non-triangular factor) for the
  Mahalanobis products and ``dsyrk`` on sqrt(gamma)-scaled rows for S2, through
  ``scipy.linalg.cython_blas``.  The caller must hold BLAS to one thread.

Sums over rows inside a chunk use 16 fixed lanes combined in a fixed tree, so their
rounding does not depend on the SIMD width.  ``CHUNK_SIZE``, the 16 lanes, their tree and
``block_count`` are unchanged by the small-problem tuning (issue 4) and by the move of the
C code into the shared headers.  ``exp``/``log`` are vectorisable polynomial versions
(about 1 ulp); ``exp(x)`` for ``x < -708`` returns 0 (no denormals).
"""
from cython cimport floating
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm, dsyrk, dtrmm

from ._driver cimport run_row_blocks, run_row_chunks
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, DPC_BLAS_MIN_D, DPC_F32_TILE_MIN_D, DPC_F32_FLUSH_CHUNKS, DPC_F32_LANE_ROWS, dpc_block_count, dpc_block_plan, dpc_chunk_count,
    dpc_chunk_rows, dpc_lane_pad, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_f32_prod cimport dpf_logp_tiles, dpf_s2_piece
from .dpc_f32 cimport (
    domain32, dpf_load_domain32, dpf_exp_log_rows, dpf_lanes_flush, dpf_load, dpf_load_domain, dpf_lse, dpf_prefetch,
    dpf_ftz_begin, dpf_ftz_end,
)
from .dpc_gmm cimport (
    dpe_center, dpe_gmm_scratch_init, dpe_logp_from_y, dpe_logp_small, dpf_center, dpf_logp_small,
)
from .dpc_lanes cimport (
    dpe_lanes_flush_n_s1, dpe_lanes_flush_s2, dpe_lanes_n_s1, dpe_lanes_n_s1_size,
    dpe_lanes_s2, dpe_lanes_s2_size, dpe_moments_prep, dpf_lanes_n_s1, dpf_lanes_s2,
)
from .dpc_lse cimport dpe_lse, store_log_resp
from .dpc_rows cimport check_domain, load_rows, load_rows_domain
from .dpc_scratch cimport dpc_scratch, dpf_scratch, dpf_scratch_init
from .dpc_simd cimport dpe_exp_neg, dpe_log_pos


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``_contract.block_count(n, K * (d * d + d + 1))`` (0 when n == 0).
    """
    return dpc_block_count(n, K * (d * d + d + 1))


cdef void _logp_chunk(const double *Xt, Py_ssize_t npad, Py_ssize_t d, Py_ssize_t K,
                      const double *means, const double *prec_chol, const double *log_const,
                      int tri, double *D, double *W, double *L) noexcept nogil:
    """L[k, r] = log pi_k + log N(x_r | mu_k, Sigma_k) for the rows of one chunk."""
    cdef Py_ssize_t k
    cdef int m = <int> npad, dd = <int> d, ld = <int> DPC_CHUNK_SIZE
    cdef double one = 1.0, zero = 0.0
    cdef const double *P
    for k in range(K):
        P = prec_chol + k * d * d
        if d < DPC_BLAS_MIN_D:
            dpe_logp_small(Xt, d, DPC_CHUNK_SIZE, npad, means + k * d, P, tri, log_const[k],
                           D, L + k * DPC_CHUNK_SIZE)
        else:
            dpe_center(Xt, d, DPC_CHUNK_SIZE, npad, means + k * d, D)
            if tri:
                # D(npad x d, col-major) := D @ P_k; P_k row-major is the lower factor P_k^T
                dtrmm(b'R', b'L', b'T', b'N', &m, &dd, &one, <double *> P, &dd, D, &ld)
                dpe_logp_from_y(D, d, DPC_CHUNK_SIZE, npad, log_const[k], L + k * DPC_CHUNK_SIZE)
            else:
                dgemm(b'N', b'T', &m, &dd, &dd, &one, D, &ld, <double *> P, &dd, &zero, W, &ld)
                dpe_logp_from_y(W, d, DPC_CHUNK_SIZE, npad, log_const[k], L + k * DPC_CHUNK_SIZE)


cdef Py_ssize_t _estep_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr,
                             Py_ssize_t d, Py_ssize_t K,
                             const double *means, const double *prec_chol, const double *log_const,
                             int tri, const double *dom, double target,
                             double *nk, double *s1, double *s2, double *ll_acc,
                             const dpc_scratch *s) noexcept nogil:
    """E-step and moments of rows [r0, r0 + nr) added into one block's partials."""
    cdef Py_ssize_t npad = dpc_lane_pad(nr)
    cdef Py_ssize_t k, r
    cdef Py_ssize_t ns1 = dpe_lanes_n_s1_size(d)
    cdef double *la
    cdef int dd = <int> d, m = <int> npad, ld = <int> DPC_CHUNK_SIZE
    cdef double one = 1.0, acc = 0.0
    cdef Py_ssize_t n_clipped = 0

    if dom == NULL:
        load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
    else:
        n_clipped = load_rows_domain(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, dom,
                                     target, s.Xt)
    _logp_chunk(s.Xt, npad, d, K, means, prec_chol, log_const, tri, s.D, s.W, s.L)
    dpe_lse(s.L, K, DPC_CHUNK_SIZE, nr, npad, s.ll, s.tmp)
    for r in range(nr):
        acc += s.ll[r]
    ll_acc[0] += acc
    for k in range(K):
        if d < DPC_BLAS_MIN_D:
            la = s.lanes + k * s.lanes_per_component
            dpe_lanes_n_s1(s.Xt, d, DPC_CHUNK_SIZE, npad, s.L + k * DPC_CHUNK_SIZE, s.W, la)
            dpe_lanes_s2(s.Xt, s.W, d, DPC_CHUNK_SIZE, npad, la + ns1)
        else:
            dpe_moments_prep(s.Xt, d, DPC_CHUNK_SIZE, npad, s.L + k * DPC_CHUNK_SIZE, s.sg, s.W,
                             nk + k, s1 + k * d)
            # s2_k (row-major upper == col-major lower) += W^T W, W: npad x d col-major
            dsyrk(b'L', b'T', &dd, &m, &one, s.W, &ld, &one, s2 + k * d * d, &dd)
    return n_clipped


cdef struct _Args:
    # what a block of either pass reads (from the driver's arguments) and writes
    Py_ssize_t n, d, K
    dpc_block_plan plan           # estep_stats: the chunks of each block
    const double *means
    const double *prec_chol
    const double *log_const
    int tri
    const double *dom             # NULL: raw rows
    double target
    double *nk                    # estep_stats: (n_blocks, K), (n_blocks, K, d), (n_blocks, K, d, d),
    double *s1                    # (n_blocks,) partials; row b is block b's
    double *s2
    double *ll
    int64_t *clipped              # (n_blocks,) rows clipped, or NULL without a domain
    void *out_resp                # log_resp: (n, K) and (n,) outputs, dtype of X
    void *out_ll
    const float *means32          # the float32 path: the parameters rounded to float
    const float *prec32
    const float *log_const32
    const float *dom32            # the float32 path's domain in float (dpf_domain32), or NULL


cdef void _set_args(_Args *a, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K,
                    const double *means, const double *prec_chol, const double *log_const,
                    bint tri) noexcept:
    """The arguments both passes read; everything else empty (NULL / 0)."""
    memset(a, 0, sizeof(_Args))
    a.n, a.d, a.K = n, d, K
    a.means, a.prec_chol, a.log_const = means, prec_chol, log_const
    a.tri = 1 if tri else 0
    a.target = 1.0


cdef int _estep_block(const floating *X, const void *args, Py_ssize_t b, double *buf) noexcept nogil:
    """Block ``b`` (the driver's body): its chunks in order, accumulated into its partial row."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, r0, k, i, nc, d = a.d, K = a.K
    cdef Py_ssize_t ns1 = dpe_lanes_n_s1_size(d)
    cdef double *nk = a.nk + b * K
    cdef double *s1 = a.s1 + b * K * d
    cdef double *s2 = a.s2 + b * K * d * d
    cdef dpc_scratch s
    cdef double *la
    dpe_gmm_scratch_init(&s, d, K, buf)
    if d < DPC_BLAS_MIN_D:
        for i in range(K * s.lanes_per_component):
            s.lanes[i] = 0.0
    for c in range(dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)):
        r0 = c * DPC_CHUNK_SIZE
        nc = _estep_chunk(X, r0, dpc_chunk_rows(a.n, c), d, K, a.means, a.prec_chol,
                          a.log_const, a.tri, a.dom, a.target, nk, s1, s2,
                          a.ll + b, &s)
        if a.clipped != NULL:
            a.clipped[b] += nc
    if d < DPC_BLAS_MIN_D:
        for k in range(K):
            la = s.lanes + k * s.lanes_per_component
            dpe_lanes_flush_n_s1(la, d, nk + k, s1 + k * d)
            dpe_lanes_flush_s2(la + ns1, d, s2 + k * d * d)
    return 0


# ------------------------------------------------------------------ single precision
# The float32 path (float32 rows, ``single=True``): the same block layout, with the chunk in
# float (a declared domain's clip is done in float64 first, then the clipped row is rounded),
# log-densities, log-sum-exp and moments in float, and float64 accumulation: a float lane
# holds at most DPC_F32_LANE_ROWS (128) rows before it is added into its float64 lane
# (every DPC_F32_FLUSH_CHUNKS chunks and at the block's end), and at d >= F32_TILE_MIN_D each
# float product of the second moments (dpf_s2_piece: register tiles, no BLAS, issue 41)
# covers at most that many rows and is added into the float64 partial at once.  The
# responsibilities are normalised in float64 (dpf_lse).  These are the facts that
# dpem_fast._engine._specs.FLOAT32_WIDENING is derived from.

cdef inline Py_ssize_t _single_scratch(dpf_scratch *s, Py_ssize_t d, Py_ssize_t K,
                                       double *buf) noexcept nogil:
    """The float32 path's chunk scratch (dpc_scratch.h): on the hand-loop path the lanes of
    n, s1 and s2 of every component; at d >= F32_TILE_MIN_D the lanes of n and s1 (the second
    moments go straight into the float64 partial, dpf_s2_piece)."""
    if d < DPC_F32_TILE_MIN_D:
        return dpf_scratch_init(s, d, K, 2, dpe_lanes_n_s1_size(d) + dpe_lanes_s2_size(d), 0, buf)
    return dpf_scratch_init(s, d, K, 2, dpe_lanes_n_s1_size(d), 0, buf)


cdef void _logp_chunk_single(const float *Xs, Py_ssize_t npad, Py_ssize_t d, Py_ssize_t K,
                             const float *means, const float *prec, const float *log_const,
                             int tri, float *D, float *W, float *L) noexcept nogil:
    """_logp_chunk in float: L[k, r] = log pi_k + log N(x_r | mu_k, Sigma_k)."""
    cdef Py_ssize_t k
    cdef const float *P
    for k in range(K):
        P = prec + k * d * d
        if d < DPC_F32_TILE_MIN_D:
            dpf_logp_small(Xs, d, DPC_CHUNK_SIZE, npad, means + k * d, P, tri, log_const[k],
                           D, L + k * DPC_CHUNK_SIZE)
        else:
            # register tiles, no BLAS (dpc_f32_prod.h: strmm spent most of its time packing)
            dpf_center(Xs, d, DPC_CHUNK_SIZE, npad, means + k * d, D)
            dpf_logp_tiles(D, d, DPC_CHUNK_SIZE, npad, P, tri, log_const[k], L + k * DPC_CHUNK_SIZE)


cdef int _estep_block_single(const float *X, const void *args, Py_ssize_t b,
                             double *buf) noexcept nogil:
    """Block ``b`` on the float32 path (the driver's body for float32 rows, ``single=True``)."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, c0, c1, r, r0, nr, npad, k, i, d = a.d, K = a.K
    cdef Py_ssize_t ns1 = dpe_lanes_n_s1_size(d), lpc, piece = DPC_F32_LANE_ROWS
    cdef double *nk = a.nk + b * K
    cdef double *s1 = a.s1 + b * K * d
    cdef double *s2 = a.s2 + b * K * d * d
    cdef dpf_scratch s
    cdef float *la
    cdef const float *g
    cdef double acc
    cdef Py_ssize_t n_clipped = 0
    cdef unsigned int mode = dpf_ftz_begin()
    _single_scratch(&s, d, K, buf)
    lpc = s.lanes_per_component
    for i in range(K * lpc):
        s.lanes[i] = 0.0
        s.lanes32[i] = 0.0
    c0, c1 = dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)
    for c in range(c0, c1):
        r0 = c * DPC_CHUNK_SIZE
        nr = dpc_chunk_rows(a.n, c)
        npad = dpc_lane_pad(nr)
        if a.dom == NULL:
            dpf_load(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, s.Xs)
        elif a.dom32 != NULL:
            # the clip in float (dpc_f32.h: the same ball, ||x~|| <= 1 + u)
            n_clipped += dpf_load_domain32(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, a.dom32, a.dom,
                                           a.target, s.Xt, s.Xs)
        else:
            # a domain not representable in float: the clip in float64, then rounded to float
            n_clipped += dpf_load_domain(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, a.dom, a.target,
                                         s.Xt, s.Xs)
        if c + 1 < c1:      # the next chunk's rows on their way while this one computes
            dpf_prefetch(X + (r0 + DPC_CHUNK_SIZE) * d, sizeof(float) * d * dpc_chunk_rows(a.n, c + 1))
        _logp_chunk_single(s.Xs, npad, d, K, a.means32, a.prec32, a.log_const32, a.tri,
                           s.D, s.W, s.L)
        dpf_lse(s.L, K, DPC_CHUNK_SIZE, nr, npad, s.ll, s.tmp)
        acc = 0.0
        for r in range(nr):
            acc += s.ll[r]
        a.ll[b] += acc
        for k in range(K):
            la = s.lanes32 + k * lpc
            g = s.L + k * DPC_CHUNK_SIZE
            if d < DPC_F32_TILE_MIN_D:
                dpf_lanes_n_s1(s.Xs, d, DPC_CHUNK_SIZE, npad, g, s.W, la)
                dpf_lanes_s2(s.Xs, s.W, d, DPC_CHUNK_SIZE, npad, la + ns1)
            else:
                # n, s1 into the float lanes and W = g x; s2_k += W^T X summed in float over
                # at most DPC_F32_LANE_ROWS rows a piece, then added into float64 (dpc_f32_prod.h)
                dpf_lanes_n_s1(s.Xs, d, DPC_CHUNK_SIZE, npad, g, s.W, la)
                r = 0
                while r < npad:
                    dpf_s2_piece(s.W, s.Xs, d, DPC_CHUNK_SIZE, r, npad - r if npad - r < piece else piece,
                                 s2 + k * d * d)
                    r += piece
        if (c - c0 + 1) % DPC_F32_FLUSH_CHUNKS == 0 or c + 1 == c1:
            dpf_lanes_flush(s.lanes32, K * lpc, s.lanes)
    for k in range(K):
        dpe_lanes_flush_n_s1(s.lanes + k * lpc, d, nk + k, s1 + k * d)
        if d < DPC_F32_TILE_MIN_D:
            dpe_lanes_flush_s2(s.lanes + k * lpc + ns1, d, s2 + k * d * d)
    if a.clipped != NULL:
        a.clipped[b] += n_clipped
    dpf_ftz_end(mode)
    return 0


def estep_stats(const floating[:, ::1] X,           # IN  (n, d) data rows
                const double[:, ::1] means,         # IN  (K, d)
                const double[:, :, ::1] prec_chol,  # IN  (K, d, d) precision = P_k @ P_k.T
                const double[::1] log_const,        # IN  (K,) log pi_k + log|det P_k| - d/2 log(2 pi)
                double[:, ::1] part_nk,             # OUT (n_blocks, K)
                double[:, :, ::1] part_s1,          # OUT (n_blocks, K, d)
                double[:, :, :, ::1] part_s2,       # OUT (n_blocks, K, d, d) upper triangle; lower = 0
                double[::1] part_ll,                # OUT (n_blocks,)
                bint upper_triangular,              # all P_k upper triangular (sklearn convention)
                int n_threads,
                const double[:, ::1] domain=None,   # IN  (4, d) lower, upper, center, 1/scale
                double clip_target=1.0,             # norm given to rows beyond the unit ball
                int64_t[::1] part_clipped=None,     # OUT (n_blocks,) rows clipped per block
                const float[:, ::1] means32=None,   # IN  (K, d) the float32 path: means in float
                const float[:, :, ::1] prec32=None, # IN  (K, d, d) precision factors in float
                const float[::1] log_const32=None): # IN  (K,) constants in float
    """Fused E-step (DP-EM Eq. 10) and Eq. 11 moments, as per-block float64 partials.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over
    axis 0 in block order and mirrors ``S2``.  BLAS must be limited to one thread.

    With ``domain``, each row is first mapped into the unit ball of the declared domain
    (clip to the box, centre, scale, clip the norm) while it is loaded, so a private fit
    needs no transformed copy of ``X``; ``means``/``prec_chol`` are then in those units.

    With float32 ``X`` and the parameters in float (``means32``, ``prec32``,
    ``log_const32``: all three, or none) the pass runs in single precision with float64
    accumulation (the float32 path, above ``estep_stats`` in this module); without them
    float32 rows are upcast and the pass runs in float64.

    Equivalent to: ``lp = log_gaussian_prob(X) + log_w; ll = logsumexp(lp, 1);
    g = exp(lp - ll[:, None]); (g.sum(0), g.T @ X, einsum('nk,ni,nj->kij', g, X, X), ll.sum())``
    split over blocks of rows.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef dpc_scratch layout
    cdef dpf_scratch single_layout
    cdef _Args a
    cdef bint single
    if (means.shape[1] != d or prec_chol.shape[0] != K or prec_chol.shape[1] != d
            or prec_chol.shape[2] != d or log_const.shape[0] != K):
        raise ValueError("parameter shapes do not match X")
    check_domain(domain, d, clip_target)
    if domain is not None and (part_clipped is None or part_clipped.shape[0] != nb):
        raise ValueError("part_clipped must have n_blocks entries when domain is given")
    if (part_nk.shape[0] != nb or part_nk.shape[1] != K or part_s1.shape[0] != nb or part_s2.shape[0] != nb
            or part_ll.shape[0] != nb or part_s1.shape[1] != K or part_s1.shape[2] != d
            or part_s2.shape[1] != K or part_s2.shape[2] != d or part_s2.shape[3] != d):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    single = means32 is not None or prec32 is not None or log_const32 is not None
    if single and (means32 is None or prec32 is None or log_const32 is None):
        raise ValueError("the float32 path needs means32, prec32 and log_const32")
    if single and floating is double:
        raise ValueError("the float32 path needs float32 rows")
    if single and (means32.shape[0] != K or means32.shape[1] != d or prec32.shape[0] != K
                   or prec32.shape[1] != d or prec32.shape[2] != d or log_const32.shape[0] != K):
        raise ValueError("float32 parameter shapes do not match X")
    if n == 0:
        return
    part_nk[:, :] = 0.0
    part_s1[:, :, :] = 0.0
    part_s2[:, :, :, :] = 0.0
    part_ll[:] = 0.0
    _set_args(&a, n, d, K, &means[0, 0], &prec_chol[0, 0, 0], &log_const[0],
              upper_triangular)
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
    a.nk, a.s1, a.s2, a.ll = &part_nk[0, 0], &part_s1[0, 0, 0], &part_s2[0, 0, 0, 0], &part_ll[0]
    if domain is not None and d > 0:
        part_clipped[:] = 0
        a.dom, a.target = &domain[0, 0], clip_target
        a.clipped = &part_clipped[0]
    if single:
        a.means32, a.prec32, a.log_const32 = &means32[0, 0], &prec32[0, 0, 0], &log_const32[0]
        keep = domain32(a.dom, d, &a.dom32)       # alive for the call
        run_row_blocks(&X[0, 0], _estep_block_single, _estep_block[double], &a, a.plan.n_busy,
                       _single_scratch(&single_layout, d, K, NULL), n_threads, "E-step scratch")
        return
    run_row_blocks(&X[0, 0], _estep_block[float], _estep_block[double], &a, a.plan.n_busy,
                   dpe_gmm_scratch_init(&layout, d, K, NULL), n_threads, "E-step scratch")


cdef int _logresp_chunk(const floating *X, const void *args, Py_ssize_t c,
                        double *buf) noexcept nogil:
    """Chunk ``c`` of log_resp (the driver's body): log pi_k + log N(x | k) of its rows,
    their log-sum-exp and the log responsibilities."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, K = a.K, r0 = c * DPC_CHUNK_SIZE
    cdef Py_ssize_t nr = dpc_chunk_rows(a.n, c), npad = dpc_lane_pad(nr)
    cdef dpc_scratch s
    dpe_gmm_scratch_init(&s, d, K, buf)
    load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
    _logp_chunk(s.Xt, npad, d, K, a.means, a.prec_chol, a.log_const, a.tri, s.D, s.W, s.L)
    store_log_resp(s.L, s.ll, s.tmp, DPC_CHUNK_SIZE, nr, npad, K,
                   <floating *> a.out_resp + r0 * K, <floating *> a.out_ll + r0)
    return 0


def log_resp(const floating[:, ::1] X,              # IN  (n, d)
             const double[:, ::1] means,            # IN  (K, d)
             const double[:, :, ::1] prec_chol,     # IN  (K, d, d)
             const double[::1] log_const,           # IN  (K,) as in estep_stats
             floating[:, ::1] out_log_resp,         # OUT (n, K) log gamma_ik
             floating[::1] out_ll,                  # OUT (n,) log p(x_i)
             bint upper_triangular,
             int n_threads):
    """Per-row log responsibilities and log-likelihoods (predict / score_samples).

    Equivalent to: ``lp = log_gaussian_prob(X) + log_w; ll = logsumexp(lp, 1);
    (lp - ll[:, None], ll)`` (DP-EM Eq. 10, in log space).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef dpc_scratch layout
    cdef _Args a
    if (means.shape[1] != d or prec_chol.shape[0] != K or prec_chol.shape[1] != d
            or prec_chol.shape[2] != d or log_const.shape[0] != K
            or out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n):
        raise ValueError("shapes do not match")
    if n == 0:
        return
    _set_args(&a, n, d, K, &means[0, 0], &prec_chol[0, 0, 0], &log_const[0],
              upper_triangular)
    a.out_resp, a.out_ll = &out_log_resp[0, 0], &out_ll[0]
    run_row_chunks(&X[0, 0], n, _logresp_chunk[float], _logresp_chunk[double], &a,
                   dpe_gmm_scratch_init(&layout, d, K, NULL), n_threads, "E-step scratch")


def _exp_log_wrapper(const double[::1] x, double[::1] out_exp, double[::1] out_log):
    """Test hook: ``out_exp = exp(x)`` (x <= 0) and ``out_log = log(-x)`` (x < 0) elementwise.

    Equivalent to: ``np.where(x < -708, 0, np.exp(x)), np.log(-x)``.
    """
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        out_exp[i] = dpe_exp_neg(x[i])
        out_log[i] = dpe_log_pos(-x[i])


def _exp_log_f32_wrapper(const float[::1] x, float[::1] out_exp, const double[::1] s, double[::1] out_log):
    """Test hook: ``out_exp = exp(x)`` in float (x <= 0) and ``out_log = log(s)`` (s > 0, normal)
    as the float32 path's log-sum-exp computes them (this CPU's clone, vectorised).

    Equivalent to: ``np.where(x < -87, 0, np.exp(x)).astype(np.float32), np.log(s)`` to 2 ulp.
    """
    if out_exp.shape[0] != x.shape[0] or out_log.shape[0] != s.shape[0]:
        raise ValueError("shapes do not match")
    dpf_exp_log_rows(&x[0] if x.shape[0] else NULL, &out_exp[0] if x.shape[0] else NULL, x.shape[0],
                     &s[0] if s.shape[0] else NULL, &out_log[0] if s.shape[0] else NULL, s.shape[0])


def _lse_f32_wrapper(float[:, ::1] L, double[::1] out_ll):
    """Test hook: the float32 path's log-sum-exp (dpf_lse) over L (K, n) float log-densities,
    chunk by chunk: L becomes the responsibilities, ``out_ll`` the per-row log-likelihood.

    Equivalent to: ``ll = logsumexp(L, axis=0); L = exp(L - ll)`` in float64, to float precision.
    """
    cdef Py_ssize_t K = L.shape[0], n = L.shape[1], c, k, r, nr, npad
    cdef float *buf
    cdef double *ll
    if out_ll.shape[0] != n or K == 0:
        raise ValueError("shapes do not match")
    buf = <float *> malloc(sizeof(float) * K * DPC_CHUNK_SIZE)
    ll = <double *> malloc(sizeof(double) * 3 * DPC_CHUNK_SIZE)      # ll, then tmp (2 chunks)
    if buf == NULL or ll == NULL:
        free(buf)
        free(ll)
        raise MemoryError()
    for c in range(0, n, DPC_CHUNK_SIZE):
        nr = min(DPC_CHUNK_SIZE, n - c)
        npad = dpc_lane_pad(nr)
        for k in range(K):
            for r in range(npad):
                buf[k * DPC_CHUNK_SIZE + r] = L[k, c + r] if r < nr else L[k, c]
        dpf_lse(buf, K, DPC_CHUNK_SIZE, nr, npad, ll, ll + DPC_CHUNK_SIZE)
        for r in range(nr):
            out_ll[c + r] = ll[r]
            for k in range(K):
                L[k, c + r] = buf[k * DPC_CHUNK_SIZE + r]
    free(buf)
    free(ll)
