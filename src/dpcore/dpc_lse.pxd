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


cdef inline void store_log_resp(const double *L, double *ll, double *tmp, ptrdiff_t ld,
                                ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t K, floating *out_resp,
                                floating *out_ll) noexcept nogil:
    """The log responsibilities of a chunk's rows from its log-probabilities L (K, ld):
    ll = dpe_lse_ll(L) (scratch tmp), then for rows r < nr out_ll[r] = ll[r] and
    out_resp[r, k] = L[k, r] - ll[r] (row-major (nr, K), in the output dtype)."""
    cdef ptrdiff_t r, k
    dpe_lse_ll(L, K, ld, npad, ll, tmp)
    for r in range(nr):
        out_ll[r] = <floating> ll[r]
        for k in range(K):
            out_resp[r * K + k] = <floating> (L[k * ld + r] - ll[r])
