# Declarations of dpc_lse.h: column max and log-sum-exp over a chunk's K component rows.
from cython cimport floating
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_lse.h" nogil:
    void dpe_colmax(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                    double *mx, double *s)
    void dpe_lse(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                 double *ll, double *tmp)
    void dpe_lse_ll(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                    double *ll, double *tmp)


cdef inline void store_log_resp(const double *L, const double *ll, ptrdiff_t ld, ptrdiff_t nr,
                                ptrdiff_t K, floating *out_resp,
                                floating *out_ll) noexcept nogil:
    """Rows r < nr of a chunk: out_ll[r] = ll[r], out_resp[r, k] = L[k, r] - ll[r] (row-major
    (nr, K), in the output dtype): the log responsibilities after dpe_lse_ll."""
    cdef ptrdiff_t r, k
    for r in range(nr):
        out_ll[r] = <floating> ll[r]
        for k in range(K):
            out_resp[r * K + k] = <floating> (L[k * ld + r] - ll[r])
