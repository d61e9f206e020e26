"""Rows of a fit held in a ``dask.array.Array``: statistics on the workers, noise on the client.

A fit on a dask array never gathers the data.  :class:`DaskRows` has the interface of the
engine's :class:`~dpem_fast._engine._sources._rows.Rows` that the fit loop uses (``summary``,
``n_rows``, ``n_features``, ``dtype``, ``reduce``, ``column_range``), but:

* the array is cut into its **row chunks** (the columns are rechunked to one chunk);
* validation (finite values, dtype, the model's own row check — ``_rows_task``) runs
  on the workers, one task per chunk, and returns only the chunk's row count (and, for a
  non-private fit, its column minima / maxima);
* ``reduce(fn)`` computes ``fn(chunk)`` — the model's statistics kernel
  (``_statistics_task``), or the domain estimate's histogram kernel — on the workers, one
  task per chunk, gathers the per-chunk :class:`~dpem_fast._engine._statistics.Statistics`
  (small: a few arrays of the model's size) and sums them on the client in **chunk index
  order**.

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
the user's to configure).  Only the client draws noise, from its own key, and only what
leaves the client — the fitted model, its privacy record — is private.  The privacy record
of a dask fit is the one of the in-memory fit.

What a task holds, exactly (nothing else is pickled into the graph):

* in every task: the chunk (its part of the array's own graph), the dtype and the model's
  row check — a module-level function, or a ``functools.partial`` of one with public
  parameters (Bernoulli: the ``binarize`` threshold) — and, in a ``map_chunks`` task, the
  chunk's row count seen at validation;
* validation: a flag, private or not;
* an EM pass (:class:`~dpem_fast._engine.PrivateEM`, private or ``epsilon=inf``): the
  model's statistics kernel — a module-level function, with the public hyperparameters it
  reads bound (gradient EM: the component variance, ``symmetric``, the robust estimator's
  name, its scale and multiplier precision) — the current parameters (released, or the
  data-independent initialisation, or the user's ``*_init``), the data domain (declared,
  released, or with ``bounds="from_data"`` the data's exact box; None for a model with a
  fixed domain and for ``epsilon=inf``) and the thread count;
* a private domain estimate: the compiled histogram's name, the thread count, the
  histogram's shape and, in stage 2, the released stage-1 box;
* LDA: the token cap N (``max_doc_length``), the prior α, the E-step's iteration cap and
  tolerance, the clip, the thread count, the chunk's selected rows and their corpus row
  numbers, their initial γ (drawn on the client), exp E[log β] — and, in a private fit,
  the token-cap sub-key ``derive_key(key, "lda", "cap")``: data-independent, keyed
  BLAKE2b of the fit's key (a one-way derivation: neither the key nor any other sub-key
  can be computed from it), which need not be secret.

* a person-level fit (``groups``, :mod:`~dpem_fast._engine._groups`): the chunk's part of the
  groups array (its own graph, like X's), ``max_rows_per_group`` and the bounding sub-key
  ``derive_key(key, "groups", "bound")`` — one-way from the fit's key like the token cap's,
  and safe to reveal: the bounding is a function of each group's own rows for *every* key,
  so the guarantee holds conditionally on it.  Each task bounds its chunk itself; that
  equals the in-memory bounding because the validation pass refused groups whose rows lie
  in more than one chunk (it gathers each chunk's sorted group stream ids on the client).

Never in a task: the estimator (so neither ``random_state``, ``budget``, ``privacy_`` nor
``diagnostics_``), a budget ledger, a random generator, the fit's key or a noise sub-key.
:func:`check_public` refuses, before anything is sent, a bound method, lambda or closure
(each would pickle the estimator it refers to) and an estimator, ledger or generator
anywhere in a task's arguments; a model supplies its kernel and row check through
``PrivateEM._statistics_task`` and ``PrivateEM._rows_task``.

Scheduler: whatever ``dask.compute`` uses — the ``dask.distributed`` client when one is
active, else dask's local scheduler.  ``n_threads`` is the OpenMP thread count of each
chunk task (results do not depend on it).

dask is optional (``pip install dpem_fast[dask]``); this module imports it only when a dask
array is passed to ``fit``.
"""
from __future__ import annotations

