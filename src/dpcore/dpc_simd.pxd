# Declarations of dpc_simd.h: vectorisable exp / log and the fixed-tree lane sums.
# (The dpe_v8 vector types and DPE_CLONES are for C code in the headers only.)
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_simd.h" nogil:
    enum:
        DPE_L
    double dpe_exp_neg(double x)
    double dpe_log_pos(double s)
    double dpe_hsum(const double *a)
    void dpe_hsum_add(const double *la, ptrdiff_t m, double *out)
