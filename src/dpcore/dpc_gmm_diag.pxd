# Declarations of dpc_gmm_diag.h: the E-step of a Gaussian mixture with diagonal precisions.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_gmm_diag.h" nogil:
    ptrdiff_t dpe_lanes_diag_size(ptrdiff_t d)
    void dpe_logp_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                       ptrdiff_t K, const double *mu, const double *p, const double *c, double *L)
    void dpe_lanes_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                        ptrdiff_t K, const double *G, double *la, ptrdiff_t lpc)
    void dpe_lanes_diag_flush(const double *la, ptrdiff_t d, double *nk, double *s1, double *sq)
    # the float32 path (dpc_f32.h's conventions)
    void dpf_logp_diag(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, ptrdiff_t K,
                       const float *mu, const float *p, const float *c, float *L)
    void dpf_lanes_diag(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, ptrdiff_t K,
                        const float *G, float *la, ptrdiff_t lpc)
