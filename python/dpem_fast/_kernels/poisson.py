"""Python face of the Poisson-mixture kernel (``dpem_fast._dpcore._poisson``).

A mixture of K products of independent Poissons over d count features, weights ``w_k`` and
rates ``lam_kj > 0``; counts clipped to a declared maximum ``M``.  One pass gives::

    N_k = sum_i g_ik     S_k = sum_i g_ik (x_i - c) / R     LL = sum_i log p(x_i)

(``c = M/2``, ``R = (M/2) sqrt(d)``: the clipped rows mapped into the unit ball).  Additive
over any partition of the rows and *not* private: noise is added only by the release layer.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, logsumexp

from .._dpcore import _contract, _poisson
from .._engine import Statistics
from .._threads import effective_n_threads

__all__ = ["poisson_stats", "poisson_log_resp", "unit_map"]


def unit_map(M, d):
    """``(c, R)`` of the map ``x -> (x - c) / R`` of ``[0, M]^d`` into the unit ball."""
    return 0.5 * float(M), 0.5 * float(M) * float(np.sqrt(d))


def _params(X, weights, rates):
    X = np.ascontiguousarray(X, dtype=np.float64)
    rates = np.ascontiguousarray(rates, dtype=np.float64)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if rates.ndim != 2 or rates.shape[1] != X.shape[1] or weights.shape != (rates.shape[0],):
        raise ValueError(f"rates must have shape (K, {X.shape[1]}) and weights (K,), got {rates.shape}, "
                         f"{weights.shape}")
    if not (np.all(rates > 0) and np.all(np.isfinite(rates)) and np.all(weights > 0)):
        raise ValueError("rates and weights must be finite and > 0")
    return X, weights, rates


def poisson_stats(X, weights, rates, max_count, n_threads=None) -> Statistics:
    """One pass of the Poisson-mixture E-step over ``X`` (counts, clipped to ``max_count`` in
    the kernel): ``"counts"`` (K,), ``"sums"`` (K, d) in unit-ball units, ``loglik``, and
    ``n_clipped`` (rows with a count outside [0, max_count]) as a diagnostic.

    Equivalent to: :func:`dpem_fast._reference.poisson.poisson_stats_reference`."""
    X, weights, rates = _params(X, weights, rates)
    n, d = X.shape
    K = rates.shape[0]
    nb = _poisson.block_count(n, d, K)
    counts, sums = np.zeros((nb, K)), np.zeros((nb, K, d))
    ll, clipped = np.zeros(nb), np.zeros(nb, dtype=np.int64)
    nt = effective_n_threads(n_threads)
    _poisson.poisson_stats(X, rates, weights, float(max_count), counts, sums, ll, clipped, nt)
    # exact (any thread count, same bits): the contract's reduction
    return Statistics({"counts": _contract.sum_blocks(counts, nt), "sums": _contract.sum_blocks(sums, nt)}, n,
                      float(ll.sum()), int(clipped.sum()))


def poisson_log_resp(X, weights, rates, max_count):
    """``(log responsibilities (n, K), log p(x) (n,))`` of counts clipped to ``max_count``
    (inference: vectorised numpy, not a statistic of a fit)."""
    X, weights, rates = _params(X, weights, rates)
    X = np.clip(X, 0.0, float(max_count))
    lj = np.log(weights) + X @ np.log(rates).T - rates.sum(axis=1) - gammaln(X + 1.0).sum(axis=1)[:, None]
    lp = logsumexp(lj, axis=1)
    return lj - lp[:, None], lp
