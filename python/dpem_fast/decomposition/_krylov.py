"""Top eigenpairs of a released covariance read through its products (issue 41; post-processing).

PCA's matrix-free path: the second moment is released as an operator (:mod:`dpem_fast._engine.
_operator`, E revealed lazily with the law of the materialised release), so the eigensolver
may only multiply.  Block Krylov with full reorthogonalisation and Rayleigh–Ritz on the whole
basis: every product the operator answers reveals new directions of E, so a restarted method
(ARPACK) would pay for directions it throws away; the Krylov basis keeps them all.  Small blocks
(:data:`BLOCK`) and a deep basis converge at the spectrum's noise edge, where the eigenvalues
crowd, far better than wide blocks of the same size (at 80 columns, d = 4096, a spike near the
edge: held-out energy 0.645 of the best with blocks of 8 and 0.677 with 4, against 0.681 for
the exact eigenvectors and 0.42 with blocks of 20); 8 columns a block halve the products' time
against 4 (they are memory-bound at 4).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

from .._dpcore import _basis
from .._workspace import workspace

__all__ = ["BLOCK", "ReleasedCovariance", "RowsCovariance", "krylov_columns", "top_eigenpairs_krylov", "uses_operator"]

#: columns per Krylov block
BLOCK = 8
#: relative residual at which the top-k Ritz pairs are converged
TOL = 1e-8


def krylov_columns(k):
    """The largest Krylov basis for ``k`` components (public): ``max(80, 8 k)`` columns."""
    return max(80, 8 * int(k))


def uses_operator(d, k):
    """Public: the released second moment is read through its products (never formed) where its
    Krylov basis is small against d (at most a quarter of it)."""
    return 4 * krylov_columns(k) <= int(d)


class ReleasedCovariance:
    """``diag(r) (A / n − m mᵀ + c I) diag(r)`` as products, A a released operator (the
    covariance in the original units up to one public factor, :func:`~._dp_pca.scaled_covariance`)."""

    def __init__(self, A, n, mean, diag_add, r):
        self.A, self.n, self.c = A, float(n), float(diag_add)
        self.r = np.asarray(r, dtype=np.float64)
        self.rm = self.r * np.asarray(mean, dtype=np.float64)
        self.shape = A.shape
        self._ones = bool(np.all(self.r == 1.0))        # equal scales: no diag(r) products
        self._u = self.rm.copy()                        # rm off the solver's basis (reveal)
        self._qm = np.zeros(0)                          # the basis' coordinates of rm

    def __matmul__(self, V):
        W = V if self._ones else self.r[:, None] * V
        out = self.A @ W                # then the same operations, in place (no temporaries)
        out /= self.n
        out -= np.outer(self.rm, self.rm @ V)
        out += self.c * W
        if not self._ones:
            out *= self.r[:, None]
        return out

    def reveal(self, V):
        """The solver's next block ``V`` (orthonormal, orthogonal to its basis Q; equal scales
        only): ``(Qᵀ C V, Vᵀ C V, W)``, W the part of ``C V`` off ``span [Q, V]`` (projected
        once), from the operator's released coordinates of ``A V``
        (:meth:`~dpem_fast._engine._operator.ReleasedOperator.reveal_block`) and the mean's
        coordinates ``Qᵀ m`` kept here: no product with the basis.  None where the operator does
        not take V as given (then ``C @ V``; the solver's basis is then no longer the operator's,
        and this is not called again)."""
        # products where the scales differ, A is not a released operator (any symmetric product
        # will do), or it revealed a block not seen here
        if not self._ones or getattr(self.A, "revealed", None) != self._qm.size:
            return None
        got = self.A.reveal_block(V)
        if got is None:
            return None
        K, B, R = got
        # C V = Q (K/n − (Qᵀm) aᵀ) + V (B/n − a aᵀ + c I) + (R/n − u aᵀ), a = Vᵀ m, u = m off [Q, V]
        a = V.T @ self.rm
        u = self._u
        u -= V @ (V.T @ u)
        told = K / self.n
        told -= np.outer(self._qm, a)
        tnew = B / self.n
        tnew -= np.outer(a, a)
        tnew.flat[::tnew.shape[0] + 1] += self.c
        W = R / self.n                  # column-major as R: the rank-one update in place
        W = blas.dger(-1.0, u, a, a=W, overwrite_a=True)
        self._qm = np.concatenate([self._qm, a])
        return told, tnew, W

    def reserve(self, cols):
        """Room in the operator for ``cols`` directions (public)."""
        self.A.reserve(cols)

    def diagonal(self):
        """The released diagonal (ends the operator: the products first)."""
        return self.A.diagonal() * (self.r * self.r) / self.n - self.rm * self.rm + self.c * (self.r * self.r)

    def trace(self):
        """The released trace (ends the operator: the eigenpairs first)."""
        r2 = self.r * self.r
        return self.A.weighted_trace(r2) / self.n - float(self.rm @ self.rm) + self.c * float(np.sum(r2))


class RowsCovariance:
    """``S / n − m mᵀ`` as products, ``S = Σ_r y_r y_rᵀ`` the exact second moment held as its
    rows (:class:`~dpem_fast._engine._operator.RowProducts`): the non-private fit's
    (``epsilon=inf``) covariance where the private fit reads a released operator, with the
    same solver.  Nothing here is released: it serves only a fit that is not private."""

    def __init__(self, S, n, mean):
        self.S, self.n = S, float(n)        # (products, trace, diagonal: factor analysis' EM reads these)
        self.m = np.asarray(mean, dtype=np.float64)
        self.shape = S.shape

    def __matmul__(self, V):
        out = self.S @ V
        out /= self.n
        out -= np.outer(self.m, self.m @ V)
        return out

    def diagonal(self):
        """``diag(S) / n − m ∘ m``."""
        return self.S.diagonal() / self.n - self.m * self.m

    def trace(self):
        """``tr(S) / n − ‖m‖²`` (the rows' squared norms, summed per part)."""
        return self.S.projected_trace() / self.n - float(self.m @ self.m)


def _orthonormal(W, Q, told, second=True):
    """``(V, R)``: ``W`` (already projected off ``span Q`` once: the caller's) off ``span Q`` once
    more (Gram–Schmidt's second pass; in place) unless ``second`` is False, then ``V R`` its QR.
    Where a column kept less than 10⁻³ of ``top`` (the block's largest norm before the
    projections, ``√max(told + ‖R e_j‖²)``, ``told`` its columns' squared norms along Q: near an invariant subspace the rounding left along Q, ~10⁻¹⁶ of the block, is
    then above 10⁻¹³ of V's column; at an exact one V's column is rounding's direction), V is
    orthogonalised against Q again and R updated (``C Q = Q T + V R`` still holds).  Without the
    second pass W is left as it is (the caller may redo it with one)."""
    if second and Q.shape[1]:
        W -= Q @ (Q.T @ W)
    V, R = _qr(W)
    top = math.sqrt(float(np.max(told + _col_norms2(R)))) if Q.shape[1] else 0.0
    if Q.shape[1] and np.any(np.abs(np.diag(R)) < 1e-3 * top):
        for _ in range(2):
            V = V - Q @ (Q.T @ V)
        V, R2 = _qr(V)
        R = R2 @ R                          # W = (I − Q Qᵀ) V R = V' (R2 R): the recurrence holds
    return V, R


@functools.lru_cache(maxsize=8)
def _qr_lwork(d, p):
    return max(int(lapack.dgeqrf_lwork(d, p)[0]), 1)


def _qr(W):
    """``scipy.linalg.qr(W, mode="economic")`` (the same LAPACK calls, the same bits) without its
    checks and workspace queries: a tall block's QR is a Krylov step's largest small cost.  (Not
    Cholesky QR, ~2x faster: its signs, R's diagonal positive, are not Householder's, and the
    operator's noise on a direction depends on its sign: another draw, not the same bits.)"""
    d, p = W.shape
    if p > d or p == 0:
        return linalg.qr(W, mode="economic", check_finite=False)
    lwork = _qr_lwork(d, p)
    qr, tau, _, info = lapack.dgeqrf(W, lwork=lwork)
    if info:
        raise np.linalg.LinAlgError(f"dgeqrf failed ({info})")
    R = np.triu(qr[:p])
    V, _, info = lapack.dorgqr(qr, tau, lwork=lwork, overwrite_a=True)
    if info:
        raise np.linalg.LinAlgError(f"dorgqr failed ({info})")
    return V, R


def _c_order(M):
    """``M`` C-contiguous (a Fortran-order block transposed by the kernel: ~3x numpy's copy)."""
    if M.flags.c_contiguous or not M.flags.f_contiguous:
        return np.ascontiguousarray(M)
    out = np.empty(M.shape)
    _basis.transpose(M.T, out)
    return out


def _col_norms2(M):
    return np.einsum("ij,ij->j", M, M)


def top_eigenpairs_krylov(C, k, start, max_cols, tol=TOL, pairs=True):
    """The ``k`` largest Ritz pairs of the symmetric ``C`` (products ``C @ V`` only), descending:
    block Krylov from the data-independent ``start`` (d x ``BLOCK``), at most ``max_cols``
    columns, stopped earlier once every top-k residual ``‖C u − θ u‖`` is below ``tol``·|θ₁|
    (a function of the released products: post-processing).  The residuals are read off the
    block recurrence ``C Q = Q T + W R E_lastᵀ`` (``W R`` the QR of the last block's products off
    ``span Q``, which the next block needs anyway): ``‖R s_last‖``, ``s_last`` the Ritz vector's
    last block of coordinates — exact up to rounding, no product with the d x m basis.

    Where ``C`` has ``reveal`` (:class:`ReleasedCovariance`), a block's new column of
    ``T = Qᵀ C Q`` and its part off the basis come from the released coordinates (projected off
    the basis once, by the operator), and the next block is that part's QR as it is: the
    operator checks every block it takes to be orthonormal to its basis to ``ORTHO_TOL``
    (~10⁻¹⁶ measured after one projection in these noisy bases) and declines it, revealing
    nothing, otherwise; the block is then redone with Gram–Schmidt's second pass and offered
    again.  Else (or once ``reveal`` declines that too) ``T``'s column is ``Qᵀ (C V)``, the
    first pass its coefficients, and the second pass always follows.

    ``pairs=False``: the whole basis only, ``(Q, sym(T))`` at ``max_cols`` columns (no Ritz pair,
    no early stop: a caller that keeps the basis, factor analysis)."""
    d = C.shape[0]
    max_cols = min(int(max_cols), d)
    Q = workspace((max_cols, d)).T          # huge pages (not faulted in on every fit), column-major
    T = np.empty((max_cols, max_cols))
    if hasattr(C, "reserve"):
        C.reserve(max_cols)
    reveal = getattr(C, "reveal", None)
    start = np.asarray(start, dtype=np.float64)
    V = _orthonormal(start.copy(), Q[:, :0], 0.0)[0]
    m, W, told = 0, None, 0.0
    while True:
        p = min(V.shape[1], max_cols - m)
        src = V[:, :p]                  # the QR's (Fortran order): copied into Q as it is
        V = _c_order(src)
        got = reveal(V) if reveal is not None else None
        if got is None and reveal is not None and W is not None:
            # declined after one projection: Gram–Schmidt's second pass, offered again
            src = _orthonormal(W, Q[:, :m], told)[0][:, :p]
            V = _c_order(src)
            got = reveal(V)
        Q[:, m:m + p] = src
        if got is None:
            reveal = None
            CV = C @ V
            col = Q[:, :m + p].T @ CV                   # the new columns of Qᵀ C Q
            T[:m + p, m:m + p] = col
            W = CV - Q[:, :m + p] @ col                 # Gram–Schmidt's first pass
        else:
            T[:m, m:m + p], T[m:m + p, m:m + p], W = got
        told = _col_norms2(T[:m + p, m:m + p])
        T[m:m + p, :m] = T[:m, m:m + p].T
        m += p
        last = m >= max_cols
        if not last:
            V, R = _orthonormal(W, Q[:, :m], told, second=reveal is None)
        elif not pairs:
            return Q[:, :m].copy(), (T[:m, :m] + T[:m, :m].T) / 2
        if pairs and (last or (m >= 2 * k and (m // p) % 2 == 0)):    # every other block from 2k columns
            kk = min(k, m)                  # the top kk pairs only (dsyevr's subset: ~30 % less)
            theta, S = linalg.eigh((T[:m, :m] + T[:m, :m].T) / 2, check_finite=False,
                                   subset_by_index=[m - kk, m - 1])
            theta, S = theta[::-1], S[:, ::-1]
            if last:
                break
            Rs = R @ S[m - p:m]
            if np.all(np.sqrt(np.einsum("ij,ij->j", Rs, Rs)) <= tol * max(abs(theta[0]), np.finfo(float).tiny)):
                break
    return theta, (np.ascontiguousarray(S.T) @ Q[:, :m].T).T      # Q S from Q's rows (C-contiguous)
