"""The documents of a private LDA fit: count checks, the token cap, and the two document
sources the SVI loop draws minibatches from — in memory (a CSR matrix) or in a dask array
(each chunk's minibatch statistic on a worker, summed on the client in chunk order).

Nothing here is private on its own: a minibatch's clipped statistic leaves only through the
estimator's release layer (:class:`~dpem_fast.decomposition.DPLatentDirichletAllocation`).
"""
from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse as sp

from .._dpcore import _contract
from .._engine._statistics import StatisticsSum
from .lda import estep_csr as _estep_csr
from .._rng import derive_key

#: Largest count of one term in one document the estimator accepts.
_MAX_COUNT = 2.0 ** 31


def _check_counts(d):
    """Entries of a count matrix (finite already checked): non-negative integers <= _MAX_COUNT."""
    if np.any(d < 0):
        raise ValueError("Negative values in data passed to X: counts must be non-negative")
    if np.any(d != np.floor(d)):
        raise ValueError("X: counts must be integers")
    if d.size and d.max() > _MAX_COUNT:
        raise ValueError(f"X: counts up to {d.max():.3g} exceed {_MAX_COUNT:.3g}")


def _check_count_chunk(X):
    """Row check of one dense dask chunk (runs on a worker)."""
    _check_counts(X)
    return X


def _cap_documents(X, cap_key, N, doc_ids=None):
    """Each document of the CSR ``X`` longer than ``N`` tokens cut to ``N`` tokens drawn without
    replacement; returns ``(X capped, number capped)``.

    The draw of document ``i`` uses its own stream ``derive_key(cap_key, doc_ids[i])``
    (``doc_ids``: the documents' row numbers in the corpus, default ``0, 1, ...``), so a
    document is capped the same way whichever rows are capped with it: on the client once
    per fit, or on a dask worker for the documents of one chunk.  The randomness is
    data-independent but **must stay secret**, as every draw of the fit: it is addressed by
    position, so removing a document moves the later documents to other streams.  The
    guarantee holds over the secret key, not for each fixed draw: the per-position draws
    are i.i.d., so D′'s capped corpus has the law of D's without the removed document (a
    coupling), and the release's sensitivity C applies to that pair.  The same argument
    covers the E-step's random starts and the Poisson minibatches, also addressed by
    position.  The cap sub-key reaches the Dask workers that hold the documents (trusted
    like the data; never a task's public part), and nothing else.
    """
    X = X.copy()
    lengths = np.asarray(X.sum(axis=1)).ravel()
    capped = np.flatnonzero(lengths > N)
    ids = capped if doc_ids is None else np.asarray(doc_ids)[capped]
    for d, doc in zip(capped, ids):
        rng = np.random.Generator(np.random.PCG64(derive_key(cap_key, int(doc))))
        lo, hi = X.indptr[d], X.indptr[d + 1]
        # N of the document's L tokens without replacement: positions, then their terms
        ends = np.cumsum(X.data[lo:hi].astype(np.int64))
        pos = rng.choice(int(ends[-1]), N, replace=False, shuffle=False)
        X.data[lo:hi] = np.bincount(np.searchsorted(ends, pos, side="right"), minlength=hi - lo)
    X.eliminate_zeros()
    return X, int(capped.size)


def _count_documents(X, N):
    """Worker: ``[documents with no token, documents over N tokens]`` of one chunk."""
    lengths = X.sum(axis=1)
    return np.array([np.sum(lengths == 0), np.sum(lengths > N)], dtype=np.int64)


def _chunk_minibatch(X, local, doc_ids, gamma0, eb_t, cfg):
    """Worker: the clipped statistic sum of the selected documents of one dense chunk.

    ``local``: their rows in the chunk; ``doc_ids``: their rows in the corpus (the token
    cap's streams); ``cfg = (cap_key or None, N, alpha, max_iter, tol, clip, n_threads)``.
    Returns ``(number of documents, K x V sum, number clipped)``, never a row.
    """
    cap_key, N, alpha, max_iter, tol, clip, n_threads = cfg
    docs = sp.csr_matrix(np.asarray(X[local], dtype=np.float64))
    docs.sort_indices()
    if cap_key is not None:
        docs, _ = _cap_documents(docs, cap_key, N, doc_ids)
    _, sstats, clipped = _estep_csr(docs, eb_t, gamma0, alpha, max_iter, tol, clip, n_threads)
    return docs.shape[0], sstats, int(clipped)


def _clipped_count_sum(X, clip):
    """``Σ_d c_d · min(1, clip (1 - 1e-12) / ‖c_d‖₂)`` over the rows ``c_d`` of the CSR ``X``: the
    unigram statistic, each document's count vector clipped to L2 norm ``clip`` (V,).  Each
    word's terms ``c_dv s_d`` (one rounded product each) are summed exactly and rounded once
    (``_contract.sum_segments``; the release's rounding bound, :func:`~dpem_fast.decomposition.
    _dp_unigram.unigram_spec`)."""
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())
    scale = np.ones_like(norms)
    big = norms > clip
    scale[big] = clip * (1 - 1e-12) / norms[big]
    terms = sp.csr_matrix((np.asarray(X.data, dtype=np.float64) * np.repeat(scale, np.diff(X.indptr)),
                           X.indices, X.indptr), shape=X.shape).tocsc()
    return _contract.sum_segments(terms.data, terms.indptr)


