# Declarations of dpc_lanes.h: 16-lane accumulators for counts, first and second moments.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_lanes.h" nogil:
    ptrdiff_t dpe_lanes_n_s1_size(ptrdiff_t d)
    ptrdiff_t dpe_lanes_s2_size(ptrdiff_t d)
    void dpe_lanes_n_s1(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                        const double *g, double *W, double *la)
    void dpe_lanes_s2(const double *Xt, const double *W, ptrdiff_t d, ptrdiff_t ld,
                      ptrdiff_t npad, double *la)
    void dpe_lanes_flush_n_s1(const double *la, ptrdiff_t d, double *nk, double *s1)
    void dpe_lanes_flush_s2(const double *la, ptrdiff_t d, double *s2)
    void dpe_moments_prep(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                          const double *g, double *sg, double *W, double *nk, double *s1)
    # the float32 path: float lanes of the same layout (flushed with dpf_lanes_flush)
    void dpf_lanes_n_s1(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                        const float *g, float *W, float *la)
    void dpf_lanes_s2(const float *Xs, const float *W, ptrdiff_t d, ptrdiff_t ld,
                      ptrdiff_t npad, float *la)
    void dpf_moments_prep(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                          const float *g, float *sg, float *W, float *la)
    void dpf_add_upper(const float *C, ptrdiff_t d, double *s2)
