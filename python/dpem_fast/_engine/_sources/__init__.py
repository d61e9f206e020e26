"""Where a fit's rows come from, in one place: every source gives the engine the same
interface (``summary``, ``n_rows``, ``n_features``, ``dtype``, ``reduce``) and sums its
statistics in a fixed order, so a fit's result does not depend on the source.

* ``_rows``: what the engine knows of X before a statistic (:class:`DataSummary`) and the
  superblock reader of in-memory, memory-mapped and streamed rows (:class:`Rows`);
* ``_memory``: validation of an ndarray, a ``numpy.memmap`` or a block source
  (:mod:`dpem_fast.io`'s documented block protocol) before anything is charged
  (:func:`validated_rows`);
* ``_dask``: rows in a ``dask.array.Array``, validated and reduced on the workers, never
  gathered (:class:`DaskRows`).

Private LDA's documents (a CSR matrix or a dask array of counts, with the token cap) build
on these in :mod:`dpem_fast.decomposition._lda_docs`.
"""
from ._dask import DaskRows, dask_rows, is_dask_array
from ._memory import validated_rows
from ._rows import DataSummary, Rows, summarize

__all__ = ["DataSummary", "Rows", "summarize", "validated_rows", "DaskRows", "dask_rows", "is_dask_array"]
