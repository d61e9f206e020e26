# Declarations of dpc_basis.h: a Krylov basis' passes against a block of 8 columns.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_basis.h" nogil:
    enum:
        DPB_P
    void dpb_tdot8(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out, int fast)
    void dpb_sub8(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X, int fast)
    void dpb_colsq8(const double *X, ptrdiff_t d, double *out, int fast)
    void dpb_transpose(const double *src, ptrdiff_t r, ptrdiff_t c, double *dst)

cdef extern from "dpc_avx2fma.h" nogil:
    int dpc_avx2fma()
    int dpc_avx512()
