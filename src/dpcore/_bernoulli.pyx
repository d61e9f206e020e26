"""Fused Bernoulli-mixture E-step: responsibilities, counts and first moments in one pass.

A mixture of K products of independent Bernoullis over d binary features, with means
``mu_kj in (0, 1)`` and weights ``pi_k``.  For a row ``x in {0,1}^d``::

    log pi_k + log p(x | k) = c_k + sum_j x_j theta_kj,
    theta_kj = log mu_kj - log(1 - mu_kj),      c_k = log pi_k + sum_j log(1 - mu_kj).

One pass over ``X`` computes these logits, their log-sum-exp (the per-row log-likelihood)
and the responsibilities ``gamma_ik``, and accumulates the additive statistics of the
M-step into float64 per-block partials::

    N_k = sum_i gamma_ik        S1_k = sum_i gamma_ik x_i        LL = sum_i log p(x_i)

(the M-step is ``pi_k = N_k / n``, ``mu_k = S1_k / N_k``; a DP version adds noise to N and
S1, as DP-EM does for the GMM).  The n x K responsibility matrix is never materialised.

Shared pieces
-------------
This module is written on the headers of the GMM E-step: the chunk loader
(``dpc_rows.h``), the log-sum-exp (``dpc_lse.h``), the count / first-moment lane
accumulators (``dpc_lanes.h``), the scratch layout (``dpc_scratch.h``), the contract
constants, block count and block plan (``dpc_contract.h``) and the parallel driver
(``run_blocks``, ``_driver.pxd``).  Only the logits are its own (``dpc_bernoulli.h``).

Work layout (reproducibility contract, as ``_estep.pyx``)
---------------------------------------------------------
Chunks of ``CHUNK_SIZE`` rows, grouped into ``block_count(n, d, K) =
dpc_block_count(n, K (d + 1) + 1)`` blocks; block ``b`` owns row ``b`` of the partials and
walks its chunks in order; the caller sums the rows in block order.  Results do not depend
on the thread count.  Two code paths, chosen by ``d`` only (``BERNOULLI_BLAS_MIN_D`` in
``dpc_contract.h``, 16):

* small ``d``: hand loops on the transposed chunk (logits in register tiles of 4
  components x 16 rows; S1 in 16-lane accumulators flushed once per block);
* larger ``d``: ``dgemm`` (``scipy.linalg.cython_blas``) for the logits
  ``X theta^T`` and for ``S1 += gamma^T X`` per chunk, on the rows as they lie in ``X``
  (float32 rows are upcast to a row-major float64 copy): no transposition, which costs
  more than the products for large d.  The counts still use the lanes.  The caller must
  hold BLAS to one thread.
"""
from cython cimport floating
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm

from ._driver cimport run_row_blocks, run_row_chunks
from .dpc_bernoulli cimport dpb_logits_init, dpb_logits_small, dpb_scratch_init
from .dpc_contract cimport (
    DPC_BERNOULLI_BLAS_MIN_D, DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count,
    dpc_chunk_rows, dpc_lane_pad, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_lanes cimport dpe_lanes_flush_n_s1, dpe_lanes_n_s1
from .dpc_lse cimport dpe_lse, store_log_resp
from .dpc_rows cimport load_rows, rows_f64
from .dpc_scratch cimport dpc_scratch


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``_contract.block_count(n, K * (d + 1) + 1)``.
    """
    return dpc_block_count(n, K * (d + 1) + 1)


cdef inline int _use_blas(Py_ssize_t d, int path) noexcept nogil:
    if d == 0:
        return 0          # nothing to multiply; BLAS would reject a zero leading dimension
    if path >= 0:
        return path
    return 1 if d >= DPC_BERNOULLI_BLAS_MIN_D else 0


cdef const double *_logits_chunk(const floating *X, Py_ssize_t nr, Py_ssize_t npad,
                                 Py_ssize_t d, Py_ssize_t K, const double *theta,
                                 const double *log_const, int blas,
                                 const dpc_scratch *s) noexcept nogil:
    """L[k, r] = log pi_k + log p(x_r | k) for the nr rows at X (one chunk).

    Hand loops read the rows transposed (s.Xt, returned); the BLAS path reads them
    row-major as they are (X, or a float64 copy in s.Xt for float32, returned).
    """
    cdef int m = <int> nr, dd = <int> d, kk = <int> K, ld = <int> DPC_CHUNK_SIZE
    cdef double one = 1.0
    cdef const double *Xr
    if blas:
        Xr = rows_f64(X, nr, d, s.Xt)
        # L (nr x K, col-major, ld CHUNK) := c + Xr (nr x d) @ theta^T; Xr row-major is
        # d x nr col-major, theta row-major is d x K col-major.  Padding rows keep c.
        dpb_logits_init(log_const, K, DPC_CHUNK_SIZE, npad, s.L)
        dgemm(b'T', b'N', &m, &kk, &dd, &one, <double *> Xr, &dd, <double *> theta, &dd,
              &one, s.L, &ld)
        return Xr
    load_rows(X, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
    dpb_logits_small(s.Xt, d, DPC_CHUNK_SIZE, npad, theta, log_const, K, s.L)
    return s.Xt


cdef void _stats_chunk(const floating *X, Py_ssize_t nr, Py_ssize_t d,
                       Py_ssize_t K, const double *theta, const double *log_const, int blas,
                       double *s1, double *ll_acc, const dpc_scratch *s) noexcept nogil:
    """Responsibilities of the nr rows at X, added into one block's partials / lanes."""
    cdef Py_ssize_t npad = dpc_lane_pad(nr)
    cdef Py_ssize_t k, r
    cdef int m = <int> nr, dd = <int> d, kk = <int> K, ld = <int> DPC_CHUNK_SIZE
    cdef double one = 1.0, acc = 0.0
    cdef const double *Xc = _logits_chunk(X, nr, npad, d, K, theta, log_const, blas, s)
    dpe_lse(s.L, K, DPC_CHUNK_SIZE, nr, npad, s.ll, s.tmp)
    for r in range(nr):
        acc += s.ll[r]
    ll_acc[0] += acc
    for k in range(K):
        dpe_lanes_n_s1(Xc, 0 if blas else d, DPC_CHUNK_SIZE, npad, s.L + k * DPC_CHUNK_SIZE,
                       NULL, s.lanes + k * s.lanes_per_component)
    if blas:
        # s1 (K x d row-major = d x K col-major) += Xr^T (d x nr) @ gamma (nr x K)
        dgemm(b'N', b'N', &dd, &kk, &m, &one, <double *> Xc, &dd, s.L, &ld, &one, s1, &dd)


cdef struct _Args:
    # what a block of either pass reads (from the driver's arguments) and writes
    Py_ssize_t n, d, K
    dpc_block_plan plan           # bernoulli_stats: the chunks of each block
    const double *theta
    const double *log_const
    int blas
    double *nk                    # bernoulli_stats: (n_blocks, K), (n_blocks, K, d), (n_blocks,)
    double *s1                    # partials; row b is block b's
    double *ll
    void *out_resp                # bernoulli_log_resp: (n, K) and (n,) outputs, dtype of X
    void *out_ll


cdef void _set_args(_Args *a, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K,
                    const double *theta, const double *log_const, int blas) noexcept:
    """The arguments both passes read; everything else empty (NULL / 0)."""
    memset(a, 0, sizeof(_Args))
    a.n, a.d, a.K = n, d, K
    a.theta, a.log_const, a.blas = theta, log_const, blas


cdef int _stats_block(const floating *X, const void *args, Py_ssize_t b, double *buf) noexcept nogil:
    """Block ``b`` (the driver's body): its chunks in order, accumulated into its partial row."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, r0, k, i, d = a.d, K = a.K
    cdef double *nk = a.nk + b * K
    cdef double *s1 = a.s1 + b * K * d
    cdef dpc_scratch s
    dpb_scratch_init(&s, d, K, a.blas, buf)
    for i in range(K * s.lanes_per_component):
        s.lanes[i] = 0.0
    for c in range(dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)):
        r0 = c * DPC_CHUNK_SIZE
        _stats_chunk(X + r0 * d, dpc_chunk_rows(a.n, c), d, K, a.theta, a.log_const,
                     a.blas, s1, a.ll + b, &s)
    for k in range(K):
        dpe_lanes_flush_n_s1(s.lanes + k * s.lanes_per_component, 0 if a.blas else d,
                             nk + k, s1 + k * d)
    return 0


def bernoulli_stats(const floating[:, ::1] X,       # IN  (n, d) rows, entries 0 or 1
                    const double[:, ::1] theta,     # IN  (K, d) log mu - log(1 - mu)
                    const double[::1] log_const,    # IN  (K,) log pi + sum_j log(1 - mu)
                    double[:, ::1] part_nk,         # OUT (n_blocks, K)
                    double[:, :, ::1] part_s1,      # OUT (n_blocks, K, d)
                    double[::1] part_ll,            # OUT (n_blocks,)
                    int n_threads,
                    int _path=-1):                  # tests: -1 by d, 0 hand loops, 1 BLAS
    """Fused Bernoulli-mixture E-step: per-block float64 partials of N, S1 and LL.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over
    axis 0 in block order.  BLAS must be limited to one thread (BLAS path).

    Equivalent to: ``lp = X @ theta.T + log_const; ll = logsumexp(lp, 1);
    g = exp(lp - ll[:, None]); (g.sum(0), g.T @ X, ll.sum())`` split over blocks of rows.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = theta.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef dpc_scratch layout
    cdef int blas = _use_blas(d, _path)
    cdef _Args a
    if K < 1 or theta.shape[1] != d or log_const.shape[0] != K:
        raise ValueError("parameter shapes do not match X")
    if (part_nk.shape[0] != nb or part_nk.shape[1] != K or part_s1.shape[0] != nb
            or part_s1.shape[1] != K or part_s1.shape[2] != d or part_ll.shape[0] != nb):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    if n == 0:
        return
    part_nk[:, :] = 0.0
    part_s1[:, :, :] = 0.0
    part_ll[:] = 0.0
    _set_args(&a, n, d, K, &theta[0, 0], &log_const[0], blas)
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
    a.nk, a.s1, a.ll = &part_nk[0, 0], &part_s1[0, 0, 0], &part_ll[0]
    run_row_blocks(&X[0, 0], _stats_block[float], _stats_block[double], &a, a.plan.n_busy,
                   dpb_scratch_init(&layout, d, K, blas, NULL), n_threads, "Bernoulli E-step scratch")


cdef int _logresp_chunk(const floating *X, const void *args, Py_ssize_t c,
                        double *buf) noexcept nogil:
    """Chunk ``c`` of bernoulli_log_resp (the driver's body): the logits of its rows, their
    log-sum-exp and the log responsibilities."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t r0 = c * DPC_CHUNK_SIZE, nr = dpc_chunk_rows(a.n, c)
    cdef Py_ssize_t d = a.d, K = a.K, npad = dpc_lane_pad(nr)
    cdef dpc_scratch s
    dpb_scratch_init(&s, d, K, a.blas, buf)
    _logits_chunk(X + r0 * d, nr, npad, d, K, a.theta, a.log_const, a.blas, &s)
    store_log_resp(s.L, s.ll, s.tmp, DPC_CHUNK_SIZE, nr, npad, K,
                   <floating *> a.out_resp + r0 * K, <floating *> a.out_ll + r0)
    return 0


def bernoulli_log_resp(const floating[:, ::1] X,      # IN  (n, d)
                       const double[:, ::1] theta,    # IN  (K, d)
                       const double[::1] log_const,   # IN  (K,)
                       floating[:, ::1] out_log_resp, # OUT (n, K) log gamma_ik
                       floating[::1] out_ll,          # OUT (n,) log p(x_i)
                       int n_threads,
                       int _path=-1):
    """Per-row log responsibilities and log-likelihoods (predict / score_samples).

    Equivalent to: ``lp = X @ theta.T + log_const; ll = logsumexp(lp, 1);
    (lp - ll[:, None], ll)``.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = theta.shape[0]
    cdef dpc_scratch layout
    cdef int blas = _use_blas(d, _path)
    cdef _Args a
    if (K < 1 or theta.shape[1] != d or log_const.shape[0] != K
            or out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n):
        raise ValueError("shapes do not match")
    if n == 0:
        return
    _set_args(&a, n, d, K, &theta[0, 0], &log_const[0], blas)
    a.out_resp, a.out_ll = &out_log_resp[0, 0], &out_ll[0]
    run_row_chunks(&X[0, 0], n, _logresp_chunk[float], _logresp_chunk[double], &a,
                   dpb_scratch_init(&layout, d, K, blas, NULL), n_threads, "Bernoulli E-step scratch")