import functools
import types

import numpy as np

from .._statistics import StatisticsSum
from ._rows import DataSummary, Rows, then_transform

__all__ = ["DaskRows", "is_dask_array", "dask_rows", "check_public", "dask_grouping"]


def is_dask_array(X) -> bool:
    """Whether ``X`` is a ``dask.array.Array`` (without importing dask unless it is loaded)."""
    if not type(X).__module__.startswith("dask"):
        return False
    import dask.array as da

    return isinstance(X, da.Array)


def _secret_types():
    """Objects that must never go into a task: an estimator (it holds ``random_state``,
    ``budget``, ``privacy_``, ``diagnostics_``), a budget ledger, a random generator."""
    from sklearn.base import BaseEstimator

    from ...accounting import BudgetLedger

    return (BaseEstimator, BudgetLedger, np.random.Generator, np.random.RandomState,
            np.random.SeedSequence, np.random.BitGenerator)


def check_public(obj, what):
    """Refuse, before anything is sent, a task argument that would carry more than public
    values: a callable must be a module-level function (pickled by reference) or a
    ``functools.partial`` of one; no bound method, closure or lambda (they pickle what they
    close over — an estimator, with its seed and ledger); and nothing inside it, down through
    partials, tuples, lists and dicts, may be an estimator, a ledger or a random generator.
    Arrays and numbers pass: the key is an array and cannot be told from one here — what
    arrays a task holds is the caller's contract (see the module docstring)."""
    secret = _secret_types()
    todo = [obj]
    while todo:
        x = todo.pop()
        if isinstance(x, functools.partial):
            todo += [x.func, *x.args, *x.keywords.values()]
        elif isinstance(x, (tuple, list)):
            todo += list(x)
        elif isinstance(x, dict):
            todo += list(x.keys()) + list(x.values())
        elif isinstance(x, types.MethodType) or isinstance(x, secret):
            raise TypeError(f"{what}: a Dask task may not hold {type(x).__name__} "
                            f"{getattr(x, '__qualname__', '')} (an estimator, ledger or generator)")
        elif isinstance(x, types.FunctionType) and (x.__closure__ or "." in x.__qualname__
                                                    or "<" in x.__qualname__):
            raise TypeError(f"{what}: a Dask task takes module-level functions only, got {x.__qualname__} "
                            "(a lambda, closure or method pickles what it refers to)")


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
    X = _prepared(X, prepare)
    if not full or X.shape[0] == 0:
        return X.shape[0], None, None, None
    lo, hi = X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)
    return X.shape[0], lo, hi, max(float(np.max(np.abs(lo))), float(np.max(np.abs(hi))))


def _prepared(X, prepare):
    return X if prepare is None else prepare(X)


def _apply(fn, block, dtype, prepare):
    """Worker task: ``fn`` of one prepared chunk (None for an empty chunk)."""
    X = _prepared(_as_chunk(block, dtype), prepare)
    return fn(X) if X.shape[0] else None


def _apply_rows(fn, block, dtype, prepare, n_rows, args):
    """Worker task: ``fn(chunk, *args)`` of one prepared chunk that must still have the
    ``n_rows`` rows it had when it was validated."""
    X = _prepared(_as_chunk(block, dtype), prepare)
    if X.shape[0] != n_rows:
        raise RuntimeError(f"X: a dask chunk had {n_rows} rows when it was validated and now has "
                           f"{X.shape[0]} (the array's graph is not deterministic)")
    return fn(X, *args)


def _bounded(X, gblock, bound):
    """The rows of one prepared chunk that the person-level bounding keeps (``bound``: the
    bounding sub-key and m; the chunk holds whole groups, checked at validation)."""
    from .._groups import bound_mask, check_groups

    bkey, m = bound
    return X[bound_mask(check_groups(np.asarray(gblock), X.shape[0]), bkey, m)]


