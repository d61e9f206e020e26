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
on these in :mod:`dpem_fast._kernels.lda_docs`.
"""
from ._dask import DaskRows, dask_grouping, dask_rows, is_dask_array
from ._memory import kept_rows, validated_rows
from ._rows import DataSummary, Rows, summarize

__all__ = ["DataSummary", "Rows", "summarize", "validated_rows", "DaskRows", "dask_rows", "is_dask_array",
           "group_rows", "bounded_rows"]


def group_rows(rows, groups):
    """The validated groups of a person-level fit on ``rows`` (None without groups), before
    anything is charged: a :class:`~dpem_fast._engine._groups.Grouping` for rows in this
    process, the checked chunks of the groups for a dask fit (:func:`dask_grouping`)."""
    from .._groups import check_groups

    if groups is None:
        return None
    if rows.remote:
        return dask_grouping(rows, groups)
    if is_dask_array(groups):
        raise TypeError("groups: a dask array of groups needs X as a dask array (chunked alike)")
    return check_groups(groups, rows.n_rows)


def bounded_rows(rows, grouping, key, m, n_threads):
    """``rows`` bounded to at most ``m`` rows per group (:func:`~dpem_fast._engine._groups.bound_mask`
    with the fit's ``key``): the engine's rows of a person-level fit, after the charge."""
    from .._groups import bound_mask, bounding_key

    if rows.remote:
        return rows.bounded(grouping, bounding_key(key), m)
    return kept_rows(rows, bound_mask(grouping, bounding_key(key), m, n_threads))
