# Declarations of dpc_kmeans.h: the k-means centre table, assignment and accumulation.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_kmeans.h" nogil:
    enum:
        DPK_LD
        DPK_SMALL_D
        DPK_PATH_FMA
        DPK_PATH_AVX2
        DPK_PATH_DIRECT
    ptrdiff_t dpk_table_size(ptrdiff_t d, ptrdiff_t K)
    void dpk_centre_table(const double *C, ptrdiff_t d, ptrdiff_t K, double *tab)
    void dpk_centre_bounds(const double *C, ptrdiff_t d, ptrdiff_t K, const double *tab,
                           double *cmax, double *hmax)
    int dpk_simd_path()
    void dpk_assign(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                    const double *tab, ptrdiff_t K, double xmax, double cmax, double hmax,
                    double *best, double *lab, int path)
    void dpk_distances(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                       const double *C, const double *lab, double *dist, int simd)
    void dpk_accumulate(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                        const double *C, const double *lab,
                        double *counts, double *sums, double *inertia, int simd)
