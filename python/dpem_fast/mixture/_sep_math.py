"""The maths of DP-SEP that the fit (:mod:`dpem_fast.mixture._dp_sep`) and the audit share: the
accounting event, the default clip norm, the rounding factor of one release, the noise the last
factor keeps, the posterior's noise floor and the map back to raw units, and the fit's public
set-up.  Derived in ``docs/models/stochastic_ep.rst``, "Privacy analysis in full"."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import accounting as acc
from .._kernels import sep as _sep

#: noise margin of N Λ_f's eigenvalues, in units of sqrt(d) τ (``_margin``)
_MARGIN = 3.0


def sep_event(noise_multiplier, n_samples, n_epochs, sampling, batch_size=1, privacy_unit="row"):
    """The accounting event of a DP-SEP run (replace-one relation; see the model page;
    ``privacy_unit="group"``: a person-level run over ``n_samples`` slots, shuffle only)."""
    g = acc.GaussianEvent(noise_multiplier)
    n, B = int(n_samples), int(batch_size)
    if sampling == "shuffle":
        inner = acc.SelfComposedEvent(g, int(n_epochs))
    elif sampling == "uniform":
        inner = acc.SelfComposedEvent(acc.SampledWithoutReplacementEvent(n, B, g), -(-n // B) * int(n_epochs))
    else:
        raise ValueError(f"sampling must be 'shuffle' or 'uniform', got {sampling!r}")
    return acc.NeighbouringEvent("replace", inner, privacy_unit)


def default_clip_norm(n_features, component_variance):
    """C = sqrt(d + 1) / s²: the norm of one fully responsible site ``[x / s², I / s²]`` for a row
    with ``‖x‖ <= 1`` (all in the domain's units, where rows lie in the unit ball)."""
    return math.sqrt(n_features + 1.0) / component_variance


def sep_rounding_factor(batch_size, m, n_entries):
    """The factor by which float rounding can exceed Prop. 1's sensitivity ``2 m γ C / N`` of one
    release (the model page, "Rounding"): ``ρ (1 + u)⁸ (1 + γ_L L + (1 + γ_L)(B/m) u (2 + u))``
    with ``L = SITE_BLOCK`` (256) steps per float partial, ``B`` the largest batch, ``m`` the
    sites one neighbour changes (1, or a group's m slots) and ``ρ = (1 + u)² / ((1 − u)
    √(1 − γ_E))`` the clip's float overshoot on ``E = J (d + d²)`` entries (``u = 2⁻⁵³``,
    ``γ_k = k u / (1 − k u)``).  Public: B, m, J and d."""
    u, L, E = 2.0 ** -53, _sep.SITE_BLOCK, int(n_entries)

    def gamma_(k):
        if k * u >= 0.5:
            raise ValueError(f"DP-SEP rounding: {k} terms per sum is too many for the bound")
        return k * u / (1.0 - k * u)

    rho = (1.0 + u) ** 2 / ((1.0 - u) * math.sqrt(1.0 - gamma_(E)))
    excess = gamma_(L) * L + (1.0 + gamma_(L)) * (float(batch_size) / float(m)) * u * (2.0 + u)
    return rho * (1.0 + u) ** 8 * (1.0 + 1.01 * excess)


def _posterior_noise(sigma, sizes, gamma, n):
    """Standard deviation of the noise in each entry of ``N θ_f`` after the last release: the
    damped releases keep ``Σ_r Π_{r' > r} (1 - γ b_r'/N)² σ²`` (public)."""
    var = 0.0
    for b in sizes:
        var = var * (1.0 - gamma * b / n) ** 2 + sigma * sigma
    return n * math.sqrt(var)


def _margin(d, tau):
    """Eigenvalues of ``N Λ_f`` below this are treated as noise: ``3 sqrt(d) τ``.  The symmetrised
    d x d noise (entry sd τ on the diagonal, τ/√2 off it) has spectral norm about ``sqrt(2d) τ``;
    the factor 3 sqrt(d) puts a noise-only direction below the threshold with high probability
    (a public constant: d and the plan's τ only)."""
    return _MARGIN * math.sqrt(d) * tau


def _posterior(theta0, m0u, data_part, q, d, tau, lo, hi):
    """Means, covariances and precisions of the posterior over the J means (working units).

    SEP: the released ``N θ_f`` per component; its precision's eigenvalues are soft-thresholded by
    the public noise margin (a direction indistinguishable from noise carries no precision, and
    its mean falls back to the prior's), the factor's own mean (already in the box) is kept,
    ``Λ = Λ0 + Λ'``, ``m = Λ⁻¹ (Λ0 m0 + Λ' m_f)`` clamped into the box.  EP: ``q`` as it is.
    Returns (means, covs, precisions, components that fell back to the prior)."""
    J = theta0.shape[0]
    lam0 = theta0[:, d:].reshape(J, d, d)
    means = np.empty((J, d))
    lams = np.empty((J, d, d))
    fell = []
    for j in range(J):
        if data_part is None:
            lam = 0.5 * (q[j, d:].reshape(d, d) + q[j, d:].reshape(d, d).T)
            m = np.linalg.solve(lam, q[j, :d])
        else:
            lf = data_part[j, d:].reshape(d, d)
            wv, V = np.linalg.eigh(0.5 * (lf + lf.T))
            wv = np.maximum(wv, 0.0)
            c = V.T @ data_part[j, :d]
            mf = np.clip(V @ np.where(wv > 0, c / np.where(wv > 0, wv, 1.0), 0.0), lo, hi)
            wp = np.maximum(wv - _margin(d, tau), 0.0)
            if tau > 0 and not wp.max() > 0:
                fell.append(j)
            lp = (V * wp) @ V.T
            lam = lam0[j] + lp
            lam = 0.5 * (lam + lam.T)
            m = np.linalg.solve(lam, lam0[j] @ m0u[j] + lp @ mf)
            if tau > 0:
                # the privacy noise's own share of the uncertainty: m_f = Λ_f⁻¹ η_f moves by about
                # Λ_f⁻¹ (e - E m_f) for noise e, E of entry sd τ (covariance τ² (1 + ‖m_f‖²) Λ_f⁻²),
                # and reaches m through A = (Λ0 + Λ')⁻¹ Λ' Λ_f⁻¹
                vi = np.linalg.inv(lam)
                A = vi @ ((V * np.where(wv > 0, wp / np.where(wv > 0, wv, 1.0), 0.0)) @ V.T)
                cov = vi + tau * tau * (1.0 + float(mf @ mf)) * (A @ A.T)
                lam = np.linalg.inv(0.5 * (cov + cov.T))
                lam = 0.5 * (lam + lam.T)
        means[j] = np.clip(m, lo, hi)
        lams[j] = lam
    covs = np.linalg.inv(lams)
    return means, 0.5 * (covs + np.swapaxes(covs, 1, 2)), lams, fell


def _to_raw(theta_u, centre, R, d):
    """Natural parameters in the working units -> raw units (Λ / R², η = (η_u + Λ_u c / R) / R)."""
    J = theta_u.shape[0]
    lam_u = theta_u[:, d:].reshape(J, d, d)
    eta = (theta_u[:, :d] + np.einsum("jab,b->ja", lam_u, centre) / R) / R
    return np.concatenate([eta, (lam_u / (R * R)).reshape(J, d * d)], axis=1)


@dataclass(frozen=True)
class _Setup:
    """The public set-up of a DP-SEP fit (:meth:`DPStochasticEP._setup`): the rows (slots of a
    person-level fit) the loop runs over, the parameters, the box
    (``lo``, ``hi``; working units: ``(x - centre) / R``, the box ``[lo_u, hi_u]``), the prior
    and the initial factor, in the working units."""

    n: int
    J: int
    eps: float
    delta: float
    C: float
    gamma: float
    T: int
    B: int
    acct: str
    lo: np.ndarray
    hi: np.ndarray
    centre: np.ndarray
    R: float
    lo_u: np.ndarray
    hi_u: np.ndarray
    s2: float
    s2u: float
    m0u: np.ndarray
    S0u: np.ndarray
    w: np.ndarray
    log_w: np.ndarray
    theta0: np.ndarray
    theta_f: np.ndarray

    def working(self, X):
        """Rows in the working units: clipped to the box, centred, divided by R."""
        return (np.clip(X, self.lo, self.hi) - self.centre) / self.R
