"""Python face of the LDA E-step kernel (``dpem_fast._dpcore._lda``).

The statistic is a sum over documents, additive over any partition of them, and *not*
private: noise is added only by the release layer.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma

from .._dpcore import _contract, _lda
from .._engine._statistics import StatisticsSum

__all__ = ["estep_csr", "max_call_documents", "max_block_documents", "exp_dirichlet_expectation"]


def exp_dirichlet_expectation(alpha):
    """``exp(E[log x])`` for ``x ~ Dirichlet(alpha)``, row-wise: ``exp(psi(a) - psi(sum a))``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 1:
        return np.exp(digamma(alpha) - digamma(alpha.sum()))
    return np.exp(digamma(alpha) - digamma(alpha.sum(axis=1))[:, None])



def max_call_documents(K, V):
    """The most documents one call of the kernel gets from :func:`estep_csr` (a minibatch is cut
    into calls of at most this many): ``LDA_DOC_CHUNK · BLOCK_CHUNKS · max(MIN_BLOCKS,
    PARTIAL_BUDGET // (K V))``, so that the block plan of every call has at most
    :func:`max_block_documents` documents per block, whatever the (private) minibatch size.
    Public: K and V only."""
    cap = max(_contract.MIN_BLOCKS, _contract.PARTIAL_BUDGET // max(1, int(K) * int(V)))
    return _contract.LDA_DOC_CHUNK * _contract.BLOCK_CHUNKS * cap


def max_block_documents():
    """The most documents one block partial of a call sums in floats (``LDA_DOC_CHUNK ·
    BLOCK_CHUNKS`` = 128): the ``b`` of the float64 rounding bound of the topic-word statistic
    (:mod:`dpem_fast._engine._specs`, "Rounding")."""
    return _contract.LDA_DOC_CHUNK * _contract.BLOCK_CHUNKS


def _one_call(X, eb_t, gamma, alpha, max_iter, tol, clip, n_threads, want_stats):
    V, K = eb_t.shape
    n = gamma.shape[0]
    sstats_t = np.zeros((V, K) if want_stats else (0, K))
    norms = np.zeros(n)
    n_upd = np.zeros(n, dtype=np.int32)
    clipped = _lda.lda_estep(X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data, eb_t,
                             float(alpha), int(max_iter), float(tol), float(clip), gamma, sstats_t, norms,
                             n_upd, int(n_threads))
    return sstats_t, clipped


def estep_csr(X, eb_t, gamma0, alpha, max_iter, tol, clip, n_threads, want_stats=True):
    """E-step of the CSR documents ``X`` under ``eb_t = exp(E[log beta]).T`` (V, K): returns
    ``(gamma, sstats (K, V) or None, n_clipped)``.

    With statistics, the documents go to the kernel in consecutive calls of at most
    :func:`max_call_documents` (a public function of K and V), each call's block partials
    summed exactly, the calls' sums added by Sum2 (``StatisticsSum``): no block of any
    minibatch, however large, sums more than :func:`max_block_documents` documents in floats.
    Each document's fixed point is its own, so gamma does not depend on the cut."""
    V, K = eb_t.shape
    gamma = np.array(gamma0, dtype=np.float64, order="C")        # a copy: the kernel writes it
    n = gamma.shape[0]
    step = max_call_documents(K, V) if want_stats else max(n, 1)
    if n <= step:
        sstats_t, clipped = _one_call(X, eb_t, gamma, alpha, max_iter, tol, clip, n_threads, want_stats)
        return gamma, (sstats_t.T.copy() if want_stats else None), clipped
    total, clipped = StatisticsSum(), 0
    for r0 in range(0, n, step):
        part = gamma[r0:r0 + step]                   # a view: the kernel writes these rows of gamma
        s_t, c = _one_call(X[r0:r0 + step], eb_t, part, alpha, max_iter, tol, clip, n_threads, True)
        total.add(s_t)
        clipped += c
    return gamma, total.result().T.copy(), clipped
