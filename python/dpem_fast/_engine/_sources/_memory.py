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

import numpy as np

from ..._dpcore._contract import superblock_rows
from ...io import as_row_source, is_block_source, scan
from ._rows import DataSummary, Rows, summarize

__all__ = ["DataSummary", "Rows", "summarize", "validated_rows"]


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
