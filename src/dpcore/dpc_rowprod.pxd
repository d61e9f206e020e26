# Declarations of dpc_rowprod.h: the released operator's fused product with the exact rows.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_rowprod.h" nogil:
    enum:
        DPR_P
    void dpr_products8(const double *Y, ptrdiff_t n, ptrdiff_t d, const double *V,
                       double *out, double *sq, int fast)

cdef extern from "dpc_cliprows.h" nogil:
    ptrdiff_t dcr_clip_rows(const double *X, ptrdiff_t n, ptrdiff_t d, const double *dom, double target,
                            double *Z, double *sq, double *sums, ptrdiff_t tile, int fast)

cdef extern from "dpc_avx2fma.h" nogil:
    int dpc_avx2fma()
    int dpc_avx512()
