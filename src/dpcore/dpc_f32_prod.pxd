# Declarations of dpc_f32_prod.h: the float32 path's products at d >= DPC_BLAS_MIN_D (register
# tiles in place of strmm / ssyrk).
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_f32_prod.h" nogil:
    void dpf_logp_tiles(const float *D, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, const float *P,
                        int tri, float c, float *out)
    void dpf_s2_piece(const float *W, const float *X, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t r0,
                      ptrdiff_t m, double *s2)