def _apply_bounded(fn, block, gblock, dtype, prepare, bound):
    """Worker task: ``fn`` of the kept rows of one prepared chunk (None if none are kept)."""
    X = _bounded(_prepared(_as_chunk(block, dtype), prepare), gblock, bound)
    return fn(X) if X.shape[0] else None


def _count_bounded(block, gblock, dtype, prepare, bound):
    return int(_bounded(_prepared(_as_chunk(block, dtype), prepare), gblock, bound).shape[0])


def _range_bounded(block, gblock, dtype, prepare, bound):
    X = _bounded(_prepared(_as_chunk(block, dtype), prepare), gblock, bound)
    if not X.shape[0]:
        return None
    return X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)


def _group_chunk(gblock, n_rows):
    """Worker task: validate one chunk of the groups array; its sorted distinct stream ids."""
    from .._groups import check_groups

    return np.unique(check_groups(np.asarray(gblock), n_rows).streams)


def dask_grouping(rows, groups):
    """The groups of a dask fit, validated on the workers before anything is charged: a 1-D
    dask array (or an in-memory array, then chunked like X) whose chunks match X's row chunks,
    and no group in two chunks (:mod:`~dpem_fast._engine._groups`, "Row sources").  Returns
    the list of the groups' chunks (delayed), to bound with :meth:`DaskRows.bounded`."""
    import dask.array as da

    if not is_dask_array(groups):
        g = np.asarray(groups)
        if g.ndim != 1 or g.shape[0] != rows.n_rows:
            raise ValueError("groups must be 1-D with one entry per row of X (its length differs from X's)")
        groups = da.from_array(g, chunks=(rows.chunk_rows,))
    if groups.ndim != 1:
        raise ValueError(f"groups must be 1-D (one id per row of X), got {groups.ndim} dimension(s)")
    if tuple(int(c) for c in groups.chunks[0]) != rows.chunk_rows:
        raise ValueError("groups: a dask array of groups must be chunked like X's rows (the same row chunks)")
    blocks = list(groups.to_delayed().ravel())
    import dask

    task = dask.delayed(_group_chunk, pure=True)
    streams = _compute([task(b, n) for b, n in zip(blocks, rows.chunk_rows)])
    every = np.concatenate([np.asarray(s, dtype=np.uint64) for s in streams]) if streams else np.empty(0, np.uint64)
    if np.unique(every).size != every.size:
        raise ValueError("groups: the rows of a group must lie in one chunk of X (shuffle the rows by group "
                         "on the cluster first, e.g. a dask DataFrame set_index or shuffle on the group column, "
                         "then to_dask_array(lengths=True))")
    return blocks


def _range(block, dtype, prepare):
    X = _prepared(_as_chunk(block, dtype), prepare)
    if not X.shape[0]:
        return None
    return X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)


def _compute(tasks):
    import dask

    return dask.compute(*tasks)


