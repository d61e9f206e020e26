"""Python face of the k-means kernel (``dpem_fast._dpcore._kmeans``) and the NICV metric.

One pass assigns every row to its nearest centre and sums, per cluster, the rows and their
count (Lloyd's update ``c_k = S_k / N_k``)::

    N_k = #{i : a(i) = k}        S_k = sum_{a(i) = k} x_i        W = sum_i min_k |x_i - c_k|²

They are additive over any partition of the rows and *not* private: noise is added only by
the engine's release layer.
"""
from __future__ import annotations

import numpy as np

from .._dpcore import _contract, _kmeans
from .._engine import Statistics
from .._preprocess import clip_target
from .._threads import effective_n_threads
from .._validation import as_kernel_rows

__all__ = ["COUNTS", "SUMS", "kmeans_stats", "kmeans_assign", "nicv"]

#: Names of the k-means statistics in the engine's :class:`Statistics`.
COUNTS, SUMS = "counts", "sums"


def _centers(X, centers):
    C = np.ascontiguousarray(centers, dtype=np.float64)
    if C.ndim != 2 or C.shape[1] != X.shape[1] or C.shape[0] < 1:
        raise ValueError(f"centers must have shape (n_clusters, {X.shape[1]}), got {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("centers must be finite")
    return C


def kmeans_stats(X, centers, n_threads=None, domain=None) -> Statistics:
    """Hard assignment and per-cluster statistics of ``X`` in one pass.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
        C-contiguous rows (copied otherwise).  Accumulation is always float64.
    centers : ndarray of shape (n_clusters, n_features)
    n_threads : int or None
        OpenMP threads; the result is bit-identical for every value.
    domain : dpem_fast._preprocess.DataDomain or None
        If given, every row is mapped into the unit ball of this domain as the kernel loads
        it (clip to the box, centre, scale, clip the norm); ``centers`` and the statistics
        are in those units.

    Returns
    -------
    Statistics
        ``"counts"`` (K,), ``"sums"`` (K, d); ``loglik`` is minus the inertia
        ``sum_i min_k |x_i - c_k|²`` (a diagnostic), ``n_rows`` and ``n_clipped``.

    Notes
    -----
    Equivalent to: ``dpem_fast._reference.kmeans.kmeans_stats_reference(X, centers, domain)``:
    the nearest centre comes from the scores ``|c_k|²/2 - x·c_k`` (``dpc_kmeans.h``; the same
    on every machine and code path), so labels, and with them the counts, equal the twin's
    except where two centres are within rounding of each other; sums and the inertia to
    rounding.
    """
    X = as_kernel_rows(X)
    n, d = X.shape
    C = _centers(X, centers)
    K = C.shape[0]
    nb = _kmeans.block_count(n, d, K)
    parts = [np.empty((nb, K)), np.empty((nb, K, d)), np.empty(nb)]
    kw = {}
    if domain is not None:
        kw = dict(domain=domain.loader_array(), clip_target=clip_target(d, np.float64),
                  part_clipped=np.zeros(nb, dtype=np.int64))
    nt = effective_n_threads(n_threads)
    _kmeans.kmeans_stats(X, C, *parts, nt, **kw)
    # Exact (sum_blocks: every entry the correctly rounded sum of its blocks; issue 34).
    counts, sums, inertia = (_contract.sum_blocks(p, nt) for p in parts)
    return Statistics({COUNTS: counts, SUMS: sums}, int(n), -float(inertia),
                      int(kw["part_clipped"].sum()) if kw else 0)


def kmeans_assign(X, centers, n_threads=None):
    """Nearest centre of each row (lowest index on ties) and the squared distance to it.

    Returns
    -------
    labels : ndarray of shape (n_samples,), int64
    sq_dist : ndarray of shape (n_samples,), dtype of ``X``

    Notes
    -----
    Equivalent to: ``dpem_fast._reference.kmeans.kmeans_assign_reference(X, centers)``: labels
    equal except at near-ties within rounding; ``sq_dist`` is the twin's distance to the label
    returned, bit for bit.
    """
    X = as_kernel_rows(X)
    C = _centers(X, centers)
    labels = np.empty(X.shape[0], dtype=np.int64)
    sq = np.empty(X.shape[0], dtype=X.dtype)
    _kmeans.kmeans_assign(X, C, labels, sq, effective_n_threads(n_threads))
    return labels, sq


def nicv(X, centers, *, n_threads=None):
    """Normalised intra-cluster variance, ``(1/N) sum_i min_k |x_i - c_k|²``.

    The k-means metric of the DP-EM paper (Park et al. 2017, Sec. 7, Fig. 4).  Pass ``X``
    and ``centers`` in the units the comparison is made in: the paper normalises the data to
    the unit ball of one declared domain first, so the value moves with that domain and
    compares fits only within it.  ``DPKMeans.nicv(X)`` divides by X's total variance instead,
    which no domain or unit enters.  Not private: it reads ``X``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)

    Returns
    -------
    float
    """
    X = as_kernel_rows(X)
    if X.shape[0] == 0:
        raise ValueError("X must have at least one row")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite (no NaN or infinity)")
    return float(np.add.reduce(kmeans_assign(X, centers, n_threads)[1].astype(np.float64))) / X.shape[0]
