"""LDA variational E-step over a minibatch of documents, with per-document clipping.

For each document ``d`` (a CSR row of term counts) the kernel runs the fixed point of
Hoffman, Blei & Bach (2010) in the ``exp(E[log theta]) exp(E[log beta])`` form (see
``dpc_lda.h``), then forms the document's expected sufficient statistic
``s_d[k, v] = c_dv phi_dvk`` (K x V), clips it to Frobenius norm ``<= clip`` and adds it
to the minibatch sum.  Clipping each document (not the sum) is what bounds the change one
document makes to the sum by ``clip`` (see ``DPLatentDirichletAllocation``).

Work layout (reproducibility contract)
--------------------------------------
Documents are cut into chunks of ``LDA_DOC_CHUNK`` and the chunks into
``lda_block_count(n, K V)`` blocks of consecutive chunks (``dpc_plan_blocks``;
``lda_block_count(n, 0)`` when only gamma is wanted: no partials); the blocks are run by
the kernels' one parallel driver (``_driver.pxd``, dynamic schedule: documents differ in
length).  Each block owns a (V, K) partial sum, a "touched" mark per term and an int64
count of its clipped documents, and adds its documents in order.  The partials are then
summed exactly, per entry, over the blocks that touched its term (a superaccumulator,
``dpc_exactsum.h``: the correctly rounded sum, whatever the block order; skipping a zero
partial adds nothing), so a document's rounding stays inside its own block
(``dpem_fast._engine._specs``, "Rounding").  The result is bit-identical for any thread
count.  (Integer additions and ``ldexp`` only: the module's ``-ffp-contract=fast`` cannot
change the exact sums.)
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free, malloc
from cython.parallel cimport threadid

from ._driver cimport run_blocks
from .dpc_contract cimport (
    DPC_LDA_DOC_CHUNK, dpc_block_plan, dpc_lda_block_count, dpc_lda_chunk_count,
    dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)
from .dpc_exactsum cimport dpc_xs_add, dpc_xs_init, dpc_xs_round, dpc_xsum
from .dpc_lda cimport dpl_add_stat, dpl_digamma, dpl_doc_fixed_point, dpl_stat_norm

ctypedef long long i64


def block_count(Py_ssize_t n, Py_ssize_t K, Py_ssize_t V):
    """Blocks (partial sums) for ``n`` documents; independent of the thread count.

    Equivalent to: ``_contract.lda_block_count(n, K * V)``.
    """
    return dpc_lda_block_count(n, K * V)


def digamma(const double[::1] x,   # IN  (m,) positive values
            double[::1] out):      # OUT (m,)
    """The kernel's digamma (for tests).  Equivalent to ``scipy.special.digamma(x)``."""
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        out[i] = dpl_digamma(x[i])


cdef struct _Args:
    # what a block reads (from lda_estep's arguments) and writes
    Py_ssize_t n, K, V, max_len
    dpc_block_plan plan           # the document chunks of each block
    const i64 *indptr
    const int *indices
    const double *counts
    const double *eb_t
    double alpha, tol, clip
    int max_iter
    bint want_stats
    double *gamma                 # (n, K)
    double *norms                 # (n,)
    int *n_updates                # (n,)
    double **partial              # (n_blocks,) (V, K) partial sums, allocated by their block
    unsigned char **touched       # (n_blocks,) (V,) terms each block added to
    int64_t *clipped              # (n_blocks,) documents clipped


