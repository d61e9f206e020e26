"""Python face of the second-moment kernel (``dpem_fast._dpcore._moments``).

The additive statistics of factor analysis (DP-EM Sec. 6) over rows ``x_i`` (mapped into
the unit ball of a declared domain when one is given)::

    count = N        sum = sum_i x_i        second_moment = sum_i x_i x_i^T

They are *not* private: noise is added only by the engine's release layer.
"""
from __future__ import annotations

import numpy as np

from .._dpcore import _contract, _moments, _rowprod
from .._engine import Statistics
from .._engine._operator import RowProducts
from .._preprocess import clip_target, scale_and_clip
from .._threads import blas_single_thread, effective_n_threads
from .._validation import as_kernel_rows
from .._workspace import workspace

__all__ = ["COUNT", "SUM", "SECOND", "second_moment_stats", "second_moment_rows", "held_rows", "product_rows"]

COUNT, SUM, SECOND = "count", "sum", "second_moment"


def second_moment_stats(X, domain=None, n_threads=None) -> Statistics:
    """Count, sum and second moment of the rows of ``X`` in one blocked pass.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
    domain : DataDomain or None
        If given, each row is clipped into the unit ball of this (declared or privately
        estimated) domain while it is loaded (``dpc_rows.h``); else rows are used as they are.
    n_threads : int or None
        OpenMP threads; the result is bit-identical for every value.

    Returns
    -------
    Statistics
        ``"count"`` (1,), ``"sum"`` (d,), ``"second_moment"`` (d, d) exactly symmetric;
        ``n_clipped`` (a diagnostic, not private).

    Notes
    -----
    Equivalent to: ``Z = scale_and_clip(X, domain)[0]; ([n], Z.sum(0), Z.T @ Z)``
    (:func:`dpem_fast._reference.fa.second_moment_reference`).
    """
    X = as_kernel_rows(X)
    n, d = X.shape
    nt = effective_n_threads(n_threads)
    nb2, nb1 = _moments.block_count(n, d)
    part_s2 = np.empty((nb2, d, d))
    part_s1 = np.empty((nb1, d))
    part_clip = np.zeros(nb1, dtype=np.int64)
    kw = {}
    if domain is not None:
        kw = dict(domain=domain.loader_array(), clip_target=clip_target(d, np.float64))
    with blas_single_thread():
        _moments.second_moment(X, part_s2, part_s1, part_clip, nt, **kw)
    # exact (every entry the correctly rounded sum of its blocks; issue 34), over the lower
    # triangles the kernel writes (the upper ones are left unwritten; mirrored below)
    s2 = _contract.sum_blocks_lower(part_s2, nt) if nb2 != 1 else part_s2[0]
    _moments.mirror_lower(s2, nt)
    s1 = _contract.sum_blocks(part_s1, nt)
    # fresh arrays, this call's alone: a one-part sum holds them without a copy
    return Statistics({COUNT: np.array([float(n)]), SUM: s1, SECOND: s2}, int(n), 0.0,
                      int(part_clip.sum()), owned=True)


def second_moment_rows(X, domain, n_threads=None) -> Statistics:
    """:func:`second_moment_stats` with the second moment held as its rows (a
    :class:`~dpem_fast._engine._operator.RowProducts` of the rows mapped and clipped into the
    domain's unit ball, in float64), for a release read through its products (issue 41).  The sum
    is summed per ``TILE_ROWS`` rows, the blocks exactly, as the kernel sums it.  The rows, their
    squared norms and the blocks' sums come from one read of X (``_rowprod.clip_rows``: the
    loader's map, the norm summed in its own order) where its AVX2 path runs, else from
    :func:`~dpem_fast._preprocess.scale_and_clip`."""
    X = np.ascontiguousarray(as_kernel_rows(X), dtype=np.float64)
    n, d = X.shape
    nt = effective_n_threads(n_threads)
    sq = np.empty(n)
    if _rowprod.FAST and n and d:
        tile = _moments.TILE_ROWS
        Y, parts = workspace((n, d)), np.empty((-(-n // tile), d))
        n_clipped = _rowprod.clip_rows(X, domain.loader_array(), clip_target(d, np.float64), Y, sq, parts, tile)
        S = RowProducts([Y], d, [sq])
        s1 = parts[0] if parts.shape[0] == 1 else _contract.sum_blocks(parts, nt)
    else:
        Y, n_clipped = scale_and_clip(X, domain, sq_out=sq)
        S = RowProducts([Y], d, [sq])
        s1 = S.row_sum(nt)
    return Statistics({COUNT: np.array([float(n)]), SUM: s1, SECOND: S}, int(n), 0.0, int(n_clipped))


def held_rows(X, n_threads=None) -> Statistics:
    """The non-private fit's (``epsilon=inf``) statistics with the second moment held as the
    rows themselves (no domain map: the exact fit's rows, clipped to a declared domain already),
    for an exact update read through products: count, the sum (per ``TILE_ROWS`` rows, the
    blocks summed exactly, as :func:`second_moment_rows`); the rows' squared norms, read once
    for the trace, are left to :class:`~dpem_fast._engine._operator.RowProducts`."""
    X = np.ascontiguousarray(as_kernel_rows(X), dtype=np.float64)
    n, d = X.shape
    S = RowProducts([X], d)
    return Statistics({COUNT: np.array([float(n)]), SUM: S.row_sum(effective_n_threads(n_threads)), SECOND: S},
                      int(n), 0.0, 0)


def product_rows(A, B, n_threads=None):
    """``A @ B`` (float64) over ``n_threads`` threads with the same bits for every thread
    count (fixed row blocks, one single-threaded dgemm each; :func:`_moments.product_rows`):
    the post-processing's products with a (released) d x d matrix."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    out = np.empty((A.shape[0], B.shape[1]))
    with blas_single_thread():
        _moments.product_rows(A, B, out, effective_n_threads(n_threads))
    return out
