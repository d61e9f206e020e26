"""k-means assignment step and per-cluster statistics (Lloyd; DP-EM Sec. 7's k-means, DPLloyd).

One pass over ``X`` assigns every row to its nearest centre (squared Euclidean distance,
ties to the lowest index) and accumulates the additive statistics of the centre update
into float64 per-block partials::

    N_k = #{i : a(i) = k}        S_k = sum_{i : a(i) = k} x_i        W = sum_i min_k |x_i - c_k|^2

(the update is ``c_k = S_k / N_k``; the private versions add noise to N and S).  The n
labels are never materialised.

Shared pieces: the chunk loader with the declared-domain clip (``dpc_rows.h``, so a
private fit clips rows into the unit ball inside the kernel, as the GMM E-step does), the
contract constants and block count (``dpc_contract.h``) and ``DPE_CLONES``
(``dpc_simd.h``).  The assignment and accumulation are in ``dpc_kmeans.h``.

Work layout (reproducibility contract, as ``_estep.pyx``)
---------------------------------------------------------
Chunks of ``CHUNK_SIZE`` rows, grouped into ``block_count(n, d, K) =
dpc_block_count(n, K (d + 1) + 1)`` blocks; block ``b`` owns row ``b`` of the partials and
walks its chunks in order, rows in order; the caller sums the partial rows in block order.
Results do not depend on the thread count.  This module is built without
``-ffp-contract=fast``: no FMA, so distances equal the numpy twin's bit for bit.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free

from .dpc_contract cimport (
    DPC_CHUNK_SIZE, dpc_block_count, dpc_chunk_count, dpc_chunks_per_block, dpc_lane_pad,
)
from .dpc_kmeans cimport dpk_accumulate, dpk_assign
from .dpc_rows cimport load_rows, load_rows_domain


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``_contract.block_count(n, K * (d + 1) + 1)``.
    """
    return dpc_block_count(n, K * (d + 1) + 1)


cdef inline Py_ssize_t _scratch_size(Py_ssize_t d) noexcept nogil:
    """Doubles of one thread's scratch: Xt (d, CHUNK), best (CHUNK), lab (CHUNK)."""
    return (d + 2) * DPC_CHUNK_SIZE


cdef Py_ssize_t _stats_block(const floating *X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K,
                             Py_ssize_t b, Py_ssize_t chunks_per_block, const double *C,
                             const double *dom, double inv_scale, double target,
                             double *counts, double *sums, double *inertia,
                             double *buf) noexcept nogil:
    """Walk the chunks of block ``b`` in order; returns the rows clipped into the ball."""
    cdef Py_ssize_t c, r0, nr, npad, n_clipped = 0
    cdef Py_ssize_t c1 = min(dpc_chunk_count(n), (b + 1) * chunks_per_block)
    cdef double *Xt = buf
    cdef double *best = buf + d * DPC_CHUNK_SIZE
    cdef double *lab = best + DPC_CHUNK_SIZE
    for c in range(b * chunks_per_block, c1):
        r0 = c * DPC_CHUNK_SIZE
        nr = min(DPC_CHUNK_SIZE, n - r0)
        npad = dpc_lane_pad(nr)
        if dom == NULL:
            load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, Xt)
        else:
            n_clipped += load_rows_domain(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, dom, inv_scale,
                                          target, Xt)
        dpk_assign(Xt, d, DPC_CHUNK_SIZE, npad, C, K, best, lab)
        dpk_accumulate(Xt, d, DPC_CHUNK_SIZE, nr, best, lab, counts, sums, inertia)
    return n_clipped


