# Declarations of dpc_bernoulli.h: the Bernoulli-mixture logits and scratch layout.
from libc.stddef cimport ptrdiff_t

from .dpc_scratch cimport dpc_scratch

cdef extern from "dpc_bernoulli.h" nogil:
    void dpb_logits_small(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                          const double *theta, const double *c, ptrdiff_t K, double *L)
    void dpb_logits_init(const double *c, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad, double *L)
    ptrdiff_t dpb_scratch_init(dpc_scratch *s, ptrdiff_t d, ptrdiff_t K, int blas, double *buf)
