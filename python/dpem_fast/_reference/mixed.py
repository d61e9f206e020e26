"""Obviously-correct numpy twin of the mixed-table E-step kernel (test oracle, benchmark baseline).

Component k of the mixture is ``N(z | mu_k, Sigma_k) × Π_j theta_{k, j}(c_j)`` over the numeric
columns z and the category codes c_j of a row; the responsibilities are DP-EM's Eq. 10 for this
exponential-family mixture, and the statistics their sums.  Everything is float64.
"""
from __future__ import annotations

import numpy as np

from .gmm import _normalised, log_gaussian_prob_diag_reference, log_gaussian_prob_reference
from .rows import scale_and_clip_reference

__all__ = ["category_slots_reference", "log_prob_reference", "mixed_stats_reference"]


def category_slots_reference(X, layout):
    """(n, J) integer slots: ``offset[j] + code`` for an integer code in ``[0, C_j)``, else
    ``offset[j] + C_j`` ("other")."""
    X = np.asarray(X, dtype=np.float64)
    off = layout.offset
    out = np.empty((X.shape[0], len(layout.cat_cols)), dtype=np.intp)
    for j, (col, C) in enumerate(zip(layout.cat_cols, layout.n_categories)):
        v = X[:, col]
        ok = (v >= 0) & (v < C) & (v == np.floor(v))
        out[:, j] = off[j] + np.where(ok, v, C).astype(np.intp)
    return out


def log_prob_reference(X, layout, means, prec, log_theta, covariance_type, domain=None):
    """Per-component log densities (n, K) without the weights, and the numeric block (n, d)
    in the units they were computed in (mapped by ``domain`` when given)."""
    X = np.asarray(X, dtype=np.float64)
    Z = X[:, list(layout.num_cols)]
    if domain is not None and Z.shape[1]:
        Z = scale_and_clip_reference(Z, domain)[0]
    K = np.shape(log_theta)[0]
    if Z.shape[1] == 0:
        lp = np.zeros((X.shape[0], K))
    elif covariance_type == "diag":
        lp = log_gaussian_prob_diag_reference(Z, means, prec)
    else:
        lp = log_gaussian_prob_reference(Z, means, prec)
    slots = category_slots_reference(X, layout)
    for j in range(slots.shape[1]):
        lp = lp + np.asarray(log_theta)[:, slots[:, j]].T
    return lp, Z


def mixed_stats_reference(X, layout, weights, means, prec, log_theta, covariance_type="full", domain=None):
    """``{name: array}`` of the kernel's statistics and ``Σ_i log p(x_i)``."""
    lp, Z = log_prob_reference(X, layout, means, prec, log_theta, covariance_type, domain)
    log_resp, ll = _normalised(lp, weights)
    g = np.exp(log_resp)
    K, d = g.shape[1], Z.shape[1]
    if covariance_type == "diag":
        s2 = g.T @ (Z * Z)
    else:
        s2 = np.empty((K, d, d))
        for k in range(K):
            s2[k] = (Z * g[:, k:k + 1]).T @ Z
        s2 = 0.5 * (s2 + s2.transpose(0, 2, 1))
    cat = np.zeros((K, layout.n_slots))
    slots = category_slots_reference(X, layout)
    for j in range(slots.shape[1]):
        np.add.at(cat.T, slots[:, j], g)
    stats = {"counts": g.sum(axis=0), "first_moments": g.T @ Z, "second_moments": s2, "category_counts": cat}
    return stats, float(ll.sum())
