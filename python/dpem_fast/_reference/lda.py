"""Numpy twin of the LDA E-step kernel (``_dpcore._lda``) and of the perplexity bound.

Slow and plain: the test oracle of the kernel and the benchmark's numpy baseline.
"""
from __future__ import annotations

import numpy as np

from ..decomposition._lda_math import approx_bound, exp_dirichlet_expectation

__all__ = ["exp_dirichlet_expectation", "estep", "approx_bound", "perplexity"]

_EPS = np.finfo(np.float64).eps


def estep(X, exp_beta, alpha, gamma0, max_iter, tol, clip=np.inf):
    """The E-step of the CSR documents ``X`` under ``exp_beta`` = exp(E[log beta]) (K, V).

    Returns ``(gamma, sstats, norms)``: the fitted (n, K) gamma, the (K, V) sum over the
    documents of ``s_d * min(1, clip (1 - 1e-12) / ||s_d||_F)`` with ``s_d[k, v] = c_dv
    phi_dvk``, and each ``||s_d||_F`` before clipping.
    """
    n, K = gamma0.shape
    gamma = np.array(gamma0, dtype=np.float64)
    sstats = np.zeros_like(exp_beta)
    norms = np.zeros(n)
    for d in range(n):
        ids = X.indices[X.indptr[d]:X.indptr[d + 1]]
        cnts = X.data[X.indptr[d]:X.indptr[d + 1]].astype(np.float64)
        eb = exp_beta[:, ids]
        g = gamma[d]
        t = exp_dirichlet_expectation(g)
        for _ in range(max_iter):
            last = g
            g = alpha + t * ((cnts / (t @ eb + _EPS)) @ eb.T)
            t = exp_dirichlet_expectation(g)
            if np.mean(np.abs(g - last)) < tol:
                break
        gamma[d] = g
        s = np.outer(t, cnts / (t @ eb + _EPS)) * eb
        norms[d] = np.linalg.norm(s)
        scale = clip * (1 - 1e-12) / norms[d] if norms[d] > clip else 1.0
        sstats[:, ids] += scale * s
    return gamma, sstats, norms


def perplexity(X, gamma, lam, alpha, eta):
    """``exp(-approx_bound / total word count)``: the per-word perplexity bound."""
    return float(np.exp(-approx_bound(X, gamma, lam, alpha, eta) / X.sum()))
