"""Additive E-step statistics of a Gaussian mixture and the Python face of the fused kernel.

DP-EM (Park et al. 2017): the responsibilities of Eq. 10 enter the updates of Eq. 11 only
through ``N_k = sum_i g_ik``, ``S1_k = sum_i g_ik x_i`` and ``S2_k = sum_i g_ik x_i x_i^T``.
These sums are additive over any partition of the rows (chunks of a memmap, partitions on a
cluster), which is what the engine's :class:`~dpem_fast._engine.Statistics` and its ``+``
express: here named ``"counts"``, ``"first_moments"`` and ``"second_moments"``.  They are *not*
private: noise is added only by the engine's release layer.
"""
from __future__ import annotations

import numpy as np

from .._dpcore import _contract, _estep, _estep_diag, _mstep
from .._engine import Statistics
from .._preprocess import clip_target
from .._threads import blas_single_thread, effective_n_threads
from .._validation import as_kernel_rows

__all__ = ["COUNTS", "FIRST", "SECOND", "COVARIANCE_TYPES", "gmm_statistics", "second_moments_of_type", "compute_stats", "predict_log_resp", "log_normalizers",
           "compute_stats_diag", "predict_log_resp_diag", "log_normalizers_diag", "full_m_step"]


#: Names of the mixture's statistics, in the engine's :class:`Statistics`.
COUNTS, FIRST, SECOND = "counts", "first_moments", "second_moments"


def gmm_statistics(n_rows, nk, s1, s2, loglik=0.0, n_clipped=0, owned=False) -> Statistics:
    """Pack ``N_k``, ``S1_k``, ``S2_k`` (and diagnostics) as named engine statistics
    (``owned``: the arrays are fresh and held by nothing else, see :class:`Statistics`)."""
    return Statistics({COUNTS: nk, FIRST: s1, SECOND: s2}, int(n_rows), float(loglik), int(n_clipped), owned)


#: scikit-learn's covariance types and the second moments each one releases
COVARIANCE_TYPES = ("full", "diag", "tied", "spherical")


def second_moments_of_type(s2, covariance_type):
    """The second moments a covariance type needs, from the full ``S2_k`` (K, d, d).

    ``"full"``: ``S2_k`` itself; ``"diag"``: its diagonals ``Σ_i γ_ik x_i²`` (K, d);
    ``"spherical"``: its traces ``Σ_i γ_ik ‖x_i‖²`` (K,); ``"tied"``: the pooled
    ``Σ_k S2_k = Σ_i x_i x_iᵀ`` (d, d) (``Σ_k γ_ik = 1``).  Summed in a fixed order (over k, then
    as numpy reduces a fixed shape): the result does not depend on the thread count.
    ``s2`` may also be the diagonal kernel's squared sums (K, d) (:func:`compute_stats_diag`),
    for ``"diag"`` (returned as they are) and ``"spherical"`` (their row sums).
    """
    if covariance_type in ("diag", "spherical") and np.ndim(s2) == 2:
        return s2 if covariance_type == "diag" else np.add.reduce(s2, axis=1)
    if covariance_type == "full":
        return s2
    if covariance_type == "diag":
        return np.ascontiguousarray(np.diagonal(s2, axis1=1, axis2=2))
    if covariance_type == "spherical":
        return np.trace(s2, axis1=1, axis2=2)
    if covariance_type == "tied":
        out = s2[0].copy()
        for k in range(1, s2.shape[0]):
            out += s2[k]
        return out
    raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {covariance_type!r}")


def _is_upper(P):
    """True when every P_k is upper triangular (``not np.any(np.tril(P, -1))``; compiled: it
    runs every iteration)."""
    return _mstep.is_upper_triangular(np.ascontiguousarray(P, dtype=np.float64))


