"""Fused E-step of a mixed-type latent-class mixture (``DPMixedMixture``): each component is a
Gaussian over the numeric columns times one categorical distribution per discrete column.

One pass over ``X`` (n, D) computes, per row, for every component k

    log pi_k + log N(x_num | mu_k, Sigma_k) + sum_j log theta_{k, j, c_j(x)}

(``Sigma_k`` full, or diagonal), its log-sum-exp (the row's log-likelihood) and the
responsibilities ``gamma_ik`` (DP-EM Eq. 10 for this exponential-family mixture), and adds
into float64 partials the expected sufficient statistics

    N_k  = sum_i gamma_ik                  S1_k = sum_i gamma_ik x_i
    S2_k = sum_i gamma_ik x_i x_i^T  (full: upper triangle; diag: the squares x_i**2)
    T_k[m] = sum_i gamma_ik [m is one of the row's category slots]      LL = sum_i log p(x_i)

Columns.  ``num_cols`` (d) are the numeric columns (gathered per row, then loaded and, with
a declared domain, mapped into the unit ball by the shared loader of ``dpc_rows.h``);
``cat_cols`` (J) hold category codes: column j has ``C_j`` declared categories and one more
slot, "other", at ``offset[j] + C_j`` (``offset[j + 1] - offset[j] = C_j + 1``).  A value
``v`` of column j is category ``v`` if it is an integer in ``[0, C_j)``, else "other" (a
public rule: unknown or missing categories, never an error about the data).

Work layout: the GMM's (``_estep.pyx``): chunks of ``CHUNK_SIZE`` rows, grouped into
``block_count(n, d, K, M, diag)`` blocks (``dpc_block_count`` of the partials' size), block
b owning row b of every partial, run by the one driver (``run_row_blocks``), summed by the
caller in block order: bit-identical for any thread count.  Moments run in the 16 fixed
lanes of ``dpc_lanes.h`` / ``dpc_gmm_diag.h``; the category sums are added row by row, in
row order, into the block's own partial row.  The Gaussian part uses the GMM's hand loops
for every d (``dpe_logp_small``, ``dpe_lanes_n_s1`` + ``dpe_lanes_s2``; diag:
``dpe_logp_diag``, ``dpe_lanes_diag``): no BLAS.  d = 0 (categorical columns only) and
J = 0 (a Gaussian mixture) are allowed.
"""
from cython cimport floating
from libc.stdint cimport int64_t
from libc.string cimport memset

from ._driver cimport run_row_blocks, run_row_chunks
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_chunk_rows,
    dpc_lane_pad, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_gmm cimport dpe_logp_small