cdef int _lda_block(const void *args, Py_ssize_t b, double *scratch) noexcept nogil:
    """Block ``b`` (the driver's body): its documents in order; with stats, their clipped
    statistics added into the block's own (V, K) partial.  Returns 1 if that partial could
    not be allocated."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t K = a.K, max_len = a.max_len, d, nnz_d
    cdef Py_ssize_t d0 = dpc_plan_first(&a.plan, b) * DPC_LDA_DOC_CHUNK
    cdef Py_ssize_t d1 = min(a.n, dpc_plan_end(&a.plan, b) * DPC_LDA_DOC_CHUNK)
    cdef const int *idx
    cdef const double *cnt
    cdef double nrm, scale
    cdef int64_t clipped = 0
    if a.want_stats:
        a.partial[b] = <double *> calloc(a.V * K, sizeof(double))
        a.touched[b] = <unsigned char *> calloc(a.V, 1)
        if a.partial[b] == NULL or a.touched[b] == NULL:
            return 1
    for d in range(d0, d1):
        idx = a.indices + a.indptr[d]
        cnt = a.counts + a.indptr[d]
        nnz_d = a.indptr[d + 1] - a.indptr[d]
        a.n_updates[d] = dpl_doc_fixed_point(
            idx, cnt, nnz_d, a.eb_t, K, a.alpha, a.max_iter, a.tol, a.gamma + d * K,
            scratch + max_len, scratch, scratch + max_len + K)
        nrm = dpl_stat_norm(idx, cnt, nnz_d, a.eb_t, K, scratch + max_len, scratch,
                            scratch + max_len + 2 * K)
        a.norms[d] = nrm
        if a.want_stats:
            scale = 1.0
            if nrm > a.clip:
                scale = a.clip * (1.0 - 1e-12) / nrm
                clipped += 1
            dpl_add_stat(idx, cnt, nnz_d, a.eb_t, K, scratch + max_len, scratch, scale,
                         a.partial[b], a.touched[b])
    a.clipped[b] = clipped
    return 0


def lda_estep(const i64[::1] indptr,          # IN  (n + 1,) CSR row pointers
              const int[::1] indices,         # IN  (nnz,) term ids, < V
              const double[::1] counts,       # IN  (nnz,) term counts (>= 0)
              const double[:, ::1] eb_t,      # IN  (V, K) exp(E[log beta]) transposed
              double alpha,                   # doc_topic_prior
              int max_iter,                   # max_doc_update_iter
              double tol,                     # mean_change_tol
              double clip,                    # Frobenius bound per document (inf: none)
              double[:, ::1] gamma,           # INOUT (n, K) initial -> fitted gamma
              double[:, ::1] sstats_t,        # OUT (V, K) clipped sum (zeroed here), or empty (0, K)
              double[::1] norms,              # OUT (n,) each document's norm before clipping
              int[::1] n_updates,             # OUT (n,) fixed-point updates per document
              int n_threads):
    """E-step of ``n`` documents; returns the number of documents clipped.

    Equivalent to ``dpem_fast._reference.lda.estep`` (same arguments as arrays): per
    document the fixed point of gamma, then ``s_d = c_v phi_vk``, scaled by
    ``min(1, clip (1 - 1e-12) / ||s_d||_F)`` and summed.  With ``sstats_t`` of 0 rows only
    gamma (and the norms) are computed.  The caller holds BLAS to one thread.
    """
    cdef Py_ssize_t n = gamma.shape[0], K = gamma.shape[1], V = eb_t.shape[0]
    cdef bint want_stats = sstats_t.shape[0] > 0
    if indptr.shape[0] != n + 1 or eb_t.shape[1] != K or norms.shape[0] != n or n_updates.shape[0] != n:
        raise ValueError("lda_estep: inconsistent shapes")
    if want_stats and (sstats_t.shape[0] != V or sstats_t.shape[1] != K):
        raise ValueError("lda_estep: sstats_t must have shape (V, K)")
    sstats_t[:, :] = 0.0
    if n == 0 or K == 0:
        return 0
    # without stats a block has no partial: per_block_doubles 0
    cdef Py_ssize_t nb = dpc_lda_block_count(n, K * V if want_stats else 0)
    cdef Py_ssize_t i, b, v, k, m
    cdef int64_t n_clipped = 0
    cdef _Args a
    cdef dpc_xsum *acc
    cdef dpc_xsum *acc_all
    a.n, a.K, a.V, a.max_len = n, K, V, 0
    for i in range(n):
        if indptr[i + 1] - indptr[i] > a.max_len:
            a.max_len = indptr[i + 1] - indptr[i]
    a.plan = dpc_plan_blocks(dpc_lda_chunk_count(n), nb)
    a.indptr = &indptr[0]
    a.indices = &indices[0] if indices.shape[0] > 0 else NULL    # NULL: no term in any document
    a.counts = &counts[0] if counts.shape[0] > 0 else NULL
    a.eb_t = &eb_t[0, 0] if V > 0 else NULL
    a.alpha, a.tol, a.clip, a.max_iter, a.want_stats = alpha, tol, clip, max_iter, want_stats
    a.gamma, a.norms, a.n_updates = &gamma[0, 0], &norms[0], &n_updates[0]
    a.partial = <double **> calloc(nb, sizeof(double *))
    a.touched = <unsigned char **> calloc(nb, sizeof(unsigned char *))
    a.clipped = <int64_t *> calloc(nb, sizeof(int64_t))
    try:
        if a.partial == NULL or a.touched == NULL or a.clipped == NULL:
            raise MemoryError("lda_estep: could not allocate the block partials")
        run_blocks(_lda_block, &a, a.plan.n_busy, a.max_len + 3 * K + 1, n_threads,
                   "the LDA E-step's per-thread scratch or block partials")
        if want_stats:
            # exact reduction per entry, over the blocks that touched its term (K accumulators
            # per thread)
            n_threads = max(1, min(n_threads, nb))
            acc_all = <dpc_xsum *> malloc(n_threads * K * sizeof(dpc_xsum))
            if acc_all == NULL:
                raise MemoryError("lda_estep: could not allocate the exact reduction's accumulators")
            try:
                with nogil:
                    for v in prange(V, schedule='static', num_threads=n_threads):
                        acc = acc_all + threadid() * K
                        m = 0
                        while m < nb and not (a.touched[m] != NULL and a.touched[m][v]):
                            m = m + 1
                        if m == nb:
                            continue                # no block touched the term: it stays 0
                        for k in range(K):
                            dpc_xs_init(&acc[k])
                        while m < nb:
                            if a.touched[m] != NULL and a.touched[m][v]:
                                for k in range(K):
                                    dpc_xs_add(&acc[k], a.partial[m][v * K + k])
                            m = m + 1
                        for k in range(K):
                            sstats_t[v, k] = dpc_xs_round(&acc[k])
            finally:
                free(acc_all)
        for b in range(nb):
            n_clipped += a.clipped[b]
    finally:
        if a.partial != NULL and a.touched != NULL:
            for b in range(nb):
                free(a.partial[b])
                free(a.touched[b])
        free(a.partial)
        free(a.touched)
        free(a.clipped)
    return n_clipped
