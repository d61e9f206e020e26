"""Obviously-correct numpy twin of the fused GMM E-step kernel (test oracle, benchmark baseline).

DP-EM (Park et al. 2017), Eq. 10 (responsibilities) and the sums that enter Eq. 11.
Everything is computed in float64 whatever the dtype of ``X``.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "log_gaussian_prob_reference",
    "log_resp_reference",
    "estep_stats_reference",
    "log_det_cholesky_reference",
    "log_gaussian_prob_diag_reference",
    "log_resp_diag_reference",
    "estep_diag_stats_reference",
    "responsibilities_reference",
]


def log_det_cholesky_reference(precisions_cholesky):
    """log |det P_k| per component: sum of log-diagonal when P_k is upper triangular, else slogdet."""
    P = np.asarray(precisions_cholesky, dtype=np.float64)
    if not np.any(np.tril(P, -1)):
        return np.sum(np.log(np.diagonal(P, axis1=1, axis2=2)), axis=1)
    return np.linalg.slogdet(P)[1]


def log_gaussian_prob_reference(X, means, precisions_cholesky):
    """log N(x_i | mu_k, Sigma_k), shape (n, K), with precision_k = P_k @ P_k.T.

    Same convention as scikit-learn's ``covariance_type='full'``:
    ``-0.5 * (d log 2 pi + ||x @ P_k - mu_k @ P_k||^2) + log det P_k``.
    """
    X = np.asarray(X, dtype=np.float64)
    means = np.asarray(means, dtype=np.float64)
    P = np.asarray(precisions_cholesky, dtype=np.float64)
    n, d = X.shape
    K = means.shape[0]
    maha = np.empty((n, K))
    for k in range(K):
        y = X @ P[k] - means[k] @ P[k]
        maha[:, k] = np.sum(y * y, axis=1)
    return -0.5 * (d * np.log(2 * np.pi) + maha) + log_det_cholesky_reference(P)


def _normalised(log_prob, weights):
    """Log responsibilities and per-row log-likelihood from per-component log densities."""
    with np.errstate(divide="ignore"):
        log_w = np.log(np.asarray(weights, dtype=np.float64))
    lp = log_prob + log_w
    ll = logsumexp(lp, axis=1) if lp.shape[0] else np.zeros(0)
    return lp - ll[:, None], ll


def responsibilities_reference(log_prob):
    """Responsibilities ``exp(lp - ll)`` (n, K) and per-row log-likelihood ``ll = logsumexp(lp)``
    (n,) of log densities ``lp`` (n, K) in float64 (the log-sum-exp of the kernels; -inf
    entries give 0)."""
    lp = np.asarray(log_prob, dtype=np.float64)
    ll = logsumexp(lp, axis=1)
    return np.exp(lp - ll[:, None]), ll


def log_resp_reference(X, weights, means, precisions_cholesky):
    """Log responsibilities (n, K) and per-row log-likelihood (n,) (DP-EM Eq. 10 in log space)."""
    return _normalised(log_gaussian_prob_reference(X, means, precisions_cholesky), weights)


def estep_stats_reference(X, weights, means, precisions_cholesky):
    """E-step statistics of the rows of ``X``, a plain dict: ``"counts"`` sum_i g_ik,
    ``"first_moments"`` sum_i g_ik x_i, ``"second_moments"`` sum_i g_ik x_i x_i^T, ``"loglik"``
    sum_i log p(x_i) and ``"n_rows"``, with g_ik the responsibilities of DP-EM Eq. 10.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    K = np.asarray(means).shape[0]
    log_resp, ll = log_resp_reference(X, weights, means, precisions_cholesky)
    resp = np.exp(log_resp)
    s2 = np.empty((K, d, d))
    for k in range(K):
        s2[k] = (X * resp[:, k : k + 1]).T @ X
    s2 = 0.5 * (s2 + s2.transpose(0, 2, 1))
    return _stats(n, resp.sum(axis=0), resp.T @ X, s2, ll)


def log_gaussian_prob_diag_reference(X, means, prec_diag):
    """log N(x_i | mu_k, diag(1 / p_k²)), shape (n, K), for diagonal precision Cholesky factors
    ``prec_diag`` (K, d) (scikit-learn's ``precisions_cholesky_`` for ``'diag'``):
    ``-0.5 (d log 2 pi + Σ_j ((x_j − mu_kj) p_kj)²) + Σ_j log p_kj``."""
    X = np.asarray(X, dtype=np.float64)
    means = np.asarray(means, dtype=np.float64)
    p = np.asarray(prec_diag, dtype=np.float64)
    d = X.shape[1]
    maha = np.empty((X.shape[0], means.shape[0]))
    for k in range(means.shape[0]):
        y = (X - means[k]) * p[k]
        maha[:, k] = np.sum(y * y, axis=1)
    return -0.5 * (d * np.log(2 * np.pi) + maha) + np.sum(np.log(p), axis=1)


def log_resp_diag_reference(X, weights, means, prec_diag):
    """Log responsibilities (n, K) and per-row log-likelihood (n,) for diagonal precisions."""
    return _normalised(log_gaussian_prob_diag_reference(X, means, prec_diag), weights)


def estep_diag_stats_reference(X, weights, means, prec_diag):
    """E-step statistics for diagonal precisions: counts (K,), first moments (K, d) and the
    squared sums ``Σ_i g_ik x_i²`` (K, d) as ``second_moments``, and ``Σ_i log p(x_i)``
    (the dict of :func:`estep_stats_reference`)."""
    X = np.asarray(X, dtype=np.float64)
    log_resp, ll = log_resp_diag_reference(X, weights, means, prec_diag)
    resp = np.exp(log_resp)
    return _stats(X.shape[0], resp.sum(axis=0), resp.T @ X, resp.T @ (X * X), ll)


def _stats(n_rows, counts, first, second, ll):
    return {"counts": counts, "first_moments": first, "second_moments": second, "loglik": float(ll.sum()),
            "n_rows": int(n_rows)}
