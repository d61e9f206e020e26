"""k-means assignment step and per-cluster statistics (Lloyd; DP-EM Sec. 7's k-means, DPLloyd).

One pass over ``X`` assigns every row to its nearest centre (squared Euclidean distance,
ties to the lowest index) and accumulates the additive statistics of the centre update
into float64 per-block partials::

    N_k = #{i : a(i) = k}        S_k = sum_{i : a(i) = k} x_i        W = sum_i min_k |x_i - c_k|^2

(the update is ``c_k = S_k / N_k``; the private versions add noise to N and S).  The n
labels are never materialised.

The nearest centre is found from the scores ``h_k - x . c_k`` (``h_k = |c_k|^2 / 2``, one
fma per feature, register-tiled like a matrix product: ``dpc_kmeans.h``), the same on every
code path and machine; ``W`` and the distances returned are the direct sums of squared
differences of the twin, bit for bit.  Labels agree with the numpy twin except at near-ties
within rounding.

Shared pieces: the chunk loader with the declared-domain clip (``dpc_rows.h``, so a
private fit clips rows into the unit ball inside the kernel, as the GMM E-step does), the
contract constants, block count and block plan (``dpc_contract.h``) and the parallel driver
(``_driver.pxd``).  The centre table, assignment and accumulation are in ``dpc_kmeans.h``;
one chunk of ``kmeans_stats`` (with its faster small-d assignment) in ``dpc_kmeans_small.h``.

Work layout (reproducibility contract, as ``_estep.pyx``)
---------------------------------------------------------
Chunks of ``CHUNK_SIZE`` rows, grouped into ``block_count(n, d, K) =
dpc_block_count(n, K (d + 1) + 1)`` blocks; block ``b`` owns row ``b`` of the partials and
walks its chunks in order, rows in order; the caller sums the partial rows in block order.
Results do not depend on the thread count.  This module is built without
``-ffp-contract=fast``: the only fused multiply-adds are the explicit ones of the scores.
"""
from cython cimport floating
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int64_t
from libc.string cimport memcpy, memset

from ._driver cimport run_row_blocks, run_row_chunks
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_chunk_rows,
    dpc_lane_pad, dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_kmeans cimport (
    DPK_LD, DPK_PATH_AVX2, DPK_PATH_DIRECT, DPK_PATH_FMA, DPK_SMALL_D, dpk_assign, dpk_centre_bounds,
    dpk_centre_table, dpk_distances, dpk_simd_path, dpk_table_size,
)
from .dpc_kmeans_small cimport (
    dpk_acc_load, dpk_acc_store, dpk_small_layout, dpk_small_scratch_size, dpk_stats_chunk,
    dpk_table_alloc_size, dpk_table_place,
)
from .dpc_rows cimport check_domain, load_rows_simd


cdef int _SIMD = dpk_simd_path()


def simd_path():
    """The assignment code path this CPU runs: ``"AVX2+FMA"``, ``"portable C (fma)"`` (the
    same labels) or ``"portable C (direct distances)"`` (no hardware FMA: the twin's
    arithmetic, labels that can differ from the others' at near-ties)."""
    if _SIMD == DPK_PATH_AVX2:
        return "AVX2+FMA"
    return "portable C (fma)" if _SIMD == DPK_PATH_FMA else "portable C (direct distances)"


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``_contract.block_count(n, K * (d + 1) + 1)``.
    """
    return dpc_block_count(n, K * (d + 1) + 1)


cdef inline Py_ssize_t _scratch_size(Py_ssize_t d) noexcept nogil:
    """Doubles of one thread's scratch: Xt (d, DPK_LD), best (CHUNK), lab (CHUNK)."""
    return d * DPK_LD + 2 * DPC_CHUNK_SIZE


cdef inline Py_ssize_t _stats_scratch_size(Py_ssize_t d, Py_ssize_t K) noexcept nogil:
    """Doubles of one thread's kmeans_stats scratch: dpk_small_layout's for small d."""
    return dpk_small_scratch_size(d, K) if d <= DPK_SMALL_D else _scratch_size(d)


cdef struct _Args:
    # what a block of either pass reads (from the driver's arguments) and writes
    Py_ssize_t n, d, K
    int path                      # dpk_assign's path (DPK_PATH_*)
    int simd                      # the AVX2 loader and distances (path == DPK_PATH_AVX2)
    dpc_block_plan plan           # kmeans_stats: the chunks of each block
    const double *C               # (K, d) centres
    const double *tab             # dpk_centre_table of C
    double cmax, hmax             # its bounds (dpk_centre_bounds: the overflow guard)
    const double *dom             # NULL: raw rows
    double target
    double *counts                # kmeans_stats: (n_blocks, K), (n_blocks, K, d), (n_blocks,)
    double *sums                  # partials; row b is block b's
    double *inertia
    int64_t *clipped              # (n_blocks,) rows clipped, or NULL without a domain
    long long *out_lab            # kmeans_assign: (n,) labels and (n,) squared distances,
    void *out_dist                # dtype of X


