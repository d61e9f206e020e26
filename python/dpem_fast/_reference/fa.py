"""Obviously-correct numpy twins for factor analysis: the second-moment kernel and the EM,
and the trivial private model the factor model is compared with.

Test oracles and benchmark baselines of :mod:`dpem_fast.decomposition`; they import nothing
of the package's engine, kernels or models (the small maths they share is written here).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg
from scipy.optimize import brentq
from scipy.special import erfcx, log_ndtr, ndtr

from .rng import make_key_reference, release_key_reference, standard_normal
from .rows import map_rows_reference, scale_and_clip_reference

__all__ = ["second_moment_reference", "fa_em_reference", "fa_loglik_reference", "fa_noisy_reference", "private_diagonal_gaussian", "PrivateDiagonalGaussian",
           "diagonal_gaussian_loglik", "variance_posterior_mean_reference", "gdp_mu_reference"]


def second_moment_reference(X, domain=None):
    """(count, sum, second moment, rows clipped) of the rows of X, clipped into the unit
    ball of ``domain`` first if given; float64 throughout (float32 rows are upcast first, as
    the kernel's loader does)."""
    Z = np.asarray(X, dtype=np.float64)
    n_clipped = 0
    if domain is not None:
        Z, n_clipped = scale_and_clip_reference(Z, domain)
    return float(Z.shape[0]), Z.sum(axis=0), Z.T @ Z, n_clipped


def variance_posterior_mean_reference(v, sd):
    """Posterior mean of a variance ``v >= 0`` released as ``v^ = v + N(0, sd^2)``, flat prior on
    ``v >= 0``: the mean of ``N(v^, sd^2)`` truncated to ``[0, inf)``, ``sd (z + phi(z)/Phi(z))``
    with ``z = v^/sd``.  ``phi/Phi`` through the scaled complementary error function
    (``phi(z)/Phi(z) = sqrt(2/pi) / erfcx(-z/sqrt 2)``); below z = -200, where ``z + phi/Phi``
    cancels, its asymptotic series ``1/x - 2/x^3 + 10/x^5`` (x = -z)."""
    v = np.asarray(v, dtype=np.float64)
    if sd <= 0.0:
        return v.copy()
    z = v / sd
    x = np.maximum(-z, 200.0)
    far = sd * (1.0 / x - 2.0 / x ** 3 + 10.0 / x ** 5)
    near = v + sd * math.sqrt(2.0 / math.pi) / erfcx(-z / math.sqrt(2.0))
    return np.where(z < -200.0, far, near)


def _fix_signs(W):
    """Each row of W times the sign of its entry of largest magnitude (eigenvectors' signs
    are arbitrary)."""
    W = np.array(W, dtype=np.float64)
    if W.size:
        top = W[np.arange(W.shape[0]), np.argmax(np.abs(W), axis=1)]
        W *= np.where(top < 0, -1.0, 1.0)[:, None]
    return W


def _noisy_step(lam, V, edge, v, low):
    """One step of the noise-aware factor iteration from the leading eigenpairs (lam, V) of the
    residual: an eigenvalue above the noise edge (>= 0) is the spike ``l`` with
    ``lam = l + edge^2 / (4 l)`` (Benaych-Georges & Nadakuditi 2011), ``(lam + sqrt(lam^2 - edge^2))/2``;
    one at or below it is 0.  ``W_j = sqrt(l_j) V_j^T`` and the noise variances
    ``max(v - sum_j W_j^2, low)``.  Returns (W, psi, n_resolved)."""
    lam = np.asarray(lam, dtype=np.float64)
    above = lam > edge
    ell = np.where(above, (lam + np.sqrt(np.where(above, lam * lam - edge * edge, 0.0))) / 2.0, 0.0)
    W = np.sqrt(ell)[:, None] * V.T
    return W, np.maximum(v - np.sum(W * W, axis=0), low), int(np.count_nonzero(ell))


def fa_loglik_reference(C, W, psi):
    """Mean log-likelihood per row of data with covariance C under N(0, W^T W + diag psi)."""
    d = C.shape[0]
    S = W.T @ W + np.diag(psi)
    sign, logdet = np.linalg.slogdet(S)
    return -0.5 * (d * np.log(2 * np.pi) + logdet + np.trace(np.linalg.solve(S, C)))


def fa_em_reference(C, n_components, n_iter, psi0=None, small=1e-12):
    """Textbook factor-analysis EM on a covariance C (Rubin & Thayer 1982; DP-EM Sec. 6's
    update with Lambda = C), written with explicit E- and M-steps and no eigendecomposition:

    G = (I + W Psi^-1 W^T)^-1, B = G W Psi^-1 (k x d),
    W_new^T = C B^T (B C B^T + G)^-1, psi_new = diag(C - W_new^T B C).

    W is (k x d) as scikit-learn's ``components_``.  Starts from the leading scaled
    eigenvectors (as the maximum-likelihood iteration would), then runs ``n_iter`` steps.
    """
    d = C.shape[0]
    k = n_components
    psi = np.ones(d) if psi0 is None else np.asarray(psi0, dtype=np.float64).copy()
    s = np.sqrt(psi)
    lam, V = np.linalg.eigh(C / np.outer(s, s))
    lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    W = (np.sqrt(np.maximum(lam - 1.0, 0.0))[:, None] * V.T) * s
    for _ in range(n_iter):
        Wp = W / psi
        G = np.linalg.inv(np.eye(k) + Wp @ W.T)
        B = G @ Wp
        CB = C @ B.T
        Wt = CB @ np.linalg.inv(B @ CB + G)
        W = Wt.T
        psi = np.maximum(np.diag(C) - np.sum(Wt * CB, axis=1), small)
    return W, psi


def fa_eigen_em_reference(C, n_components, n_rows, max_iter, tol, floor=1e-12, start=None):
    """Numpy twin of :func:`dpem_fast.decomposition._fa_em.fa_em`: the same fixed point with
    a full ``np.linalg.eigh`` per step, or from the basis ``start`` the solver before issue 26
    (three power steps per step on the formed ``M``, warm-started).  Returns (W, psi, n_iter),
    W with the signs fixed as the estimator fixes them (largest entry of each row positive)."""
    C = np.asarray(C, dtype=np.float64)
    d, k = C.shape[0], n_components
    var = np.maximum(np.diag(C), floor)
    psi = np.ones(d)
    old = -np.inf
    W = np.zeros((k, d))
    it = 0
    Q = start
    for it in range(1, max_iter + 1):
        sp = np.sqrt(psi) + 1e-12
        M = C / np.outer(sp, sp)
        if Q is None:
            lam, V = np.linalg.eigh(M)
            lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
        else:
            lam, V, Q = _top_subspace_v1(M, k, Q)
        W = np.sqrt(np.maximum(lam - 1.0, 0.0))[:, None] * V.T * sp
        ll = -0.5 * n_rows * (d * np.log(2 * np.pi) + k + np.sum(np.log(lam)) + np.trace(M) - lam.sum()
                              + np.sum(np.log(psi)))
        if ll - old < tol:
            break
        old = ll
        psi = np.maximum(var - np.sum(W ** 2, axis=0), floor)
    return _fix_signs(W), psi, it


def _top_subspace_v1(M, k, Q, steps=3):
    """The previous solver's eigenpairs (before issue 26): ``steps`` power steps of the block
    Q on the formed matrix M, then Rayleigh-Ritz with one more product."""
    for _ in range(steps):
        Q, _ = np.linalg.qr(M @ Q)
    B = Q.T @ (M @ Q)
    lam, U = np.linalg.eigh((B + B.T) / 2)
    V = Q @ U[:, ::-1]
    return lam[::-1][:k], V[:, :k], V


def _loglik_lemmas(C, W, psi):
    """:func:`fa_loglik_reference` through the determinant and inversion lemmas (O(k d²), as
    the previous solver computed it): ``Σ = WᵀW + Ψ``, ``B = I + W Ψ⁻¹ Wᵀ``."""
    d = C.shape[0]
    Wp = W / psi
    B = np.eye(W.shape[0]) + Wp @ W.T
    logdet = np.sum(np.log(psi)) + np.linalg.slogdet(B)[1]
    tr = np.sum(np.diag(C) / psi) - np.trace(np.linalg.solve(B, Wp @ C @ Wp.T))
    return -0.5 * (d * np.log(2 * np.pi) + logdet + tr)


def fa_noisy_reference(C, n_components, n_rows, *, sigma_cov, edge, max_iter, tol, ceiling=1.0, start=None):
    """Numpy twin of :func:`dpem_fast.decomposition._fa_em.fa_noisy` as it was before issue 26:
    the residual ``R = C − diag(ψ)`` formed every iteration, its leading eigenpairs by a dense
    ``eigh`` of the wanted index range (``start`` None) or, from the basis ``start``, by three
    power steps on ``R + edge I`` warm-started from the previous iteration's block;
    the log-likelihood by the matrix lemmas (:func:`fa_loglik_reference`'s value).  The
    oracle and benchmark baseline of the structured solver.  Returns ``(W, psi, n_resolved,
    loglik, n_iter)``."""
    C = np.asarray(C, dtype=np.float64)
    d, k = C.shape[0], int(n_components)
    v = np.minimum(variance_posterior_mean_reference(np.diag(C), sigma_cov), ceiling)
    low = np.minimum(v, sigma_cov)
    psi = low.copy()
    Q = start
    W, n_resolved, it, lls = np.zeros((k, d)), 0, 0, []
    for it in range(1, int(max_iter) + 1):
        R = C - np.diag(psi)
        if Q is None:
            lam, V = linalg.eigh(R, subset_by_index=[d - k, d - 1], driver="evr")
            lam, V = lam[::-1], V[:, ::-1]
        else:
            lam, V, Q = _top_subspace_v1(R + edge * np.eye(d), k, Q)
            lam = lam - edge
        W, new, n_resolved = _noisy_step(lam, V, edge, v, low)
        moved = float(np.max(np.abs(new - psi)))
        psi = new
        lls.append(n_rows * _loglik_lemmas(C, W, psi))
        if moved <= tol * sigma_cov:
            break
    return W, psi, n_resolved, lls, it


def gdp_mu_reference(epsilon, delta):
    """The ``mu`` of a mu-GDP mechanism that is exactly (epsilon, delta)-DP: the root of
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta`` (Dong, Roth & Su 2022,
    Cor. 2.13; the left side increases with mu), by Brent's method to full precision."""
    eps, delta = float(epsilon), float(delta)

    def excess(mu):
        return ndtr(-eps / mu + mu / 2.0) - math.exp(eps + log_ndtr(-eps / mu - mu / 2.0)) - delta

    return brentq(excess, 1e-8, 1e3, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)


def _declared_domain(d, data_norm, bounds):
    """``(center, scale, box)`` of the declared domain, as the estimators map rows: with
    ``bounds`` (a pair of scalars or (d,) arrays) the box's middle, each feature scaled by
    ``sqrt(d)`` times its half-width (the box onto the cube inside the unit ball) or, with
    ``data_norm`` too, by ``data_norm``; with ``data_norm`` alone centre 0 and scale
    ``data_norm``, no box."""
    if bounds is None:
        return np.zeros(d), np.full(d, float(data_norm)), None
    lo, hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), (d,)).copy() for b in bounds)
    center = lo / 2 + hi / 2
    scale = np.full(d, float(data_norm)) if data_norm is not None else math.sqrt(d) * (hi / 2 - lo / 2)
    return center, scale, (lo, hi)


