"""The rows of a fit: in memory, memory-mapped or streamed, always in the same superblocks.

The engine never indexes X directly.  It asks :class:`Rows` for passes over the data, each
a sequence of *superblocks*: consecutive rows, ``superblock_rows(n_features)`` of them
(``dpem_fast._dpcore._contract``; about 64 MiB of float64), the last one shorter.  Kernels
reduce each superblock to additive statistics and the engine sums them in superblock order,
so a fit on an ndarray, on a ``numpy.memmap`` of it, and on a block source reading the same
rows in blocks of any size (:mod:`dpem_fast.io`) computes the same statistics bit for bit,
and therefore — same key, same noise — the same fit.

Validation happens before anything is charged to a privacy budget: an ndarray through
scikit-learn's ``validate_data`` (:func:`~dpem_fast._validation.validate_table`: messages that name
the column); a stream by one scanning pass (row count, finiteness, the
model's own row checks).  A private fit then reads the data once per EM iteration (plus
once for each histogram of a private domain estimate).
"""
from __future__ import annotations

import numpy as np

from ..._dpcore._contract import superblock_rows
from ..._validation import validate_table
from ...io import as_row_source, is_block_source, scan
from ._rows import DataSummary, Rows, summarize

__all__ = ["DataSummary", "Rows", "summarize", "validated_rows", "kept_rows"]


def validated_rows(estimator, X, private):
    """:class:`Rows` of ``X`` for ``estimator``, validated before anything is charged.

    An ndarray (a ``numpy.memmap`` included) goes through ``validate_data`` (messages that name
    the column: :func:`~dpem_fast._validation.validate_table`) and the model's
    ``_prepare_rows``; a block source is scanned once (finite values, at least one row, the
    model's row checks on every superblock).
    """
    from ._dask import dask_rows, is_dask_array

    if is_dask_array(X):                       # never gathered: validated chunk by chunk on the workers
        rows = dask_rows(X, private, estimator._rows_task())     # the public row check, not the estimator
        estimator.n_features_in_ = rows.n_features
        return rows
    if is_block_source(X):
        d = int(X.n_features)
        source = as_row_source(X, superblock_rows(d))
        n, lo, hi, max_abs = scan(source, check_block=estimator._prepare_rows)
        estimator.n_features_in_ = d
        summary = DataSummary(n, d, *((lo, hi, max_abs) if not private else (None, None, None)))
        return Rows(source, estimator._prepare_rows, summary)
    # scikit-learn's finiteness check sums X first: finite rows near DBL_MAX overflow that
    # sum (a RuntimeWarning) before the exact elementwise check decides
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            X = validate_table(estimator, X, dtype=[np.float64, np.float32], order="C", ensure_min_samples=1)
        except TypeError as exc:
            raise TypeError("X must be array-like, a numpy.memmap or a block source with n_features and "
                            f"iter_blocks() (dpem_fast.io); {exc}") from exc
    X = estimator._prepare_rows(X)
    summary = summarize(X) if not private else DataSummary(X.shape[0], X.shape[1])
    return Rows(as_row_source(X, superblock_rows(X.shape[1])), None, summary)


class _KeptBlocks:
    """The rows ``keep`` selects of a validated :class:`Rows`, as a block source (one block per
    superblock of the rows, in order): regrouped by :func:`~dpem_fast.io.as_row_source` into
    the standard superblocks, so that every source of the same rows gives the same passes."""

    def __init__(self, rows, keep):
        self._rows = rows
        self._keep = keep
        self.n_features = rows.n_features
        self.dtype = rows.dtype
        self.n_rows = int(np.count_nonzero(keep))

    def iter_blocks(self):
        r0 = 0
        for block in self._rows.superblocks():
            k = self._keep[r0:r0 + block.shape[0]]
            r0 += block.shape[0]
            yield block[k]
        if r0 != self._keep.size:
            raise ValueError("X: a pass of the block source yielded another number of rows than its first")


def kept_rows(rows, keep):
    """:class:`Rows` of the rows of ``rows`` that the bool mask ``keep`` selects, in order (the
    contribution bounding of a person-level fit, :mod:`~dpem_fast._engine._groups`).  An
    in-memory array is gathered once; a memory map or a stream is filtered pass by pass (never
    copied whole).  Either way the superblocks are the standard ones of the kept rows, so the
    fit is the same bit for bit.  The summary holds the shape only (a private fit's)."""
    d = rows.n_features
    summary = DataSummary(int(np.count_nonzero(keep)), d)
    source = rows._source
    X = getattr(source, "_X", None)
    if X is not None and not isinstance(X, np.memmap) and rows._prepare is None:
        return Rows(as_row_source(np.ascontiguousarray(X[keep]), superblock_rows(d)), None, summary)
    return Rows(as_row_source(_KeptBlocks(rows, keep), superblock_rows(d)), None, summary)