from .dpc_gmm_diag cimport dpe_lanes_diag, dpe_lanes_diag_flush, dpe_lanes_diag_size, dpe_logp_diag
from .dpc_lanes cimport (
    dpe_lanes_flush_n_s1, dpe_lanes_flush_s2, dpe_lanes_n_s1, dpe_lanes_n_s1_size,
    dpe_lanes_s2, dpe_lanes_s2_size,
)
from .dpc_lse cimport dpe_lse, store_log_resp
from .dpc_rows cimport check_domain, load_rows, load_rows_domain
from .dpc_scratch cimport dpc_scratch, dpc_scratch_init


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K, Py_ssize_t M, bint diag):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``_contract.block_count(n, K * (1 + d + (d if diag else d * d) + M))``.
    """
    return dpc_block_count(n, K * (1 + d + (d if diag else d * d) + M))


cdef struct _Args:
    Py_ssize_t n, D, d, J, K, M
    bint diag
    int tri
    dpc_block_plan plan
    const Py_ssize_t *num_cols    # (d,)
    const Py_ssize_t *cat_cols    # (J,)
    const Py_ssize_t *offset      # (J + 1,)
    const double *means           # (K, d)
    const double *prec            # (K, d, d) full factors, or (K, d) diagonal ones
    const double *log_const       # (K,)
    const double *log_theta       # (K, M)
    const double *dom             # (4, d) or NULL
    double target
    double *nk                    # (nb, K) (nb, K, d) (nb, K, d*d | d) (nb, K, M) (nb,)
    double *s1
    double *s2
    double *cat
    double *ll
    int64_t *clipped
    void *out_resp
    void *out_ll


cdef inline Py_ssize_t _lanes(Py_ssize_t d, bint diag) noexcept nogil:
    return dpe_lanes_diag_size(d) if diag else dpe_lanes_n_s1_size(d) + dpe_lanes_s2_size(d)


cdef inline Py_ssize_t _scratch(dpc_scratch *s, Py_ssize_t d, Py_ssize_t K, Py_ssize_t J,
                                bint diag, double *buf, double **gather, double **codes) noexcept nogil:
    """The GMM scratch (Xt, D, W, L, ll, tmp, lanes), then the chunk's gathered numeric rows
    (CHUNK_SIZE x d, row-major) and its category slots (J x CHUNK_SIZE, as doubles)."""
    cdef Py_ssize_t size = dpc_scratch_init(s, d, K, 0 if diag else 2, _lanes(d, diag), buf)
    if buf != NULL:
        gather[0] = buf + size
        codes[0] = buf + size + d * DPC_CHUNK_SIZE
    return size + (d + J) * DPC_CHUNK_SIZE


cdef inline void _slots(const floating *X, const _Args *a, Py_ssize_t r0, Py_ssize_t nr,
                        double *codes) noexcept nogil:
    """codes[j, r] = the slot (offset[j] + category, or offset[j] + C_j for "other") of row
    r0 + r in categorical column j."""
    cdef Py_ssize_t j, r, c, C
    cdef double v
    for j in range(a.J):
        C = a.offset[j + 1] - a.offset[j] - 1
        for r in range(nr):
            v = <double> X[(r0 + r) * a.D + a.cat_cols[j]]
            c = C
            if v >= 0.0 and v < <double> C:
                c = <Py_ssize_t> v
                if <double> c != v:
                    c = C
            codes[j * DPC_CHUNK_SIZE + r] = <double> (a.offset[j] + c)


cdef inline Py_ssize_t _load(const floating *X, const _Args *a, Py_ssize_t r0, Py_ssize_t nr,
                             Py_ssize_t npad, const dpc_scratch *s, double *gather,
                             bint with_domain) noexcept nogil:
    """The chunk's numeric columns into s.Xt (mapped into the unit ball when a domain is
    given and ``with_domain``); returns the rows clipped."""
    cdef Py_ssize_t r, i, d = a.d
    if d == 0:
        return 0
    for r in range(nr):
        for i in range(d):
            gather[r * d + i] = <double> X[(r0 + r) * a.D + a.num_cols[i]]
    if a.dom == NULL or not with_domain:
        load_rows(<const double *> gather, d, nr, npad, DPC_CHUNK_SIZE, s.Xt)
        return 0
    return load_rows_domain(<const double *> gather, d, nr, npad, DPC_CHUNK_SIZE, a.dom, a.target, s.Xt)


cdef inline void _logp(const _Args *a, Py_ssize_t nr, Py_ssize_t npad, const dpc_scratch *s,
                       const double *codes) noexcept nogil:
    """L[k, r] = log pi_k + log N(x_r | k) + sum_j log theta[k, slot_j(r)] (rows r < nr; the
    padding keeps the Gaussian part only and is zeroed by the log-sum-exp)."""
    cdef Py_ssize_t k, j, r, d = a.d, K = a.K, M = a.M
    cdef double *Lk
    cdef const double *th
    cdef const double *cj
    if a.diag:
        dpe_logp_diag(s.Xt, d, DPC_CHUNK_SIZE, npad, K, a.means, a.prec, a.log_const, s.L)
    else:
        for k in range(K):
            dpe_logp_small(s.Xt, d, DPC_CHUNK_SIZE, npad, a.means + k * d, a.prec + k * d * d,
                           a.tri, a.log_const[k], s.D, s.L + k * DPC_CHUNK_SIZE)
    for k in range(K):
        Lk = s.L + k * DPC_CHUNK_SIZE
        th = a.log_theta + k * M
        for j in range(a.J):
            cj = codes + j * DPC_CHUNK_SIZE
            for r in range(nr):
                Lk[r] += th[<Py_ssize_t> cj[r]]


cdef int _stats_block(const floating *X, const void *args, Py_ssize_t b, double *buf) noexcept nogil:
    """Block ``b`` (the driver's body): its chunks in order, accumulated into its partial row."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, r, r0, nr, npad, k, j, i, d = a.d, K = a.K, M = a.M
    cdef Py_ssize_t n_clipped = 0
    cdef double acc
    cdef double *gather
    cdef double *codes
    cdef double *la
    cdef double *cat = a.cat + b * K * M
    cdef const double *g
    cdef const double *cj
    cdef dpc_scratch s
    _scratch(&s, d, K, a.J, a.diag, buf, &gather, &codes)
    for i in range(K * s.lanes_per_component):
        s.lanes[i] = 0.0
    for c in range(dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)):
        r0 = c * DPC_CHUNK_SIZE
        nr = dpc_chunk_rows(a.n, c)
        npad = dpc_lane_pad(nr)
        n_clipped += _load(X, a, r0, nr, npad, &s, gather, True)
        _slots(X, a, r0, nr, codes)
        _logp(a, nr, npad, &s, codes)
        dpe_lse(s.L, K, DPC_CHUNK_SIZE, nr, npad, s.ll, s.tmp)
        acc = 0.0
        for r in range(nr):
            acc += s.ll[r]
        a.ll[b] += acc
        if a.diag:
            dpe_lanes_diag(s.Xt, d, DPC_CHUNK_SIZE, npad, K, s.L, s.lanes, s.lanes_per_component)
        else:
            for k in range(K):
                la = s.lanes + k * s.lanes_per_component
                dpe_lanes_n_s1(s.Xt, d, DPC_CHUNK_SIZE, npad, s.L + k * DPC_CHUNK_SIZE, s.W, la)
                dpe_lanes_s2(s.Xt, s.W, d, DPC_CHUNK_SIZE, npad, la + dpe_lanes_n_s1_size(d))
        for k in range(K):            # category sums: row order, into the block's row
            g = s.L + k * DPC_CHUNK_SIZE
            for j in range(a.J):
                cj = codes + j * DPC_CHUNK_SIZE
                for r in range(nr):
                    cat[k * M + <Py_ssize_t> cj[r]] += g[r]
    for k in range(K):
        la = s.lanes + k * s.lanes_per_component
        if a.diag:
            dpe_lanes_diag_flush(la, d, a.nk + b * K + k, a.s1 + (b * K + k) * d, a.s2 + (b * K + k) * d)
        else:
            dpe_lanes_flush_n_s1(la, d, a.nk + b * K + k, a.s1 + (b * K + k) * d)
            dpe_lanes_flush_s2(la + dpe_lanes_n_s1_size(d), d, a.s2 + (b * K + k) * d * d)
    if a.clipped != NULL:
        a.clipped[b] += n_clipped
    return 0


