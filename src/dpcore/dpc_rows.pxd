# Declarations of dpc_rows.h (the row loader), and fused-type front ends for kernels
# written over ``floating``.
from cython cimport floating
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_rows.h" nogil:
    void dpe_load_f64(const double *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld,
                      double *Xt)
    void dpe_load_f32(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld,
                      double *Xt)
    void dpe_upcast_f32(const float *X, ptrdiff_t m, double *out)
    ptrdiff_t dpe_load_domain_f64(const double *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                                  ptrdiff_t ld, const double *dom, double inv_scale,
                                  double target, double *Xt)
    ptrdiff_t dpe_load_domain_f32(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                                  ptrdiff_t ld, const double *dom, double inv_scale,
                                  double target, double *Xt)


cdef inline void load_rows(const floating *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                           ptrdiff_t ld, double *Xt) noexcept nogil:
    """Xt[i, r] = X[r, i] as float64 for r < nr (X: the chunk's first row), 0 up to npad."""
    if floating is double:
        dpe_load_f64(X, d, nr, npad, ld, Xt)
    else:
        dpe_load_f32(X, d, nr, npad, ld, Xt)


cdef inline ptrdiff_t load_rows_domain(const floating *X, ptrdiff_t d, ptrdiff_t nr,
                                       ptrdiff_t npad, ptrdiff_t ld, const double *dom,
                                       double inv_scale, double target,
                                       double *Xt) noexcept nogil:
    """As load_rows, each row mapped into the unit ball of the domain ``dom``
    (lower, upper, center); returns the number of rows rescaled to norm ``target``."""
    if floating is double:
        return dpe_load_domain_f64(X, d, nr, npad, ld, dom, inv_scale, target, Xt)
    else:
        return dpe_load_domain_f32(X, d, nr, npad, ld, dom, inv_scale, target, Xt)


cdef inline const double *rows_f64(const floating *X, ptrdiff_t nr, ptrdiff_t d,
                                   double *buf) noexcept nogil:
    """The nr rows at X as row-major float64: X itself for float64, else a copy in buf."""
    if floating is double:
        return X
    else:
        dpe_upcast_f32(X, nr * d, buf)
        return buf


cdef inline int check_domain(const double[:, ::1] domain, Py_ssize_t d, double inv_scale,
                             double clip_target) except -1:
    """Raise ValueError unless ``domain`` (None, or (3, d): lower, upper, center) and the
    scale and target that load_rows_domain takes with it are valid."""
    if domain is None:
        return 0
    if domain.shape[0] != 3 or domain.shape[1] != d:
        raise ValueError("domain must have shape (3, n_features)")
    if not (inv_scale > 0.0 and 0.0 < clip_target <= 1.0):
        raise ValueError("inv_scale must be > 0 and clip_target in (0, 1]")
    return 0
