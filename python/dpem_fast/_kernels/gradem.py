"""Python face of the gradient-EM kernel (``dpem_fast._dpcore._gradem``).

The statistics are sums over rows, additive over any partition of the rows, and *not*
private: noise is added only by the engine's release layer.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._dpcore import _contract, _gradem
from .._engine import Statistics
from .psi import GL_NODES
from .._threads import effective_n_threads
from .._validation import as_kernel_rows

__all__ = ["ESTIMATORS", "gradem_stats", "gradem_loglik", "expected_psi", "symmetric_psi_bias", "GH_NODES"]

#: kernel codes of the estimators
ESTIMATORS = {"raw": 0, "truncated": 1, "clipped": 2}
_GLX, _GLW = (np.ascontiguousarray(a) for a in np.polynomial.legendre.leggauss(GL_NODES))
#: Gauss-Hermite nodes per dimension of the 2-d integral in ``symmetric_psi_bias``
GH_NODES = 48


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
    # exact (the same bits for any thread count and block order): the contract's reduction
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


@functools.lru_cache(maxsize=4)
def _hermite(k):
    x, w = np.polynomial.hermite_e.hermegauss(k)       # weight exp(-x^2/2)
    return x, w / math.sqrt(2.0 * math.pi)


def symmetric_psi_bias(beta, sigma2, scale, beta_m, nodes=GH_NODES):
    """``h(beta) = E_{y ~ P_beta}[s E psi(g_beta(y) (1 + eps) / s)]`` per coordinate: the mean of
    DG-EM's truncated gradient at ``beta`` when the data follow the symmetric model *at beta*
    (``y = z beta + e``, ``z = +-1``, ``e ~ N(0, sigma2 I)``), where the true mean gradient
    ``E g_beta(y) = E tanh(<beta, y>/sigma2) y - beta`` is 0 (self-consistency, BWY Sec. 3.1).

    So ``h(beta)`` is the bias of the truncated estimate of the mean gradient at the model,
    and ``beta + eta (G/n - h(beta))`` has the true ``beta*`` as a fixed point of its
    population map, where the uncorrected update has one shrunk towards 0 (see
    :class:`~dpem_fast.mixture.DPGradientEM`, Bias correction).  A function of public values
    only (``beta`` released, ``sigma2``, ``s``, ``beta_m``): post-processing.

    Computation: ``z = -1`` gives the same g as ``z = +1`` (g is even in (z, e)), so take
    ``z = 1``.  With ``b = |beta|``, ``t = <beta, e>/b ~ N(0, sigma2)`` and, per coordinate j,
    ``e_j = (beta_j/b) t + sigma sqrt(1 - beta_j^2/b^2) w`` (w ~ N(0, 1) independent of t)::

        g_j = tanh(b (b + t) / sigma2) (beta_j + e_j) - beta_j

    a two-dimensional Gaussian integral over (t, w), taken by ``nodes`` x ``nodes``
    Gauss-Hermite quadrature (``E psi`` by the kernel's closed form inside).  The integrand
    is smooth but not analytic where g = 0 (E psi's tails vanish like exp(-1/u^2)), so the
    quadrature converges slowly: 48 nodes are within about 1 % of h (1e-4 absolute at
    |beta| = 1.3) of 150 nodes and within Monte Carlo error of 10^6 rows — far below the
    noise of any private gradient.
    ``beta = 0``: g = 0 and h = 0; a non-finite result (overflowing ``beta``) is replaced by 0.
    """
    beta = np.asarray(beta, dtype=np.float64).reshape(-1)
    with np.errstate(over="ignore", under="ignore"):
        b = float(np.linalg.norm(beta))
    if not b > 0.0 or not math.isfinite(b):
        return np.zeros_like(beta)
    sig = math.sqrt(float(sigma2))
    s = float(scale)
    x, w = _hermite(int(nodes))
    weight = (w[:, None] * w[None, :]).ravel()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        t = sig * x[None, :, None]                                     # (1, k, 1)
        th = np.tanh(b * (b + t) / float(sigma2))
        c = (beta / b)[:, None, None]                                  # (d, 1, 1)
        ej = c * t + sig * np.sqrt(np.maximum(0.0, 1.0 - c * c)) * x[None, None, :]
        g = th * (beta[:, None, None] + ej) - beta[:, None, None]      # (d, k, k)
        u = np.where(np.isfinite(g), g, 0.0) / s
        ep = expected_psi(u, float(beta_m)).reshape(beta.size, -1)
        out = s * (ep @ weight)
    return np.where(np.isfinite(out), out, 0.0)
