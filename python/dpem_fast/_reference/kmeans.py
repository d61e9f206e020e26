"""Obviously-correct numpy twin of the k-means kernel (test oracle, benchmark baseline).

Squared distances are summed feature by feature, ``D = ((0 + t_0²) + t_1²) + ...`` with
``t_i = x_i - c_i``, the order in which the kernel (``dpc_kmeans.h``, no FMA there) computes
the distance of a row to its assigned centre, so those distances agree bit for bit; ties go to
the lowest index (``argmin``).  The kernel picks the centre from the scores
``|c|²/2 - x·c`` instead: labels agree except where two centres are within rounding.  Rows are
mapped into the unit ball of a declared domain by :func:`~dpem_fast._reference.rows.scale_and_clip_reference`
(the numpy twin of the kernel's loader).  Everything is computed in float64.
"""
from __future__ import annotations

import numpy as np

from .rows import scale_and_clip_reference

__all__ = ["sq_distances_reference", "kmeans_assign_reference", "kmeans_stats_reference"]


def sq_distances_reference(X, centers):
    """``D[r, k] = sum_i (X[r, i] - C[k, i])²``, shape (n, K), summed over i in order."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    D = np.zeros((X.shape[0], C.shape[0]))
    for i in range(X.shape[1]):
        t = X[:, i, None] - C[None, :, i]
        D += t * t
    return D


def kmeans_assign_reference(X, centers):
    """Nearest centre (lowest index on ties) and the squared distance to it."""
    D = sq_distances_reference(X, centers)
    if D.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    lab = D.argmin(axis=1)
    return lab.astype(np.int64), D[np.arange(D.shape[0]), lab]


def kmeans_stats_reference(X, centers, domain=None):
    """A plain dict: ``"counts"`` (K,) rows per nearest centre, ``"sums"`` (K, d) their
    coordinate sums; ``"loglik"`` minus the inertia ``sum_i min_k |x_i - c_k|²``, ``"n_rows"``
    and ``"n_clipped"`` the rows changed by the domain map (diagnostics, not private)."""
    X = np.asarray(X, dtype=np.float64)
    n_clipped = 0
    if domain is not None:
        X, n_clipped = scale_and_clip_reference(X, domain)
    K, d = np.shape(centers)
    lab, dist = kmeans_assign_reference(X, centers)
    counts = np.bincount(lab, minlength=K).astype(np.float64)
    sums = np.zeros((K, d))
    for k in range(K):
        sums[k] = X[lab == k].sum(axis=0)
    return {"counts": counts, "sums": sums, "loglik": -float(dist.sum()), "n_rows": X.shape[0],
            "n_clipped": int(n_clipped)}
