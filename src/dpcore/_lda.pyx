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
``lda_block_count(n, K V)`` blocks of consecutive chunks; blocks are scheduled
dynamically (documents differ in length), each block owns a (V, K) partial sum and a
"touched" mark per term and adds its documents in order.  The partials are then summed
in block order, per term, over the blocks that touched it (skipping a zero partial adds
nothing).  The result is bit-identical for any thread count.
"""
from cython.parallel cimport prange, parallel
from libc.math cimport sqrt, isfinite
from libc.stdlib cimport malloc, calloc, free

from .dpc_contract cimport DPC_LDA_DOC_CHUNK, dpc_lda_block_count
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
    cdef Py_ssize_t nb = dpc_lda_block_count(n, K * V) if want_stats else (n + DPC_LDA_DOC_CHUNK - 1) // DPC_LDA_DOC_CHUNK
    cdef Py_ssize_t n_chunks = (n + DPC_LDA_DOC_CHUNK - 1) // DPC_LDA_DOC_CHUNK
    cdef Py_ssize_t cpb = (n_chunks + nb - 1) // nb
    cdef Py_ssize_t max_len = 0, i, b, d, d0, d1, v, k, m
    for i in range(n):
        if indptr[i + 1] - indptr[i] > max_len:
            max_len = indptr[i + 1] - indptr[i]
    cdef double **partial = NULL
    cdef unsigned char **touched = NULL
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *scratch
    cdef double nrm, scale
    cdef int clipped = 0
    cdef const int *idx
    cdef const double *cnt
    cdef Py_ssize_t nnz_d
    if want_stats:
        partial = <double **> calloc(nb, sizeof(double *))
        touched = <unsigned char **> calloc(nb, sizeof(unsigned char *))
        if partial == NULL or touched == NULL:
            free(partial)
            free(touched)
            raise MemoryError()
    if n_threads < 1:
        n_threads = 1
    if n_threads > nb:
        n_threads = nb
    try:
        with nogil, parallel(num_threads=n_threads):
            scratch = <double *> malloc((max_len + 3 * K + 1) * sizeof(double))
            if scratch == NULL:
                failed_p[0] = 1
            for b in prange(nb, schedule='dynamic'):
                if scratch == NULL:
                    continue
                d0 = b * cpb * DPC_LDA_DOC_CHUNK
                d1 = min(n, (b + 1) * cpb * DPC_LDA_DOC_CHUNK)
                if d0 >= d1:
                    continue
                if want_stats:
                    partial[b] = <double *> calloc(V * K, sizeof(double))
                    touched[b] = <unsigned char *> calloc(V, 1)
                    if partial[b] == NULL or touched[b] == NULL:
                        failed_p[0] = 1
                        continue
                for d in range(d0, d1):
                    idx = &indices[indptr[d]]
                    cnt = &counts[indptr[d]]
                    nnz_d = indptr[d + 1] - indptr[d]
                    n_updates[d] = dpl_doc_fixed_point(
                        idx, cnt, nnz_d, &eb_t[0, 0], K, alpha, max_iter, tol, &gamma[d, 0],
                        scratch + max_len, scratch, scratch + max_len + K)
                    nrm = dpl_stat_norm(idx, cnt, nnz_d, &eb_t[0, 0], K, scratch + max_len, scratch,
                                        scratch + max_len + 2 * K)
                    norms[d] = nrm
                    if want_stats:
                        scale = 1.0
                        if nrm > clip:
                            scale = clip * (1.0 - 1e-12) / nrm
                            clipped += 1
                        dpl_add_stat(idx, cnt, nnz_d, &eb_t[0, 0], K, scratch + max_len, scratch,
                                     scale, partial[b], touched[b])
            free(scratch)
        if failed:
            raise MemoryError("lda_estep: could not allocate per-thread scratch or block partials")
        if want_stats:
            # block-order reduction per term, over the blocks that touched it
            with nogil:
                for v in prange(V, schedule='static', num_threads=n_threads):
                    for m in range(nb):
                        if touched[m] != NULL and touched[m][v]:
                            for k in range(K):
                                sstats_t[v, k] += partial[m][v * K + k]
    finally:
        if want_stats:
            for b in range(nb):
                free(partial[b])
                free(touched[b])
            free(partial)
            free(touched)
    return clipped
