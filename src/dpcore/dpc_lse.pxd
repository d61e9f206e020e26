# Declarations of dpc_lse.h: column max and log-sum-exp over a chunk's K component rows.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_lse.h" nogil:
    void dpe_colmax(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                    double *mx, double *s)
    void dpe_lse(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                 double *ll, double *tmp)
    void dpe_lse_ll(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                    double *ll, double *tmp)