cdef int _set_args(_Args *a, Py_ssize_t n, Py_ssize_t D, const Py_ssize_t[::1] num_cols,
                   const Py_ssize_t[::1] cat_cols, const Py_ssize_t[::1] offset,
                   const double[:, ::1] means, const double[:, ::1] prec, bint diag, bint tri,
                   const double[::1] log_const, const double[:, ::1] log_theta) except -1:
    """Check the shapes, the columns and the slot offsets; fill the arguments both passes read."""
    cdef Py_ssize_t d = num_cols.shape[0], J = cat_cols.shape[0], K = means.shape[0]
    cdef Py_ssize_t j, i
    if offset.shape[0] != J + 1 or offset[0] != 0:
        raise ValueError("offset must have n_categorical + 1 entries starting at 0")
    for j in range(J):
        if offset[j + 1] - offset[j] < 1:
            raise ValueError("every categorical column needs at least one slot (its 'other')")
        if not (0 <= cat_cols[j] < D):
            raise ValueError("cat_cols: column index out of range")
    for i in range(d):
        if not (0 <= num_cols[i] < D):
            raise ValueError("num_cols: column index out of range")
    if K == 0:
        raise ValueError("at least one component is needed")
    if (means.shape[1] != d or prec.shape[0] != K or prec.shape[1] != (d if diag else d * d)
            or log_const.shape[0] != K or log_theta.shape[0] != K or log_theta.shape[1] != offset[J]):
        raise ValueError("parameter shapes do not match the columns")
    memset(a, 0, sizeof(_Args))
    a.n, a.D, a.d, a.J, a.K, a.M = n, D, d, J, K, offset[J]
    a.diag = diag
    a.tri = 1 if tri else 0
    a.num_cols = &num_cols[0] if d > 0 else NULL
    a.cat_cols = &cat_cols[0] if J > 0 else NULL
    a.offset = &offset[0]
    a.means = &means[0, 0] if d > 0 else NULL
    a.prec = &prec[0, 0] if d > 0 else NULL
    a.log_const = &log_const[0]
    a.log_theta = &log_theta[0, 0] if a.M > 0 else NULL
    a.target = 1.0
    return 0


