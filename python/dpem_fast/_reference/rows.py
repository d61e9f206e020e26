"""Numpy twin of the kernels' row loader (``dpc_rows.h``): rows into the unit ball of a domain.

Test oracle of every kernel that takes a declared domain.  Plain float64 arithmetic for
finite rows of moderate size (the loader, and :func:`dpem_fast._preprocess.scale_and_clip`,
also guard rows whose arithmetic would overflow; the oracle leaves those cases out).  The
domain is read by its public fields only: ``bounds`` (a pair of arrays, or None),
``center`` and ``scale``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["scale_and_clip_reference", "map_rows_reference"]


def scale_and_clip_reference(X, domain):
    """:func:`map_rows_reference` with the fields of a domain object."""
    return map_rows_reference(X, domain.center, domain.scale, domain.bounds)


def map_rows_reference(X, center, scale, bounds=None):
    """``(Z, n_clipped)``: every row clipped to the box ``bounds`` = (lower, upper) (if any),
    then ``(a - center) / scale`` feature by feature, then, where its norm exceeds 1, scaled to
    norm ``1 - 8 (d + 2) eps`` (a little below 1: the loader's target, which rounding cannot
    push outside the ball).  ``n_clipped``: the rows either clip changed.  Float64."""
    Z = np.array(X, dtype=np.float64)
    d = Z.shape[1]
    boxed = np.zeros(Z.shape[0], dtype=bool)
    if bounds is not None:
        lo, hi = (np.asarray(b, dtype=np.float64) for b in bounds)
        boxed = np.any((Z < lo) | (Z > hi), axis=1)
        Z = np.clip(Z, lo, hi)
    Z = (Z - center) / scale
    norms = np.sqrt(np.sum(Z * Z, axis=1))
    over = norms > 1.0
    Z[over] *= ((1.0 - 8.0 * (d + 2) * np.finfo(np.float64).eps) / norms[over])[:, None]
    return Z, int(np.count_nonzero(boxed | over))
