"""Python face of the LDA E-step kernel (``dpem_fast._dpcore._lda``).

The statistic is a sum over documents, additive over any partition of them, and *not*
private: noise is added only by the release layer.
"""
from __future__ import annotations

import numpy as np

from .._dpcore import _lda

__all__ = ["estep_csr"]


def estep_csr(X, eb_t, gamma0, alpha, max_iter, tol, clip, n_threads, want_stats=True):
    """E-step of the CSR documents ``X`` under ``eb_t = exp(E[log beta]).T`` (V, K): returns
    ``(gamma, sstats (K, V) or None, n_clipped)``."""
    V, K = eb_t.shape
    gamma = np.array(gamma0, dtype=np.float64, order="C")        # a copy: the kernel writes it
    n = gamma.shape[0]
    sstats_t = np.zeros((V, K) if want_stats else (0, K))
    norms = np.zeros(n)
    n_upd = np.zeros(n, dtype=np.int32)
    clipped = _lda.lda_estep(X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data, eb_t,
                             float(alpha), int(max_iter), float(tol), float(clip), gamma, sstats_t, norms,
                             n_upd, int(n_threads))
    return gamma, (sstats_t.T.copy() if want_stats else None), clipped
