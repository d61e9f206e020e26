"""The diagonal of a released operator, after its columns (issue 41; factor analysis).

:class:`~dpem_fast._engine._operator.ReleasedOperator` has released the columns ``A Q`` of
``A = S + E`` on an orthonormal basis ``Q`` (d x m; E the symmetric Gaussian, σ on the diagonal,
σ/√2 above it).  :meth:`~dpem_fast._engine._operator.ReleasedOperator.diagonal` then releases
``diag A`` — what a model reading the materialised release would read next — and ends the
operator.  With ``P = Q Qᵀ``, ``R = I − P`` and ``e_i = P e_i + R e_i``::

    A_ii = (P e_i)ᵀ A (P e_i) + 2 (R e_i)ᵀ A (P e_i) + (R e_i)ᵀ A (R e_i)

The first two terms are functions of the released columns only (``known``:
``2 rowsum(AQ ∘ Q) − diag(Q H Qᵀ)``, ``H = sym(Qᵀ A Q)``).  The third is
``diag(R S R) + diag(R E R)``, and the coordinates ``⟨R e_i e_iᵀ R, E⟩`` are orthogonal (Frobenius)
to every coordinate the columns revealed (``⟨sym(v q_jᵀ), ·⟩``: ``R q_j = 0``), so by the
isotropy of E they are independent of everything released, with covariance
``σ² ⟨R e_i e_iᵀ R, R e_j e_jᵀ R⟩ = σ² (R ∘ R)_ij``.  The release is therefore::

    diag = known + diag(R S R) + N + τ ξ,    N ~ N(0, σ² R ∘ R),  ξ ~ N(0, I),  τ = DIAGONAL_TAU σ

In exact arithmetic ``known + diag(RSR) + N`` has, jointly with the columns, the law of the
materialised release's diagonal (post-processing of the dense release: no privacy cost), and
``τ ξ`` is independent noise added to it (post-processing too; variance 10⁻⁶ of an entry's).

Sampler (released values only choose it).  ``R ∘ R = I − 2 diag(p) + P ∘ P``, ``p = diag P``
(an identity for any Q).  Where ``max p ≤ ½``: ``N = √(1 − 2p) ∘ z + diag(Q M Qᵀ)``, z standard
(scale σ) and M a fresh isotropic symmetric m x m draw (σ on the diagonal, σ/√2 above:
``Cov(q_iᵀ M q_i, q_jᵀ M q_j) = σ² (q_iᵀ q_j)² = σ² P_ij²``): O(d m²), d + m² normals.  Else
(some coordinate axis nearly inside span Q): ``N = diag(R F R)`` with a fresh isotropic d x d F
(O(d² m), d² normals).  ``diag(RSR) = Σ_r (R y_r) ∘ (R y_r)`` is read from the rows
(:meth:`~dpem_fast._engine._operator.RowProducts.projected_diagonal`).

Privacy with rounding (why τ).  The computed ``diag(RSR)`` carries float error, and ``R ∘ R``
can be singular (a coordinate axis inside span Q), so its noise N alone need not cover that
error; τ ξ does.  Treat the whole output, as the operator's module does, as one Gaussian
mechanism whose mean shift between neighbours is the exact shift plus the rounding shift, and
bound both in the noise's Mahalanobis norm:

* exact shift.  The revealed functionals ``L = [L_col; L_diag]`` of ``δS`` (the columns'
  coordinates, then ``⟨R e_i e_iᵀ R, δS⟩``) have Gram ``L L*`` with diagonal blocks ``G_cc`` (the
  columns', ``⪯ (1 + η)² I`` by the operator's check, η = ``m_max`` ·
  :data:`~dpem_fast._engine._operator.ORTHO_TOL`), ``G_dd = R² ∘ R²`` and a cross block X.  Q is
  orthonormal only to η: ``R² − R = −Q (I − QᵀQ) Qᵀ`` has norm ≤ (1 + η) η, so (Schur products
  do not increase the spectral norm) ``G_dd ⪯ R ∘ R + 2.1 η I``; and ``R q_j = Q (I − QᵀQ) e_j``
  (norm ≤ (1 + η) η) gives ``‖X‖ ≤ 3 √m_max η``.  The noise's covariance is
  ``σ² blockdiag(I, R ∘ R + (τ/σ)² I)``, which dominates ``σ² L L* / (1 + η)² (1 + 3√m_max η)``
  once ``(τ/σ)² ≥ (2.1 + 3 √m_max) η`` (10⁻⁶ against 2.3·10⁻¹¹ at m_max = 80; checked by
  :func:`~dpem_fast._engine._specs.operator_diagonal_rounding_factor`): the exact shift's
  Mahalanobis norm is at most ``(1 + η)(1 + 3√m_max η)^{1/2} ‖δS‖_F / σ``.
* rounding shift.  The columns' is the operator's (its factor); the diagonal's, ``δ_r``, has
  Mahalanobis norm at most ``‖δ_r‖₂ / τ`` (the covariance is ``⪰ τ² I``).  ``‖δ_r‖₂ ≤ B_r``
  (row-level replace-one, public n: only the replaced row's term, its part's float sum and the
  exact sum's final rounding differ), with ``ρ = 5 m_max γ_{d+m_max+2}`` one row's term error
  (ℓ2 over i): ``ĉ = fl(Qᵀ y)`` is within ``γ_d (1 + η)`` per entry, ``x̂_i = fl(y_i − q_iᵀ ĉ)``
  within ``ε_i = u |x_i| + γ_{d+m+2} (1 + η) Σ_j |q_ij|`` (``‖Σ_j |q_j|‖₂ ≤ m (1 + η)``),
  ``fl(x̂_i²)`` within ``u x̂_i² + ε_i (2 |x_i| + ε_i)``, ``‖x‖ ≤ 1 + η``; a part's float sum of at
  most b terms adds ``γ_b b (1 + ρ)(1 + η)²``; the exact sum's one rounding ``u n (1 + ρ)(1 + γ_b)
  (1 + η)²``; ``B_r = 2.02 (ρ + those two)``.

Minkowski: the whole shift's norm is at most
``φ_op (1 + 3√m_max η)^{1/2} Δ / σ + B_r / τ``; with ``τ = DIAGONAL_TAU σ`` and ``Δ ≥ 1`` (the second
moment's sensitivity, √2 under replace-one) that is at most ``φ Δ / σ`` for
``φ = φ_op (1 + 3√m_max η)^{1/2} + B_r / DIAGONAL_TAU``
(:func:`~dpem_fast._engine._specs.operator_diagonal_rounding_factor`, about ``1 + 5·10⁻⁷`` at
(400, 4096), m_max = 80): the plan's σ, calibrated to ``φ Δ``, covers it.  A model applies φ
wherever the diagonal may be read (a public test on d, k and the relation, before the charge);
row-level replace-one only (public n), as the operator's columns.
"""
from __future__ import annotations