cdef int _path_code(path) except -1:
    """The DPK_PATH_* of a kernel's ``path`` argument: None (this CPU's path, simd_path()),
    "fma" (the portable score path: the AVX2 path's labels) or "direct" (direct distances)."""
    if path is None:
        return _SIMD
    if path == "fma":
        return DPK_PATH_FMA
    if path == "direct":
        return DPK_PATH_DIRECT
    raise ValueError(f"path must be None, 'fma' or 'direct', got {path!r}")


cdef double *_set_args(_Args *a, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K, const double *C,
                       path) except NULL:
    """The arguments both passes read, with the centre table (for d <= DPK_SMALL_D placed by
    dpk_table_place, with a copy of the centres; the caller frees the returned pointer);
    everything else empty (NULL / 0)."""
    cdef int code = _path_code(path)
    cdef double *raw = <double *> PyMem_Malloc(dpk_table_alloc_size(d, K) * sizeof(double))
    cdef double *tab
    if raw == NULL:
        raise MemoryError("could not allocate the k-means centre table")
    memset(a, 0, sizeof(_Args))
    a.n, a.d, a.K, a.C = n, d, K, C
    tab = raw
    if d <= DPK_SMALL_D:
        # the small-d path's loads apart from its accumulator's page offsets (dpc_kmeans_small.h)
        tab = dpk_table_place(raw)
        memcpy(tab + dpk_table_size(d, K), C, K * d * sizeof(double))
        a.C = tab + dpk_table_size(d, K)
    a.path = code
    a.simd = a.path == DPK_PATH_AVX2
    a.target = 1.0
    dpk_centre_table(C, d, K, tab)
    dpk_centre_bounds(C, d, K, tab, &a.cmax, &a.hmax)
    a.tab = tab
    return raw


