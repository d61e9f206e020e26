# Declarations of dpc_exactsum.h: exact, order-independent sums of doubles (a
# superaccumulator; the sum is rounded once, to nearest, as math.fsum).
from libc.stdint cimport int64_t
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_exactsum.h" nogil:
    enum:
        DPC_XS_SPAN
        DPC_XS_LIMBS
    ctypedef struct dpc_xsum:
        int64_t pending
    void dpc_xs_init(dpc_xsum *a)
    void dpc_xs_add(dpc_xsum *a, double x)
    double dpc_xs_round(dpc_xsum *a)
    double dpc_xs_sum_column(const double *p, ptrdiff_t nb, ptrdiff_t ld, ptrdiff_t j)
    void dpc_xs_sum_span(const double *p, ptrdiff_t nb, ptrdiff_t ld, ptrdiff_t j0, ptrdiff_t j1,
                         double *out)
