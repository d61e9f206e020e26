"""The Gaussian block of the mixtures: :class:`~dpem_fast.DPGaussianMixture`, and the numeric
columns of :class:`~dpem_fast.DPMixedMixture`.

Covariance types dispatch through one table, :data:`COVARIANCES` (scikit-learn's four
structures, as scikit-learn dispatches per type): each entry says which second moments the type
releases and how many coordinates they hold, which E-step kernel it runs, how its covariances
are stored and expanded, how its precision Cholesky factors are computed, mapped back to the
original units and drawn from.  Everything here is post-processing of released statistics and
public constants (the domain's scales, K, d), or the public shapes of the plan.

The released statistics and their sensitivities per type are declared and derived once in
:mod:`dpem_fast._engine._specs` (module docstring); the joint bound per type is
:func:`~dpem_fast._engine._specs.moments_joint_bound`.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import linalg

from .._engine._specs import diagonal_second_moments, second_moments, squared_norms
from .._kernels.gmm import SECOND
from ._gmm_mstep import compute_precision_cholesky, covariance_from_precision_cholesky

__all__ = ["COVARIANCES", "GAUSSIAN_MERGE_REASON", "typed_covariances", "isotropic_factors", "start_variances",
           "start_covariances", "set_fitted_gaussian"]

#: The Gaussian mixtures' reason why components empty (measured in bench/mixture_collapse.py, issue
#: 35): the noise of the released second moments floors each covariance eigenvalue at σ₂/N_k (domain
#: units), which grows as a component shrinks, and a component that a tight cluster or a repeated
#: value (a column that is mostly one value) distinguishes is then fitted wide and merged by EM.
GAUSSIAN_MERGE_REASON = ("what told them apart (tight clusters, or values repeated in many rows such as a "
                         "column that is mostly zero) is narrower than the released second moments "
                         "resolve: each covariance is floored at the noise of its release, more so the "
                         "fewer rows a component holds, so EM merged those components into wider ones")


class _Full:
    """One full matrix per component: covariances (K, d, d), released ``Σ_i γ_ik x_i x_iᵀ``."""
    name = "full"
    #: the E-step runs the diagonal kernel (O(n K d)); else the full one
    diagonal = False
    #: one covariance for all components (dropping a component keeps it)
    shared = False

    def n_parameters(self, K, d):
        """Free covariance parameters: also the noised coordinates of the second moments."""
        return K * d * (d + 1) / 2

    def shape(self, K, d):
        """The shape of ``covariances_``, ``precisions_`` and ``precisions_init``."""
        return (K, d, d)

    def second_moments(self, K, d):
        """The released second moments (sensitivities: :mod:`dpem_fast._engine._specs`)."""
        return second_moments(SECOND, (K, d, d))

    def kernel_doubles(self, K, d):
        """Doubles of one block's partials in the E-step kernel (``_estep.block_count``: K (d² + d + 1);
        ``_estep_diag``: K (2d + 1)): what bounds the rows of a float64 partial."""
        return K * (d * d + d + 1)

    def working_domain(self, domain):
        """The domain the fit works in (the declared or estimated one, or a public coarsening)."""
        return domain

    def from_full(self, covs):
        """The type's covariances from (K, d, d) matrices."""
        return covs

    def to_full(self, covs, K, d):
        """The (K, d, d) matrices of the type's covariances."""
        return covs

    def precision_cholesky(self, covs, K, d):
        """Precision Cholesky factors (K, d, d), as the E-step and inference kernels take them."""
        return compute_precision_cholesky(covs)

    def kernel_factors(self, prec_chol, K, d):
        """The fitted ``precisions_cholesky_`` as the inference kernel takes them."""
        return self.to_full(prec_chol, K, d)

    def initial_factors(self, prec, s, K, d):
        """Working-unit precision Cholesky factors (K, d, d) from the user's ``precisions_init``
        (original units; x = c + diag(s) z, so the working precision is ``diag(s) P diag(s)``)."""
        ss = np.outer(s, s)
        prec = np.broadcast_to(prec, (K, d, d))
        return np.stack([linalg.cholesky(prec[k] * ss, lower=True) for k in range(K)])

    def initial_diagonal(self, diag):
        """The diagonal (d,) of an isotropic initial precision factor."""
        return diag

    def start_variances(self, v):
        """The private start's variances (K,), one per component."""
        return v

    def back_map(self, covs, prec_chol, s, dtype):
        """``(covariances_, precisions_cholesky_, precisions_)`` in the original units:
        covariances ``diag(s) S diag(s)``, factors ``diag(1/s) P`` (``P Pᵀ`` the working precision)."""
        covs = (covs * (s[:, None] * s[None, :])).astype(dtype, copy=False)
        chol = (prec_chol / s[None, :, None]).astype(dtype, copy=False)
        return covs, chol, np.einsum("kij,klj->kil", chol, chol)

    def component(self, covs, k):
        """Component k's covariance, in the type's storage."""
        return covs[k]

    def draw(self, rng, mean, cov, n):
        """n rows from ``N(mean, cov)`` (``cov``: one component's covariance)."""
        return rng.multivariate_normal(mean, cov, size=n)


