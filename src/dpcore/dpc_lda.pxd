# Declarations of dpc_lda.h: the per-document LDA E-step, its statistic and clipping.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_lda.h" nogil:
    double dpl_digamma(double x)
    int dpl_doc_fixed_point(const int *idx, const double *cnt, ptrdiff_t n, const double *Eb,
                            ptrdiff_t K, double alpha, int max_iter, double tol, double *gamma,
                            double *t, double *phinorm, double *acc)
    double dpl_stat_norm(const int *idx, const double *cnt, ptrdiff_t n, const double *Eb,
                         ptrdiff_t K, const double *t, const double *phinorm, double *tmp)
    void dpl_add_stat(const int *idx, const double *cnt, ptrdiff_t n, const double *Eb, ptrdiff_t K,
                      const double *t, const double *phinorm, double scale, double *out,
                      unsigned char *touched)
