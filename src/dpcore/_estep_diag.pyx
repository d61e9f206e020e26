"""Fused E-step of a Gaussian mixture with diagonal precisions (covariance types "diag" and
"spherical"): O(n K d) per pass instead of the full kernel's O(n K d²).

One pass over ``X`` computes, per row, ``log N(x | mu_k, diag(1/p_k²)) + log pi_k`` for every
component (``p_k``: the diagonal of the precision Cholesky factor, 1 / standard deviations),
the log-sum-exp and the responsibilities ``gamma_ik`` (DP-EM Eq. 10), and accumulates into
float64 partials the statistics a diagonal or spherical covariance needs (Eq. 11 restricted
to the diagonal)::

    N_k  = sum_i gamma_ik        S1_k = sum_i gamma_ik x_i        Q_k = sum_i gamma_ik x_i**2
    LL = sum_i log p(x_i)

(``Q_k`` is the diagonal of the full kernel's ``S2_k``; a spherical type reduces it to its
row sums, the traces, before anything is released.)

Work layout (the reproducibility contract of ``_estep.pyx``): rows in chunks of
``CHUNK_SIZE``, chunks grouped into ``block_count(n, d, K) = dpc_block_count(n, K (2 d + 1))``
blocks, block ``b`` owning row ``b`` of every partial array, the blocks run by the one
driver (``run_row_blocks``; OpenMP ``prange``, ``nogil``) and summed by the caller in block
order: bit-identical for any thread count.  Inside a chunk the rows are transposed into
the float64 scratch ``Xt`` (float32 upcast; with a declared domain each row is mapped into
the unit ball by the same loader as the full kernel, ``load_rows_domain``), and every
row sum runs in 16 fixed lanes reduced by a fixed tree (``dpc_gmm_diag.h``).  One code path
for every d (no BLAS).
"""
from cython cimport floating
from libc.stdint cimport int64_t
from libc.string cimport memset

