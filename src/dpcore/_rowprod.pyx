"""The released operator's fused product with the exact rows (issue 41; ``dpc_rowprod.h``).

``products8(Y, V, out, sq)``: ``out = Yᵀ (Y V)`` and ``sq[r] = ‖Vᵀ y_r‖²`` for one block ``Y``
(n x d, C-contiguous float64) and ``V`` (d x 8, C-contiguous), the summation order fixed
(the header's docstring: an fma chain per entry, rows in order; the same bits on the AVX-512
path, the AVX2 one and the portable one, whatever the caller's thread count).  ``FAST``: whether
the AVX2 + FMA path runs here (else :class:`~dpem_fast._engine._operator.RowProducts` keeps its
BLAS slabs: C's ``fma()`` one row at a time is slower); ``WIDE``: whether the AVX-512 path does
(it then serves ``fast=2``, the default).

``clip_rows(X, dom, target, Z, sq, sums, tile)``: the operator's rows themselves, X (n x d) mapped
into the domain's unit ball (``dom``: the loader's (4, d) array) row-major into Z, each row's
squared norm into ``sq`` and each block of ``tile`` rows' sum into ``sums`` (``dpc_cliprows.h``);
returns the rows a clip changed; its AVX2 + FMA path runs where ``FAST`` says.
"""
from .dpc_rowprod cimport DPR_P, dcr_clip_rows, dpc_avx2fma, dpc_avx512, dpr_products8

FAST = bool(dpc_avx2fma())
WIDE = bool(dpc_avx512())
#: columns of V the kernel takes (the Krylov block)
COLUMNS = DPR_P


def products8(const double[:, ::1] Y, const double[:, ::1] V, double[:, ::1] out, double[::1] sq,
              int fast=2):
    """``out = Yᵀ (Y V)``, ``sq = ‖Vᵀ y_r‖²`` (module docstring); ``fast``: 0 the portable path, 1
    at most the AVX2 one, 2 the widest this CPU runs (the same bits on each)."""
    cdef Py_ssize_t n = Y.shape[0], d = Y.shape[1]
    if V.shape[0] != d or V.shape[1] != DPR_P or out.shape[0] != d or out.shape[1] != DPR_P or sq.shape[0] != n:
        raise ValueError("products8: shapes (n, d), (d, 8), (d, 8), (n,) expected")
    if d == 0:
        sq[:] = 0.0
        return
    with nogil:
        dpr_products8(&Y[0, 0] if n else NULL, n, d, &V[0, 0], &out[0, 0], &sq[0] if n else NULL, fast)


def clip_rows(const double[:, ::1] X, const double[:, ::1] dom, double target, double[:, ::1] Z,
              double[::1] sq, double[:, ::1] sums, Py_ssize_t tile, bint fast=True):
    """Z, sq, sums from X (module docstring); the rows changed by a clip.  ``fast=False``: the
    portable path."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nb
    cdef Py_ssize_t changed
    if tile < 1:
        raise ValueError("clip_rows: tile must be >= 1")
    nb = (n + tile - 1) // tile
    if (dom.shape[0] != 4 or dom.shape[1] != d or Z.shape[0] != n or Z.shape[1] != d or sq.shape[0] != n
            or sums.shape[0] < nb or sums.shape[1] != d):
        raise ValueError("clip_rows: shapes (n, d), (4, d), (n, d), (n,), (ceil(n / tile), d) expected")
    if n == 0 or d == 0:
        sq[:] = 0.0
        if d:
            sums[:, :] = 0.0
        return 0
    with nogil:
        changed = dcr_clip_rows(&X[0, 0], n, d, &dom[0, 0], target, &Z[0, 0], &sq[0], &sums[0, 0], tile, fast)
    return changed
