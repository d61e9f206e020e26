# Declarations of dpc_kmeans_small.h: one chunk of the k-means statistics pass.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_kmeans_small.h" nogil:
    ptrdiff_t dpk_small_scratch_size(ptrdiff_t d, ptrdiff_t K)
    void dpk_acc_load(double *acc, ptrdiff_t d, ptrdiff_t K, const double *counts,
                      const double *sums)
    void dpk_acc_store(const double *acc, ptrdiff_t d, ptrdiff_t K, double *counts, double *sums)
    ptrdiff_t dpk_table_alloc_size(ptrdiff_t d, ptrdiff_t K)
    double *dpk_table_place(double *raw)
    double *dpk_small_layout(double *buf, ptrdiff_t d, double **Xt, ptrdiff_t *ld,
                             double **best, double **lab)
    void dpk_stats_chunk(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                         ptrdiff_t npad, const double *tab, ptrdiff_t K, const double *C,
                         double xmax, double cmax, double hmax, double *best, double *lab,
                         double *work, double *counts, double *sums, double *inertia,
                         int path)
