# Declarations of dpc_gmm_diag.h: the E-step of a Gaussian mixture with diagonal precisions.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_gmm_diag.h" nogil:
    ptrdiff_t dpe_lanes_diag_size(ptrdiff_t d)
    void dpe_logp_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                       const double *mu, const double *p, double c, double *out)
    void dpe_lanes_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                        const double *g, double *la)
    void dpe_lanes_diag_flush(const double *la, ptrdiff_t d, double *nk, double *s1, double *sq)