class DaskRows:
    """Validated rows of a fit in a dask array (see the module docstring)."""

    #: the engine sends a pass's kernel to the workers: only public things may go in it
    remote = True

    def __init__(self, blocks, dtype, prepare, summary, chunk_rows, groups=None, bound=None):
        self._blocks = blocks
        self._prepare = prepare
        self.summary = summary
        self.dtype = dtype
        self.chunk_rows = tuple(int(r) for r in chunk_rows)
        self._groups = groups         # a person-level fit: the groups' chunks, and
        self._bound = bound           # (the bounding sub-key, m)

    def with_transform(self, fn):
        """These rows with ``fn`` (public) applied to every chunk on the workers after their own
        transform, as :meth:`Rows.with_transform`."""
        check_public(fn, "with_transform")
        return DaskRows(self._blocks, self.dtype, functools.partial(then_transform, self._prepare, fn), self.summary,
                        self.chunk_rows, self._groups, self._bound)

    def bounded(self, group_blocks, bkey, m):
        """These rows bounded to at most ``m`` per group, chunk by chunk on the workers (the
        groups from :func:`dask_grouping`; ``bkey`` the bounding sub-key).  Every pass then
        reads the kept rows only; the kept count is gathered once (for the diagnostics)."""
        import dask

        bound = (np.asarray(bkey, dtype=np.uint32), int(m))
        task = dask.delayed(_count_bounded, pure=True)
        counts = _compute([task(b, g, self.dtype, self._prepare, bound)
                           for b, g in zip(self._blocks, group_blocks)])
        summary = DataSummary(int(sum(counts)), self.n_features)
        return DaskRows(self._blocks, self.dtype, self._prepare, summary, self.chunk_rows, group_blocks, bound)

    n_rows = Rows.n_rows
    n_features = Rows.n_features

    @property
    def n_chunks(self):
        return len(self._blocks)

    def reduce(self, fn):
        """``fn(chunk_0) + fn(chunk_1) + ...``: each term on a worker, the sum on the client in
        chunk index order (Sum2, :class:`~dpem_fast._engine._statistics.StatisticsSum`)."""
        import dask

        check_public(fn, "reduce")
        if self._bound is not None:
            task = dask.delayed(_apply_bounded, pure=True)
            parts = _compute([task(fn, b, g, self.dtype, self._prepare, self._bound)
                              for b, g in zip(self._blocks, self._groups)])
        else:
            task = dask.delayed(_apply, pure=True)
            parts = _compute([task(fn, b, self.dtype, self._prepare) for b in self._blocks])
        if len(parts) != len(self._blocks):       # dask returns one result per task or raises
            raise RuntimeError("X: a dask pass returned fewer chunk results than chunks")
        total = StatisticsSum()            # Sum2: its rounding does not grow with the chunk count
        for part in parts:
            total.add(part)
        return total.result()

    def map_chunks(self, fn, args):
        """``[fn(chunk_i, *args[i]) ...]`` in chunk order, each on a worker; ``args[i] is None``
        skips chunk ``i`` (its entry is None).  Each task first checks that its chunk still has
        the row count seen at validation; the client checks that one result came back per
        task.  ``fn`` must return something small (a statistic of the chunk, never its rows)."""
        import dask

        if len(args) != len(self._blocks):
            raise ValueError(f"map_chunks: {len(args)} argument tuples for {len(self._blocks)} chunks")
        if self._bound is not None:
            raise TypeError("map_chunks: per-chunk row selections of a person-level (bounded) dask fit are "
                            "not supported")
        check_public((fn, args), "map_chunks")
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

        if self._bound is not None:
            task = dask.delayed(_range_bounded, pure=True)
            tasks = [task(b, g, self.dtype, self._prepare, self._bound) for b, g in zip(self._blocks, self._groups)]
        else:
            task = dask.delayed(_range, pure=True)
            tasks = [task(b, self.dtype, self._prepare) for b in self._blocks]
        lo = hi = None
        for part in _compute(tasks):
            if part is None:
                continue
            lo = part[0] if lo is None else np.minimum(lo, part[0])
            hi = part[1] if hi is None else np.maximum(hi, part[1])
        return lo, hi

    def superblocks(self):
        raise TypeError("the rows of a dask fit are never gathered on the client; use reduce()")


def dask_rows(X, private, prepare=None):
    """:class:`DaskRows` of the dask array ``X``, validated on the workers before anything is
    charged to a privacy budget.  ``prepare`` is the model's per-chunk row check/transform
    (``f(chunk) -> chunk``; None: none), a module-level function or a ``functools.partial`` of
    one binding public arguments (:func:`check_public`): it goes into every task.  The
    estimator is not an argument: nothing of it can reach a task (the caller sets its
    ``n_features_in_`` from ``rows.n_features``)."""
    import dask

    check_public(prepare, "prepare")
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
    return DaskRows(blocks, dtype, prepare, summary, [c[0] for c in checks])
