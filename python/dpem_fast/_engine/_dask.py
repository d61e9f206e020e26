"""Rows of a fit held in a ``dask.array.Array``: statistics on the workers, noise on the client.

A fit on a dask array never gathers the data.  :class:`DaskRows` has the interface of the
engine's :class:`~dpem_fast._engine._data.Rows` that the fit loop uses (``summary``,
``n_rows``, ``n_features``, ``dtype``, ``reduce``, ``column_range``), but:

* the array is cut into its **row chunks** (the columns are rechunked to one chunk);
* validation (finite values, dtype, the model's own row checks — ``_prepare_rows``) runs
  on the workers, one task per chunk, and returns only the chunk's row count (and, for a
  non-private fit, its column minima / maxima);
* ``reduce(fn)`` computes ``fn(chunk)`` — the model's own ``_statistics`` kernel, or the
  domain estimate's histogram kernel — on the workers, one task per chunk, gathers the
  per-chunk :class:`~dpem_fast._engine._statistics.Statistics` (small: a few arrays of the
  model's size) and sums them on the client in **chunk index order**.

* ``map_chunks(fn, args)`` runs ``fn(chunk_i, *args[i])`` on the workers with per-chunk
  arguments (a model that selects rows per iteration, e.g. the LDA minibatch: the client
  sends each chunk the rows it wants and the public, already-released parameters) and
  returns the per-chunk results in chunk order.

The engine then releases the sum through its :class:`~dpem_fast._engine._release.ReleaseLayer`
on the client, with the client's key: no worker draws or adds noise, and no worker
randomness enters the fit.  The privacy record is the one of the in-memory fit.  The sum of
per-chunk statistics differs from the in-memory sum over superblocks only in rounding (a
different association of the same additions), about 1e-15 relative per statistic.

Every pass recomputes the chunks from the array's graph: call ``X.persist()`` first to keep
them in the workers' memory across the EM iterations.  A task that raises makes the fit raise
(dask may first retry it on another worker); no chunk is ever dropped.  A worker that dies
mid-task: the scheduler reruns the task on a live worker (up to
``distributed.scheduler.allowed-failures`` times, then the fit raises ``KilledWorker``), so a
fit either fails or returns the model of the in-memory fit.  The client also checks that it
got one result per task, and each task that its chunk still has the row count seen at
validation.

Trust boundary
--------------
The workers and the scheduler see the raw rows and the **exact** per-chunk statistics
before any noise: they are inside the trust boundary, like the memory of an in-memory fit
(run them on machines you would trust with the data; dask's own communication security is
the user's to configure).  Only the client draws noise, from its own key (the fit's key
never goes into a task; a model may send a data-independent sub-key such as LDA's token-cap
key), and only what leaves the client — the fitted model, its privacy record — is private.
The privacy record of a dask fit is the one of the in-memory fit.

Scheduler: whatever ``dask.compute`` uses — the ``dask.distributed`` client when one is
active, else dask's local scheduler.  ``n_threads`` is the OpenMP thread count of each
chunk task (results do not depend on it).

dask is optional (``pip install dpem_fast[dask]``); this module imports it only when a dask
array is passed to ``fit``.
"""
from __future__ import annotations

import numpy as np

from ._data import DataSummary, Rows

__all__ = ["DaskRows", "is_dask_array", "dask_rows"]


def is_dask_array(X) -> bool:
    """Whether ``X`` is a ``dask.array.Array`` (without importing dask unless it is loaded)."""
    if not type(X).__module__.startswith("dask"):
        return False
    import dask.array as da

    return isinstance(X, da.Array)


def _as_chunk(block, dtype):
    """A chunk as the C-contiguous 2-D float array the kernels take."""
    try:
        return np.ascontiguousarray(block, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X: a dask chunk cannot be read as {dtype} ({exc})") from None


def _check_chunk(block, dtype, prepare, full):
    """Worker task: validate one chunk; returns ``(n_rows, lo, hi, max_abs)`` (``lo``, ``hi``,
    ``max_abs`` only for a non-private fit, else None)."""
    X = _as_chunk(block, dtype)
    if X.ndim != 2:
        raise ValueError(f"X: a dask chunk has shape {X.shape}; expected 2-D")
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(X)
    if not finite.all():
        if np.isnan(X).any():
            raise ValueError("Input X contains NaN.")
        raise ValueError(f"Input X contains infinity or a value too large for {X.dtype!r}.")
    X = prepare(X)
    if not full or X.shape[0] == 0:
        return X.shape[0], None, None, None
    lo, hi = X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)
    return X.shape[0], lo, hi, max(float(np.max(np.abs(lo))), float(np.max(np.abs(hi))))


def _apply(fn, block, dtype, prepare):
    """Worker task: ``fn`` of one prepared chunk (None for an empty chunk)."""
    X = prepare(_as_chunk(block, dtype))
    return fn(X) if X.shape[0] else None


