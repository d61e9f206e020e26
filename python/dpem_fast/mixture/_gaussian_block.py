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

__all__ = ["COVARIANCES", "GAUSSIAN_MERGE_REASON", "typed_covariances", "isotropic_factors", "start_variances",
           "start_covariances", "set_fitted_gaussian", "cap_feature_variances", "compute_precision_cholesky",
           "covariance_from_precision_cholesky"]

#: The Gaussian mixtures' reason why components empty (measured in bench/mixture_collapse.py, issue
#: 35): the noise of the released second moments floors each covariance eigenvalue at σ₂/N_k (domain
#: units), which grows as a component shrinks, and a component that a tight cluster or a repeated
#: value (a column that is mostly one value) distinguishes is then fitted wide and merged by EM.
GAUSSIAN_MERGE_REASON = ("what told them apart (tight clusters, or values repeated in many rows such as a "
                         "column that is mostly zero) is narrower than the released second moments "
                         "resolve: each covariance is floored at the noise of its release, more so the "
                         "fewer rows a component holds, so EM merged those components into wider ones")


#: Covariance eigenvalues are floored at this many noise standard deviations of one entry
#: of the noisy covariance, sigma_S2 / N_k (post-processing of public quantities), in the
#: working units (each feature divided by its own scale s_i; so in original units the floor
#: is per feature, sigma_S2 / N_k * s_i² along feature i).  The floor is capped at the
#: smallest per-feature variance the domain allows, min_i b_i² (b: the half-widths of the
#: box's image, 1/sqrt(d) for a declared box; 1 without a box), so a component the release
#: cannot resolve gets at most a feature's own width, not the ball's; ``reg_covar`` (at
#: least 1e-6) stays the lowest floor, as before.  For a unit
#: vector v, v^T E v has standard deviation sigma_S2/N_k whatever v (the release's symmetric
#: noise E is orthogonally invariant: sigma on the diagonal, sigma/sqrt(2) above it), so an eigenvalue within one standard deviation of zero is
#: not resolved by the release.  (Before issue 9 this was 0.25 sqrt(d) standard deviations, a
#: value chosen on Shuttle and nycflights13; see CHANGELOG.)
_EIG_FLOOR_STD = 1.0


def compute_precision_cholesky(covariances):
    """Cholesky factor of the precision, scikit-learn's 'full' convention.

    Equivalent to: ``solve_triangular(cholesky(cov, lower=True), I, lower=True).T``,
    so that ``precision = P @ P.T``.  Calls LAPACK ``potrf``/``trtrs`` directly (the same
    routines, hence the same bits, as those scipy wrappers) with one finiteness check for
    all components: the wrappers' per-call overhead dominated the M-step for small d.
    """
    covariances = np.asarray(covariances)
    K, d, _ = covariances.shape
    if not np.isfinite(covariances).all():
        raise ValueError("array must not contain infs or NaNs")
    potrf, trtrs = linalg.get_lapack_funcs(("potrf", "trtrs"), (covariances,))
    eye = np.eye(d, dtype=covariances.dtype)
    out = np.empty_like(covariances)
    for k in range(K):
        cov_chol, info = potrf(covariances[k], lower=1, clean=1)
        if info > 0:
            raise linalg.LinAlgError(f"{info}-th leading minor of the array is not positive definite")
        if info < 0:  # pragma: no cover - arguments are valid by construction
            raise ValueError(f"LAPACK reported an illegal value in {-info}-th argument of potrf")
        inv, info = trtrs(cov_chol, eye, lower=1)
        if info > 0:
            raise linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
        if info < 0:  # pragma: no cover
            raise ValueError(f"illegal value in {-info}-th argument of internal trtrs")
        out[k] = inv.T
    return out


def covariance_from_precision_cholesky(prec_chol):
    """Covariances from precision Cholesky factors (the inverse of :func:`compute_precision_cholesky`)."""
    out = np.empty_like(prec_chol)
    for k in range(prec_chol.shape[0]):
        prec = prec_chol[k] @ prec_chol[k].T
        out[k] = linalg.inv(prec)
        out[k] = (out[k] + out[k].T) / 2
    return out


