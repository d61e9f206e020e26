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

Leading eigenpairs: LAPACK ``syevr`` on the wanted index range for ``d <= DENSE_MAX_D``;
above, a block subspace iteration with Rayleigh-Ritz (``SUBSPACE_OVERSAMPLE`` extra
vectors, ``SUBSPACE_STEPS`` products per EM step, warm-started from the previous step's
basis; the first basis is drawn from the fit's key, so it is data-independent).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg

__all__ = ["fa_em", "orthomax", "fix_signs", "DENSE_MAX_D", "SMALL"]

#: sklearn's guard for tiny variances (a public constant)
SMALL = 1e-12
DENSE_MAX_D = 1024
SUBSPACE_OVERSAMPLE = 10
SUBSPACE_STEPS = 3


def _top_dense(M, k):
    d = M.shape[0]
    lam, V = linalg.eigh(M, subset_by_index=[d - k, d - 1], driver="evr", check_finite=False)
    return lam[::-1], V[:, ::-1]


def _top_subspace(M, k, Q):
    """k leading eigenpairs of symmetric M from the basis Q (d x p); returns (lam, V, Q)."""
    for _ in range(SUBSPACE_STEPS):
        Q, _ = linalg.qr(M @ Q, mode="economic", check_finite=False)
    B = Q.T @ (M @ Q)
    lam, U = linalg.eigh((B + B.T) / 2, check_finite=False)
    lam, U = lam[::-1], U[:, ::-1]
    V = Q @ U
    return lam[:k], V[:, :k], V


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
    C : ndarray (d, d), symmetric
    n_components : int
    n_rows : float
        N, which scales the log-likelihood (and so the meaning of ``tol``, as scikit-learn).
    max_iter : int
    tol : float
        Stop when the log-likelihood gains less than ``tol``.
    floor, ceiling : float
        Bounds of each noise variance psi_j.
    start : ndarray (d, p) or None
        First basis of the subspace iteration (used only when d > DENSE_MAX_D).

    Returns
    -------
    W : ndarray (k, d)
    psi : ndarray (d,)
    loglik : list of float
    n_iter : int
    """
    C = np.asarray(C, dtype=np.float64)
    d = C.shape[0]
    k = int(n_components)
    var = np.clip(np.diag(C).copy(), floor, ceiling)
    psi = np.clip(np.ones(d), floor, ceiling)
    const = d * math.log(2.0 * math.pi) + k
    dense = d <= DENSE_MAX_D
    Q = start
    if not dense and Q is None:
        raise ValueError("start basis required for the subspace iteration")
    lls, old, W, it = [], -np.inf, np.zeros((k, d)), 0
    for it in range(1, int(max_iter) + 1):
        sp = np.sqrt(psi) + SMALL
        M = C / sp[:, None]
        M /= sp[None, :]
        if dense:
            lam, V = _top_dense(M, k)
        else:
            lam, V, Q = _top_subspace(M, k, Q)
        unexplained = float(np.trace(M) - lam.sum())
        W = (np.sqrt(np.maximum(lam - 1.0, 0.0))[:, None] * V.T) * sp
        ll = -0.5 * n_rows * (const + float(np.sum(np.log(np.maximum(lam, SMALL)))) + unexplained
                              + float(np.sum(np.log(psi))))
        lls.append(ll)
        if ll - old < tol:
            break
        old = ll
        psi = np.clip(var - np.sum(W * W, axis=0), floor, ceiling)
    return W, psi, lls, it


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