def _params(X, weights, means, precisions_cholesky):
    X = as_kernel_rows(X)
    n, d = X.shape
    means = np.ascontiguousarray(means, dtype=np.float64)
    P = np.ascontiguousarray(precisions_cholesky, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != d:
        raise ValueError(f"means must have shape (n_components, {d}), got {means.shape}")
    K = means.shape[0]
    if P.shape != (K, d, d):
        raise ValueError(f"precisions_cholesky must have shape {(K, d, d)}, got {P.shape}")
    if weights.shape != (K,):
        raise ValueError(f"weights must have shape ({K},), got {weights.shape}")
    upper = _mstep.is_upper_triangular(P)       # (P is C-contiguous float64 already)
    return X, means, P, log_normalizers(weights, P, upper), upper


#: ``log(2 pi)`` as numpy computes it (the constant of every log normalizer, computed once)
_LOG_2PI = float(np.log(2 * np.pi))


def _log_weights(weights):
    """``log π_k`` as a new float64 array, ``-inf`` for a zero weight without numpy's
    divide-by-zero warning (a dropped component)."""
    weights = np.asarray(weights, dtype=np.float64)
    # (the ufunc reduce: weights.all() at a fraction of its cost) np.errstate costs more than
    # this E-step's reduction on small problems; a NaN or a negative weight takes the errstate
    # path, which gives the same values and warnings
    if not weights.size or np.minimum.reduce(weights) > 0:
        return np.log(weights)
    with np.errstate(divide="ignore"):
        return np.log(weights)


def log_normalizers(weights, precisions_cholesky, upper_triangular=None):
    """``log pi_k + log|det P_k| - d/2 log(2 pi)``, the per-component constant of Eq. 10.

    For upper-triangular ``P_k`` (scikit-learn's convention) the log-determinant is the sum of
    the log-diagonal, exactly as scikit-learn computes it; otherwise ``slogdet``.
    """
    P = np.asarray(precisions_cholesky, dtype=np.float64)
    d = P.shape[-1]
    if upper_triangular is None:
        upper_triangular = _is_upper(P)
    if upper_triangular:        # (np.add.reduce: .sum's ufunc, without its Python wrapper)
        log_det = np.add.reduce(np.log(P.diagonal(axis1=1, axis2=2)), axis=1)
    else:
        log_det = np.linalg.slogdet(P)[1]
    log_w = _log_weights(weights)
    log_w += log_det                    # (log_w + log_det) - c in place: the same bits
    log_w -= 0.5 * d * _LOG_2PI
    return log_w                        # a new 1-d array: contiguous


def _domain_kwargs(domain, d, nb):
    """The kernels' domain arguments: the (4, d) loader array, the clip target (``clip_target``
    is memoised) and per-block clip counts (none without a domain)."""
    if domain is None:
        return {}
    return dict(domain=domain.loader_array(), clip_target=clip_target(d, np.float64),
                part_clipped=np.zeros(nb, dtype=np.int64))


#: The float32 path runs only while every Mahalanobis term stays far inside float range:
#: with rows in the unit ball, ``‖(x - μ_k) P_k‖² ≤ (1 + ‖μ_k‖)² ‖P_k‖_F² ≤ 2^100``.
_SINGLE_MAX_SQUARE = 2.0 ** 100
#: ... and while the float64 normalisation of the responsibilities keeps their sum within
#: ``FLOAT32_WIDENING``'s derivation (K - 1 float64 roundings below 2^-24).
_SINGLE_MAX_COMPONENTS = 2 ** 20


def single_parameters(means, prec, log_const, domain):
    """The parameters rounded to float for the float32 path, or None where it must not run.

    The float32 path (:func:`compute_stats`, :func:`compute_stats_diag` with ``single=True``)
    needs rows in the unit ball (a ``domain``: float32 rows without one run in float64) and
    parameters whose Mahalanobis terms cannot overflow a float (module constants above);
    otherwise the pass runs in float64, whose sensitivities are the unwidened ones, so the
    fallback never weakens a plan.  ``prec``: (K, d, d) factors or (K, d) diagonals.
    """
    K = means.shape[0]
    if domain is None or K > _SINGLE_MAX_COMPONENTS:
        return None
    # (every iteration of a float32 fit: the ufuncs' reduces stand for np.max / .sum / np.any,
    # the same values without their Python wrappers)
    with np.errstate(over="ignore", invalid="ignore"):
        mu_norm = np.sqrt(np.maximum.reduce(np.einsum("kd,kd->k", means, means))) if K else 0.0
        p_sq = float(np.maximum.reduce(np.add.reduce(np.square(prec).reshape(K, -1), axis=1))) if K else 0.0
        if not (np.isfinite(mu_norm) and np.isfinite(p_sq)) or (1.0 + mu_norm) ** 2 * p_sq > _SINGLE_MAX_SQUARE:
            return None
        c32 = log_const.astype(np.float32)
    if c32.size and not np.maximum.reduce(c32) < np.inf:     # a NaN (max propagates it) or +inf
        return None
    return means.astype(np.float32), prec.astype(np.float32), c32


def _single_kwargs(X, single, means, prec, log_const, domain):
    """The E-step kernels' float32 arguments (``means32``, ``prec32``, ``log_const32``) when
    ``single`` asks for the float32 path on float32 rows and :func:`single_parameters` allows
    it; otherwise none (the pass runs in float64)."""
    if not (single and X.dtype == np.float32):
        return {}
    p32 = single_parameters(means, prec, log_const, domain)
    return {} if p32 is None else dict(means32=p32[0], prec32=p32[1], log_const32=p32[2])


def compute_stats(X, weights, means, precisions_cholesky, n_threads=None, domain=None,
                  single=False, second="full") -> Statistics:
    """One fused E-step pass over ``X`` (DP-EM Eq. 10-11): responsibilities and their moments.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
        C-contiguous rows (copied otherwise).  Accumulation is always float64.
    weights : ndarray of shape (n_components,)
    means : ndarray of shape (n_components, n_features)
    precisions_cholesky : ndarray of shape (n_components, n_features, n_features)
        ``precision_k = P_k @ P_k.T`` (scikit-learn's ``precisions_cholesky_`` for ``'full'``).
    n_threads : int or None
        OpenMP threads (see :func:`dpem_fast._threads.effective_n_threads`).  The result is
        bit-identical for every value.
    domain : dpem_fast._preprocess.DataDomain or None
        If given, every row is mapped into the unit ball of this declared domain as the
        kernel loads it (as :func:`dpem_fast._preprocess.scale_and_clip` does, without
        copying ``X``); the parameters and the statistics are in those scaled units.
    single : bool, default=False
        For float32 ``X`` with a ``domain``: run the float32 path (single-precision
        arithmetic, float64 accumulation; ``_estep.pyx``), whose statistics carry the
        rounding that :data:`dpem_fast._engine._specs.FLOAT32_WIDENING` bounds.  Ignored for
        float64 rows, without a domain, and for parameters :func:`single_parameters` refuses
        (the pass then runs in float64).
    second : {"full", "tied"}, default="full"
        ``"tied"``: the pooled ``Σ_k S2_k`` (d, d) instead of the per-component second moments,
        summed exactly from the block partials of every component (one rounding, as every
        other statistic; :mod:`dpem_fast._engine._specs`, "Rounding").

    Returns
    -------
    Statistics
        ``"counts"`` (K,), ``"first_moments"`` (K, d), ``"second_moments"`` (K, d, d) (``"tied"``:
        (d, d)), exactly symmetric; ``n_rows``, ``loglik`` and ``n_clipped`` as diagnostics.

    Notes
    -----
    Equivalent to: ``g = exp(lp - logsumexp(lp, 1)[:, None])`` with
    ``lp = log_gaussian_prob(X) + log(weights)``, then ``(g.sum(0), g.T @ X,
    einsum('nk,ni,nj->kij', g, X, X), logsumexp(lp, 1).sum())``, without materialising ``g``.
    """
    if second not in ("full", "tied"):
        raise ValueError(f"second must be 'full' or 'tied', got {second!r}")
    X, means, P, log_const, upper = _params(X, weights, means, precisions_cholesky)
    n, d = X.shape
    K = means.shape[0]
    n_threads = effective_n_threads(n_threads)
    nb = _estep.block_count(n, d, K)
    # the kernel zeroes the partials itself (np.empty avoids a second pass of page faults)
    part_nk = np.empty((nb, K))
    part_s1 = np.empty((nb, K, d))
    part_s2 = np.empty((nb, K, d, d))
    part_ll = np.empty(nb)
    kw = _domain_kwargs(domain, d, nb)
    if single:
        kw.update(_single_kwargs(X, single, means, P, log_const, domain))
    if d >= _contract.BLAS_MIN_D:
        with blas_single_thread():
            _estep.estep_stats(X, means, P, log_const, part_nk, part_s1, part_s2, part_ll,
                               upper, n_threads, **kw)
    else:                       # the hand loops call no BLAS
        _estep.estep_stats(X, means, P, log_const, part_nk, part_s1, part_s2, part_ll, upper, n_threads, **kw)
    # Exact (sum_blocks: every entry the correctly rounded sum of its blocks; issue 34).
    nk = _contract.sum_blocks(part_nk, n_threads)
    s1 = _contract.sum_blocks(part_s1, n_threads)
    if second == "tied":        # every component's block partials at once: one exact sum
        s2 = _contract.sum_blocks(part_s2.reshape(nb * K, d, d), n_threads)[None]
    else:
        s2 = _contract.sum_blocks(part_s2, n_threads)
    # Mirror the upper triangle.  The kernel leaves the strict lower triangle at +0.0 and no
    # entry is -0.0 (accumulators start at +0.0), so u + 0.0 == u and copying the upper
    # triangle below equals ``triu(s2) + triu(s2, 1).T`` bit for bit.
    _contract.mirror_upper(s2)
    if second == "tied":
        s2 = s2[0]
    loglik = float(np.add.reduce(part_ll)) if nb else 0.0
    n_clipped = int(np.add.reduce(kw["part_clipped"])) if "part_clipped" in kw else 0
    return gmm_statistics(n, nk, s1, s2, loglik, n_clipped, owned=True)


def predict_log_resp(X, weights, means, precisions_cholesky, n_threads=None):
    """Log responsibilities and per-row log-likelihood, for ``predict`` / ``score_samples``.

    Returns
    -------
    log_resp : ndarray of shape (n_samples, n_components), dtype of ``X``
    log_prob : ndarray of shape (n_samples,), dtype of ``X``

    Notes
    -----
    Equivalent to: ``lp = log_gaussian_prob(X) + log(weights); ll = logsumexp(lp, 1);
    (lp - ll[:, None], ll)`` (computed in float64, stored in the dtype of ``X``).
    """
    X, means, P, log_const, upper = _params(X, weights, means, precisions_cholesky)
    n = X.shape[0]
    K = means.shape[0]
    out = np.empty((n, K), dtype=X.dtype)
    ll = np.empty(n, dtype=X.dtype)
    with blas_single_thread(enabled=X.shape[1] >= _contract.BLAS_MIN_D):
        _estep.log_resp(X, means, P, log_const, out, ll, upper, effective_n_threads(n_threads))
    return out, ll


def _params_diag(X, weights, means, prec_diag):
    X = as_kernel_rows(X)
    n, d = X.shape
    means = np.ascontiguousarray(means, dtype=np.float64)
    p = np.ascontiguousarray(prec_diag, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != d or means.shape[0] == 0:
        raise ValueError(f"means must have shape (n_components, {d}) with n_components >= 1, got {means.shape}")
    K = means.shape[0]
    if p.shape != (K, d):
        raise ValueError(f"precisions_cholesky must have shape {(K, d)} (diagonal factors), got {p.shape}")
    # finite and > 0: every factor in (0, inf), the smallest and largest by one ufunc reduce each
    # (a NaN fails both; every iteration runs this, np.all's wrappers cost more)
    if p.size and not (np.minimum.reduce(p, axis=None) > 0 and np.maximum.reduce(p, axis=None) < np.inf):
        raise ValueError("precisions_cholesky (diagonal factors) must be finite and > 0")
    if weights.shape != (K,):
        raise ValueError(f"weights must have shape ({K},), got {weights.shape}")
    return X, means, p, log_normalizers_diag(weights, p)


def log_normalizers_diag(weights, prec_diag):
    """``log pi_k + Σ_j log p_kj - d/2 log(2 pi)`` for diagonal precision Cholesky factors
    ``p_k`` (K, d): the constant of Eq. 10, as scikit-learn's ``'diag'`` log-determinant."""
    p = np.asarray(prec_diag, dtype=np.float64)
    out = _log_weights(weights)
    out += np.add.reduce(np.log(p), axis=1)             # (np.sum's ufunc)
    out -= 0.5 * p.shape[1] * _LOG_2PI                  # (x + s) - c in place: the same bits
    return out


def compute_stats_diag(X, weights, means, prec_diag, n_threads=None, domain=None, single=False,
                       second="diag") -> Statistics:
    """One fused E-step pass for diagonal precisions (covariance types ``"diag"`` and
    ``"spherical"``), O(n K d): responsibilities and the moments a diagonal covariance needs.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
    weights : ndarray of shape (n_components,)
    means : ndarray of shape (n_components, n_features)
    prec_diag : ndarray of shape (n_components, n_features)
        Diagonal precision Cholesky factors, ``1 / standard deviation`` per feature
        (scikit-learn's ``precisions_cholesky_`` for ``'diag'``), finite and > 0.
    n_threads : int or None
        OpenMP threads; the result is bit-identical for every value.
    domain : dpem_fast._preprocess.DataDomain or None
        As in :func:`compute_stats`: rows mapped into the unit ball of the domain as loaded.
    single : bool, default=False
        As in :func:`compute_stats`: the float32 path for float32 rows with a domain.
    second : {"diag", "spherical"}, default="diag"
        ``"spherical"``: their row sums ``Σ_i γ_ik ‖x_i‖²`` (K,) instead of the squared sums,
        summed exactly from the block partials of every feature (one rounding, as every other
        statistic; :mod:`dpem_fast._engine._specs`, "Rounding").

    Returns
    -------
    Statistics
        ``"counts"`` (K,), ``"first_moments"`` (K, d) and, as ``"second_moments"``, the squared
        sums ``Σ_i γ_ik x_i²`` (K, d) (the diagonals of :func:`compute_stats`' second moments;
        ``"spherical"``: (K,));
        ``n_rows``, ``loglik`` and ``n_clipped`` as diagnostics.

    Notes
    -----
    Equivalent to: ``lp = log_gaussian_prob_diag(X) + log(weights)``, ``g = exp(lp -
    logsumexp(lp, 1)[:, None])``, then ``(g.sum(0), g.T @ X, g.T @ X**2, logsumexp(lp, 1).sum())``.
    """
    if second not in ("diag", "spherical"):
        raise ValueError(f"second must be 'diag' or 'spherical', got {second!r}")
    X, means, p, log_const = _params_diag(X, weights, means, prec_diag)
    n, d = X.shape
    K = means.shape[0]
    n_threads = effective_n_threads(n_threads)
    nb = _estep_diag.block_count(n, d, K)
    part_nk = np.empty((nb, K))
    part_s1 = np.empty((nb, K, d))
    part_sq = np.empty((nb, K, d))
    part_ll = np.empty(nb)
    kw = _domain_kwargs(domain, d, nb)
    if single:
        kw.update(_single_kwargs(X, single, means, p, log_const, domain))
    _estep_diag.estep_diag_stats(X, means, p, log_const, part_nk, part_s1, part_sq, part_ll, n_threads, **kw)
    nk = _contract.sum_blocks(part_nk, n_threads)
    s1 = _contract.sum_blocks(part_s1, n_threads)
    if second == "spherical":   # every feature's block partials at once: one exact sum
        sq = _contract.sum_blocks(part_sq.transpose(0, 2, 1).reshape(nb * d, K), n_threads)
    else:
        sq = _contract.sum_blocks(part_sq, n_threads)
    loglik = float(np.add.reduce(part_ll)) if nb else 0.0
    n_clipped = int(kw["part_clipped"].sum()) if "part_clipped" in kw else 0
    return gmm_statistics(n, nk, s1, sq, loglik, n_clipped, owned=True)


def predict_log_resp_diag(X, weights, means, prec_diag, n_threads=None):
    """Log responsibilities and per-row log-likelihood for diagonal precisions, O(n K d)
    (``predict`` / ``score_samples`` of the diag and spherical types).

    Returns
    -------
    log_resp : ndarray of shape (n_samples, n_components), dtype of ``X``
    log_prob : ndarray of shape (n_samples,), dtype of ``X``
    """
    X, means, p, log_const = _params_diag(X, weights, means, prec_diag)
    n = X.shape[0]
    K = means.shape[0]
    out = np.empty((n, K), dtype=X.dtype)
    ll = np.empty(n, dtype=X.dtype)
    _estep_diag.log_resp_diag(X, means, p, log_const, out, ll, effective_n_threads(n_threads))
    return out, ll


def full_m_step(nk, s1, s2, count_floor, sd1, sigma2, low, box=None, n_threads=1):
    """The private full-covariance M-step and precision Cholesky factors in one compiled call
    (:mod:`dpem_fast._dpcore._mstep`; post-processing of noisy statistics).

    ``count_floor``, ``sd1``, ``sigma2``, ``low``: the counts' floor ``max(1, 3 σ_N)``, the
    noise sd of a first-moment coordinate, the second moments' noise scale and the eigenvalue
    floor's lowest value; ``box``: the box image's half-widths (None: the unit ball);
    ``n_threads``: the components run over at most this many threads (the result does not
    depend on it).

    Returns
    -------
    weights (K,), means (K, d), covariances (K, d, d), precision Cholesky factors (K, d, d)

    Notes
    -----
    Equivalent to: ``private_m_step(...)`` with ``covariance_type="full"`` and no prior, then
    ``compute_precision_cholesky`` (:mod:`dpem_fast.mixture._gmm_mstep`, the numpy twin).
    """
    s1 = np.ascontiguousarray(s1, dtype=np.float64)
    K, d = s1.shape
    weights, means = np.empty(K), np.empty((K, d))
    covs, prec_chol = np.empty((K, d, d)), np.empty((K, d, d))
    n_threads = effective_n_threads(n_threads)
    # LAPACK/BLAS from every thread: held to one thread each (the engine's loop holds it
    # already: then free; a multithreaded BLAS called from OpenMP threads stalls for ms)
    with blas_single_thread(_mstep.component_threads(K, d, n_threads) > 1):
        _mstep.full_m_step(np.ascontiguousarray(nk, dtype=np.float64), s1, np.ascontiguousarray(s2, dtype=np.float64),
                           float(count_floor), float(sd1), float(sigma2), float(low),
                           None if box is None else np.ascontiguousarray(box, dtype=np.float64),
                           weights, means, covs, prec_chol, n_threads)
    return weights, means, covs, prec_chol
