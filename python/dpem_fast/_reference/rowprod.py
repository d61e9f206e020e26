"""Numpy twin of the released operator's fused product (``dpc_rowprod.h``, issue 41).

Test oracle of :func:`dpem_fast._dpcore._rowprod.products8`; imports nothing of the package.
The kernel sums in a fixed fma order, numpy in BLAS's: the two agree to rounding, not bits.
"""
from __future__ import annotations

import numpy as np

__all__ = ["row_products_reference"]


def row_products_reference(Y, V):
    """``(Yᵀ (Y V), ‖Vᵀ y_r‖² per row)`` of a block of rows ``Y`` (n x d) and ``V`` (d x p)."""
    Y = np.asarray(Y, dtype=np.float64)
    W = Y @ np.asarray(V, dtype=np.float64)
    return Y.T @ W, np.sum(W * W, axis=1)
