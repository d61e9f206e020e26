"""Obviously-correct numpy twins for factor analysis: the second-moment kernel and the EM.

Test oracles and benchmark baselines of :mod:`dpem_fast.decomposition`.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from .._engine._plan import make_plan
from .._engine._release import ReleaseLayer
from .._engine._specs import moments_joint_bound
from .._engine._statistics import StatSpec
from .._preprocess import project_into_domain, resolve_domain, scale_and_clip
from .._rng import make_key
from ..decomposition._fa_em import noisy_factor_step, variance_posterior_mean

__all__ = ["second_moment_reference", "fa_em_reference", "fa_loglik_reference", "fa_noisy_reference", "private_diagonal_gaussian", "PrivateDiagonalGaussian",
           "diagonal_gaussian_loglik"]


def second_moment_reference(X, domain=None):
    """(count, sum, second moment, rows clipped) of the rows of X, clipped into the unit
    ball of ``domain`` first if given; float64 throughout (float32 rows are upcast first, as
    the kernel's loader does)."""
    Z = np.asarray(X, dtype=np.float64)
    n_clipped = 0
    if domain is not None:
        Z, n_clipped = scale_and_clip(Z, domain)
    return float(Z.shape[0]), Z.sum(axis=0), Z.T @ Z, n_clipped


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
    W with :func:`fix_signs` applied."""
    from ..decomposition._fa_em import fix_signs

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
    return fix_signs(W), psi, it


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
    v = np.minimum(variance_posterior_mean(np.diag(C), sigma_cov), ceiling)
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
        W, new, n_resolved = noisy_factor_step(lam, V, edge, v, low)    # the model's step; the solver differs
        moved = float(np.max(np.abs(new - psi)))
        psi = new
        lls.append(n_rows * _loglik_lemmas(C, W, psi))
        if moved <= tol * sigma_cov:
            break
    return W, psi, n_resolved, lls, it


def private_diagonal_gaussian(X, *, epsilon, delta, data_norm=None, bounds=None, random_state=0):
    """The trivial private model: one Gaussian with a diagonal covariance.

    Rows are mapped into the unit ball by the declared ``data_norm`` (centre 0) and
    clipped, as the factor model's rows are.  Released once, jointly (one Gaussian
    mechanism), through the engine's release layer: the sum ``Σ x`` (ℓ2 sensitivity 2
    replace, 1 add/remove) and the per-feature sum of squares ``Σ x∘x`` (a vector with
    ``‖x∘x‖₂ ≤ ‖x‖² ≤ 1``; replace ``‖x∘x − x'∘x'‖² ≤ ‖x∘x‖² + ‖x'∘x'‖² ≤ 2`` since both
    are nonnegative: √2), under replace-one, where the row count is public.  Equal shares and the joint bound of the factor model
    (``‖x∘x − x'∘x'‖ ≤ ‖xxᵀ − x'x'ᵀ‖_F``, so :func:`moments_joint_bound` holds).
    Post-processing as :class:`DPFactorAnalysis`'s diagonal: the plug-in bias ``σ_m²`` added
    back, the posterior mean of each variance given its release noise, and ``σ_m²`` added
    for the predictive density.  Returns ``(mean, var)`` in the original units.

    With ``bounds`` (and no ``data_norm``) rows are mapped as the factor model maps them, each
    feature by its own declared range (:func:`~dpem_fast._preprocess.resolve_domain`); the
    mean is clipped into the box's image and each variance capped at ``b_i²``.
    """
    n, d = X.shape
    domain = resolve_domain(d, data_norm, bounds)
    Z, _ = scale_and_clip(np.asarray(X, dtype=np.float64), domain)
    specs = (StatSpec("sum", (d,), l2={"add_remove": 1.0, "replace": 2.0}),
             StatSpec("sumsq", (d,), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)}))
    neighbouring = "replace"
    plan = make_plan(specs, 1, epsilon=epsilon, delta=delta, neighbouring=neighbouring, accountant="gdp",
                     mechanisms=None, shares={"sum": 1.0, "sumsq": 1.0},
                     joint=lambda a: moments_joint_bound(a["sum"], a["sumsq"], neighbouring=neighbouring))
    layer = ReleaseLayer(plan, make_key(random_state))
    noisy = layer.release({"sum": Z.sum(0), "sumsq": np.sum(Z * Z, axis=0)}, 0)
    sig1, sig2 = plan.releases["sum"].noise_scale, plan.releases["sumsq"].noise_scale
    mean = project_into_domain(noisy["sum"] / n, domain)
    mean_var = (sig1 / n) ** 2
    box = domain.box_image
    ceiling = 1.0 if box is None else np.minimum(box, 1.0) ** 2
    var = np.minimum(variance_posterior_mean(noisy["sumsq"] / n - mean * mean + mean_var, sig2 / n), ceiling) + mean_var
    return domain.to_original(mean), var * domain.scale ** 2


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
