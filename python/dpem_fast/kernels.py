"""Low-level kernels for other libraries: sufficient statistics, the release, the samplers.

Array in, array out, no hidden state: every function is a thin wrapper of the kernel the
estimators use (the same compiled code, the same blocking), so a library that builds its own
private algorithm on these gets the estimators' speed and reproducibility.  None of these
functions is private on its own: the statistics are *exact* and must be released (with
:func:`add_noise` at a noise scale calibrated for their sensitivity, e.g. with
:func:`dpem_fast.accounting` tools) before they leave the trusted side.

Contract
--------
* **Stability**: the names and signatures below follow semantic versioning from 1.0;
  before 1.0 a change is announced in the CHANGELOG.
* **Reproducibility**: for a fixed input (and key), every result is bit-identical for every
  ``n_threads`` (rows are cut into fixed blocks whose partial sums are reduced in block
  order); results may change between releases of dpem_fast (the CHANGELOG says when).
* **Thread safety**: no function keeps state between calls; each may be called from several
  Python threads at once (the kernels release the GIL and allocate their own scratch).
  ``n_threads`` OpenMP threads run inside one call (None: all cores, see
  ``DPEM_FAST_NUM_THREADS``).

Domains: ``domain`` is None (rows used as they are), a :class:`DataDomain`, or
``(center, scale)`` or ``(center, scale, (lower, upper))`` with ``scale`` one positive
number (a radius, the same for every feature) or one per feature, shape (d,): each row is
clipped to the box, mapped to ``(x - center) / scale`` feature by feature and clipped into
the unit ball while the kernel loads it (the estimators' ``data_norm`` / ``bounds`` map:
with a box and no ``data_norm`` they use ``scale = sqrt(d) * (upper - lower) / 2``), and the
statistics are in those units.
"""
from __future__ import annotations

import numpy as np

from . import random as _random
from ._kernels import all_binary, all_finite
from ._engine._release import noised_value
from ._preprocess import DataDomain
from ._rng import make_key
from ._threads import effective_n_threads

__all__ = [
    "gmm_statistics", "bernoulli_statistics", "kmeans_statistics", "second_moments", "lda_estep",
    "add_noise", "make_key",
    "uniform", "standard_normal", "laplace", "integers", "symmetric_gaussian",
    "discrete_laplace", "discrete_gaussian", "symmetric_discrete_gaussian",
]

uniform = _random.uniform
standard_normal = _random.standard_normal
laplace = _random.laplace
integers = _random.integers
symmetric_gaussian = _random.symmetric_gaussian
discrete_laplace = _random.discrete_laplace
discrete_gaussian = _random.discrete_gaussian
symmetric_discrete_gaussian = _random.symmetric_discrete_gaussian


def _domain(domain, d):
    if domain is None:
        return None
    if isinstance(domain, DataDomain):
        if domain.center.shape != (d,):
            raise ValueError(f"domain: a DataDomain of {domain.center.shape[0]} features for X with {d}")
        return domain
    if not isinstance(domain, tuple) or len(domain) not in (2, 3):
        raise TypeError("domain must be None, a DataDomain, (center, scale) or (center, scale, (lower, upper))")
    center = np.asarray(domain[0], dtype=np.float64)
    try:
        scale = np.asarray(domain[1], dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"domain: scale must be a number or {d} numbers, got {domain[1]!r}") from None
    if center.shape != (d,) or not np.all(np.isfinite(center)):
        raise ValueError(f"domain: center must be {d} finite values")
    with np.errstate(divide="ignore", over="ignore"):
        ok = (scale.shape in ((), (d,)) and np.all(np.isfinite(scale)) and np.all(scale > 0)
              and np.all(np.isfinite(1.0 / scale)))
    if not ok:
        raise ValueError(f"domain: scale must be one or {d} finite values > 0, got {domain[1]!r}")
    bounds = None
    if len(domain) == 3 and domain[2] is not None:
        lo, hi = (np.asarray(b, dtype=np.float64) for b in domain[2])
        if lo.shape != (d,) or hi.shape != (d,) or not np.all(lo <= hi):
            raise ValueError(f"domain: bounds must be two arrays of {d} values with lower <= upper")
        bounds = (lo, hi)
    return DataDomain(center, np.broadcast_to(scale, (d,)).copy(), bounds, False)


def _rows(X, n_threads, binary=False):
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = np.ascontiguousarray(X)
    # over the kernel's threads: a serial check would bound the call's speed-up (issue 41);
    # binary values are finite, so binary rows need one pass (the second only names the fault)
    check = all_binary if binary else all_finite
    if not check(X, n_threads):
        if binary and all_finite(X, n_threads):
            raise ValueError("X must be binary (every value 0 or 1)")
        raise ValueError("X contains NaN or infinity")
    return X


def _out(stats):
    out = {name: np.asarray(v) for name, v in stats.items()}
    out["loglik"] = float(stats.loglik)
    out["n_clipped"] = int(stats.n_clipped)
    return out


def gmm_statistics(X, weights, means, precisions_cholesky, *, domain=None, n_threads=None):
    """Gaussian-mixture E-step statistics (DP-EM Eq. 10-11) in one fused pass.

    Returns a dict: ``"counts"`` (K,) = Σ_i r_ik, ``"first_moments"`` (K, d) = Σ_i r_ik x_i,
    ``"second_moments"`` (K, d, d) = Σ_i r_ik x_i x_iᵀ (exactly symmetric), ``"loglik"`` =
    Σ_i log p(x_i), ``"n_clipped"`` (rows changed by ``domain``).  ``precision_k =
    P_k P_kᵀ`` for ``P = precisions_cholesky`` (scikit-learn's convention).
    """
    from ._kernels.gmm import compute_stats

    nt = effective_n_threads(n_threads)
    X = _rows(X, nt)
    return _out(compute_stats(X, weights, means, precisions_cholesky, nt, _domain(domain, X.shape[1])))