def private_diagonal_gaussian(X, *, epsilon, delta, data_norm=None, bounds=None, random_state=0):
    """The trivial private model: one Gaussian with a diagonal covariance.

    Rows are mapped into the unit ball by the declared ``data_norm`` (centre 0) or ``bounds``
    and clipped, as the factor model's rows are (:func:`_declared_domain`).  Released once,
    jointly (one Gaussian mechanism), under replace-one, where the row count is public: the
    sum ``S1 = Σ x`` (ℓ2 sensitivity 2) and the per-feature sum of squares ``S2 = Σ x∘x``
    (``‖x∘x − x'∘x'‖² ≤ ‖x∘x‖² + ‖x'∘x'‖² ≤ 2`` since both are nonnegative: √2), with equal
    shares ``σ1 / 2 = σ2 / √2 = s``.  Jointly, for unit rows with ``c = xᵀx'``,
    ``‖x − x'‖²/σ1² + ‖x∘x − x'∘x'‖²/σ2² ≤ ((2 − 2c)/4 + (2 − 2c²)/2) / s² ≤ 25 / (16 s²)``
    (the factor model's bound with ``‖x∘x − x'∘x'‖ ≤ ‖xxᵀ − x'x'ᵀ‖_F``, maximal at c = −1/4),
    so the release is ``(5 / (4 s))``-GDP, and ``s = 5 / (4 mu)`` with ``mu`` from
    :func:`gdp_mu_reference`.  The noise comes from the library's streams, drawn by their
    twin (:mod:`dpem_fast._reference.rng`; key ``random_state``, sub-keys
    ``("release", 0, "sum" / "sumsq")``), so a seeded baseline is the one the engine drew.

    Post-processing as :class:`DPFactorAnalysis`'s diagonal: the mean moved into the domain's
    image (each coordinate into the box's image, then onto the unit ball), the plug-in bias
    ``σ_m²`` added back, the posterior mean of each variance given its release noise
    (:func:`variance_posterior_mean_reference`), capped at 1 (at ``b_i²`` with a box of image
    ``[-b_i, b_i]``), and ``σ_m²`` added for the predictive density.  Returns ``(mean, var)``
    in the original units.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    center, scale, box = _declared_domain(d, data_norm, bounds)
    Z, _ = map_rows_reference(X, center, scale, box)
    s = 5.0 / (4.0 * gdp_mu_reference(epsilon, delta))
    sig1, sig2 = 2.0 * s, math.sqrt(2.0) * s
    key = make_key_reference(random_state)
    noisy_sum = Z.sum(0) + np.asarray(standard_normal(release_key_reference(key, 0, "sum"), d, sig1))
    noisy_sumsq = np.sum(Z * Z, axis=0) + np.asarray(standard_normal(release_key_reference(key, 0, "sumsq"), d, sig2))
    mean = noisy_sum / n
    b = None if box is None else (box[1] / 2 - box[0] / 2) / scale
    if b is not None:
        mean = np.clip(mean, -b, b)
    norm = math.sqrt(float(mean @ mean))
    if norm > 1.0:
        mean = mean / norm
    mean_var = (sig1 / n) ** 2
    ceiling = 1.0 if b is None else np.minimum(b, 1.0) ** 2
    var = np.minimum(variance_posterior_mean_reference(noisy_sumsq / n - mean * mean + mean_var, sig2 / n),
                     ceiling) + mean_var
    return center + scale * mean, var * scale ** 2


def diagonal_gaussian_loglik(X, mean, var):
    """Mean log-likelihood per row of X under N(mean, diag(var))."""
    X = np.asarray(X, dtype=np.float64)
    return float(np.mean(-0.5 * np.sum((X - mean) ** 2 / var + np.log(2 * np.pi * var), axis=1)))


class PrivateDiagonalGaussian:
    """:func:`private_diagonal_gaussian` as a model with ``fit`` / ``score`` (held-out mean
    log-likelihood per row): the trivial model that the utility tests and benchmarks compare
    factor analysis with."""

    def __init__(self, epsilon, *, delta=1e-5, data_norm=None, bounds=None, random_state=0):
        self.epsilon, self.delta, self.data_norm, self.bounds = epsilon, delta, data_norm, bounds
        self.random_state = random_state

    def fit(self, X):
        self.mean_, self.var_ = private_diagonal_gaussian(X, epsilon=self.epsilon, delta=self.delta,
                                                          data_norm=self.data_norm, bounds=self.bounds,
                                                          random_state=self.random_state)
        return self

    def score(self, X):
        return diagonal_gaussian_loglik(X, self.mean_, self.var_)