def _apply_rows(fn, block, dtype, prepare, n_rows, args):
    """Worker task: ``fn(chunk, *args)`` of one prepared chunk that must still have the
    ``n_rows`` rows it had when it was validated."""
    X = prepare(_as_chunk(block, dtype))
    if X.shape[0] != n_rows:
        raise RuntimeError(f"X: a dask chunk had {n_rows} rows when it was validated and now has "
                           f"{X.shape[0]} (the array's graph is not deterministic)")
    return fn(X, *args)


def _range(block, dtype, prepare):
    X = prepare(_as_chunk(block, dtype))
    if not X.shape[0]:
        return None
    return X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)


def _compute(tasks):
    import dask

    return dask.compute(*tasks)


class DaskRows:
    """Validated rows of a fit in a dask array (see the module docstring)."""

    def __init__(self, blocks, dtype, prepare, summary, chunk_rows):
        self._blocks = blocks
        self._prepare = prepare
        self.summary = summary
        self.dtype = dtype
        self.chunk_rows = tuple(int(r) for r in chunk_rows)

    n_rows = Rows.n_rows
    n_features = Rows.n_features

    @property
    def n_chunks(self):
        return len(self._blocks)

    def reduce(self, fn):
        """``fn(chunk_0) + fn(chunk_1) + ...``: each term on a worker, the sum on the client in
        chunk index order."""
        import dask

        task = dask.delayed(_apply, pure=True)
        parts = _compute([task(fn, b, self.dtype, self._prepare) for b in self._blocks])
        if len(parts) != len(self._blocks):       # dask returns one result per task or raises
            raise RuntimeError("X: a dask pass returned fewer chunk results than chunks")
        total = None
        for part in parts:
            if part is not None:
                total = part if total is None else total + part
        return total

    def map_chunks(self, fn, args):
        """``[fn(chunk_i, *args[i]) ...]`` in chunk order, each on a worker; ``args[i] is None``
        skips chunk ``i`` (its entry is None).  Each task first checks that its chunk still has
        the row count seen at validation; the client checks that one result came back per
        task.  ``fn`` must return something small (a statistic of the chunk, never its rows)."""
        import dask

        if len(args) != len(self._blocks):
            raise ValueError(f"map_chunks: {len(args)} argument tuples for {len(self._blocks)} chunks")
        task = dask.delayed(_apply_rows, pure=True)
        todo = [i for i, a in enumerate(args) if a is not None]
        parts = _compute([task(fn, self._blocks[i], self.dtype, self._prepare, self.chunk_rows[i],
                               tuple(args[i])) for i in todo])
        if len(parts) != len(todo):
            raise RuntimeError(f"X: a dask pass returned {len(parts)} chunk results for {len(todo)} chunks")
        out = [None] * len(self._blocks)
        for i, part in zip(todo, parts):
            out[i] = part
        return out

    def column_range(self):
        """Exact column minima and maxima (NOT private: for ``bounds='from_data'`` only)."""
        import dask

        task = dask.delayed(_range, pure=True)
        lo = hi = None
        for part in _compute([task(b, self.dtype, self._prepare) for b in self._blocks]):
            if part is None:
                continue
            lo = part[0] if lo is None else np.minimum(lo, part[0])
            hi = part[1] if hi is None else np.maximum(hi, part[1])
        return lo, hi

    def superblocks(self):
        raise TypeError("the rows of a dask fit are never gathered on the client; use reduce()")


def dask_rows(estimator, X, private, prepare=None):
    """:class:`DaskRows` of the dask array ``X``, validated on the workers before anything is
    charged to a privacy budget.  ``prepare`` (default ``estimator._prepare_rows``) is the
    per-chunk row check/transform; give a module-level function to keep the estimator
    itself out of the task graph."""
    import dask

    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a dask array of shape {X.shape}")
    d = X.shape[1]
    if isinstance(d, float) or d < 1:      # nan: unknown column count
        raise ValueError(f"X: a dask array needs a known number of columns >= 1, got {d}")
    dtype = np.dtype(X.dtype)
    if dtype.kind == "c":
        raise ValueError(f"X: complex data is not supported (a dask array of dtype {dtype})")
    if dtype.kind not in "biuf":
        raise ValueError(f"X: a dask array of dtype {dtype}; expected real numbers")
    if dtype not in (np.float32, np.float64):
        dtype = np.dtype(np.float64)
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    blocks = list(X.to_delayed().ravel())        # row-chunk order
    if prepare is None:
        prepare = estimator._prepare_rows
    task = dask.delayed(_check_chunk, pure=True)
    checks = _compute([task(b, dtype, prepare, not private) for b in blocks])
    n = int(sum(c[0] for c in checks))
    if n == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape=(0, {d})) while a minimum of 1 is "
                         "required: X has no rows.")
    if private:
        summary = DataSummary(n, int(d))
    else:
        full = [c for c in checks if c[1] is not None]
        lo = np.minimum.reduce([c[1] for c in full])
        hi = np.maximum.reduce([c[2] for c in full])
        summary = DataSummary(n, int(d), lo, hi, max(c[3] for c in full))
    estimator.n_features_in_ = int(d)
    return DaskRows(blocks, dtype, prepare, summary, [c[0] for c in checks])