def bernoulli_statistics(X, weights, means, *, n_threads=None):
    """Bernoulli-mixture E-step statistics of binary rows: ``"counts"`` (K,), ``"first_moments"``
    (K, d), ``"loglik"``, ``"n_clipped"`` (always 0)."""
    from ._kernels.bernoulli import bernoulli_stats

    nt = effective_n_threads(n_threads)
    X = _rows(X, nt, binary=True)
    return _out(bernoulli_stats(X, weights, means, nt))


def kmeans_statistics(X, centers, *, domain=None, n_threads=None):
    """Hard assignment to the nearest centre: ``"counts"`` (K,), ``"sums"`` (K, d), ``"loglik"``
    (minus the inertia), ``"n_clipped"``."""
    from ._kernels.kmeans import kmeans_stats

    nt = effective_n_threads(n_threads)
    X = _rows(X, nt)
    return _out(kmeans_stats(X, centers, nt, _domain(domain, X.shape[1])))


def second_moments(X, *, domain=None, n_threads=None):
    """Count, sum and second moment: ``"count"`` (1,), ``"sum"`` (d,), ``"second_moment"`` (d, d)
    exactly symmetric, ``"n_clipped"``."""
    from ._kernels.moments import second_moment_stats

    nt = effective_n_threads(n_threads)
    X = _rows(X, nt)
    return _out(second_moment_stats(X, _domain(domain, X.shape[1]), nt))


def lda_estep(X, exp_elog_beta, gamma0, alpha, *, max_iter=100, tol=1e-3, clip=np.inf, n_threads=None):
    """LDA variational E-step of the CSR term counts ``X`` (n, V).

    Returns ``(gamma, sstats, norms_clipped)``: the fitted (n, K) gamma; the (K, V) sum over
    the documents of ``s_d · min(1, clip (1 - 1e-12) / ‖s_d‖_F)`` with ``s_d[k, v] = c_dv φ_dvk``
    (the per-document contribution clipped to Frobenius norm ``clip``); and the number of
    documents clipped.  ``gamma0`` is not modified.
    """
    import scipy.sparse as sp

    from ._kernels.lda import estep_csr

    X = sp.csr_matrix(X, dtype=np.float64)
    X.sort_indices()
    eb = np.asarray(exp_elog_beta, dtype=np.float64)
    K, V = eb.shape
    if X.shape[1] != V:
        raise ValueError(f"X has {X.shape[1]} terms, exp_elog_beta {V}")
    n = X.shape[0]
    if np.shape(gamma0) != (n, K):
        raise ValueError(f"gamma0 must have shape {(n, K)}, got {np.shape(gamma0)}")
    gamma, sstats, clipped = estep_csr(X, np.ascontiguousarray(eb.T), gamma0, alpha, max_iter, tol, clip,
                                       effective_n_threads(n_threads))
    return gamma, sstats, int(clipped)


def add_noise(value, noise_scale, key, *, mechanism="gaussian", symmetric=False, granularity=None,
              n_threads=None):
    """``value`` plus noise from the streams of ``key`` (the engine's release function).

    Parameters
    ----------
    value : ndarray (float64)
    noise_scale : float
        σ (``"gaussian"``, ``"discrete_gaussian"``) or the Laplace scale b (``"laplace"``), in
        the units of ``value``; calibrating it for the statistic's sensitivity is the caller's job.
    key : uint32 array of shape (8,)
        From :func:`make_key`; use a different key (e.g. ``make_key(seed)`` per release) for
        every release: the same key draws the same noise.
    mechanism : {"gaussian", "laplace", "discrete_gaussian"}
    symmetric : bool or "frobenius"
        For (…, d, d) symmetric statistics, noise drawn on the upper triangle and mirrored.
        ``True``: σ on every upper entry (Analyze-Gauss; calibrate σ for the sensitivity
        ``‖upper(δ)‖₂``).  ``"frobenius"``: σ on the diagonal and σ/√2 above it, the Gaussian
        mechanism on ``(S_ii; √2 S_ij)`` (calibrate σ for ``‖δ‖_F``; the models' own release,
        half the off-diagonal variance of Analyze-Gauss at the same ``‖δ‖_F``).  Gaussian only
        for ``"frobenius"``; the discrete Gaussian mirrors σ on every upper entry.
    granularity : float, power of two
        Lattice step of ``"discrete_gaussian"`` (the value is rounded to it first).

    Returns a new float64 array; bit-identical for every ``n_threads``.
    """
    value = np.asarray(value, dtype=np.float64)
    noise_scale = float(noise_scale)
    if not (np.isfinite(noise_scale) and noise_scale > 0):
        raise ValueError(f"noise_scale must be finite and > 0, got {noise_scale}")
    key = np.asarray(key)
    if key.shape != (8,) or key.dtype != np.uint32:
        raise ValueError("key must be a uint32 array of shape (8,) (see make_key)")
    if mechanism == "discrete_gaussian" and granularity is None:
        raise ValueError("granularity is required for mechanism='discrete_gaussian'")
    return noised_value(value, noise_scale, key, mechanism, symmetric, granularity, effective_n_threads(n_threads))
