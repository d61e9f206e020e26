"""Obviously-correct numpy twin of the Bernoulli-mixture E-step kernel (test oracle, benchmark baseline).

A mixture of K products of independent Bernoullis: for x in {0,1}^d,
``log p(x, k) = log pi_k + sum_j [x_j log mu_kj + (1 - x_j) log(1 - mu_kj)]``, written
out term by term (the kernel uses the equivalent linear form ``c_k + x . theta_k``).
Everything is computed in float64 whatever the dtype of ``X``.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "log_bernoulli_prob_reference",
    "bernoulli_log_resp_reference",
    "bernoulli_stats_reference",
]


def log_bernoulli_prob_reference(X, means):
    """``log p(x_i | k)``, shape (n, K): ``X log(mu).T + (1 - X) log(1 - mu).T``."""
    X = np.asarray(X, dtype=np.float64)
    mu = np.asarray(means, dtype=np.float64)
    return X @ np.log(mu).T + (1.0 - X) @ np.log(1.0 - mu).T


def bernoulli_log_resp_reference(X, weights, means):
    """Log responsibilities (n, K) and per-row log-likelihood (n,)."""
    with np.errstate(divide="ignore"):
        log_w = np.log(np.asarray(weights, dtype=np.float64))
    lp = log_bernoulli_prob_reference(X, means) + log_w
    ll = logsumexp(lp, axis=1) if lp.shape[0] else np.zeros(0)
    return lp - ll[:, None], ll


def bernoulli_stats_reference(X, weights, means):
    """A plain dict: ``"counts"`` ``sum_i g_ik``, ``"first_moments"`` ``sum_i g_ik x_i``;
    ``"loglik"`` ``sum_i log p(x_i)`` and ``"n_rows"``."""
    X = np.asarray(X, dtype=np.float64)
    log_resp, ll = bernoulli_log_resp_reference(X, weights, means)
    resp = np.exp(log_resp)
    return {"counts": resp.sum(axis=0), "first_moments": resp.T @ X, "loglik": float(ll.sum()),
            "n_rows": X.shape[0]}
