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
accumulators (``dpc_lanes.h``), the scratch layout (``dpc_scratch.h``) and the contract
constants and block count (``dpc_contract.h``).  Only the logits are its own
(``dpc_bernoulli.h``).

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
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from scipy.linalg.cython_blas cimport dgemm

from .dpc_bernoulli cimport dpb_logits_init, dpb_logits_small, dpb_scratch_init
from .dpc_contract cimport (
    DPC_BERNOULLI_BLAS_MIN_D, DPC_CHUNK_SIZE, dpc_block_count, dpc_chunk_count,
    dpc_chunks_per_block, dpc_lane_pad,
)
from .dpc_lanes cimport dpe_lanes_flush_n_s1, dpe_lanes_n_s1
from .dpc_lse cimport dpe_lse, dpe_lse_ll, store_log_resp
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


cdef void _stats_block(const floating *X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K,
                       Py_ssize_t b, Py_ssize_t chunks_per_block,
                       const double *theta, const double *log_const, int blas,
                       double *nk, double *s1, double *ll_acc, double *buf) noexcept nogil:
    """Walk the chunks of block ``b`` in order, accumulating into its partial row."""
    cdef Py_ssize_t c, r0, k, i
    cdef Py_ssize_t c1 = min(dpc_chunk_count(n), (b + 1) * chunks_per_block)
    cdef dpc_scratch s
    dpb_scratch_init(&s, d, K, blas, buf)
    for i in range(K * s.lanes_per_component):
        s.lanes[i] = 0.0
    for c in range(b * chunks_per_block, c1):
        r0 = c * DPC_CHUNK_SIZE
        _stats_chunk(X + r0 * d, min(DPC_CHUNK_SIZE, n - r0), d, K, theta, log_const, blas,
                     s1, ll_acc, &s)
    for k in range(K):
        dpe_lanes_flush_n_s1(s.lanes + k * s.lanes_per_component, 0 if blas else d,
                             nk + k, s1 + k * d)


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
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n)
    cdef Py_ssize_t cpb, b, scratch_size
    cdef dpc_scratch layout
    cdef int blas = _use_blas(d, _path)
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
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
    cpb = dpc_chunks_per_block(n_chunks, nb)
    nb = dpc_chunks_per_block(n_chunks, cpb)   # blocks actually used; the rest stay 0
    n_threads = max(1, min(n_threads, nb))
    scratch_size = dpb_scratch_init(&layout, d, K, blas, NULL)
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(scratch_size * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for b in prange(nb, schedule='dynamic'):
            if buf != NULL:
                _stats_block(&X[0, 0], n, d, K, b, cpb, &theta[0, 0], &log_const[0], blas,
                             &part_nk[b, 0], &part_s1[b, 0, 0], &part_ll[b], buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate Bernoulli E-step scratch")


cdef void _logresp_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr, Py_ssize_t d,
                         Py_ssize_t K, const double *theta, const double *log_const, int blas,
                         floating *out_resp, floating *out_ll, double *buf) noexcept nogil:
    cdef Py_ssize_t npad = dpc_lane_pad(nr)
    cdef dpc_scratch s
    dpb_scratch_init(&s, d, K, blas, buf)
    _logits_chunk(X + r0 * d, nr, npad, d, K, theta, log_const, blas, &s)
    dpe_lse_ll(s.L, K, DPC_CHUNK_SIZE, npad, s.ll, s.tmp)
    store_log_resp(s.L, s.ll, DPC_CHUNK_SIZE, nr, K, out_resp + r0 * K, out_ll + r0)


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
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n), c, scratch_size
    cdef dpc_scratch layout
    cdef int blas = _use_blas(d, _path)
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    if (K < 1 or theta.shape[1] != d or log_const.shape[0] != K
            or out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n):
        raise ValueError("shapes do not match")
    if n == 0:
        return
    n_threads = max(1, min(n_threads, n_chunks))
    scratch_size = dpb_scratch_init(&layout, d, K, blas, NULL)
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(scratch_size * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for c in prange(n_chunks, schedule='dynamic'):
            if buf != NULL:
                _logresp_chunk(&X[0, 0], c * DPC_CHUNK_SIZE, min(DPC_CHUNK_SIZE, n - c * DPC_CHUNK_SIZE),
                               d, K, &theta[0, 0], &log_const[0], blas,
                               &out_log_resp[0, 0], &out_ll[0], buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate Bernoulli E-step scratch")
