"""Factor-analysis EM on a (released) covariance matrix, and orthogonal rotations.

Post-processing only: everything here is a function of a covariance matrix C (d x d), a
row count N and public constants.  The model is ``x ~ N(mu, W^T W + diag(psi))`` with
loadings W of shape (k, d) (scikit-learn's ``components_`` convention).

The iteration is the maximum-likelihood fixed point of factor analysis written through
the scaled covariance ``M = Psi^-1/2 C Psi^-1/2`` (Barber, *Bayesian Reasoning and
Machine Learning*, Sec. 21.2.2): with ``lambda_1 >= ... >= lambda_k`` its leading
eigenvalues and ``v_j`` their eigenvectors, the best W for fixed Psi is
``W_j = sqrt(max(lambda_j - 1, 0)) v_j^T Psi^1/2``, and then
``psi = max(diag(C) - sum_j W_j^2, floor)``.  The log-likelihood of the data under the
model, ``-N/2 (d log 2 pi + k + sum_j log lambda_j + (tr M - sum_j lambda_j) + sum log psi)``,
is monitored and the iteration stops when it gains less than ``tol`` (stopping on a
released matrix is post-processing).

Leading eigenpairs: LAPACK ``syevr`` on the wanted index range for small d
(:func:`uses_subspace`); above, a structured solver that never decomposes a d x d matrix
(issue 26).  It keeps an orthonormal basis K (d x m, m at most ``SUBSPACE_BLOCKS`` blocks
of p = k + ``SUBSPACE_OVERSAMPLE`` columns) together with the product ``C K``, so that
the Rayleigh-Ritz step of every operator the iterations need costs O(d m²) and no product
with C: the residual ``C - diag(psi) + edge I`` (:func:`fa_noisy`) is ``C K - (psi - edge) * K``
on the basis, and the whitened ``Psi^-1/2 C Psi^-1/2`` (:func:`fa_em`) is the generalised
problem ``K^T C K u = theta K^T Psi K u`` (``x = K u``, ``v = Psi^1/2 x``).  When a wanted
Ritz pair's residual is above the tolerance, the residuals of the top p Ritz pairs
(preconditioned by ``Psi^-1`` for the whitened problem) extend the basis: one product
``C Z`` with a block Z of at most p columns (a block Davidson step; the basis is compressed
onto its leading Ritz vectors first when it is full).  The first solve builds
``SUBSPACE_DEPTH`` blocks (a block Krylov space of that depth from the start basis, which
contains the old solver's three power steps); later solves start from the previous basis
(warm) and usually need no product at all, or one.  The first basis is drawn from the
fit's key, so it is data-independent.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg, special

from .._kernels.moments import product_rows

__all__ = ["Covariance", "top_dense", "fa_em", "fa_noisy", "noisy_factor_step", "gaussian_loglik", "noise_edge", "spike_shrink", "variance_posterior_mean", "orthomax",
           "fix_signs", "uses_subspace", "subspace_width", "DENSE_MAX_D", "SMALL"]

#: sklearn's guard for tiny variances (a public constant)
SMALL = 1e-12
#: largest d solved by a dense (index-range) eigendecomposition per iteration
DENSE_MAX_D = 256
#: start-basis columns beyond k
SUBSPACE_OVERSAMPLE = 10
#: blocks of the first solve (products C Z from the start basis: a block Krylov space)
SUBSPACE_DEPTH = 4
#: most blocks the basis holds (it is compressed onto its leading Ritz vectors beyond)
SUBSPACE_BLOCKS = 4
#: most basis extensions (products C Z) of one later solve
SUBSPACE_REFRESH = 3
#: residuals below this share of the largest Ritz value are rounding (not a reason to extend)
_RES_FLOOR = 1e-10


class Covariance:
    """The covariance ``S / n - m mᵀ + c I`` of a symmetric second moment ``S`` (d x d; a
    released one in a private fit), as the solvers read it: products ``C @ Q`` with a
    block of columns and the diagonal, without forming C (a d x d pass and array fewer
    than the explicit matrix at d in the thousands; the products differ from those of the
    formed matrix by rounding only; the product runs over ``n_threads`` threads with the
    same bits for any count).  :meth:`dense` forms it, for the dense path."""

    def __init__(self, S, n, mean, diag_add=0.0, n_threads=1):
        self.S = np.asarray(S, dtype=np.float64)
        self.n = float(n)
        self.mean = np.asarray(mean, dtype=np.float64)
        self.diag_add = float(diag_add)
        self.n_threads = n_threads
        self.shape = self.S.shape

    def diagonal(self):
        return np.diagonal(self.S) / self.n - self.mean * self.mean + self.diag_add

    def __matmul__(self, Q):
        # the d x d product over n_threads, the same bits for every thread count
        SQ = product_rows(self.S, Q, self.n_threads)
        return SQ / self.n - self.mean[:, None] * (self.mean @ Q)[None, :] + self.diag_add * Q

    def dense(self):
        """``C`` itself (entries as ``S / n - np.outer(m, m)``, symmetrised, ``c`` added)."""
        C = self.S / self.n - np.outer(self.mean, self.mean)
        C = (C + C.T) / 2
        C.flat[:: C.shape[0] + 1] += self.diag_add
        return C


def _dense(C):
    return C.dense() if isinstance(C, Covariance) else np.asarray(C, dtype=np.float64)


def uses_subspace(d, k):
    """Whether the fit of ``k`` factors on ``d`` features uses the structured solver (and so
    needs a start basis of :func:`subspace_width` columns); public quantities only."""
    return d > DENSE_MAX_D and subspace_width(d, k) < d


def subspace_width(d, k):
    """Columns p of the start basis: ``k + SUBSPACE_OVERSAMPLE``, at most d."""
    return min(d, int(k) + SUBSPACE_OVERSAMPLE)


def top_dense(M, k):
    """The ``k`` largest eigenpairs of the symmetric dense ``M``, descending (LAPACK's ``syevr``
    on the index range)."""
    d = M.shape[0]
    lam, V = linalg.eigh(M, subset_by_index=[d - k, d - 1], driver="evr", check_finite=False)
    return lam[::-1], V[:, ::-1]


class _Basis:
    """Orthonormal K (d x m) with ``CK = C @ K`` (see the module docstring)."""

    def __init__(self, C, start):
        self.C = C
        self.p = start.shape[1]
        self.cap = min(C.shape[0], SUBSPACE_BLOCKS * self.p)
        Q, _ = linalg.qr(np.asarray(start, dtype=np.float64), mode="economic", check_finite=False)
        self.K, self.CK = Q, C @ Q

    @property
    def m(self):
        return self.K.shape[1]

    def compress(self, U):
        """Keep ``span(K U)`` (U: orthonormal columns in the standard problem, B-orthonormal
        in the generalised one; re-orthonormalised here).  No product with C."""
        Q, R = linalg.qr(self.K @ U, mode="economic", check_finite=False)
        T = linalg.solve_triangular(R, np.eye(R.shape[0]), check_finite=False)
        self.K, self.CK = Q, self.CK @ (U @ T)

    def extend(self, Z):
        """Add ``span(Z)`` outside ``span(K)``: one product with C.  Returns the columns added."""
        K = self.K
        Z = Z / np.linalg.norm(Z, axis=0)
        for _ in range(2):                      # classical Gram-Schmidt, twice
            Z = Z - K @ (K.T @ Z)
        Q, R = linalg.qr(Z, mode="economic", check_finite=False)
        Q = Q[:, np.abs(np.diag(R)) > 1e-8]     # directions already in span(K) or in Z
        if Q.shape[1] == 0:
            return 0
        self.K = np.hstack([K, Q])
        self.CK = np.hstack([self.CK, self.C @ Q])
        return Q.shape[1]


def _solve(basis, ritz, k, first, res_tol):
    """The k leading Ritz pairs of the basis's operator, extending the basis while a wanted
    pair's residual is above ``res_tol`` (at most ``SUBSPACE_REFRESH`` extensions; the first
    solve first builds ``SUBSPACE_DEPTH`` blocks).

    ``ritz(basis) -> (theta, V, res, U, Z)``: the top p Ritz values (descending), their
    vectors, residual norms, the Ritz coordinates of every basis vector (m x m, to compress)
    and the p correction directions (residuals, preconditioned).  ``res_tol``: a residual
    bound, or a pair (bound, mask of the k pairs it applies to) computed from ``theta``."""
    forced = SUBSPACE_DEPTH - 1 if first else 0
    steps = 0
    while True:
        theta, V, res, U, Z = ritz(basis)
        bound, wanted = res_tol(theta[:k])
        bound = max(bound, _RES_FLOOR * max(1.0, float(np.max(np.abs(theta)))))
        live = res > _RES_FLOOR * max(1.0, float(np.max(np.abs(theta))))
        converged = not np.any(res[:k][wanted] > bound)
        if (steps >= forced and (converged or steps >= forced + SUBSPACE_REFRESH)) or basis.m >= basis.C.shape[0] \
                or not np.any(live):
            return theta[:k], V[:, :k]
        room = basis.cap - basis.m
        need = min(int(np.count_nonzero(live)), basis.p)
        if room < need:
            basis.compress(U[:, : basis.cap - need])
        if basis.extend(Z[:, live][:, :need]) == 0:
            return theta[:k], V[:, :k]
        steps += 1


def _ritz_standard(a):
    """Rayleigh-Ritz of ``C - diag(a)`` on the basis (see :func:`_solve`); V orthonormal."""
    def ritz(basis):
        K, CK = basis.K, basis.CK
        H = K.T @ CK - (K * a[:, None]).T @ K
        theta, U = linalg.eigh((H + H.T) / 2, check_finite=False)
        theta, U = theta[::-1], U[:, ::-1]
        p = min(basis.p, theta.size)
        V = K @ U[:, :p]
        R = CK @ U[:, :p] - a[:, None] * V - V * theta[:p]
        return theta[:p], V, np.linalg.norm(R, axis=0), U, R
    return ritz


def _ritz_whitened(s2):
    """Rayleigh-Ritz of ``S^-1 C S^-1`` (``S² = diag(s2)``) on ``span(S K)`` (see
    :func:`_solve`): the generalised problem ``K^T C K u = theta K^T S² K u``, ``x = K u``;
    returns the unit eigenvector estimates ``v = S x``, the residual norms
    ``|S^-1 (C x - theta S² x)|`` and the corrections ``S^-2 (C x - theta S² x)``."""
    def ritz(basis):
        K, CK = basis.K, basis.CK
        A = K.T @ CK
        B = (K * s2[:, None]).T @ K
        theta, U = linalg.eigh((A + A.T) / 2, (B + B.T) / 2, check_finite=False)
        theta, U = theta[::-1], U[:, ::-1]
        p = min(basis.p, theta.size)
        X = K @ U[:, :p]
        R = CK @ U[:, :p] - (s2[:, None] * X) * theta[:p]
        s = np.sqrt(s2)
        return theta[:p], X * s[:, None], np.linalg.norm(R / s[:, None], axis=0), U, R / s2[:, None]
    return ritz


def fix_signs(W):
    """Each row of W flipped so that its entry of largest magnitude is positive (the
    eigenvector sign is arbitrary; this makes fits comparable)."""
    W = np.array(W, dtype=np.float64)
    if W.size:
        j = np.argmax(np.abs(W), axis=1)
        W *= np.where(W[np.arange(W.shape[0]), j] < 0, -1.0, 1.0)[:, None]
    return W


def fa_em(C, n_components, n_rows, *, max_iter, tol, floor=SMALL, ceiling=np.inf, start=None):
    """Maximum-likelihood factor analysis of the covariance ``C`` (see the module docstring).

    Parameters
    ----------
    C : ndarray (d, d), symmetric, or Covariance
    n_components : int
    n_rows : float
        N, which scales the log-likelihood (and so the meaning of ``tol``, as scikit-learn).
    max_iter : int
    tol : float
        Stop when the log-likelihood gains less than ``tol``.
    floor, ceiling : float
        Bounds of each noise variance psi_j.
    start : ndarray (d, p) or None
        First basis of the structured solver (module docstring); None: a dense
        eigendecomposition per iteration.

    Returns
    -------
    W : ndarray (k, d)
    psi : ndarray (d,)
    loglik : list of float
    n_iter : int
    """
    d = C.shape[0]
    k = int(n_components)
    C = _dense(C) if start is None else C
    diag = np.array(C.diagonal())
    var = np.clip(diag, floor, ceiling)
    psi = np.clip(np.ones(d), floor, ceiling)
    const = d * math.log(2.0 * math.pi) + k
    basis = None if start is None else _Basis(C, start)
    # a Ritz pair converged when its residual moves the log-likelihood (N rows) by less than
    # about tol: a Ritz value's error is at most residual² / gap
    bound = math.sqrt(max(float(tol), 0.0) / max(float(n_rows), 1.0))
    lls, old, W, it = [], -np.inf, np.zeros((k, d)), 0
    for it in range(1, int(max_iter) + 1):
        sp = np.sqrt(psi) + SMALL
        if basis is None:
            M = C / sp[:, None]
            M /= sp[None, :]
            lam, V = top_dense(M, k)
            trace = float(np.trace(M))
        else:
            lam, V = _solve(basis, _ritz_whitened(sp * sp), k, it == 1, lambda th: (bound, slice(None)))
            trace = float(np.sum(diag / (sp * sp)))
        unexplained = trace - float(lam.sum())
        W = (np.sqrt(np.maximum(lam - 1.0, 0.0))[:, None] * V.T) * sp
        ll = -0.5 * n_rows * (const + float(np.sum(np.log(np.maximum(lam, SMALL)))) + unexplained
                              + float(np.sum(np.log(psi))))
        lls.append(ll)
        if ll - old < tol:
            break
        old = ll
        psi = np.clip(var - np.sum(W * W, axis=0), floor, ceiling)
    return W, psi, lls, it


def noise_edge(sigma_cov, sigma_mean, mean_norm, d):
    """Where the release noise of a covariance ``S̃2/N − m̃ m̃ᵀ + σ_m² I`` ends in its spectrum.

    ``sigma_cov``: sd of each off-diagonal entry of ``S̃2/N`` (the release layer's symmetric
    draw: i.i.d. N(0, sigma_cov²) above the diagonal, twice that variance on it, a scaled
    GOE; Analyze-Gauss's equal variances have the same edge), whose spectrum fills the
    semicircle ``[-τ, τ]``, ``τ = 2 sigma_cov √d``; ``sigma_mean``: sd of each coordinate of
    the released mean ``m̃ = m + e`` (``‖e‖ ≈ sigma_mean √d``), which enters through
    ``m̃ m̃ᵀ = m mᵀ + m eᵀ + e mᵀ + e eᵀ``: a low-rank term of size at most
    ``θ = ‖m‖ ‖e‖ + ‖e‖²``.  A spike θ on Wigner noise of edge τ leaves the edge where it is
    when ``θ ≤ τ/2`` and else shows at ``θ + τ²/(4θ)`` (the BBP transition, Benaych-Georges &
    Nadakuditi 2011).  Every input is public (the plan's noise scales, N where public or
    the released count, d, the released mean's norm).
    """
    rd = math.sqrt(d)
    tau = 2.0 * sigma_cov * rd
    theta = mean_norm * sigma_mean * rd + sigma_mean * sigma_mean * d
    if theta <= tau / 2.0:
        return tau
    return theta + tau * tau / (4.0 * theta)


def spike_shrink(lam, edge):
    """Eigenvalues of a noisy symmetric matrix, cleaned of additive Wigner noise.

    For ``A = ℓ u uᵀ + Z`` with Z Wigner of semicircle edge ``τ`` (``edge``), an eigenvalue
    ``λ > τ`` comes from a spike ``ℓ = (λ + √(λ² − τ²))/2`` (the inverse of
    ``λ = ℓ + τ²/(4ℓ)``, Benaych-Georges & Nadakuditi 2011): the noise's upward bias is
    removed and ``ℓ`` is returned.  (The Frobenius-optimal ``ℓ cos²``, ``cos² = 1 − τ²/(4ℓ²)``,
    shrinks further; on held-out likelihood — natural-image patches, synthetic factors — it
    was 0–2 nats per row worse, so the likelihood model keeps ``ℓ``.)  Eigenvalues ``≤ τ``
    are not resolved: 0.  Equivalent to: ``where(lam > edge, (lam + sqrt(lam**2 - edge**2)) / 2, 0)``.
    """
    lam = np.asarray(lam, dtype=np.float64)
    out = np.zeros_like(lam)
    ok = lam > edge
    if edge <= 0.0:
        return np.where(ok, lam, 0.0)
    ell = (lam[ok] + np.sqrt(lam[ok] ** 2 - edge * edge)) / 2.0
    out[ok] = ell
    return out


def variance_posterior_mean(v, sd):
    """Posterior mean of a variance ``v ≥ 0`` from its release ``v̂ = v + N(0, sd²)`` under
    a flat prior on ``v ≥ 0``: ``v̂ + sd φ(z)/Φ(z)``, ``z = v̂/sd`` (a truncated normal's
    mean).  Always positive; ≈ ``v̂`` when ``v̂ ≫ sd``; ``0.8 sd`` at ``v̂ = 0``."""
    v = np.asarray(v, dtype=np.float64)
    if sd <= 0.0:
        return v.copy()
    z = v / sd
    out = np.empty_like(z)
    # z + φ(z)/Φ(z) cancels below zero: for z < -10 the ratio comes from erfcx, φ(z)/Φ(z) =
    # √(2/π) / erfcx(-z/√2), accurate to a few u, so the sum keeps a relative error of about
    # u z² (2e-8 at z = -1e4); below -1e4 the asymptotic series, whose first omitted term is
    # 74/|z|⁷ (relative 7e-23 there).  The old cut at -10 with three terms was 7e-5 off.
    far = z < -1.0e4
    zf = z[far]
    out[far] = sd * (-1.0 / zf + 2.0 / zf ** 3 - 10.0 / zf ** 5)
    mid = (z < -10.0) & ~far
    zm = z[mid]
    out[mid] = sd * (zm + math.sqrt(2.0 / math.pi) / special.erfcx(-zm / math.sqrt(2.0)))
    near = ~(far | mid)
    zn = z[near]
    out[near] = v[near] + sd * np.exp(-0.5 * zn * zn - 0.5 * math.log(2.0 * math.pi) - special.log_ndtr(zn))
    return out


def fa_noisy(C, n_components, n_rows, *, sigma_cov, edge, max_iter, tol, ceiling=1.0, start=None):
    """Factor analysis of a covariance released with symmetric Gaussian noise (post-processing).

    Iterated principal factors with the release noise removed from the spectrum: with
    ``v`` the variances (:func:`variance_posterior_mean` of ``diag C``, kept ≤ ``ceiling``)
    and ψ the current noise variances (first ``v``), the residual ``R = C − diag(ψ)`` is
    ``W Wᵀ`` plus the release noise, which is homoscedastic Wigner noise in these
    (unwhitened) coordinates; its ``k`` leading eigenvalues are cleaned by
    :func:`spike_shrink` with the public ``edge`` (:func:`noise_edge`), giving
    ``W_j = √η_j u_jᵀ`` (0 for an unresolved direction), and then
    ``ψ = max(v − Σ_j W_j², min(v, sigma_cov))`` (ψ ≤ v, and never below one noise sd unless
    the variance itself is).  Stops when no ψ moves by more than ``tol · sigma_cov``.  When
    no direction is resolved the result is the diagonal model ``W = 0, ψ = v``.

    ``C``: an ndarray (d, d) or a :class:`Covariance`; ``start``: the first basis of the
    structured solver (module docstring), or None for a dense eigendecomposition per iteration.

    Returns
    -------
    W : ndarray (k, d)
    psi : ndarray (d,)
    n_resolved : int
        Directions whose eigenvalue cleared the edge (in the last iteration).
    loglik : list of float
        :func:`gaussian_loglik` of ``C`` (N = ``n_rows``) after each iteration.
    n_iter : int
    """
    d = C.shape[0]
    k = int(n_components)
    C = _dense(C) if start is None else C
    v = np.minimum(variance_posterior_mean(np.array(C.diagonal()), sigma_cov), ceiling)
    low = np.minimum(v, sigma_cov)
    psi = low.copy()
    basis = None if start is None else _Basis(C, start)
    # the resolved pairs (eigenvalue above the edge) must have converged to within the
    # stopping rule's own scale, tol noise sds of an entry (the theta here are of R + edge I)
    res_tol = lambda theta: (tol * sigma_cov, theta - edge > edge)   # noqa: E731
    W, n_resolved, it, lls = np.zeros((k, d)), 0, 0, []
    for it in range(1, int(max_iter) + 1):
        if basis is None:
            R = C.copy()
            R.flat[:: d + 1] -= psi
            lam, V = top_dense(R, k)
        else:
            # R + edge I: PSD up to the noise, so its leading values are the wanted ones
            theta, V = _solve(basis, _ritz_standard(psi - edge), k, it == 1, res_tol)
            lam = theta - edge
        W, new, n_resolved = noisy_factor_step(lam, V, edge, v, low)
        moved = float(np.max(np.abs(new - psi)))
        psi = new
        lls.append(gaussian_loglik(C, W, psi, n_rows))
        if moved <= tol * sigma_cov:
            break
    return W, psi, n_resolved, lls, it


def noisy_factor_step(lam, V, edge, v, low):
    """One step of :func:`fa_noisy` from the leading eigenpairs ``(lam, V)`` of the residual:
    the eigenvalues cleaned of the noise (:func:`spike_shrink`), ``W_j = √η_j u_jᵀ`` and the new
    noise variances ``max(v − Σ_j W_j², low)``.  Returns ``(W, psi, n_resolved)``."""
    eta = spike_shrink(lam, edge)
    W = np.sqrt(eta)[:, None] * V.T
    return W, np.maximum(v - np.sum(W * W, axis=0), low), int(np.count_nonzero(eta))


def gaussian_loglik(C, W, psi, n_rows):
    """``-N/2 (d log 2π + log det Σ + tr(Σ⁻¹ C))`` with ``Σ = WᵀW + diag(ψ)`` (matrix
    determinant and inversion lemmas: O(k d²) for the nonzero rows of W, which alone enter:
    a zero row adds an identity block to ``I + W Ψ⁻¹ Wᵀ``)."""
    d = C.shape[0]
    W = W[np.any(W != 0, axis=1)]
    tr = float(np.sum(C.diagonal() / psi))
    logdet = float(np.sum(np.log(psi)))
    if W.shape[0]:
        Wp = W / psi
        B = np.eye(W.shape[0]) + Wp @ W.T
        cB = linalg.cho_factor(B, check_finite=False)
        logdet += 2.0 * float(np.sum(np.log(np.diag(cB[0]))))
        G = Wp @ (C @ Wp.T)
        tr -= float(np.trace(linalg.cho_solve(cB, G, check_finite=False)))
    return -0.5 * n_rows * (d * math.log(2.0 * math.pi) + logdet + tr)


def orthomax(L, gamma, max_iter=100, tol=1e-6):
    """Orthomax rotation of the loadings L (d x k): gamma=1 varimax, gamma=0 quartimax.

    Kaiser's criterion maximised by the usual SVD iteration: with LR = L R,
    ``G = L^T (LR^3 - gamma/d LR diag(sum LR^2))`` and R the polar factor of G.
    Returns L R.
    """
    L = np.asarray(L, dtype=np.float64)
    d, k = L.shape
    R = np.eye(k)
    obj = 0.0
    for _ in range(max_iter):
        LR = L @ R
        G = L.T @ (LR ** 3 - (gamma / d) * LR * np.sum(LR ** 2, axis=0))
        U, s, Vt = np.linalg.svd(G)
        R = U @ Vt
        new = float(s.sum())
        if new <= obj * (1.0 + tol):
            break
        obj = new
    return L @ R
