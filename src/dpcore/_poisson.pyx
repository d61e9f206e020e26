"""Poisson-mixture statistics: one pass over count rows (the kernel of ``DPPoissonMixture``).

Each row's counts are clipped to the declared maximum ``M`` (``0 <= x_ij <= M``, in the
kernel: the sensitivity rests on it), and with rates ``lam`` (K, d) and weights ``w``::

    log r_ik = log w_k + sum_j (x_ij log lam_kj - lam_kj)        (log x_ij! cancels)
    gamma_i  = softmax_k(log r_i)                                  (max subtracted)
    N_k = sum_i gamma_ik        S_k = sum_i gamma_ik (x_i - c) / R
    L   = sum_i [log sum_k r_ik - sum_j log Gamma(x_ij + 1)]

with ``c = M/2`` and ``R = (M/2) sqrt(d)``, so that ``(x - c)/R`` lies in the unit ball and
the engine's shared declarations (soft counts, weighted sums) give the sensitivities.

Work layout (reproducibility contract): chunks of ``CHUNK_SIZE`` rows in
``block_count(n, d, K) = dpc_block_count(n, K (d + 1) + 1)`` blocks (``dpc_plan_blocks``),
run by the one driver (``_driver.run_blocks``); block ``b`` owns row ``b`` of the partials
and walks its rows in order; the caller sums the partials in block order.  Clipped rows are
counted in int64, as in every kernel.  Results do not depend on the thread
count.
"""
from libc.math cimport exp, lgamma, log, INFINITY
from libc.stdint cimport int64_t

from ._driver cimport run_blocks
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_plan_blocks,
    dpc_plan_end, dpc_plan_first,
)


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads."""
    return dpc_block_count(n, K * (d + 1) + 1)


ctypedef struct _Args:
    const double *X
    Py_ssize_t n, d, K
    dpc_block_plan plan           # the chunks of each block
    const double *loglam
    const double *lam
    const double *logw
    double M, c, inv_R
    double *counts
    double *sums
    double *loglik
    int64_t *clipped


cdef int _block(const void *p, Py_ssize_t b, double *lr) noexcept nogil:
    cdef const _Args *a = <const _Args *> p
    cdef Py_ssize_t d = a.d, K = a.K
    cdef Py_ssize_t r0 = dpc_plan_first(&a.plan, b) * DPC_CHUNK_SIZE
    cdef Py_ssize_t r1 = min(a.n, dpc_plan_end(&a.plan, b) * DPC_CHUNK_SIZE)
    cdef Py_ssize_t i, j, k
    cdef double x, s, mx, tot, g, lfac, ll = 0.0
    cdef int64_t clipped = 0
    cdef double *N = a.counts + b * K
    cdef double *S = a.sums + b * K * d
    cdef int cl
    for i in range(r0, r1):
        mx = -INFINITY
        for k in range(K):
            s = a.logw[k]
            for j in range(d):
                x = a.X[i * d + j]
                x = 0.0 if x < 0.0 else (a.M if x > a.M else x)
                s = s + (x * a.loglam[k * d + j] - a.lam[k * d + j])
            lr[k] = s
            if s > mx:
                mx = s
        tot = 0.0
        for k in range(K):
            lr[k] = exp(lr[k] - mx)
            tot = tot + lr[k]
        lfac = 0.0
        cl = 0
        for j in range(d):
            x = a.X[i * d + j]
            if x < 0.0 or x > a.M:
                cl = 1
            x = 0.0 if x < 0.0 else (a.M if x > a.M else x)
            lfac = lfac + lgamma(x + 1.0)
        clipped = clipped + cl
        ll = ll + (mx + log(tot) - lfac)
        for k in range(K):
            g = lr[k] / tot
            N[k] = N[k] + g
            for j in range(d):
                x = a.X[i * d + j]
                x = 0.0 if x < 0.0 else (a.M if x > a.M else x)
                S[k * d + j] = S[k * d + j] + g * ((x - a.c) * a.inv_R)
    a.loglik[b] = ll
    a.clipped[b] = clipped
    return 0


def poisson_stats(const double[:, ::1] X, const double[:, ::1] lam, const double[::1] weights, double M,
                  double[:, ::1] counts, double[:, :, ::1] sums, double[::1] loglik, int64_t[::1] clipped,
                  int n_threads):
    """Per-block partials of one pass (see the module docstring) into ``counts`` (nb, K),
    ``sums`` (nb, K, d), ``loglik`` (nb) and ``clipped`` (nb, int64: rows with a count
    outside [0, M]), all zeroed here; ``nb = block_count(n, d, K)``.  Rates must be > 0,
    weights > 0."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = lam.shape[0], k, j
    cdef Py_ssize_t nb = dpc_block_count(n, K * (d + 1) + 1)
    cdef _Args a
    if lam.shape[1] != d or weights.shape[0] != K or counts.shape[0] != nb or counts.shape[1] != K \
            or sums.shape[0] != nb or sums.shape[1] != K or sums.shape[2] != d or loglik.shape[0] != nb \
            or clipped.shape[0] != nb:
        raise ValueError("poisson_stats: inconsistent shapes")
    counts[:, :] = 0.0
    sums[:, :, :] = 0.0
    loglik[:] = 0.0
    clipped[:] = 0
    if n == 0:
        return 0
    loglam = [[log(lam[k, j]) for j in range(d)] for k in range(K)]
    import numpy as np
    cdef double[:, ::1] ll_view = np.ascontiguousarray(loglam, dtype=np.float64)
    cdef double[::1] lw_view = np.log(np.asarray(weights))
    a.X = &X[0, 0]
    a.n, a.d, a.K = n, d, K
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
    a.loglam = &ll_view[0, 0]
    a.lam = &lam[0, 0]
    a.logw = &lw_view[0]
    a.M, a.c = M, 0.5 * M
    a.inv_R = 1.0 / (0.5 * M * (<double> d) ** 0.5)
    a.counts = &counts[0, 0]
    a.sums = &sums[0, 0, 0]
    a.loglik = &loglik[0]
    a.clipped = &clipped[0]
    run_blocks(_block, &a, a.plan.n_busy, K, n_threads, "Poisson-mixture scratch")
    return 0