def _project_psd(S, floor, ceiling):
    """Symmetrise and clip eigenvalues to [floor, ceiling] (DP-EM Sec. 4.2, after Eq. 18).

    ``S`` is one (d, d) matrix or a stack (K, d, d) with one floor per matrix (K,): a stack
    goes through one batched ``eigh`` and one batched product, which compute each matrix
    exactly as a call on it alone would (same LAPACK/BLAS routine per matrix).
    """
    S = (S + np.swapaxes(S, -1, -2)) / 2
    w, V = np.linalg.eigh(S)
    w = np.clip(w, np.asarray(floor, dtype=np.float64)[..., None], ceiling)
    return (V * w[..., None, :]) @ np.swapaxes(V, -1, -2)


def _box_cap(box):
    """The smallest per-feature variance the domain allows, ``min_i min(1, b_i)²`` (1 without a box)."""
    return 1.0 if box is None else float((np.minimum(np.asarray(box, dtype=np.float64), 1.0) ** 2).min())


def cap_feature_variances(covs, box):
    """Covariances whose feature variances respect the box: a feature in [−b_i, b_i] has
    variance at most b_i² (``box``: the box image's half-widths b, in working units).  Row and
    column i of each matrix are scaled by ``min(1, b_i / sqrt(Σ_ii))``: ``D Σ D`` with D
    diagonal and positive stays positive definite.  Post-processing with public constants;
    without it a noisy covariance (eigenvalues up to 1 = the ball's) gave a feature a standard
    deviation up to √d times its half-width, a density worse than uniform on the box."""
    b2 = np.minimum(np.asarray(box, dtype=np.float64), 1.0) ** 2
    diag = np.diagonal(covs, axis1=-2, axis2=-1)
    f = np.sqrt(np.minimum(1.0, b2 / diag))
    return covs * f[..., :, None] * f[..., None, :]



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


    # ------------------------------------------------ the M-step (post-processing)
    def noise_rows(self, nk_f, d, n_public):
        """What the noise of one released second-moment entry is divided by in a covariance
        entry: the floored noisy counts Ñ_k (spherical ``d Ñ_k``; tied one N, the public row
        count or ``Σ Ñ_k``)."""
        return nk_f

    def uniform_variance(self, box, d):
        """The variance the uniform distribution on the domain's image gives the type's covariance
        (the smallest feature's ``b_i² / 3``; ``1 / (d + 2)`` on the unit ball without a box)."""
        return 1.0 / (d + 2) if box is None else float(np.min(np.minimum(box, 1.0))) ** 2 / 3.0

    def floors(self, sigma_2, rows, low, cap, top=1.0):
        """Eigenvalue (variance) floors: one noise standard deviation of an entry,
        ``_EIG_FLOOR_STD σ₂ / rows``, at least ``low`` and at most ``cap``, then at most ``top``."""
        return np.minimum(np.maximum(low, np.minimum(cap, _EIG_FLOOR_STD * sigma_2 / rows)), top)

    def private_covariances(self, s2, means, nk_f, sigma_2, low, box, prior, n_public):
        """The type's covariances from its noisy second moments ``s2`` (working units; see
        :func:`~dpem_fast.mixture._gmm_mstep.private_m_step`): ``S = s2 / Ñ_k − μ μᵀ`` (or the
        posterior mode under ``prior``), eigenvalues clipped to ``[floor, 1]``, each feature's
        variance capped at the box's ``b_i²``."""
        d = means.shape[1]
        outer = means[:, :, None] * means[:, None, :]
        if prior is not None:
            m0, k0 = prior["mean0"], prior["kappa0"]
            S = (prior["psi0"] + s2 + k0 * np.outer(m0, m0) - (nk_f + k0)[:, None, None] * outer)
            S /= (nk_f + prior["nu0"] + d + 2)[:, None, None]
        else:
            S = s2 / nk_f[:, None, None] - outer
        covs = _project_psd(S, self.floors(sigma_2, nk_f, low, _box_cap(box)), 1.0)
        return covs if box is None else cap_feature_variances(covs, box)

    def exact_covariances(self, s1, s2, means, nk, reg_covar):
        """The non-private covariances, numerically as scikit-learn's (``reg_covar`` added to the
        variances)."""
        K, d = means.shape
        # outer products as a broadcast multiply (== einsum("ki,kj->kij"), no sum involved)
        covs = s2 / nk[:, None, None] - means[:, :, None] * means[:, None, :]
        covs += np.swapaxes(covs, 1, 2)  # (c + c.T) / 2; numpy buffers the overlapping operand
        covs /= 2
        covs.reshape(K, d * d)[:, :: d + 1] += reg_covar
        return covs


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


    def noise_rows(self, nk_f, d, n_public):
        return np.asarray([float(n_public) if n_public is not None else float(nk_f.sum())])

    def private_covariances(self, s2, means, nk_f, sigma_2, low, box, prior, n_public):
        n_tot = float(n_public) if n_public is not None else float(nk_f.sum())
        S = (s2 - np.einsum("k,ki,kj->ij", nk_f, means, means)) / n_tot
        covs = _project_psd(S, min(max(low, min(_box_cap(box), _EIG_FLOOR_STD * sigma_2 / n_tot)), 1.0), 1.0)
        return covs if box is None else cap_feature_variances(covs, box)

    def exact_covariances(self, s1, s2, means, nk, reg_covar):
        d = means.shape[1]
        covs = (s2 - (nk[:, None] * means).T @ means) / nk.sum()
        covs = (covs + covs.T) / 2
        covs.flat[:: d + 1] += reg_covar
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


    def private_covariances(self, s2, means, nk_f, sigma_2, low, box, prior, n_public):
        d = means.shape[1]
        if prior is not None:
            m0, k0 = prior["mean0"], prior["kappa0"]
            S = (np.diagonal(prior["psi0"]) + s2 + k0 * m0 * m0 - (nk_f + k0)[:, None] * means * means)
            S /= (nk_f + prior["nu0"] + d + 2)[:, None]
        else:
            S = s2 / nk_f[:, None] - means * means
        b2 = None if box is None else np.minimum(np.asarray(box, dtype=np.float64), 1.0) ** 2
        return np.clip(S, self.floors(sigma_2, nk_f, low, _box_cap(box))[:, None], 1.0 if b2 is None else b2[None, :])

    def exact_covariances(self, s1, s2, means, nk, reg_covar):
        # scikit-learn: avg_X2 - 2 avg_X_means + avg_means2 + reg
        return s2 / nk[:, None] - 2 * (means * s1 / nk[:, None]) + means ** 2 + reg_covar


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


    def noise_rows(self, nk_f, d, n_public):
        return nk_f * d

    def uniform_variance(self, box, d):
        """One variance: the uniform's mean feature variance ``mean_i b_i² / 3``."""
        return 1.0 / (d + 2) if box is None else float(np.mean(np.minimum(box, 1.0) ** 2)) / 3.0

    def private_covariances(self, s2, means, nk_f, sigma_2, low, box, prior, n_public):
        """The trace over d, clipped to ``[σ₂/(d Ñ_k), mean_i min(1, b_i²)]`` (a row of the box has
        ``E‖x − μ‖²/d ≤ Σ_i b_i²/d``; without a box ``1/d``, the ball's)."""
        d = means.shape[1]
        S = (s2 / nk_f - np.einsum("ki,ki->k", means, means)) / d
        top = 1.0 / d if box is None else float((np.minimum(np.asarray(box, dtype=np.float64), 1.0) ** 2).mean())
        return np.clip(S, self.floors(sigma_2, nk_f * d, low, top, top), top)

    def exact_covariances(self, s1, s2, means, nk, reg_covar):
        # the trace of the diag form, as scikit-learn's mean over features of it
        return (s2 / nk - 2 * np.einsum("ki,ki->k", means, s1 / nk[:, None])
                + np.einsum("ki,ki->k", means, means)) / means.shape[1] + reg_covar


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
