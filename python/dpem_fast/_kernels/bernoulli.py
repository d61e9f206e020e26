"""Python face of the Bernoulli-mixture E-step kernel (``dpem_fast._dpcore._bernoulli``).

A mixture of K products of independent Bernoullis over d binary features, weights
``pi_k`` and means ``mu_kj in (0, 1)``.  One fused pass gives the statistics of the
M-step (``pi_k = N_k / n``, ``mu_k = S1_k / N_k``)::

    N_k = sum_i g_ik        S1_k = sum_i g_ik x_i        LL = sum_i log p(x_i)

They are additive over any partition of the rows and *not* private: noise is added only
by the engine's release layer.
"""
from __future__ import annotations

import numpy as np

from .._dpcore import _bernoulli, _contract
from .._engine import Statistics
from .._threads import blas_single_thread, effective_n_threads
from .._validation import as_kernel_rows

__all__ = ["bernoulli_stats", "bernoulli_log_resp"]


def _params(X, weights, means):
    X = as_kernel_rows(X)
    d = X.shape[1]
    means = np.ascontiguousarray(means, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != d or means.shape[0] < 1:
        raise ValueError(f"means must have shape (n_components, {d}), got {means.shape}")
    if not np.all((means > 0.0) & (means < 1.0)):
        bad = means[~((means > 0.0) & (means < 1.0))]
        raise ValueError(f"means must lie strictly between 0 and 1, got {bad[0]!r}")
    K = means.shape[0]
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (K,):
        raise ValueError(f"weights must have shape ({K},), got {weights.shape}")
    if not (np.all(np.isfinite(weights)) and np.all(weights >= 0.0) and np.any(weights > 0.0)):
        raise ValueError(f"weights must be finite, >= 0 and not all 0, got {weights!r}")
    log1m = np.log1p(-means)
    theta = np.ascontiguousarray(np.log(means) - log1m)
    with np.errstate(divide="ignore"):  # a zero weight gives log 0 = -inf: that component is never chosen
        log_w = np.log(weights)
    log_const = np.ascontiguousarray(log_w + log1m.sum(axis=1))
    return X, theta, log_const


def bernoulli_stats(X, weights, means, n_threads=None) -> Statistics:
    """One fused E-step pass of a Bernoulli mixture over ``X``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
        Binary rows (entries 0 or 1), C-contiguous (copied otherwise).  Accumulation is
        always float64.  Entries are not checked: for other values the kernel still
        evaluates ``log pi_k + x log mu_k + (1 - x) log(1 - mu_k)`` (as the reference).
    weights : ndarray of shape (n_components,)
        Mixing weights, >= 0 (a zero weight is allowed: that component gets nothing).
    means : ndarray of shape (n_components, n_features)
        Bernoulli means, strictly between 0 and 1.
    n_threads : int or None
        OpenMP threads (see :func:`dpem_fast._threads.effective_n_threads`).  The result
        is bit-identical for every value.

    Returns
    -------
    Statistics
        ``"counts"`` ndarray (n_components,) ``sum_i g_ik``; ``"first_moments"`` ndarray
        (n_components, n_features) ``sum_i g_ik x_i``; ``loglik`` ``sum_i log p(x_i)`` and
        ``n_rows`` as diagnostics.

    Notes
    -----
    Equivalent to: ``lp = X @ log(mu).T + (1 - X) @ log(1 - mu).T + log(weights)``,
    ``g = exp(lp - logsumexp(lp, 1)[:, None])``, then ``(g.sum(0), g.T @ X,
    logsumexp(lp, 1).sum())``, without materialising ``g``.
    """
    X, theta, log_const = _params(X, weights, means)
    n, d = X.shape
    K = theta.shape[0]
    nb = _bernoulli.block_count(n, d, K)
    part_nk = np.empty((nb, K))
    part_s1 = np.empty((nb, K, d))
    part_ll = np.empty(nb)
    nt = effective_n_threads(n_threads)
    with blas_single_thread(enabled=d >= _contract.BERNOULLI_BLAS_MIN_D):   # hand loops: no BLAS
        _bernoulli.bernoulli_stats(X, theta, log_const, part_nk, part_s1, part_ll, nt)
    # Exact (sum_blocks: every entry the correctly rounded sum of its blocks; issue 34).
    return Statistics(
        {"counts": _contract.sum_blocks(part_nk, nt), "first_moments": _contract.sum_blocks(part_s1, nt)},
        int(n), float(np.add.reduce(part_ll)) if nb else 0.0)


def bernoulli_log_resp(X, weights, means, n_threads=None):
    """Log responsibilities and per-row log-likelihood of a Bernoulli mixture.

    Returns
    -------
    log_resp : ndarray of shape (n_samples, n_components), dtype of ``X``
    log_prob : ndarray of shape (n_samples,), dtype of ``X``

    Notes
    -----
    Equivalent to: ``lp = X @ log(mu).T + (1 - X) @ log(1 - mu).T + log(weights);
    ll = logsumexp(lp, 1); (lp - ll[:, None], ll)`` (computed in float64, stored in the
    dtype of ``X``).
    """
    X, theta, log_const = _params(X, weights, means)
    n, d = X.shape
    K = theta.shape[0]
    out = np.empty((n, K), dtype=X.dtype)
    ll = np.empty(n, dtype=X.dtype)
    with blas_single_thread(enabled=d >= _contract.BERNOULLI_BLAS_MIN_D):
        _bernoulli.bernoulli_log_resp(X, theta, log_const, out, ll, effective_n_threads(n_threads))
    return out, ll
