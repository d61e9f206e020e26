"""Numpy twin of the LDA E-step kernel (``_dpcore._lda``) and of the perplexity bound.

Slow and plain: the test oracle of the kernel and the benchmark's numpy baseline.  Written
here, not imported from the estimator (``decomposition._lda_math``), so that it checks it.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, logsumexp

__all__ = ["exp_dirichlet_expectation", "estep", "approx_bound", "perplexity"]

_EPS = np.finfo(np.float64).eps


def exp_dirichlet_expectation(alpha):
    """``exp(E[log x])`` for ``x ~ Dirichlet(alpha)`` (along the last axis):
    ``exp(digamma(alpha_k) - digamma(sum_j alpha_j))``."""
    a = np.asarray(alpha, dtype=np.float64)
    return np.exp(digamma(a) - digamma(a.sum(axis=-1, keepdims=True)))


def _dirichlet_terms(prior, post, elog):
    """``E_q[log p(x | prior)] - E_q[log q(x | post)]`` summed over the rows of ``post`` (a
    Dirichlet per row, symmetric prior ``prior``; ``elog`` = E_q[log x])."""
    n_cols = post.shape[1]
    return float(np.sum((prior - post) * elog) + np.sum(gammaln(post)) - post.shape[0] * n_cols * gammaln(prior)
                 + post.shape[0] * gammaln(prior * n_cols) - np.sum(gammaln(post.sum(axis=1))))


def approx_bound(X, gamma, lam, alpha, eta):
    """The variational lower bound of ``log p(X)`` (Hoffman, Blei & Bach 2010, Eq. 3) for the
    CSR documents X, document-topic posteriors ``gamma`` (n, K) and topic-word posteriors
    ``lam`` (K, V): ``sum_d sum_v c_dv log sum_k exp(E log theta_dk + E log beta_kv)`` plus the
    Dirichlet terms of theta (prior alpha) and of beta (prior eta)."""
    gamma = np.asarray(gamma, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    elog_theta = np.log(exp_dirichlet_expectation(gamma))
    elog_beta = np.log(exp_dirichlet_expectation(lam))
    words = 0.0
    for d in range(gamma.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        words += float(X.data[lo:hi] @ logsumexp(elog_theta[d][:, None] + elog_beta[:, X.indices[lo:hi]], axis=0))
    return words + _dirichlet_terms(alpha, gamma, elog_theta) + _dirichlet_terms(eta, lam, elog_beta)


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