from ._driver cimport run_row_blocks, run_row_chunks
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, DPC_F32_FLUSH_CHUNKS, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_chunk_rows,
    dpc_lane_pad, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_f32 cimport (
    domain32, dpf_ftz_begin, dpf_ftz_end, dpf_load_domain32, dpf_lanes_flush, dpf_load, dpf_load_domain, dpf_lse,
)
from .dpc_gmm_diag cimport (
    dpe_lanes_diag, dpe_lanes_diag_flush, dpe_lanes_diag_size, dpe_logp_diag, dpf_lanes_diag, dpf_logp_diag,
)
from .dpc_lse cimport dpe_lse, store_log_resp
from .dpc_rows cimport check_domain, load_rows, load_rows_domain
from .dpc_scratch cimport dpc_scratch, dpc_scratch_init, dpf_scratch, dpf_scratch_init


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``_contract.block_count(n, K * (2 * d + 1))`` (0 when n == 0).
    """
    return dpc_block_count(n, K * (2 * d + 1))


cdef inline Py_ssize_t _scratch(dpc_scratch *s, Py_ssize_t d, Py_ssize_t K, double *buf) noexcept nogil:
    """The chunk scratch (dpc_scratch.h): Xt, L, ll, tmp and the lanes of every component."""
    return dpc_scratch_init(s, d, K, 0, dpe_lanes_diag_size(d), buf)


cdef inline void _logp_chunk(const double *Xt, Py_ssize_t npad, Py_ssize_t d, Py_ssize_t K,
                             const double *means, const double *prec, const double *log_const,
                             double *L) noexcept nogil:
    """L[k, r] = log pi_k + log N(x_r | mu_k, diag(1 / prec_k²)) for the rows of one chunk."""
    dpe_logp_diag(Xt, d, DPC_CHUNK_SIZE, npad, K, means, prec, log_const, L)


cdef struct _Args:
    Py_ssize_t n, d, K
    dpc_block_plan plan           # estep: the chunks of each block
    const double *means           # (K, d)
    const double *prec            # (K, d) diagonal precision Cholesky factors
    const double *log_const       # (K,)
    const double *dom             # (4, d) or NULL: raw rows
    double target
    double *nk                    # (n_blocks, K), (n_blocks, K, d) x 2, (n_blocks,) partials
    double *s1
    double *sq
    double *ll
    int64_t *clipped              # (n_blocks,) or NULL
    void *out_resp                # log_resp: (n, K) and (n,) outputs, dtype of X
    void *out_ll
    const float *means32          # the float32 path: the parameters rounded to float
    const float *prec32
    const float *log_const32
    const float *dom32            # the float32 path's domain in float (dpf_domain32), or NULL


cdef int _estep_block(const floating *X, const void *args, Py_ssize_t b, double *buf) noexcept nogil:
    """Block ``b`` (the driver's body): its chunks in order, accumulated into its partial row."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, r, r0, nr, npad, k, i, d = a.d, K = a.K
    cdef Py_ssize_t n_clipped = 0
    cdef double acc
    cdef dpc_scratch s
    _scratch(&s, d, K, buf)
    for i in range(K * s.lanes_per_component):
        s.lanes[i] = 0.0
    for c in range(dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)):
        r0 = c * DPC_CHUNK_SIZE
        nr = dpc_chunk_rows(a.n, c)
        npad = dpc_lane_pad(nr)
        if a.dom == NULL:
            load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
        else:
            n_clipped += load_rows_domain(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, a.dom,
                                          a.target, s.Xt)
        _logp_chunk(s.Xt, npad, d, K, a.means, a.prec, a.log_const, s.L)
        dpe_lse(s.L, K, DPC_CHUNK_SIZE, nr, npad, s.ll, s.tmp)
        acc = 0.0
        for r in range(nr):
            acc += s.ll[r]
        a.ll[b] += acc
        dpe_lanes_diag(s.Xt, d, DPC_CHUNK_SIZE, npad, K, s.L, s.lanes, s.lanes_per_component)
    for k in range(K):
        dpe_lanes_diag_flush(s.lanes + k * s.lanes_per_component, d, a.nk + b * K + k,
                             a.s1 + (b * K + k) * d, a.sq + (b * K + k) * d)
    if a.clipped != NULL:
        a.clipped[b] += n_clipped
    return 0


# The float32 path (float32 rows with the parameters in float): the rules of ``_estep.pyx``'s
# float32 path -- a declared domain's clip in float (dpf_load_domain32; in float64 then rounded
# where the domain has no float form); the
# log-densities, log-sum-exp (normalised in float64) and the moments in float; a float lane
# flushed into its float64 lane every DPC_F32_FLUSH_CHUNKS chunks (at most 128 rows) and at
# the block's end; and the block runs flush-to-zero on its thread (dpf_ftz_begin, issue 41: far
# responsibilities make subnormal products g x_j and g x_j², each a slow path; the caller's
# mode is put back before the block returns).

cdef inline Py_ssize_t _single_scratch(dpf_scratch *s, Py_ssize_t d, Py_ssize_t K,
                                       double *buf) noexcept nogil:
    return dpf_scratch_init(s, d, K, 0, dpe_lanes_diag_size(d), 0, buf)


