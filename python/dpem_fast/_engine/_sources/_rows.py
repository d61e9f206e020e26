"""The rows of a fit, read in superblocks: what the engine knows of X before a statistic
(:class:`DataSummary`) and the in-memory / streamed row source (:class:`Rows`).

A module of its own so that every row source (:mod:`~dpem_fast._engine._sources._memory` for memory
and streams, :mod:`~dpem_fast._engine._sources._dask` for a dask array) builds on it without
importing another: no import circle.  See :mod:`dpem_fast._engine._sources._memory` for the
superblock contract.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .._statistics import StatisticsSum

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


def then_transform(first, second, block):
    """``second(first(block))`` (``first`` None: ``second(block)``): a row transform after the
    rows' own (:meth:`Rows.with_transform`; module-level, so a Dask task can hold it)."""
    return second(block if first is None else first(block))


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

    #: the rows are read in this process (see :class:`~dpem_fast._engine._sources._dask.DaskRows`)
    remote = False

    def __init__(self, source, prepare, summary):
        self._source = source
        self._prepare = prepare
        self.summary = summary

    n_rows = property(lambda self: self.summary.n_rows)
    #: an ndarray already in memory (not a memory map, a stream or a person-level selection)
    in_memory = property(lambda self: bool(getattr(self._source, "in_memory", False)))
    n_features = property(lambda self: self.summary.n_features)

    @property
    def dtype(self):
        return self._source.dtype

    def with_transform(self, fn):
        """These rows with ``fn`` applied to every superblock after their own transform (e.g. the
        declared domain's clipping of a non-private fit); ``fn`` public, as for a Dask task."""
        return Rows(self._source, functools.partial(then_transform, self._prepare, fn), self.summary)

    def superblocks(self):
        """A new pass over the rows, superblock by superblock."""
        for block in self._source.superblocks():
            yield block if self._prepare is None else self._prepare(block)

    def reduce(self, fn):
        """``fn(superblock_0) + fn(superblock_1) + ...`` in order (statistics are additive), added
        by Sum2 (:class:`~dpem_fast._engine._statistics.StatisticsSum`: its rounding does not grow
        with the number of superblocks).

        Rows without any superblock (zero rows: a private selection's training part can be
        empty, and under add/remove or per person its size is private) reduce to ``fn`` of
        one empty block, the statistics of no row, so that such a fit releases noise instead
        of failing on its row count."""
        total = StatisticsSum()
        for block in self.superblocks():
            total.add(fn(block))
        out = total.result()
        return fn(np.empty((0, self.n_features), dtype=self.dtype)) if out is None else out
