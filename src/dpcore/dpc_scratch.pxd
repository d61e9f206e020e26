# Declarations of dpc_scratch.h: the one layout of the per-thread chunk scratch.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_scratch.h" nogil:
    ctypedef struct dpc_scratch:
        double *Xt
        double *D
        double *W
        double *L
        double *ll
        double *tmp
        double *sg
        double *lanes
        ptrdiff_t lanes_per_component
        ptrdiff_t size
    ptrdiff_t dpc_scratch_init(dpc_scratch *s, ptrdiff_t d, ptrdiff_t K, int n_work,
                               ptrdiff_t lanes_per_component, double *buf)
