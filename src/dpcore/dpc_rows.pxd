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
    int dpe_load_domain_f64_row(const double *row, ptrdiff_t d, const double *dom, double target,
                                double *out, ptrdiff_t st)
    int dpe_load_domain_f32_row(const float *row, ptrdiff_t d, const double *dom, double target,
                                double *out, ptrdiff_t st)
    ptrdiff_t dpe_load_domain_f64(const double *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                                  ptrdiff_t ld, const double *dom, double target, double *Xt)
    ptrdiff_t dpe_load_domain_f32(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                                  ptrdiff_t ld, const double *dom, double target, double *Xt)
    ptrdiff_t dpe_load_any_f64(const double *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                               ptrdiff_t ld, const double *dom, double target, double *Xt,
                               int simd)
    ptrdiff_t dpe_load_any_f32(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                               ptrdiff_t ld, const double *dom, double target, double *Xt,
                               int simd)


cdef inline void load_rows(const floating *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                           ptrdiff_t ld, double *Xt) noexcept nogil:
    """Xt[i, r] = X[r, i] as float64 for r < nr (X: the chunk's first row), 0 up to npad."""
    if floating is double:
        dpe_load_f64(X, d, nr, npad, ld, Xt)
    else:
        dpe_load_f32(X, d, nr, npad, ld, Xt)


cdef inline ptrdiff_t load_rows_domain(const floating *X, ptrdiff_t d, ptrdiff_t nr,
                                       ptrdiff_t npad, ptrdiff_t ld, const double *dom,
                                       double target, double *Xt) noexcept nogil:
    """As load_rows, each row mapped into the unit ball of the domain ``dom``
    (lower, upper, center, inv_scale: (4, d)); returns the number of rows changed by the
    box or rescaled to norm ``target``."""
    if floating is double:
        return dpe_load_domain_f64(X, d, nr, npad, ld, dom, target, Xt)
    else:
        return dpe_load_domain_f32(X, d, nr, npad, ld, dom, target, Xt)


cdef inline ptrdiff_t load_rows_simd(const floating *X, ptrdiff_t d, ptrdiff_t nr,
                                     ptrdiff_t npad, ptrdiff_t ld, const double *dom,
                                     double target, double *Xt, int simd) noexcept nogil:
    """load_rows (``dom`` NULL, returns 0) or load_rows_domain, vectorised across rows
    when ``simd`` is nonzero on an x86-64 build (AVX2; the same numbers bit for bit)."""
    if floating is double:
        return dpe_load_any_f64(X, d, nr, npad, ld, dom, target, Xt, simd)
    else:
        return dpe_load_any_f32(X, d, nr, npad, ld, dom, target, Xt, simd)


cdef inline const double *rows_f64(const floating *X, ptrdiff_t nr, ptrdiff_t d,
                                   double *buf) noexcept nogil:
    """The nr rows at X as row-major float64: X itself for float64, else a copy in buf."""
    if floating is double:
        return X
    else:
        dpe_upcast_f32(X, nr * d, buf)
        return buf


cdef inline int check_domain(const double[:, ::1] domain, Py_ssize_t d,
                             double clip_target) except -1:
    """Raise ValueError unless ``domain`` (None, or (4, d): lower, upper, center, inv_scale)
    and the target that load_rows_domain takes with it are valid: centres finite, lower <=
    upper (no NaN), every inverse scale finite and > 0, clip_target in (0, 1]."""
    cdef Py_ssize_t i
    if domain is None:
        return 0
    if domain.shape[0] != 4 or domain.shape[1] != d:
        raise ValueError("domain must have shape (4, n_features): lower, upper, center, inv_scale")
    for i in range(d):
        if not (domain[3, i] > 0.0 and domain[3, i] <= 1.79769313486231570815e+308):
            raise ValueError("domain: every inverse scale (row 3) must be finite and > 0")
        if not (domain[2, i] - domain[2, i] == 0.0):
            raise ValueError("domain: every center (row 2) must be finite")
        if not (domain[0, i] <= domain[1, i]):
            raise ValueError("domain: lower (row 0) must be <= upper (row 1)")
    if not (0.0 < clip_target <= 1.0):
        raise ValueError("clip_target must be in (0, 1]")
    return 0


cdef inline int map_row(const floating *row, ptrdiff_t d, const double *dom, double target,
                        double *out) noexcept nogil:
    """One row mapped into the unit ball of the domain ``dom`` as load_rows_domain maps it (the
    same numbers), written row-major into ``out[:d]``; 1 if a clip changed it."""
    if floating is double:
        return dpe_load_domain_f64_row(row, d, dom, target, out, 1)
    else:
        return dpe_load_domain_f32_row(row, d, dom, target, out, 1)