def _chunk_unigram(X, local, doc_ids, cfg):
    """Worker: the clipped unigram statistic of one dense chunk's documents (capped with their
    corpus rows' streams); ``cfg = (cap_key or None, N, clip)``.  Returns ``(number of
    documents, (V,) sum)``, never a row."""
    cap_key, N, clip = cfg
    docs = sp.csr_matrix(np.asarray(X[local], dtype=np.float64))
    docs.sort_indices()
    if cap_key is not None:
        docs, _ = _cap_documents(docs, cap_key, N, doc_ids)
    return docs.shape[0], _clipped_count_sum(docs, float(clip))


class _MemoryDocs:
    """The documents of an in-memory fit (a validated CSR matrix)."""

    def __init__(self, X, est, alpha, n_threads):
        self.X, self._cfg = X, (int(est.max_doc_length), alpha, int(est.max_doc_update_iter),
                                float(est.mean_change_tol), n_threads)
        self.n_docs = X.shape[0]

    def counts(self):
        lengths = np.asarray(self.X.sum(axis=1)).ravel()
        return int(np.sum(lengths == 0)), int(np.sum(lengths > self._cfg[0]))

    def cap_tokens(self, cap_key):
        self.X, n = _cap_documents(self.X, cap_key, self._cfg[0])
        return n

    def keep(self, mask):
        """Keep the documents ``mask`` selects (an author-level fit's bounding), in order."""
        self.X = self.X[np.flatnonzero(mask)]
        self.n_docs = self.X.shape[0]

    def minibatch(self, idx, gamma0, eb_t, clip):
        _, alpha, max_iter, tol, n_threads = self._cfg
        _, sstats, clipped = _estep_csr(self.X[idx], eb_t, gamma0, alpha, max_iter, tol, clip, n_threads)
        return sstats, clipped

    def unigram(self, clip):
        """Σ over all (capped) documents of the count vector clipped to L2 norm ``clip``."""
        return _clipped_count_sum(self.X, float(clip))


class _DaskDocs:
    """The documents of a dask fit: each chunk's minibatch statistic on a worker, summed on
    the client in chunk order by Sum2 (see the Dask section of :class:`DPLatentDirichletAllocation`)."""

    def __init__(self, rows, est, alpha, n_threads):
        self.rows, self._cap_key, self._counts = rows, None, None
        self._cfg = (int(est.max_doc_length), alpha, int(est.max_doc_update_iter),
                     float(est.mean_change_tol), n_threads)
        self.n_docs = rows.n_rows
        self._offsets = np.concatenate([[0], np.cumsum(rows.chunk_rows)]).astype(np.int64)

    def counts(self):
        if self._counts is None:                            # one pass over the chunks
            n_empty, n_long = self.rows.reduce(partial(_count_documents, N=self._cfg[0]))
            self._counts = int(n_empty), int(n_long)
        return self._counts

    def cap_tokens(self, cap_key):
        """The workers cap each selected document with the sub-key's per-document stream."""
        self._cap_key = cap_key
        return self.counts()[1]

    def minibatch(self, idx, gamma0, eb_t, clip):
        N, alpha, max_iter, tol, n_threads = self._cfg
        cfg = (self._cap_key, N, alpha, max_iter, tol, float(clip), n_threads)
        cut = np.searchsorted(idx, self._offsets)           # idx is sorted: one slice per chunk
        args = [None if cut[i] == cut[i + 1] else
                (idx[cut[i]:cut[i + 1]] - self._offsets[i], idx[cut[i]:cut[i + 1]],
                 gamma0[cut[i]:cut[i + 1]], eb_t, cfg) for i in range(len(self._offsets) - 1)]
        parts = self.rows.map_chunks(_chunk_minibatch, args)
        V, K = eb_t.shape
        total, clipped = StatisticsSum(), 0                  # Sum2 (the rounding bound's level)
        for i, part in enumerate(parts):                     # chunk order
            if args[i] is None:
                if part is not None:
                    raise RuntimeError(f"X: dask chunk {i} returned a statistic it was not asked for")
                continue
            n_docs, sstats, n_clip = part
            if n_docs != len(args[i][0]) or np.shape(sstats) != (K, V):
                raise RuntimeError(f"X: dask chunk {i} returned a statistic of {n_docs} documents and "
                                   f"shape {np.shape(sstats)}; expected {len(args[i][0])} and {(K, V)}")
            total.add(np.asarray(sstats, dtype=np.float64))
            clipped += n_clip
        out = total.result()
        return (np.zeros((K, V)) if out is None else out), clipped

    def unigram(self, clip):
        """The clipped unigram statistic: one worker task per chunk, summed in chunk order."""
        cfg = (self._cap_key, self._cfg[0], float(clip))
        args = [None if self._offsets[i + 1] == self._offsets[i] else
                (np.arange(self._offsets[i + 1] - self._offsets[i]),
                 np.arange(self._offsets[i], self._offsets[i + 1]), cfg) for i in range(len(self._offsets) - 1)]
        parts = self.rows.map_chunks(_chunk_unigram, args)
        total = StatisticsSum()                              # Sum2 (the rounding bound's level)
        for i, part in enumerate(parts):                     # chunk order
            if args[i] is None:
                continue
            n_docs, u = part
            if n_docs != len(args[i][0]) or np.ndim(u) != 1:
                raise RuntimeError(f"X: dask chunk {i} returned a unigram statistic of {n_docs} documents; "
                                   f"expected {len(args[i][0])}")
            total.add(np.asarray(u, dtype=np.float64))
        out = total.result()
        return np.zeros(self.rows.n_features) if out is None else out