def kmeans_stats(const floating[:, ::1] X,            # IN  (n, d) data rows
                 const double[:, ::1] centers,        # IN  (K, d) current centres
                 double[:, ::1] part_counts,          # OUT (n_blocks, K)
                 double[:, :, ::1] part_sums,         # OUT (n_blocks, K, d)
                 double[::1] part_inertia,            # OUT (n_blocks,)
                 int n_threads,
                 const double[:, ::1] domain=None,    # IN  (3, d) lower, upper, center; None = raw X
                 double inv_scale=1.0,                # 1 / radius of the declared domain
                 double clip_target=1.0,              # norm given to rows beyond the unit ball
                 long long[::1] part_clipped=None):   # OUT (n_blocks,) rows clipped per block
    """Hard assignment and per-cluster counts, sums and inertia, as per-block float64 partials.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over
    axis 0 in block order.  With ``domain``, each row is first mapped into the unit ball of
    the declared domain while it is loaded (``dpc_rows.h``); ``centers`` are then in
    those units.

    Equivalent to: ``D = sum_i (X[:, i, None] - C[None, :, i]) ** 2`` (feature by feature),
    ``a = D.argmin(1)``, then ``(bincount(a, K), [X[a == k].sum(0) for k], D.min(1).sum())``
    split over blocks of rows (Lloyd's update; DP-EM Sec. 7 k-means).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = centers.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n)
    cdef Py_ssize_t cpb, b, nc
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    cdef const double *dom = NULL
    cdef long long *clip_base = NULL
    if K < 1 or centers.shape[1] != d or d < 1:
        raise ValueError("centers must have shape (n_clusters >= 1, n_features >= 1) matching X")
    if domain is not None:
        if domain.shape[0] != 3 or domain.shape[1] != d:
            raise ValueError("domain must have shape (3, n_features)")
        if part_clipped is None or part_clipped.shape[0] != nb:
            raise ValueError("part_clipped must have n_blocks entries when domain is given")
        if not (inv_scale > 0.0 and 0.0 < clip_target <= 1.0):
            raise ValueError("inv_scale must be > 0 and clip_target in (0, 1]")
    if (part_counts.shape[0] != nb or part_counts.shape[1] != K or part_sums.shape[0] != nb
            or part_sums.shape[1] != K or part_sums.shape[2] != d or part_inertia.shape[0] != nb):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    if n == 0:
        return
    part_counts[:, :] = 0.0
    part_sums[:, :, :] = 0.0
    part_inertia[:] = 0.0
    if domain is not None:
        part_clipped[:] = 0
        dom = &domain[0, 0]
        clip_base = &part_clipped[0]
    cpb = dpc_chunks_per_block(n_chunks, nb)
    nb = dpc_chunks_per_block(n_chunks, cpb)   # blocks actually used; the rest stay 0
    n_threads = max(1, min(n_threads, nb))
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(_scratch_size(d) * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for b in prange(nb, schedule='dynamic'):
            if buf != NULL:
                nc = _stats_block(&X[0, 0], n, d, K, b, cpb, &centers[0, 0], dom, inv_scale,
                                  clip_target, &part_counts[b, 0], &part_sums[b, 0, 0],
                                  &part_inertia[b], buf)
                if clip_base != NULL:
                    clip_base[b] = nc
        free(buf)
    if failed:
        raise MemoryError("could not allocate k-means scratch")


cdef void _assign_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr, Py_ssize_t d,
                        Py_ssize_t K, const double *C, long long *out_lab, floating *out_dist,
                        double *buf) noexcept nogil:
    cdef Py_ssize_t npad = dpc_lane_pad(nr), r
    cdef double *Xt = buf
    cdef double *best = buf + d * DPC_CHUNK_SIZE
    cdef double *lab = best + DPC_CHUNK_SIZE
    load_rows(X + r0 * d, d, nr, npad, DPC_CHUNK_SIZE, Xt)
    dpk_assign(Xt, d, DPC_CHUNK_SIZE, npad, C, K, best, lab)
    for r in range(nr):
        out_lab[r0 + r] = <long long> lab[r]
        out_dist[r0 + r] = <floating> best[r]


def kmeans_assign(const floating[:, ::1] X,          # IN  (n, d)
                  const double[:, ::1] centers,      # IN  (K, d)
                  long long[::1] out_labels,         # OUT (n,) nearest centre
                  floating[::1] out_sq_dist,         # OUT (n,) squared distance to it
                  int n_threads):
    """Nearest centre of every row and the squared distance to it (predict / score).

    Equivalent to: ``D = sum_i (X[:, i, None] - C[None, :, i]) ** 2; (D.argmin(1), D.min(1))``.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = centers.shape[0]
    cdef Py_ssize_t n_chunks = dpc_chunk_count(n), c
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    if K < 1 or centers.shape[1] != d or d < 1 or out_labels.shape[0] != n or out_sq_dist.shape[0] != n:
        raise ValueError("shapes do not match")
    if n == 0:
        return
    n_threads = max(1, min(n_threads, n_chunks))
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(_scratch_size(d) * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for c in prange(n_chunks, schedule='static'):
            if buf != NULL:
                _assign_chunk(&X[0, 0], c * DPC_CHUNK_SIZE, min(DPC_CHUNK_SIZE, n - c * DPC_CHUNK_SIZE),
                              d, K, &centers[0, 0], &out_labels[0], &out_sq_dist[0], buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate k-means scratch")
