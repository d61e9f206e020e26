# Declarations of dpc_f32.h: the single-precision pieces of the E-step kernels' float32 path.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_f32.h" nogil:
    float dpf_exp_neg(float x)
    void dpf_exp_log_rows(const float *x, float *y, ptrdiff_t nx, const double *s, double *lg, ptrdiff_t ns)
    void dpf_narrow(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, float *Xs)
    void dpf_load(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld, float *Xs)
    int dpf_domain32(const double *dom, ptrdiff_t d, float *dom32)
    ptrdiff_t dpf_load_domain32(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld,
                                const float *dom32, const double *dom, double target, double *tmp, float *Xs)
    ptrdiff_t dpf_load_domain(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld,
                              const double *dom, double target, double *Xt, float *Xs)
    void dpf_lse(float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                 double *ll, double *tmp)
    void dpf_lse_ll(const float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                    double *ll, double *tmp)
    void dpf_lanes_flush(float *la32, ptrdiff_t m, double *la64)
    void dpf_prefetch(const void *p, ptrdiff_t n)
    unsigned int dpf_ftz_begin()
    void dpf_ftz_end(unsigned int m)


cdef inline object domain32(const double *dom, Py_ssize_t d, const float **out):
    """The float32 path's domain in float (``dpf_domain32``, issue 41) for one kernel call: a
    buffer the caller keeps alive for the call (returned) and ``out[0]`` pointing at it, or NULL
    (None returned) where there is no domain or it has no float form (the float64 clip then)."""
    cdef char *p
    out[0] = NULL
    if dom == NULL:
        return None
    buf = bytearray(4 * d * sizeof(float))
    p = buf
    if dpf_domain32(dom, d, <float *> p):
        out[0] = <const float *> p
    return buf
