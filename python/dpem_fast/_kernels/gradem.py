"""Python face of the gradient-EM kernel (``dpem_fast._dpcore._gradem``).

The statistics are sums over rows, additive over any partition of the rows, and *not*
private: noise is added only by the engine's release layer.
"""
from __future__ import annotations

import numpy as np

from .._dpcore import _contract, _gradem
from .._engine import Statistics
from .psi import GL_NODES
from .._threads import effective_n_threads
from .._validation import as_kernel_rows

__all__ = ["ESTIMATORS", "gradem_stats", "gradem_loglik", "expected_psi"]

#: kernel codes of the estimators
ESTIMATORS = {"raw": 0, "truncated": 1, "clipped": 2}
_GLX, _GLW = (np.ascontiguousarray(a) for a in np.polynomial.legendre.leggauss(GL_NODES))


def _means(means, d, symmetric):
    means = np.ascontiguousarray(np.atleast_2d(np.asarray(means, dtype=np.float64)))
    if means.shape[1] != d or (symmetric and means.shape[0] != 1):
        raise ValueError(f"means must have shape ({'1' if symmetric else 'K'}, {d}), got {means.shape}")
    return means


def gradem_stats(X, means, sigma2, *, symmetric, estimator, scale=1.0, beta_m=1.0,
                 n_threads=None) -> Statistics:
    """One pass of gradient EM over ``X``.

    Returns
    -------
    Statistics
        ``"raw"`` (m,) ``sum_i g_i``; ``"grad"`` (m,) the truncated or clipped sum (zeros
        for ``estimator="raw"``); ``"count"`` (1,) the row count; ``"n_nonfinite"`` (1,)
        the rows left out by the kernel's last guard (a gradient that is not finite: out
        of ``"raw"`` and ``"grad"``; a contribution that is not: out of ``"grad"``; only
        non-finite parameters get there); ``loglik`` and ``n_clipped`` (rows truncated, clipped or left out) as
        diagnostics, not private.  m = d (symmetric) or K d.  Every value is finite for
        finite parameters, whatever the rows (see :mod:`dpem_fast._dpcore._gradem`);
        ``loglik`` may be -inf where a density underflows.

    Equivalent to: :func:`dpem_fast._reference.gradem.gradem_stats_reference`.
    """
    X = as_kernel_rows(X)
    n, d = X.shape
    means = _means(means, d, symmetric)
    m = d if symmetric else means.shape[0] * d
    nb = _gradem.block_count(n, m)
    raw, stat = np.zeros((nb, m)), np.zeros((nb, m))
    ll = np.zeros(nb)
    clipped, nonfinite = np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=np.int64)   # row counts
    nt = effective_n_threads(n_threads)
    _gradem.gradem_stats(X, means, float(sigma2), int(bool(symmetric)), ESTIMATORS[estimator], float(scale),
                         float(beta_m), _GLX, _GLW, raw, stat, ll, clipped, nonfinite, nt)
    # block order (the same bits for any thread count): the contract's reduction
    raw_sum, stat_sum = _contract.sum_blocks(raw, nt), _contract.sum_blocks(stat, nt)
    return Statistics({"grad": stat_sum, "raw": raw_sum, "count": np.array([float(n)]),
                       "n_nonfinite": np.array([float(nonfinite.sum())])}, n, float(ll.sum()), int(clipped.sum()))


def gradem_loglik(X, means, sigma2, *, symmetric, n_threads=None):
    """Per-row ``log p(y_i)`` (n,) and posteriors (n, 2 or K)."""
    X = as_kernel_rows(X)
    n, d = X.shape
    means = _means(means, d, symmetric)
    ll = np.empty(n)
    resp = np.empty((n, 2 if symmetric else means.shape[0]))
    _gradem.gradem_loglik(X, means, float(sigma2), int(bool(symmetric)), ll, resp, effective_n_threads(n_threads))
    return ll, resp


def expected_psi(u, beta_m):
    """The kernel's ``E psi(u (1 + eps))`` (tests)."""
    u = np.ascontiguousarray(u, dtype=np.float64).ravel()
    out = np.empty_like(u)
    _gradem.expected_psi(u, float(beta_m), _GLX, _GLW, out)
    return out