class _Tied(_Full):
    """One full matrix shared by all components: covariance (d, d), released the pooled ``Σ_i x_i x_iᵀ``."""
    name = "tied"
    shared = True

    def n_parameters(self, K, d):
        return d * (d + 1) / 2

    def shape(self, K, d):
        return (d, d)

    def second_moments(self, K, d):
        return second_moments(SECOND, (d, d))

    def from_full(self, covs):
        return covs[0]

    def to_full(self, covs, K, d):
        return np.broadcast_to(covs, (K, d, d)).copy()

    def precision_cholesky(self, covs, K, d):
        return np.broadcast_to(compute_precision_cholesky(np.asarray(covs)[None]), (K, d, d)).copy()

    def start_variances(self, v):
        return np.full(v.shape, v.mean())

    def back_map(self, covs, prec_chol, s, dtype):
        covs = (covs * (s[:, None] * s[None, :])).astype(dtype, copy=False)
        chol = (prec_chol[0] / s[:, None]).astype(dtype, copy=False)
        return covs, chol, chol @ chol.T

    def component(self, covs, k):
        return covs


class _Diag(_Full):
    """One diagonal per component: variances (K, d), released ``Σ_i γ_ik x_i²``; factors ``1/√var``."""
    name = "diag"
    diagonal = True

    def n_parameters(self, K, d):
        return K * d

    def shape(self, K, d):
        return (K, d)

    def second_moments(self, K, d):
        return diagonal_second_moments(SECOND, (K, d))

    def kernel_doubles(self, K, d):
        return K * (2 * d + 1)

    def from_full(self, covs):
        return np.diagonal(covs, axis1=1, axis2=2).copy()

    def _diagonals(self, covs, K, d):
        return np.broadcast_to(covs, (K, d))

    def to_full(self, covs, K, d):
        out = np.zeros((K, d, d))
        out.reshape(K, d * d)[:, :: d + 1] = self._diagonals(covs, K, d)
        return out

    def precision_cholesky(self, covs, K, d):
        covs = np.asarray(covs)
        if not np.isfinite(covs).all():
            raise ValueError("array must not contain infs or NaNs")
        if np.any(covs <= 0):
            raise linalg.LinAlgError("a variance is not positive")
        return self.to_full(1.0 / np.sqrt(covs), K, d)

    def kernel_factors(self, prec_chol, K, d):
        return self._diagonals(prec_chol, K, d)

    def initial_factors(self, prec, s, K, d):
        return self.to_full(np.sqrt(prec * s * s), K, d)       # scikit-learn's precisions: 1 / variances

    def back_map(self, covs, prec_chol, s, dtype):
        covs = (covs * s * s).astype(dtype, copy=False)
        chol = (np.diagonal(prec_chol, axis1=1, axis2=2) / s).astype(dtype, copy=False)
        return covs, chol, chol ** 2

    def draw(self, rng, mean, cov, n):
        return mean + rng.standard_normal((n, mean.size)) * np.sqrt(cov)    # independent coordinates


