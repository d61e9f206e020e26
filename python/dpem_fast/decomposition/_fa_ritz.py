"""Factor analysis of a released operator, on its Krylov space (issue 41; post-processing).

DPFactorAnalysis's matrix-free path (the conditions of DPPCA's: :meth:`~._moment_release.
SecondMomentRelease._matrix_free`): the released covariance ``C`` is read through products on a
block Krylov basis Q (d x m, m = :func:`~._krylov.krylov_columns`, all of it: a factor model's
residual ``C − diag ψ`` moves with ψ, so the whole basis is kept) from the data-independent
start, then through its diagonal (:meth:`~._krylov.ReleasedCovariance.diagonal`, which ends the
operator).  :func:`~._fa_em.fa_noisy`'s iterations then run on the Ritz space of ``span Q``:
the leading eigenpairs of ``Qᵀ (C − diag ψ) Q = H − Qᵀ diag(ψ) Q`` (``H = sym(Qᵀ C Q)``), O(d m²) a
step, no further product.  The log-likelihoods (``loglike_``, the below-uniform warning) read
the low-rank-plus-diagonal estimate ``Ĉ = Q H Qᵀ + diag(c − diag(Q H Qᵀ))`` (``c`` the released
diagonal) — in law what the Ritz method outputs on the materialised release.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg

from ._fa_em import gaussian_loglik, noisy_factor_step, variance_posterior_mean
from ._krylov import top_eigenpairs_krylov

__all__ = ["RitzCovariance", "fa_noisy_ritz"]


class RitzCovariance:
    """``Ĉ = Q H Qᵀ + diag(c − diag(Q H Qᵀ))`` (module docstring): products and the diagonal,
    as :func:`~._fa_em.gaussian_loglik` reads a covariance."""

    def __init__(self, Q, H, diag):
        self.Q, self.H = Q, H
        self._diag = np.asarray(diag, dtype=np.float64)
        self.rest = self._diag - np.einsum("ij,ij->i", Q @ H, Q)
        self.shape = (Q.shape[0], Q.shape[0])

    def diagonal(self):
        return self._diag

    def __matmul__(self, V):
        return self.Q @ (self.H @ (self.Q.T @ V)) + self.rest[:, None] * V


def fa_noisy_ritz(C, n_components, n_rows, *, sigma_cov, edge, max_iter, tol, ceiling, start, max_cols):
    """:func:`~._fa_em.fa_noisy` of the released covariance ``C`` (a
    :class:`~._krylov.ReleasedCovariance`) on its Krylov space (module docstring).  Returns
    ``(W, psi, n_resolved, loglik, n_iter, Ĉ)``, Ĉ the :class:`RitzCovariance` the
    log-likelihoods read."""
    k = int(n_components)
    Q, H = top_eigenpairs_krylov(C, k, start, max_cols, pairs=False)
    Cr = RitzCovariance(Q, H, C.diagonal())
    m, d = Q.shape[1], Q.shape[0]
    v = np.minimum(variance_posterior_mean(np.array(Cr.diagonal()), sigma_cov), ceiling)
    low = np.minimum(v, sigma_cov)
    psi = low.copy()
    W, n_resolved, it, lls = np.zeros((k, d)), 0, 0, []
    kk = min(k, m)
    for it in range(1, int(max_iter) + 1):
        Hp = H - Q.T @ (psi[:, None] * Q)
        lam, U = linalg.eigh((Hp + Hp.T) / 2, subset_by_index=[m - kk, m - 1], driver="evr", check_finite=False)
        lam, U = lam[::-1], U[:, ::-1]
        if kk < k:
            lam, U = np.concatenate([lam, np.zeros(k - kk)]), np.hstack([U, np.zeros((m, k - kk))])
        W, new, n_resolved = noisy_factor_step(lam, Q @ U, edge, v, low)
        moved = float(np.max(np.abs(new - psi)))
        psi = new
        lls.append(gaussian_loglik(Cr, W, psi, n_rows))
        if moved <= tol * sigma_cov:
            break
    return W, psi, n_resolved, lls, it, Cr
