# Declarations of dpc_kmeans.h: the k-means assignment and per-cluster accumulation.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_kmeans.h" nogil:
    void dpk_assign(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                    const double *C, ptrdiff_t K, double *best, double *lab)
    void dpk_accumulate(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                        const double *best, const double *lab,
                        double *counts, double *sums, double *inertia)
