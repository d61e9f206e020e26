"""The M-step of :class:`~dpem_fast.mixture.DPGaussianMixture`: parameters from statistics.

Post-processing only: every function here maps statistics and public constants (the plan's
noise scales, ``reg_covar``, the MAP prior) to parameters and reads no data.

- :func:`private_m_step`: weights, means and covariances from the noisy counts and moments
  (DP-EM Sec. 4.2), for all components at once: counts floored at the noise of their
  release, means shrunk towards the domain's centre by the positive-part James–Stein factor
  of their public noise (:func:`shrink_means`; maximum-likelihood step) and moved into the
  image of the data domain (each coordinate clipped to the
  declared box's image, else projected onto the unit ball), covariances symmetrised and
  their eigenvalues clipped to ``[floor, 1]`` by one batched ``eigh``, the floor at the
  noise level of the released second moments (``_EIG_FLOOR_STD``).  All of it lives in the
  working units, where each feature was divided by its own scale (issue 23): a floor
  ``f`` there is ``f s_i²`` in feature i's original units, so a narrow feature gets a
  narrow floor; each feature's variance is then capped at the box's ``b_i²``
  (:func:`cap_feature_variances`).  The maximum-likelihood step, or with a
  ``prior`` (:func:`map_prior`: Dirichlet / Normal-inverse-Wishart, DP-EM footnotes 7-8)
  the posterior mode.
- :func:`exact_m_step`: the non-private M-step, numerically as scikit-learn's.

What differs per covariance type (which covariances the second moments give, their floors and
caps, the rows an entry's noise is divided by) is the type's entry in
:data:`~dpem_fast.mixture._gaussian_block.COVARIANCES`, where the linear algebra between
covariances and precision Cholesky factors also lives (re-exported here).
"""
from __future__ import annotations

import warnings

import numpy as np

from .._kernels.gmm import COUNTS, FIRST, SECOND, full_m_step
from .._preprocess import project_into_domain
from ..accounting import NoiseDominatedWarning
from .._engine._components import noise_std
from ._common import REMEDY, count_floor, floored_counts, weights_from_counts
from ._gaussian_block import (COVARIANCES, cap_feature_variances, compute_precision_cholesky,  # noqa: F401
                              covariance_from_precision_cholesky)

__all__ = ["private_full_step", "PRIOR_KEYS", "cap_feature_variances", "shrink_means", "warn_if_covariances_unresolved",
           "map_prior", "private_m_step", "exact_m_step", "compute_precision_cholesky", "covariance_from_precision_cholesky"]

#: hyperparameters of the MAP prior (the ``prior`` dict of the estimator)
PRIOR_KEYS = {"alpha", "kappa0", "mean0", "nu0", "psi0"}


def shrink_means(means, sd):
    """Positive-part James–Stein shrinkage of each noisy mean towards the domain's centre.

    ``means`` (K, d) in working units, ``sd`` (K,) the public noise standard deviation of each
    coordinate (``σ₁ / Ñ_k``).  ``μ ← max(0, 1 − (d − 2) sd² / ‖μ‖²) μ`` for d ≥ 3 (James and
    Stein 1961: it lowers the mean squared error of a d-variate Gaussian estimate for every true
    mean, the more the larger the noise); d < 3 unchanged.  The centre is data-independent and
    the noise scale public: post-processing.  At a large count the factor is ≈ 1."""
    K, d = means.shape
    if d < 3:
        return means
    sq = np.einsum("ki,ki->k", means, means)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(sq > 0, np.maximum(0.0, 1.0 - (d - 2) * np.asarray(sd) ** 2 / sq), 0.0)
    return means * f[:, None]


def warn_if_covariances_unresolved(nk, releases, domain, what, covariance_type="full", n_public=None):
    """A :class:`~dpem_fast.NoiseDominatedWarning` when a live component's released second
    moments cannot tell its covariance from that of the uniform distribution on the domain.

    The noise of an entry of component k's covariance has standard deviation ``σ₂ / Ñ_k``
    (``releases``: the last update's, tail-averaged where the model averages; Ñ_k the floored
    noisy count); the uniform distribution on the box image has feature variance ``b_i² / 3``
    (on the unit ball without a box, ``1 / (d + 2)``).  Where the noise is at least the
    smallest of these, every covariance entry the release shows is within one noise standard
    deviation of the uniform's, and the fitted density is about as good as a uniform one or
    worse.  Released values and public constants only; the message holds none of them.
    Per ``covariance_type`` the noise of a covariance entry is that of :func:`private_m_step`:
    ``σ₂ / Ñ_k`` (full, diag), ``σ₂ / (d Ñ_k)`` (spherical), ``σ₂ / N`` (tied; N the public row
    count ``n_public`` or the sum of the floored noisy counts ``nk``); spherical compares its
    one variance with the uniform's mean feature variance ``mean_i b_i² / 3``.
    """
    d = releases[FIRST].shape[-1]
    ct = COVARIANCES[covariance_type]
    rows = ct.noise_rows(floored_counts(nk, releases[COUNTS]), d, n_public)
    uniform_var = ct.uniform_variance(None if domain is None else domain.box_image, d)
    if np.any(noise_std(releases[SECOND]) / rows >= uniform_var):
        warnings.warn(f"{what}: the released second moments cannot resolve the covariances (their noise is "
                      "at least the variance of a uniform distribution on the declared domain), so the "
                      f"fitted density may be no better than a uniform one; {REMEDY}",
                      NoiseDominatedWarning, stacklevel=5)