def mixed_stats(const floating[:, ::1] X,            # IN  (n, D) rows: numeric values, category codes
                const Py_ssize_t[::1] num_cols,      # IN  (d,) numeric columns
                const Py_ssize_t[::1] cat_cols,      # IN  (J,) categorical columns
                const Py_ssize_t[::1] offset,        # IN  (J + 1,) first slot of each column; M = offset[J]
                const double[:, ::1] means,          # IN  (K, d)
                const double[:, ::1] prec,           # IN  (K, d * d) full factors P_k (row-major) | (K, d) diag
                bint diag,
                bint upper_triangular,               # full: every P_k upper triangular
                const double[::1] log_const,         # IN  (K,) log pi_k + log|det P_k| - d/2 log(2 pi)
                const double[:, ::1] log_theta,      # IN  (K, M) log category probabilities
                double[:, ::1] part_nk,              # OUT (nb, K)
                double[:, :, ::1] part_s1,           # OUT (nb, K, d)
                double[:, :, ::1] part_s2,           # OUT (nb, K, d * d) upper triangle (lower = 0) | (nb, K, d)
                double[:, :, ::1] part_cat,          # OUT (nb, K, M)
                double[::1] part_ll,                 # OUT (nb,)
                int n_threads,
                const double[:, ::1] domain=None,    # IN  (4, d) lower, upper, center, 1/scale
                double clip_target=1.0,
                int64_t[::1] part_clipped=None):     # OUT (nb,) rows clipped per block
    """Fused E-step and expected sufficient statistics of the mixed mixture, as per-block
    float64 partials (``nb = block_count(n, d, K, M, diag)``; the caller sums them in block
    order and mirrors the full second moments).

    Equivalent to: ``lp = log_gaussian(Z) + log_w + sum_j log_theta[:, slot_j]`` with Z the
    numeric columns (mapped into the unit ball by ``domain``), ``ll = logsumexp(lp, 1)``,
    ``g = exp(lp - ll[:, None])``, then ``(g.sum(0), g.T @ Z, g-weighted Z Z^T or Z**2,
    g.T @ onehot(slots), ll.sum())`` (the numpy twin: ``dpem_fast._reference.mixed``).
    """
    cdef Py_ssize_t n = X.shape[0], D = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t d = num_cols.shape[0], nb
    cdef dpc_scratch layout
    cdef double *unused
    cdef _Args a
    _set_args(&a, n, D, num_cols, cat_cols, offset, means, prec, diag, upper_triangular, log_const,
              log_theta)
    nb = block_count(n, d, K, a.M, diag)
    check_domain(domain, d, clip_target)
    if domain is not None and (part_clipped is None or part_clipped.shape[0] != nb):
        raise ValueError("part_clipped must have n_blocks entries when domain is given")
    if (part_nk.shape[0] != nb or part_s1.shape[0] != nb or part_s2.shape[0] != nb
            or part_cat.shape[0] != nb or part_ll.shape[0] != nb or part_nk.shape[1] != K
            or part_s1.shape[1] != K or part_s1.shape[2] != d or part_s2.shape[1] != K
            or part_s2.shape[2] != (d if diag else d * d) or part_cat.shape[1] != K
            or part_cat.shape[2] != a.M):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K, M, diag) rows")
    if n == 0:
        return
    part_nk[:, :] = 0.0
    part_s1[:, :, :] = 0.0
    part_s2[:, :, :] = 0.0
    part_cat[:, :, :] = 0.0
    part_ll[:] = 0.0
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
    a.nk, a.ll = &part_nk[0, 0], &part_ll[0]
    a.s1 = &part_s1[0, 0, 0] if d > 0 else NULL
    a.s2 = &part_s2[0, 0, 0] if d > 0 else NULL
    a.cat = &part_cat[0, 0, 0] if a.M > 0 else NULL
    if domain is not None and d > 0:
        part_clipped[:] = 0
        a.dom, a.target = &domain[0, 0], clip_target
        a.clipped = &part_clipped[0]
    run_row_blocks(&X[0, 0], _stats_block[float], _stats_block[double], &a, a.plan.n_busy,
                   _scratch(&layout, d, K, a.J, diag, NULL, &unused, &unused), n_threads,
                   "mixed E-step scratch")