class _Spherical(_Diag):
    """One variance per component: (K,), released ``Σ_i γ_ik ‖x_i‖²``; one scale for every feature."""
    name = "spherical"

    def n_parameters(self, K, d):
        return K

    def shape(self, K, d):
        return (K,)

    def second_moments(self, K, d):
        return squared_norms(SECOND, K)

    def working_domain(self, domain):
        """One scale for every feature (a spherical covariance in per-feature working units is not
        spherical in the original ones): the largest, public post-processing of the domain (every
        clipped row stays in the unit ball; a box's image shrinks to ``half-width / max scale``)."""
        return dataclasses.replace(domain, scale=np.full(domain.scale.shape, float(np.max(domain.scale))))

    def from_full(self, covs):
        return np.diagonal(covs, axis1=1, axis2=2).mean(axis=1)

    def _diagonals(self, covs, K, d):
        return np.broadcast_to(np.asarray(covs)[:, None], (K, d))

    def initial_factors(self, prec, s, K, d):
        return self.to_full(np.sqrt(prec * s[0] * s[0]), K, d)

    def initial_diagonal(self, diag):
        return np.full(diag.shape, 1.0 / math.sqrt(np.mean(1.0 / diag ** 2)))    # the mean variance

    def back_map(self, covs, prec_chol, s, dtype):
        covs = (covs * s[0] * s[0]).astype(dtype, copy=False)
        chol = (prec_chol[:, 0, 0] / s[0]).astype(dtype, copy=False)
        return covs, chol, chol ** 2


#: covariance type -> its entry (scikit-learn's four, in its order)
COVARIANCES = {t.name: t for t in (_Full(), _Diag(), _Tied(), _Spherical())}


def typed_covariances(ctype, prec_chol):
    """Covariances in the type's shape (working units) from (K, d, d) precision Cholesky factors
    (spherical: the mean variance; tied: the first component's); d = 0 gives empty arrays."""
    covs = covariance_from_precision_cholesky(prec_chol) if prec_chol.shape[1] else prec_chol.copy()
    return ctype.from_full(covs)


def isotropic_factors(ctype, diag, K):
    """The data-independent start's precision factors ``diag(diag)`` for every component (working
    units; ``diag`` the inverse standard deviations per feature, one value for all under spherical)."""
    d = diag.shape[0]
    return np.broadcast_to(np.diag(ctype.initial_diagonal(diag)), (K, d, d)).copy()


def start_variances(means):
    """Variances ``v_k`` of isotropic initial covariances ``v_k I`` (working units) for centres
    from the private start: ``v_k = (ρ_k / 4)²`` with ρ_k the distance from centre k to the
    nearest other centre, clipped to ``[v₀ / 100, v₀]``, ``v₀ = 1 / (4d)`` the data-independent
    start's variance.  Post-processing of the released centres and public d.

    Why: the data-independent variance v₀ (a standard deviation of a quarter of the ball's
    radius) makes components seeded on distinct clusters overlap, and the first E-steps merge
    neighbouring clusters under one component before the noisy M-steps can separate them
    (measured on bench/model_selection.py: pairs of clusters of weight 0.125 ended as one
    component of weight 0.25).  A standard deviation of a quarter of the distance to the
    nearest other centre leaves neighbouring components two standard deviations apart
    each, so a row between two seeded clusters is shared, not absorbed."""
    K, d = means.shape
    v0 = 1.0 / (4.0 * d)
    if K == 1:
        return np.full(1, v0)
    dist = np.sqrt(((means[:, None, :] - means[None, :, :]) ** 2).sum(axis=2))
    np.fill_diagonal(dist, np.inf)
    return np.clip((dist.min(axis=1) / 4.0) ** 2, v0 / 100.0, v0)


def start_covariances(ctype, means):
    """``(covariances, precision factors)`` ``v_k I`` for the private start's means, ``v_k`` from
    :func:`start_variances` (tied: their mean).  Post-processing of the released centres."""
    v = ctype.start_variances(start_variances(means))
    prec_chol = np.stack([np.eye(means.shape[1]) / math.sqrt(vk) for vk in v])
    return typed_covariances(ctype, prec_chol), prec_chol


def set_fitted_gaussian(est, ctype, weights, means, covs, prec_chol, domain, dtype):
    """The fitted Gaussian attributes of ``est`` in the original units (post-processing):
    x = c + diag(s) z, so means ``c + s μ`` and the type's :meth:`back_map` of the covariances."""
    est.weights_ = weights
    est.means_ = domain.to_original(means).astype(dtype, copy=False) if means.shape[1] else means
    # a huge or tiny (privately estimated) scale saturates to inf, as the one radius did
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        est.covariances_, est.precisions_cholesky_, est.precisions_ = ctype.back_map(covs, prec_chol, domain.scale,
                                                                                     dtype)