cdef int _estep_block_single(const float *X, const void *args, Py_ssize_t b,
                             double *buf) noexcept nogil:
    """Block ``b`` on the float32 path (the driver's body for float32 rows)."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, c0, c1, r, r0, nr, npad, k, i, d = a.d, K = a.K, lpc
    cdef Py_ssize_t n_clipped = 0
    cdef double acc
    cdef dpf_scratch s
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
        dpf_logp_diag(s.Xs, d, DPC_CHUNK_SIZE, npad, K, a.means32, a.prec32, a.log_const32, s.L)
        dpf_lse(s.L, K, DPC_CHUNK_SIZE, nr, npad, s.ll, s.tmp)
        acc = 0.0
        for r in range(nr):
            acc += s.ll[r]
        a.ll[b] += acc
        dpf_lanes_diag(s.Xs, d, DPC_CHUNK_SIZE, npad, K, s.L, s.lanes32, lpc)
        if (c - c0 + 1) % DPC_F32_FLUSH_CHUNKS == 0 or c + 1 == c1:
            dpf_lanes_flush(s.lanes32, K * lpc, s.lanes)
    for k in range(K):
        dpe_lanes_diag_flush(s.lanes + k * lpc, d, a.nk + b * K + k,
                             a.s1 + (b * K + k) * d, a.sq + (b * K + k) * d)
    if a.clipped != NULL:
        a.clipped[b] += n_clipped
    dpf_ftz_end(mode)
    return 0


cdef int _set_args(_Args *a, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K, const double[:, ::1] means,
                   const double[:, ::1] prec_diag, const double[::1] log_const) except -1:
    if (means.shape[1] != d or prec_diag.shape[0] != K or prec_diag.shape[1] != d
            or log_const.shape[0] != K):
        raise ValueError("parameter shapes do not match X")
    memset(a, 0, sizeof(_Args))
    a.n, a.d, a.K = n, d, K
    if K > 0 and d > 0:
        a.means, a.prec = &means[0, 0], &prec_diag[0, 0]
    if K > 0:
        a.log_const = &log_const[0]
    a.target = 1.0
    return 0


def estep_diag_stats(const floating[:, ::1] X,           # IN  (n, d) data rows
                     const double[:, ::1] means,         # IN  (K, d)
                     const double[:, ::1] prec_diag,     # IN  (K, d) diagonal precision Cholesky factors
                     const double[::1] log_const,        # IN  (K,) log pi_k + sum_j log p_kj - d/2 log(2 pi)
                     double[:, ::1] part_nk,             # OUT (n_blocks, K)
                     double[:, :, ::1] part_s1,          # OUT (n_blocks, K, d)
                     double[:, :, ::1] part_sq,          # OUT (n_blocks, K, d) sum_i g_ik x_i**2
                     double[::1] part_ll,                # OUT (n_blocks,)
                     int n_threads,
                     const double[:, ::1] domain=None,   # IN  (4, d) lower, upper, center, 1/scale
                     double clip_target=1.0,             # norm given to rows beyond the unit ball
                     int64_t[::1] part_clipped=None,     # OUT (n_blocks,) rows clipped per block
                     const float[:, ::1] means32=None,   # IN  (K, d) the float32 path: means in float
                     const float[:, ::1] prec32=None,    # IN  (K, d) diagonal factors in float
                     const float[::1] log_const32=None): # IN  (K,) constants in float
    """Fused E-step (DP-EM Eq. 10) and the diagonal Eq. 11 moments, as per-block partials.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over axis
    0 in block order.  With ``domain`` each row is mapped into the unit ball of the declared
    domain as it is loaded (as ``_estep.estep_stats`` does).  With float32 ``X`` and the
    parameters in float (``means32``, ``prec32``, ``log_const32``: all three or none) the pass
    runs on the float32 path (above).

    Equivalent to: ``lp = log_gaussian_prob_diag(X) + log_w; ll = logsumexp(lp, 1);
    g = exp(lp - ll[:, None]); (g.sum(0), g.T @ X, g.T @ X**2, ll.sum())`` split over blocks.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef dpc_scratch layout
    cdef dpf_scratch single_layout
    cdef _Args a
    cdef bint single = means32 is not None or prec32 is not None or log_const32 is not None
    _set_args(&a, n, d, K, means, prec_diag, log_const)
    check_domain(domain, d, clip_target)
    if single and (means32 is None or prec32 is None or log_const32 is None):
        raise ValueError("the float32 path needs means32, prec32 and log_const32")
    if single and floating is double:
        raise ValueError("the float32 path needs float32 rows")
    if single and (means32.shape[0] != K or means32.shape[1] != d or prec32.shape[0] != K
                   or prec32.shape[1] != d or log_const32.shape[0] != K):
        raise ValueError("float32 parameter shapes do not match X")
    if domain is not None and (part_clipped is None or part_clipped.shape[0] != nb):
        raise ValueError("part_clipped must have n_blocks entries when domain is given")
    if (part_nk.shape[0] != nb or part_nk.shape[1] != K or part_s1.shape[0] != nb
            or part_sq.shape[0] != nb or part_ll.shape[0] != nb or part_s1.shape[1] != K
            or part_s1.shape[2] != d or part_sq.shape[1] != K or part_sq.shape[2] != d):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    if n == 0:
        return
    if K == 0:
        raise ValueError("at least one component is needed")
    part_nk[:, :] = 0.0
    part_s1[:, :, :] = 0.0
    part_sq[:, :, :] = 0.0
    part_ll[:] = 0.0
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
    a.nk, a.ll = &part_nk[0, 0], &part_ll[0]
    if d > 0:
        a.s1, a.sq = &part_s1[0, 0, 0], &part_sq[0, 0, 0]
    if domain is not None and d > 0:
        part_clipped[:] = 0
        a.dom, a.target = &domain[0, 0], clip_target
        a.clipped = &part_clipped[0]
    if single:
        if d > 0:
            a.means32, a.prec32 = &means32[0, 0], &prec32[0, 0]
        a.log_const32 = &log_const32[0]
        keep = domain32(a.dom, d, &a.dom32)       # alive for the call
        run_row_blocks(&X[0, 0], _estep_block_single, _estep_block[double], &a, a.plan.n_busy,
                       _single_scratch(&single_layout, d, K, NULL), n_threads, "E-step scratch")
        return
    run_row_blocks(&X[0, 0], _estep_block[float], _estep_block[double], &a, a.plan.n_busy,
                   _scratch(&layout, d, K, NULL), n_threads, "E-step scratch")


