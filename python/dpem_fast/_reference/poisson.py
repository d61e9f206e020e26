"""Numpy twin of the Poisson-mixture kernel (``_dpcore._poisson``): the test oracle."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["poisson_stats_reference"]


def poisson_stats_reference(X, weights, rates, M):
    """``(N (K,), S (K, d), loglik, n_clipped)`` row by row, as the kernel defines them."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    K = rates.shape[0]
    c, R = 0.5 * M, 0.5 * M * math.sqrt(d)
    N, S, ll, clipped = np.zeros(K), np.zeros((K, d)), 0.0, 0
    for x in X:
        clipped += bool(np.any((x < 0) | (x > M)))
        x = np.clip(x, 0.0, M)
        lr = np.log(weights) + (x * np.log(rates) - rates).sum(axis=1)
        top = lr.max()
        e = np.exp(lr - top)
        g = e / e.sum()
        ll += top + math.log(e.sum()) - sum(math.lgamma(v + 1.0) for v in x)
        N += g
        S += g[:, None] * ((x - c) / R)[None, :]
    return N, S, ll, clipped
