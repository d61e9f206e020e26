"""Fused Gaussian-mixture E-step and moment accumulation (DP-EM, Park et al. 2017, Eq. 10-11).

One pass over ``X`` computes, per row, ``log N(x | mu_k, Sigma_k) + log pi_k`` for every
component, the log-sum-exp (per-row log-likelihood) and the responsibilities ``gamma_ik``
(Eq. 10), and accumulates the additive statistics of Eq. 11 into float64 partials::

    N_k  = sum_i gamma_ik          S1_k = sum_i gamma_ik x_i
    S2_k = sum_i gamma_ik x_i x_i^T (upper triangle only)          LL = sum_i log p(x_i)

The n x K responsibility matrix is never materialised.

Where the code lives
--------------------
This module is the GMM's driver (blocks, chunks, BLAS calls).  The C it runs is in headers
shared with the other E-step kernels (``_bernoulli.pyx``, ...), each with a ``.pxd``:
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
Block ``b`` owns row ``b`` of every partial array and walks its chunks in order; blocks are
handed to OpenMP threads with a dynamic schedule (a thread delayed by a busy core does not
hold the others back; which thread runs a block never affects its numbers).  The caller
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
  plain loops (which remain the path for a non-triangular factor);
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
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from scipy.linalg.cython_blas cimport dgemm, dsyrk, dtrmm

from .dpc_contract cimport (
    DPC_CHUNK_SIZE, DPC_BLAS_MIN_D, dpc_block_count, dpc_chunk_count, dpc_chunks_per_block,
    dpc_lane_pad,
)
from .dpc_gmm cimport dpe_center, dpe_gmm_scratch_init, dpe_logp_from_y, dpe_logp_small
from .dpc_lanes cimport (
    dpe_lanes_flush_n_s1, dpe_lanes_flush_s2, dpe_lanes_n_s1, dpe_lanes_n_s1_size,
    dpe_lanes_s2, dpe_moments_prep,
)
from .dpc_lse cimport dpe_lse, dpe_lse_ll, store_log_resp
from .dpc_rows cimport load_rows, load_rows_domain
from .dpc_scratch cimport dpc_scratch
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
                             int tri, const double *dom, double inv_scale, double target,
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
        n_clipped = load_rows_domain(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, dom, inv_scale,
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


cdef void _estep_block(const floating *X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K,
                       Py_ssize_t b, Py_ssize_t chunks_per_block,
                       const double *means, const double *prec_chol, const double *log_const,
                       int tri, const double *dom, double inv_scale, double target,
                       double *nk, double *s1, double *s2, double *ll_acc, long long *clipped,
                       double *buf) noexcept nogil:
    """Walk the chunks of block ``b`` in order, accumulating into its partial row."""
    cdef Py_ssize_t c, r0, k, i, nc
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n)
    cdef Py_ssize_t c1 = min(n_chunks, (b + 1) * chunks_per_block)
    cdef Py_ssize_t ns1 = dpe_lanes_n_s1_size(d)
    cdef dpc_scratch s
    cdef double *la
    dpe_gmm_scratch_init(&s, d, K, buf)
    if d < DPC_BLAS_MIN_D:
        for i in range(K * s.lanes_per_component):
            s.lanes[i] = 0.0
    for c in range(b * chunks_per_block, c1):
        r0 = c * DPC_CHUNK_SIZE
        nc = _estep_chunk(X, r0, min(DPC_CHUNK_SIZE, n - r0), d, K, means, prec_chol,
                          log_const, tri, dom, inv_scale, target, nk, s1, s2, ll_acc, &s)
        if clipped != NULL:
            clipped[0] += nc
    if d < DPC_BLAS_MIN_D:
        for k in range(K):
            la = s.lanes + k * s.lanes_per_component
            dpe_lanes_flush_n_s1(la, d, nk + k, s1 + k * d)
            dpe_lanes_flush_s2(la + ns1, d, s2 + k * d * d)


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
                const double[:, ::1] domain=None,   # IN  (3, d) lower, upper, center; None = raw X
                double inv_scale=1.0,               # 1 / radius of the declared domain
                double clip_target=1.0,             # norm given to rows beyond the unit ball
                long long[::1] part_clipped=None):  # OUT (n_blocks,) rows clipped per block
    """Fused E-step (DP-EM Eq. 10) and Eq. 11 moments, as per-block float64 partials.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over
    axis 0 in block order and mirrors ``S2``.  BLAS must be limited to one thread.

    With ``domain``, each row is first mapped into the unit ball of the declared domain
    (clip to the box, centre, scale, clip the norm) while it is loaded, so a private fit
    needs no transformed copy of ``X``; ``means``/``prec_chol`` are then in those units.

    Equivalent to: ``lp = log_gaussian_prob(X) + log_w; ll = logsumexp(lp, 1);
    g = exp(lp - ll[:, None]); (g.sum(0), g.T @ X, einsum('nk,ni,nj->kij', g, X, X), ll.sum())``
    split over blocks of rows.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n)
    cdef Py_ssize_t cpb, b, scratch_size
    cdef dpc_scratch layout
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    cdef int tri = 1 if upper_triangular else 0
    cdef const double *dom = NULL
    cdef long long *clip_base = NULL
    if (means.shape[1] != d or prec_chol.shape[0] != K or prec_chol.shape[1] != d
            or prec_chol.shape[2] != d or log_const.shape[0] != K):
        raise ValueError("parameter shapes do not match X")
    if domain is not None:
        if domain.shape[0] != 3 or domain.shape[1] != d:
            raise ValueError("domain must have shape (3, n_features)")
        if part_clipped is None or part_clipped.shape[0] != nb:
            raise ValueError("part_clipped must have n_blocks entries when domain is given")
        if not (inv_scale > 0.0 and 0.0 < clip_target <= 1.0):
            raise ValueError("inv_scale must be > 0 and clip_target in (0, 1]")
    if (part_nk.shape[0] != nb or part_nk.shape[1] != K or part_s1.shape[0] != nb or part_s2.shape[0] != nb
            or part_ll.shape[0] != nb or part_s1.shape[1] != K or part_s1.shape[2] != d
            or part_s2.shape[1] != K or part_s2.shape[2] != d or part_s2.shape[3] != d):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    if n == 0:
        return
    part_nk[:, :] = 0.0
    part_s1[:, :, :] = 0.0
    part_s2[:, :, :, :] = 0.0
    part_ll[:] = 0.0
    if domain is not None and d > 0:
        part_clipped[:] = 0
        dom = &domain[0, 0]
        clip_base = &part_clipped[0]
    cpb = dpc_chunks_per_block(n_chunks, nb)
    nb = dpc_chunks_per_block(n_chunks, cpb)   # blocks actually used; the rest stay 0
    n_threads = max(1, min(n_threads, nb))
    scratch_size = dpe_gmm_scratch_init(&layout, d, K, NULL)
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(scratch_size * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for b in prange(nb, schedule='dynamic'):
            if buf != NULL:
                _estep_block(&X[0, 0], n, d, K, b, cpb, &means[0, 0], &prec_chol[0, 0, 0],
                             &log_const[0], tri, dom, inv_scale, clip_target,
                             &part_nk[b, 0], &part_s1[b, 0, 0], &part_s2[b, 0, 0, 0],
                             &part_ll[b], clip_base + b if clip_base != NULL else NULL, buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate E-step scratch")


cdef void _logresp_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr,
                         Py_ssize_t d, Py_ssize_t K,
                         const double *means, const double *prec_chol, const double *log_const,
                         int tri, floating *out_resp, floating *out_ll, double *buf) noexcept nogil:
    cdef Py_ssize_t npad = dpc_lane_pad(nr)
    cdef dpc_scratch s
    dpe_gmm_scratch_init(&s, d, K, buf)
    load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
    _logp_chunk(s.Xt, npad, d, K, means, prec_chol, log_const, tri, s.D, s.W, s.L)
    dpe_lse_ll(s.L, K, DPC_CHUNK_SIZE, npad, s.ll, s.tmp)
    store_log_resp(s.L, s.ll, DPC_CHUNK_SIZE, nr, K, out_resp + r0 * K, out_ll + r0)


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
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n), c, scratch_size
    cdef dpc_scratch layout
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    cdef int tri = 1 if upper_triangular else 0
    if (means.shape[1] != d or prec_chol.shape[0] != K or prec_chol.shape[1] != d
            or prec_chol.shape[2] != d or log_const.shape[0] != K
            or out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n):
        raise ValueError("shapes do not match")
    if n == 0:
        return
    n_threads = max(1, min(n_threads, n_chunks))
    scratch_size = dpe_gmm_scratch_init(&layout, d, K, NULL)
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(scratch_size * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for c in prange(n_chunks, schedule='dynamic'):
            if buf != NULL:
                _logresp_chunk(&X[0, 0], c * DPC_CHUNK_SIZE, min(DPC_CHUNK_SIZE, n - c * DPC_CHUNK_SIZE),
                               d, K, &means[0, 0], &prec_chol[0, 0, 0], &log_const[0], tri,
                               &out_log_resp[0, 0], &out_ll[0], buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate E-step scratch")


def _exp_log_wrapper(const double[::1] x, double[::1] out_exp, double[::1] out_log):
    """Test hook: ``out_exp = exp(x)`` (x <= 0) and ``out_log = log(-x)`` (x < 0) elementwise.

    Equivalent to: ``np.where(x < -708, 0, np.exp(x)), np.log(-x)``.
    """
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        out_exp[i] = dpe_exp_neg(x[i])
        out_log[i] = dpe_log_pos(-x[i])