cdef int _logresp_chunk(const floating *X, const void *args, Py_ssize_t c,
                        double *buf) noexcept nogil:
    """Chunk ``c`` of log_resp (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, K = a.K, r0 = c * DPC_CHUNK_SIZE
    cdef Py_ssize_t nr = dpc_chunk_rows(a.n, c), npad = dpc_lane_pad(nr)
    cdef dpc_scratch s
    dpc_scratch_init(&s, d, K, 0, 0, buf)
    load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
    _logp_chunk(s.Xt, npad, d, K, a.means, a.prec, a.log_const, s.L)
    store_log_resp(s.L, s.ll, s.tmp, DPC_CHUNK_SIZE, nr, npad, K,
                   <floating *> a.out_resp + r0 * K, <floating *> a.out_ll + r0)
    return 0


def log_resp_diag(const floating[:, ::1] X,              # IN  (n, d)
                  const double[:, ::1] means,            # IN  (K, d)
                  const double[:, ::1] prec_diag,        # IN  (K, d)
                  const double[::1] log_const,           # IN  (K,) as in estep_diag_stats
                  floating[:, ::1] out_log_resp,         # OUT (n, K) log gamma_ik
                  floating[::1] out_ll,                  # OUT (n,) log p(x_i)
                  int n_threads):
    """Per-row log responsibilities and log-likelihoods for diagonal precisions, O(n K d).

    Equivalent to: ``lp = log_gaussian_prob_diag(X) + log_w; ll = logsumexp(lp, 1);
    (lp - ll[:, None], ll)``.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef dpc_scratch layout
    cdef _Args a
    _set_args(&a, n, d, K, means, prec_diag, log_const)
    if out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n:
        raise ValueError("shapes do not match")
    if n == 0:
        return
    if K == 0:
        raise ValueError("at least one component is needed")
    a.out_resp, a.out_ll = &out_log_resp[0, 0], &out_ll[0]
    run_row_chunks(&X[0, 0], n, _logresp_chunk[float], _logresp_chunk[double], &a,
                   dpc_scratch_init(&layout, d, K, 0, 0, NULL), n_threads, "E-step scratch")
