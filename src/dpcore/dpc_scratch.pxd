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

    ctypedef struct dpf_scratch:
        double *Xt
        double *ll
        double *tmp
        double *lanes
        float *Xs
        float *D
        float *W
        float *L
        float *sg
        float *lanes32
        float *C
        ptrdiff_t lanes_per_component
        ptrdiff_t size
    ptrdiff_t dpf_scratch_init(dpf_scratch *s, ptrdiff_t d, ptrdiff_t K, int n_work,
                               ptrdiff_t lanes_per_component, ptrdiff_t n_c, double *buf)
