"""Numpy twin of the LDA E-step kernel (``_dpcore._lda``) and of the perplexity bound.

Slow and plain: the test oracle of the kernel and the benchmark's numpy baseline.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, logsumexp

__all__ = ["exp_dirichlet_expectation", "estep", "approx_bound", "perplexity"]

_EPS = np.finfo(np.float64).eps


def exp_dirichlet_expectation(alpha):
    """``exp(E[log x])`` for ``x ~ Dirichlet(alpha)``, row-wise: ``exp(psi(a) - psi(sum a))``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 1:
        return np.exp(digamma(alpha) - digamma(alpha.sum()))
    return np.exp(digamma(alpha) - digamma(alpha.sum(axis=1))[:, None])


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


def approx_bound(X, gamma, lam, alpha, eta, doc_ratio=1.0):
    """The variational lower bound of ``log p(X)`` (Hoffman et al. 2010, Eq. 3).

    ``sum_d [ sum_v c_dv log sum_k exp(E log theta_dk + E log beta_kv)
    + E log p(theta_d | alpha) - E log q(theta_d | gamma_d) ]`` times ``doc_ratio``, plus
    ``E log p(beta | eta) - E log q(beta | lam)``.  The same bound as scikit-learn's
    ``LatentDirichletAllocation`` (whose ``perplexity`` is ``exp(-bound / word count)``).
    """
    n, K = gamma.shape
    V = lam.shape[1]
    elog_theta = digamma(gamma) - digamma(gamma.sum(axis=1))[:, None]
    elog_beta = digamma(lam) - digamma(lam.sum(axis=1))[:, None]
    score = 0.0
    for d in range(n):
        ids = X.indices[X.indptr[d]:X.indptr[d + 1]]
        cnts = X.data[X.indptr[d]:X.indptr[d + 1]]
        score += cnts @ logsumexp(elog_theta[d][:, None] + elog_beta[:, ids], axis=0)
    score += np.sum((alpha - gamma) * elog_theta)
    score += np.sum(gammaln(gamma) - gammaln(alpha))
    score += np.sum(gammaln(alpha * K) - gammaln(gamma.sum(axis=1)))
    score *= doc_ratio
    score += np.sum((eta - lam) * elog_beta)
    score += np.sum(gammaln(lam) - gammaln(eta))
    score += np.sum(gammaln(eta * V) - gammaln(lam.sum(axis=1)))
    return float(score)


def perplexity(X, gamma, lam, alpha, eta):
    """``exp(-approx_bound / total word count)``: the per-word perplexity bound."""
    return float(np.exp(-approx_bound(X, gamma, lam, alpha, eta) / X.sum()))