cdef int _logresp_chunk(const floating *X, const void *args, Py_ssize_t c, double *buf) noexcept nogil:
    """Chunk ``c`` of mixed_log_resp (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t r0 = c * DPC_CHUNK_SIZE
    cdef Py_ssize_t nr = dpc_chunk_rows(a.n, c), npad = dpc_lane_pad(nr)
    cdef double *gather
    cdef double *codes
    cdef dpc_scratch s
    _scratch(&s, a.d, a.K, a.J, a.diag, buf, &gather, &codes)
    _load(X, a, r0, nr, npad, &s, gather, False)
    _slots(X, a, r0, nr, codes)
    _logp(a, nr, npad, &s, codes)
    store_log_resp(s.L, s.ll, s.tmp, DPC_CHUNK_SIZE, nr, npad, a.K,
                   <floating *> a.out_resp + r0 * a.K, <floating *> a.out_ll + r0)
    return 0


def mixed_log_resp(const floating[:, ::1] X,         # IN  (n, D)
                   const Py_ssize_t[::1] num_cols,   # IN  (d,)
                   const Py_ssize_t[::1] cat_cols,   # IN  (J,)
                   const Py_ssize_t[::1] offset,     # IN  (J + 1,)
                   const double[:, ::1] means,       # IN  (K, d)
                   const double[:, ::1] prec,        # IN  (K, d * d) | (K, d)
                   bint diag,
                   bint upper_triangular,
                   const double[::1] log_const,      # IN  (K,)
                   const double[:, ::1] log_theta,   # IN  (K, M)
                   floating[:, ::1] out_log_resp,    # OUT (n, K)
                   floating[::1] out_ll,             # OUT (n,)
                   int n_threads):
    """Per-row log responsibilities and log-likelihoods (predict / score_samples), rows in
    the parameters' units (no domain map).

    Equivalent to: ``lp = log_gaussian(X[:, num_cols]) + log_w + sum_j log_theta[:, slot_j];
    ll = logsumexp(lp, 1); (lp - ll[:, None], ll)``.
    """
    cdef Py_ssize_t n = X.shape[0], D = X.shape[1], K = means.shape[0]
    cdef dpc_scratch layout
    cdef double *unused
    cdef _Args a
    _set_args(&a, n, D, num_cols, cat_cols, offset, means, prec, diag, upper_triangular, log_const,
              log_theta)
    if out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n:
        raise ValueError("shapes do not match")
    if n == 0:
        return
    a.out_resp, a.out_ll = &out_log_resp[0, 0], &out_ll[0]
    run_row_chunks(&X[0, 0], n, _logresp_chunk[float], _logresp_chunk[double], &a,
                   _scratch(&layout, a.d, K, a.J, diag, NULL, &unused, &unused), n_threads,
                   "mixed E-step scratch")
