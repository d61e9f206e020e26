"""The released operator's fused product with the exact rows (issue 41; ``dpc_rowprod.h``).

``products8(Y, V, out, sq)``: ``out = Yᵀ (Y V)`` and ``sq[r] = ‖Vᵀ y_r‖²`` for one block ``Y``
(n x d, C-contiguous float64) and ``V`` (d x 8, C-contiguous), the summation order fixed
(the header's docstring: an fma chain per entry, rows in order; the same bits on the AVX2
path and the portable one, whatever the caller's thread count).  ``FAST``: whether the AVX2 +
FMA path runs here (else :class:`~dpem_fast._engine._operator.RowProducts` keeps its BLAS
slabs: C's ``fma()`` one row at a time is slower).
"""
from .dpc_rowprod cimport DPR_P, dpr_fast, dpr_products8

FAST = bool(dpr_fast())
#: columns of V the kernel takes (the Krylov block)
COLUMNS = DPR_P


def products8(const double[:, ::1] Y, const double[:, ::1] V, double[:, ::1] out, double[::1] sq,
              bint fast=True):
    """``out = Yᵀ (Y V)``, ``sq = ‖Vᵀ y_r‖²`` (module docstring); ``fast=False``: the portable path."""
    cdef Py_ssize_t n = Y.shape[0], d = Y.shape[1]
    if V.shape[0] != d or V.shape[1] != DPR_P or out.shape[0] != d or out.shape[1] != DPR_P or sq.shape[0] != n:
        raise ValueError("products8: shapes (n, d), (d, 8), (d, 8), (n,) expected")
    if d == 0:
        sq[:] = 0.0
        return
    with nogil:
        dpr_products8(&Y[0, 0] if n else NULL, n, d, &V[0, 0], &out[0, 0], &sq[0] if n else NULL, fast)
