# Declarations of dpc_kmeans_small.h: one chunk of the k-means statistics pass.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_kmeans_small.h" nogil:
    void dpk_stats_chunk(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                         ptrdiff_t npad, const double *tab, ptrdiff_t K, const double *C,
                         double xmax, double cmax, double hmax, double *best, double *lab,
                         double *counts, double *sums, double *inertia, int path)