def map_prior(prior, d):
    """The MAP hyperparameters for ``d`` features: the defaults updated by ``prior`` (a dict
    with keys in :data:`PRIOR_KEYS`, or None), ``mean0`` a (d,) vector, ``psi0`` a (d, d)
    matrix (a scalar is that multiple of the identity)."""
    p = dict(alpha=1.0, kappa0=1.0, mean0=np.zeros(d), nu0=float(d + 2), psi0=0.01 * np.eye(d))
    if prior:
        p.update(prior)
    p["mean0"] = np.broadcast_to(np.asarray(p["mean0"], dtype=np.float64), (d,))
    p["psi0"] = np.asarray(p["psi0"], dtype=np.float64) * (np.eye(d) if np.ndim(p["psi0"]) == 0 else 1.0)
    return p


def private_m_step(nk, s1, s2, releases, reg_covar, prior=None, domain=None, covariance_type="full",
                   n_public=None):
    """Parameters from noisy statistics (post-processing, public constants only).

    ``nk``, ``s1``, ``s2``: the noisy counts (K,), first (K, d) and second moments (the
    ``covariance_type``'s: (K, d, d) full, (K, d) diagonals, (K,) traces, or one pooled (d, d)
    for tied, see :func:`~dpem_fast._kernels.gmm.second_moments_of_type`); ``releases``: the
    plan's releases (their public noise scales); ``prior``: None for the maximum-likelihood
    step, else the hyperparameters of :func:`map_prior` for the posterior mode (full and diag);
    ``domain``: the fit's :class:`~dpem_fast._preprocess.DataDomain` (public: declared or
    released), whose box image the means are clipped to (None: the unit ball); ``n_public``:
    the row count where it is public (replace-one; the tied covariance divides by it, else by
    the sum of the floored noisy counts).  Returns ``(weights, means, covariances)``, the
    covariances in the type's shape (scikit-learn's: (K, d, d), (K, d), (K,), (d, d)).

    Floors and caps per type, in the working units (σ₂ the noise of one released entry):
    full and tied clip eigenvalues to ``[floor, 1]`` with ``floor`` one noise standard
    deviation of an entry (σ₂/Ñ_k, tied σ₂/N) and cap each feature's variance at ``b_i²``;
    diag clips each variance to ``[σ₂/Ñ_k, min(1, b_i²)]``; spherical's variance is the trace
    over d, its noise σ₂/(d Ñ_k), clipped to ``[σ₂/(d Ñ_k), mean_i min(1, b_i²)]`` (a row of
    the box has ``E‖x − μ‖²/d ≤ Σ_i b_i²/d``; without a box ``1/d``, the ball's).  Every floor
    is at least ``max(reg_covar, 1e-6)`` and at most the cap.
    """
    sigma_2 = releases[SECOND].noise_scale
    weights = weights_from_counts(nk)
    nk_f = floored_counts(nk, releases[COUNTS])
    # all components at once (the M-step runs serially between parallel E-steps, so its
    # Python overhead is what many cores wait on; issue 14)
    if prior is not None:
        m0, k0 = prior["mean0"], prior["kappa0"]
        means = (s1 + k0 * m0) / (nk_f + k0)[:, None]
    else:
        means = shrink_means(s1 / nk_f[:, None], noise_std(releases[FIRST]) / nk_f)
    # the data lie in the image of the domain (a convex set), so do their means
    means = project_into_domain(means, domain)
    covs = COVARIANCES[covariance_type].private_covariances(
        s2, means, nk_f, sigma_2, max(reg_covar, 1e-6), None if domain is None else domain.box_image, prior, n_public)
    if prior is not None:
        # Dirichlet posterior mode: counts + alpha - 1, clipped and renormalised as above
        weights = weights_from_counts(np.maximum(nk, 0.0) + prior["alpha"] - 1.0)
    return weights, means, covs


def private_full_step(nk, s1, s2, releases, reg_covar, domain=None, n_threads=1):
    """:func:`private_m_step` (maximum likelihood, ``covariance_type="full"``) and
    :func:`compute_precision_cholesky` in one compiled call (issue 26: the serial part of a
    private iteration), its components over at most ``n_threads`` threads (issue 41); the
    same values, bit for bit where the builds' sums agree (the tests compare both), for every
    thread count.  Returns ``(weights, means, covariances, precision Cholesky factors)``."""
    box = None if domain is None else domain.box_image
    return full_m_step(nk, s1, s2, count_floor(releases[COUNTS]), noise_std(releases[FIRST]),
                       releases[SECOND].noise_scale, max(reg_covar, 1e-6), box, n_threads)


def exact_m_step(stats, reg_covar, covariance_type="full"):
    """Non-private M-step, numerically as scikit-learn's (Eq. 11): ``(weights, means,
    covariances)`` from the exact statistics, ``reg_covar`` added to the variances, the
    covariances in the type's shape (``stats[SECOND]`` is the type's second moment)."""
    s1, s2 = stats[FIRST], stats[SECOND]
    nk = stats[COUNTS] + 10 * np.finfo(np.float64).eps
    means = s1 / nk[:, None]
    weights = nk / stats.n_rows
    weights /= weights.sum()
    return weights, means, COVARIANCES[covariance_type].exact_covariances(s1, s2, means, nk, reg_covar)
