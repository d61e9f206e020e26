"""A Krylov basis' passes against a block of 8 columns (issue 41; ``dpc_basis.h``).

``tdot8(Qt, V, out)``: ``out = Qt V`` (``Qt`` the basis' m columns as rows, m x d; V d x 8);
``sub8(Qt, C, X)``: ``X -= Qtᵀ C`` (C m x 8, X d x 8); ``colsq8(X, out)``: X's columns' squared
norms; all C-contiguous float64, a fixed fma order (the header's docstring: the same bits on the
AVX-512 path, the AVX2 one and the portable one, for any thread count).  Post-processing of released values: the released operator's basis and
coordinates.  ``transpose(A, out)``: ``out = Aᵀ`` (both C-contiguous: a block between the kernels' rows and
the stores' columns).  ``FAST``: whether the AVX2 + FMA paths run here; ``WIDE``: whether the
AVX-512 ones do.  ``fast``: 0 the portable path, 1 at most the AVX2 one, 2 (the default) the
widest this CPU runs.
"""
from .dpc_basis cimport DPB_P, dpb_colsq8, dpb_sub8, dpb_tdot8, dpb_transpose, dpc_avx2fma, dpc_avx512

FAST = bool(dpc_avx2fma())
WIDE = bool(dpc_avx512())
#: columns of the block
COLUMNS = DPB_P


def tdot8(const double[:, ::1] Qt, const double[:, ::1] V, double[:, ::1] out, int fast=2):
    """``out = Qt V`` (module docstring); ``fast``: the module docstring's."""
    cdef Py_ssize_t m = Qt.shape[0], d = V.shape[0]
    if (m and Qt.shape[1] != d) or V.shape[1] != DPB_P or out.shape[0] != m or out.shape[1] != DPB_P:
        raise ValueError("tdot8: shapes (m, d), (d, 8), (m, 8) expected")
    if m == 0:
        return
    with nogil:
        dpb_tdot8(&Qt[0, 0], m, d, &V[0, 0] if d else NULL, &out[0, 0], fast)


def sub8(const double[:, ::1] Qt, const double[:, ::1] C, double[:, ::1] X, int fast=2):
    """``X -= Qtᵀ C`` (module docstring); ``fast``: the module docstring's."""
    cdef Py_ssize_t m = Qt.shape[0], d = X.shape[0]
    if (m and Qt.shape[1] != d) or C.shape[0] != m or C.shape[1] != DPB_P or X.shape[1] != DPB_P:
        raise ValueError("sub8: shapes (m, d), (m, 8), (d, 8) expected")
    if m == 0 or d == 0:
        return
    with nogil:
        dpb_sub8(&Qt[0, 0], m, d, &C[0, 0], &X[0, 0], fast)


def colsq8(const double[:, ::1] X, double[::1] out, int fast=2):
    """``out = Σ_i X_i·²`` (d x 8 to 8; module docstring); ``fast``: the module docstring's."""
    if X.shape[1] != DPB_P or out.shape[0] != DPB_P:
        raise ValueError("colsq8: shapes (d, 8), (8,) expected")
    if X.shape[0] == 0:
        out[:] = 0.0
        return
    with nogil:
        dpb_colsq8(&X[0, 0], X.shape[0], &out[0], fast)


def transpose(const double[:, ::1] A, double[:, ::1] out):
    """``out = Aᵀ`` (A r x c, out c x r, both C-contiguous float64; values moved, not changed)."""
    cdef Py_ssize_t r = A.shape[0], c = A.shape[1]
    if out.shape[0] != c or out.shape[1] != r:
        raise ValueError("transpose: shapes (r, c), (c, r) expected")
    if r == 0 or c == 0:
        return
    with nogil:
        dpb_transpose(&A[0, 0], r, c, &out[0, 0])