import math

import numpy as np

from .._workspace import workspace

__all__ = ["DIAGONAL_TAU", "projected_diagonal", "released_diagonal"]

#: sd of the independent cover noise on the released diagonal, in units of σ (module docstring)
DIAGONAL_TAU = 1e-3


def projected_diagonal(parts, Q):
    """Per part ``Σ_r (R y_r) ∘ (R y_r)`` (R = I − Q Qᵀ; ``x = y − Q (Qᵀ y)``, squared, summed in
    floats over the part), as a list of d-vectors (the caller sums them exactly)."""
    out = []
    for Y in parts:
        X = workspace(Y.shape)            # huge pages: not faulted in on every fit
        np.matmul(Y @ Q, Q.T, out=X)
        np.subtract(Y, X, out=X)
        out.append(np.einsum("ij,ij->j", X, X))
    return out


def _symmetric_draw(normals, m, sigma):
    z = normals(m * m, sigma).reshape(m, m)
    M = np.triu(z, 1) * math.sqrt(0.5)
    M += M.T
    np.fill_diagonal(M, np.diagonal(z))
    return M


def released_diagonal(Q, D, R, exact, normals, sigma, tau=DIAGONAL_TAU):
    """``known + diag(RSR) + N + τ ξ`` (module docstring): the released columns as the operator
    holds them, ``A Q = Q U + R`` (U block upper triangular, ``D`` its diagonal blocks, R the
    columns' parts off the basis); ``exact`` = ``diag(RSR)`` of the rows, ``normals(size,
    scale)`` the operator's counter-based draws."""
    d, m = Q.shape
    p = np.einsum("ij,ij->i", Q, Q)
    cheap = m == 0 or float(np.max(p)) <= 0.5
    # known = 2 rowsum(AQ ∘ Q) − diag(Q H Qᵀ) with H = Qᵀ A Q = U, its upper blocks mirrored
    # (the operator's), i.e. 2 diag(Q sym(U) Qᵀ) + 2 rowsum(R ∘ Q) − diag(Q H Qᵀ)
    # = diag(Q D Qᵀ) + 2 rowsum(R ∘ Q) (2 sym(U) − H = D): no product with the d x m columns;
    # the cheap sampler's diag(Q M Qᵀ) joins it in one product with Q: diag(Q (M + D) Qᵀ)
    out = 2.0 * np.einsum("ij,ij->i", R, Q)
    if cheap:
        out += np.sqrt(np.maximum(1.0 - 2.0 * p, 0.0)) * normals(d, sigma)
        K = _symmetric_draw(normals, m, sigma) + D if m else D
    else:       # exact fallback: diag(R F R) = diag F − 2 rowsum((F Q) ∘ Q) + diag(Q (QᵀFQ) Qᵀ)
        F = _symmetric_draw(normals, d, sigma)
        FQ = F @ Q
        out += np.diagonal(F) - 2.0 * np.einsum("ij,ij->i", FQ, Q)
        K = Q.T @ FQ + D
    out += np.einsum("ij,ij->i", Q @ K, Q)
    return out + exact + normals(d, tau * sigma)
