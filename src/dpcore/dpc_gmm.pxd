# Declarations of dpc_gmm.h: the Gaussian-specific pieces of the GMM E-step.
from libc.stddef cimport ptrdiff_t

from .dpc_scratch cimport dpc_scratch

cdef extern from "dpc_gmm.h" nogil:
    void dpe_logp_small(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                        const double *mu, const double *P, int tri, double c,
                        double *D, double *out)
    void dpe_center(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                    const double *mu, double *D)
    void dpe_logp_from_y(const double *Y, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                         double c, double *out)
    ptrdiff_t dpe_gmm_scratch_init(dpc_scratch *s, ptrdiff_t d, ptrdiff_t K, double *buf)
    # the float32 path (dpc_f32.h's conventions)
    void dpf_logp_small(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                        const float *mu, const float *P, int tri, float c,
                        float *D, float *out)
    void dpf_center(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                    const float *mu, float *D)
    void dpf_logp_from_y(const float *Y, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                         float c, float *out)
