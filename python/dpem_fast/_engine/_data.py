"""The rows of a fit: in memory, memory-mapped or streamed, always in the same superblocks.

The engine never indexes X directly.  It asks :class:`Rows` for passes over the data, each
a sequence of *superblocks*: consecutive rows, ``superblock_rows(n_features)`` of them
(``dpem_fast._dpcore._contract``; about 64 MiB of float64), the last one shorter.  Kernels
reduce each superblock to additive statistics and the engine sums them in superblock order,
so a fit on an ndarray, on a ``numpy.memmap`` of it, and on a block source reading the same
rows in blocks of any size (:mod:`dpem_fast.io`) computes the same statistics bit for bit,
and therefore — same key, same noise — the same fit.

Validation happens before anything is charged to a privacy budget: an ndarray through
scikit-learn's ``validate_data``; a stream by one scanning pass (row count, finiteness, the
model's own row checks).  A private fit then reads the data once per EM iteration (plus
once for each histogram of a private domain estimate).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._dpcore._contract import superblock_rows
from ..io import as_row_source, is_block_source, scan

__all__ = ["DataSummary", "Rows", "summarize"]


@dataclass(frozen=True)
class DataSummary:
    """What the engine knows of X before the first pass that computes a statistic.

    ``column_min``, ``column_max`` and ``max_abs`` are read from the data: they are set only
    for non-private fits (a private fit's initialisation must not see them).
    """

    n_rows: int
    n_features: int
    column_min: np.ndarray | None = None
    column_max: np.ndarray | None = None
    max_abs: float | None = None


def summarize(X) -> DataSummary:
    """The full summary of an in-memory 2-D array (for non-private fits and tests)."""
    X = np.asarray(X)
    return DataSummary(X.shape[0], X.shape[1], X.min(axis=0).astype(np.float64),
                       X.max(axis=0).astype(np.float64), float(np.max(np.abs(X))) if X.size else 0.0)


class Rows:
    """Validated rows of a fit, read in superblocks.

    Parameters
    ----------
    source : the :func:`dpem_fast.io.as_row_source` adapter
    prepare : callable or None
        The model's row-wise, data-independent transform (e.g. binarisation), applied to
        every superblock of a stream as it is read (an in-memory X was prepared once).
    summary : DataSummary
    """

    #: the rows are read in this process (see :class:`~dpem_fast._engine._dask.DaskRows`)
    remote = False

    def __init__(self, source, prepare, summary):
        self._source = source
        self._prepare = prepare
        self.summary = summary

    n_rows = property(lambda self: self.summary.n_rows)
    n_features = property(lambda self: self.summary.n_features)

    @property
    def dtype(self):
        return self._source.dtype

    def superblocks(self):
        """A new pass over the rows, superblock by superblock."""
        for block in self._source.superblocks():
            yield block if self._prepare is None else self._prepare(block)

    def reduce(self, fn):
        """``fn(superblock_0) + fn(superblock_1) + ...`` in order (statistics are additive)."""
        total = None
        for block in self.superblocks():
            part = fn(block)
            total = part if total is None else total + part
        return total


def validated_rows(estimator, X, private):
    """:class:`Rows` of ``X`` for ``estimator``, validated before anything is charged.

    An ndarray (a ``numpy.memmap`` included) goes through ``validate_data`` and the model's
    ``_prepare_rows``; a block source is scanned once (finite values, at least one row, the
    model's row checks on every superblock).
    """
    from sklearn.utils.validation import validate_data

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
            X = validate_data(estimator, X, dtype=[np.float64, np.float32], order="C", ensure_min_samples=1)
        except TypeError as exc:
            raise TypeError("X must be array-like, a numpy.memmap or a block source with n_features and "
                            f"iter_blocks() (dpem_fast.io); {exc}") from exc
    X = estimator._prepare_rows(X)
    summary = summarize(X) if not private else DataSummary(X.shape[0], X.shape[1])
    return Rows(as_row_source(X, superblock_rows(X.shape[1])), None, summary)