cdef int _stats_block(const floating *X, const void *args, Py_ssize_t b,
                      double *buf) noexcept nogil:
    """Block ``b`` (the driver's body): its chunks in order, rows in order, into its partial
    row; the rows clipped into the ball are counted in its ``clipped`` entry."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t c, r0, nr, npad, d = a.d, K = a.K, n_clipped = 0
    cdef ptrdiff_t ld = DPK_LD
    cdef double *Xt = buf
    cdef double *best = buf + d * DPK_LD
    cdef double *lab = best + DPC_CHUNK_SIZE
    cdef double *work = NULL
    if d <= DPK_SMALL_D:
        work = dpk_small_layout(buf, d, &Xt, &ld, &best, &lab)
        if a.path == DPK_PATH_AVX2:
            # the block's counts and sums in one accumulator (dpc_kmeans_small.h)
            dpk_acc_load(work, d, K, a.counts + b * K, a.sums + b * K * d)
        else:
            work = NULL
    for c in range(dpc_plan_first(&a.plan, b), dpc_plan_end(&a.plan, b)):
        r0 = c * DPC_CHUNK_SIZE
        nr = dpc_chunk_rows(a.n, c)
        npad = dpc_lane_pad(nr)
        n_clipped += load_rows_simd(X + r0 * d, d, nr, npad, ld, a.dom, a.target, Xt, a.simd)
        # rows mapped into the unit ball have |x_i| <= 1; raw rows: their own maximum
        dpk_stats_chunk(Xt, d, ld, nr, npad, a.tab, K, a.C, 1.0 if a.dom != NULL else -1.0,
                        a.cmax, a.hmax, best, lab, work, a.counts + b * K,
                        a.sums + b * K * d, a.inertia + b, a.path)
    if work != NULL:
        dpk_acc_store(work, d, K, a.counts + b * K, a.sums + b * K * d)
    if a.clipped != NULL:
        a.clipped[b] = n_clipped
    return 0


def kmeans_stats(const floating[:, ::1] X,            # IN  (n, d) data rows
                 const double[:, ::1] centers,        # IN  (K, d) current centres
                 double[:, ::1] part_counts,          # OUT (n_blocks, K)
                 double[:, :, ::1] part_sums,         # OUT (n_blocks, K, d)
                 double[::1] part_inertia,            # OUT (n_blocks,)
                 int n_threads,
                 const double[:, ::1] domain=None,    # IN  (4, d) lower, upper, center, 1/scale
                 double clip_target=1.0,              # norm given to rows beyond the unit ball
                 int64_t[::1] part_clipped=None,      # OUT (n_blocks,) rows clipped per block
                 path=None):                          # tests: "fma" / "direct" (_path_code)
    """Hard assignment and per-cluster counts, sums and inertia, as per-block float64 partials.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over
    axis 0 in block order.  With ``domain``, each row is first mapped into the unit ball of
    the declared domain while it is loaded (``dpc_rows.h``); ``centers`` are then in
    those units.

    Equivalent to: ``D = sum_i (X[:, i, None] - C[None, :, i]) ** 2`` (feature by feature),
    ``a = D.argmin(1)``, then ``(bincount(a, K), [X[a == k].sum(0) for k], D.min(1).sum())``
    split over blocks of rows (Lloyd's update; DP-EM Sec. 7 k-means); ``a`` from the scores
    (module docstring), equal to the twin's except at near-ties within rounding.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = centers.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef _Args a
    if K < 1 or centers.shape[1] != d or d < 1:
        raise ValueError("centers must have shape (n_clusters >= 1, n_features >= 1) matching X")
    check_domain(domain, d, clip_target)
    if domain is not None and (part_clipped is None or part_clipped.shape[0] != nb):
        raise ValueError("part_clipped must have n_blocks entries when domain is given")
    if (part_counts.shape[0] != nb or part_counts.shape[1] != K or part_sums.shape[0] != nb
            or part_sums.shape[1] != K or part_sums.shape[2] != d or part_inertia.shape[0] != nb):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    if n == 0:
        return
    part_counts[:, :] = 0.0
    part_sums[:, :, :] = 0.0
    part_inertia[:] = 0.0
    cdef double *tab = _set_args(&a, n, d, K, &centers[0, 0], path)
    try:
        a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
        a.counts, a.sums, a.inertia = &part_counts[0, 0], &part_sums[0, 0, 0], &part_inertia[0]
        if domain is not None:
            part_clipped[:] = 0
            a.dom, a.target = &domain[0, 0], clip_target
            a.clipped = &part_clipped[0]
        run_row_blocks(&X[0, 0], _stats_block[float], _stats_block[double], &a, a.plan.n_busy,
                       _stats_scratch_size(d, K), n_threads, "k-means scratch")
    finally:
        PyMem_Free(tab)


cdef int _assign_chunk(const floating *X, const void *args, Py_ssize_t c,
                       double *buf) noexcept nogil:
    """Chunk ``c`` of kmeans_assign (the driver's body): nearest centre of each of its rows."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, r0 = c * DPC_CHUNK_SIZE, r
    cdef Py_ssize_t nr = dpc_chunk_rows(a.n, c), npad = dpc_lane_pad(nr)
    cdef double *Xt = buf
    cdef double *best = buf + d * DPK_LD
    cdef double *lab = best + DPC_CHUNK_SIZE
    cdef floating *out_dist = <floating *> a.out_dist
    load_rows_simd(X + r0 * d, d, nr, npad, DPK_LD, NULL, 1.0, Xt, a.simd)
    dpk_assign(Xt, d, DPK_LD, npad, a.tab, a.K, -1.0, a.cmax, a.hmax, best, lab, a.path)
    dpk_distances(Xt, d, DPK_LD, npad, a.C, lab, best, a.simd)
    for r in range(nr):
        a.out_lab[r0 + r] = <long long> lab[r]
        out_dist[r0 + r] = <floating> best[r]
    return 0


def kmeans_assign(const floating[:, ::1] X,          # IN  (n, d)
                  const double[:, ::1] centers,      # IN  (K, d)
                  long long[::1] out_labels,         # OUT (n,) nearest centre
                  floating[::1] out_sq_dist,         # OUT (n,) squared distance to it
                  int n_threads,
                  path=None):                        # tests: "fma" / "direct" (_path_code)
    """Nearest centre of every row and the squared distance to it (predict / score).

    Equivalent to: ``D = sum_i (X[:, i, None] - C[None, :, i]) ** 2; (D.argmin(1), D.min(1))``
    (the label from the scores: equal except at near-ties within rounding; the distance to
    it exactly the twin's).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = centers.shape[0]
    cdef _Args a
    if K < 1 or centers.shape[1] != d or d < 1 or out_labels.shape[0] != n or out_sq_dist.shape[0] != n:
        raise ValueError("shapes do not match")
    if n == 0:
        return
    cdef double *tab = _set_args(&a, n, d, K, &centers[0, 0], path)
    try:
        a.out_lab, a.out_dist = &out_labels[0], &out_sq_dist[0]
        run_row_chunks(&X[0, 0], n, _assign_chunk[float], _assign_chunk[double], &a,
                       _scratch_size(d), n_threads, "k-means scratch")
    finally:
        PyMem_Free(tab)


def _load_rows_wrapper(const floating[:, ::1] X, const double[:, ::1] domain=None,
                       double clip_target=1.0, bint simd=True):
    """Test hook: the ``n <= CHUNK_SIZE`` rows of ``X`` through the chunk loader of this
    module (``load_rows_simd``: lane-wise with ``simd`` on an AVX2 machine, else the scalar
    loader), as ``(Xt, n_clipped)``: ``Xt`` of shape (d, npad), the rows' padded width.

    Equivalent to: ``scale_and_clip(X, domain)[0].T`` (to rounding; bit for bit between
    the two loaders).
    """
    import numpy as np

    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], npad = dpc_lane_pad(X.shape[0])
    cdef Py_ssize_t n_clipped
    if n < 1 or n > DPC_CHUNK_SIZE or d < 1:
        raise ValueError("X must have 1 to CHUNK_SIZE rows and at least one feature")
    check_domain(domain, d, clip_target)
    out = np.zeros((d, DPK_LD))
    cdef double[:, ::1] Xt = out
    n_clipped = load_rows_simd(&X[0, 0], d, n, npad, DPK_LD,
                               NULL if domain is None else &domain[0, 0], clip_target,
                               &Xt[0, 0], simd and _SIMD == DPK_PATH_AVX2)
    return out[:, :npad].copy(), int(n_clipped)
