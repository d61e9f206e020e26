"""A symmetric Gaussian release read through its products, its noise revealed lazily (issue 41).

A statistic ``S = Σ_r y_r y_rᵀ`` (d x d, rows ``y_r`` mapped and clipped into the unit ball)
can be handed to the release layer as :class:`RowProducts`: its rows, not the matrix.  The
layer then returns a :class:`ReleasedOperator` ``A = S + E`` instead of an array — the **same**
release (same plan entry, same key, same record, one observer call; the plan, the charge and
the record do not know the difference) — which answers products ``A V = Yᵀ(Y V) + E V`` without
ever forming S or E.  Cost ``n d m + d m²`` for ``m`` queried directions, against ``n d²`` to
form S and ``d²/2`` normals to draw E.

Why the law is the materialised release's.  The symmetric Gaussian noise of the release layer
(σ on the diagonal, σ/√2 above it, :mod:`~dpem_fast._engine._release`) is orthogonally
invariant: for any orthonormal basis ``B``, ``Bᵀ E B`` has its law (independent entries, σ² on
the diagonal, σ²/2 off it).  The operator keeps an orthonormal basis ``Q`` (d x m) of every
direction queried so far and ``E Q``.  Claim: given everything revealed (the queries, which are
functions of earlier answers, and ``E Q``), E is ``E Q Qᵀ + Q (E Q)ᵀ − Q (Qᵀ E Q) Qᵀ + W G Wᵀ``
with ``W`` any orthonormal basis of the complement of ``span Q`` and ``G`` a fresh scaled GOE of
size ``d − m``.  True for m = 0 (invariance); if it holds at m, a new block ``Qn`` (orthonormal,
in ``span W``, a function of what was revealed) completes to a basis ``[Qn, W']`` of the
complement, and the entries of ``G`` in it are independent: the ``(Qn, Qn)`` block is a scaled
GOE, the ``(W', Qn)`` block i.i.d. N(0, σ²/2), the ``(W', W')`` block the next fresh GOE.  So
the reveal ``E Qn = Q (E Q)ᵀ Qn + Qn B + (σ/√2) P g`` — ``B`` a fresh p x p GOE draw, ``g``
i.i.d. N(0, 1) of shape (d, p), ``P`` the projection onto the complement of ``span[Q, Qn]`` (whose
image ``P g`` has the law ``W' z``, z i.i.d. N(0, 1)) — has exactly the conditional law of the
materialised ``E Qn``, and the claim holds at ``m + p``.  Any method that reads A through
products (Lanczos, block Krylov) therefore outputs, in law, what it would output on the
materialised release; and so does the weighted trace ``Σ w_i A_ii`` (:meth:`ReleasedOperator.
weighted_trace`): its noise is ``tr(QᵀRQ · QᵀEQ) + 2 tr(QᵀR P E Q) + N(0, σ² ‖P R P‖²_F)``,
``R = diag(w)``, ``P = I − Q Qᵀ`` (the revealed part plus ``tr(Wᵀ R W G)``).  Seeded draws are
not the dense path's (another sampler on the same key), only their law is.

Randomness: the release's own sub-key (the one :func:`~dpem_fast._engine._release.add_noise`
would use), counter-based: each draw of ``L`` normals takes the next ``⌈L / SAMPLER_BLOCK⌉``
streams (``_rng.fill_normal`` with a stream offset), so the answers do not depend on the
thread count.

Rounding (issue 34's "Rounding", :mod:`~dpem_fast._engine._specs`): the products are summed
per block of at most ``TILE_ROWS`` rows (one ``dgemm`` pair each), the blocks' partials exactly
(``_contract.sum_blocks``), as the dense kernel sums ``S``.  A product's rounding is not the
dense sum's: each row's ``y_rᵀ v`` (length d) adds up to ``γ_d ‖y_r‖ ‖v‖`` per query, so over
``m`` orthonormal queries a changed row moves the answers by up to ``γ_d √m`` beyond what the
dense factor covers (about ``6·10⁻¹¹`` at d = 4096, m = 80) — reported, not widened.

The operator holds the exact rows: it is the release layer's answer to the model's update and
must not be kept, copied or pickled (:meth:`ReleasedOperator.__reduce__` refuses).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from .._dpcore import _contract, _moments
from .._dpcore import _rng as _core_rng
from .._dpcore._contract import SAMPLER_BLOCK
from .._threads import blas_single_thread

__all__ = ["RowProducts", "ReleasedOperator"]

#: rows per slab of a product (a slab of 16 rows stays in cache between its two products)
_SLAB = 16


class RowProducts:
    """The exact ``S = Σ_r y_r y_rᵀ`` held as its rows (blocks of float64 rows, in order);
    ``+`` joins the rows of disjoint parts (the engine's sum over superblocks)."""

    def __init__(self, blocks, d):
        self._blocks = [np.ascontiguousarray(b, dtype=np.float64) for b in blocks if b.shape[0]]
        self.shape = (int(d), int(d))

    def __add__(self, other):
        if not isinstance(other, RowProducts) or other.shape != self.shape:
            return NotImplemented
        return RowProducts(self._blocks + other._blocks, self.shape[0])

    def _parts(self):
        step = _moments.TILE_ROWS
        for b in self._blocks:
            for r0 in range(0, b.shape[0], step):
                yield b[r0:r0 + step]

    def _sum(self, parts, shape, n_threads):
        parts = list(parts)
        if not parts:
            return np.zeros(shape)
        return parts[0] if len(parts) == 1 else _contract.sum_blocks(np.stack(parts), n_threads)

    def _product(self, Y, V):
        # Y_bᵀ (Y_b V) by slabs of _SLAB rows, each read from memory once (still in cache for its
        # second product); the slabs add up in floats inside the block, as any block sum may
        out = np.zeros((Y.shape[1], V.shape[1]))
        for r0 in range(0, Y.shape[0], _SLAB):
            Z = Y[r0:r0 + _SLAB]
            out += Z.T @ (Z @ V)
        return out

    def __matmul__(self, V):
        """``S V`` (d x p): per block ``Y_bᵀ (Y_b V)``, the blocks summed exactly."""
        V = np.ascontiguousarray(V, dtype=np.float64)
        return self._sum((self._product(Y, V) for Y in self._parts()), V.shape, 1)

    def diagonal(self):
        """``diag S`` (exact statistic; never released by the operator)."""
        return self._sum((np.einsum("ij,ij->j", Y, Y) for Y in self._parts()), (self.shape[0],), 1)

    def dense(self, n_threads=1):
        """``S`` formed (for a mechanism the operator does not serve)."""
        with blas_single_thread():
            S = self._sum((Y.T @ Y for Y in self._parts()), self.shape, n_threads)
        return (S + S.T) / 2


class ReleasedOperator:
    """``A = S + E`` of one symmetric Gaussian release, read through products (module
    docstring): ``A @ V``, ``weighted_trace(w)`` (the last read: it ends the operator)."""

    def __init__(self, exact, sigma, key, n_threads=1):
        d = exact.shape[0]
        self.shape = (d, d)
        self.sigma = float(sigma)
        self._exact, self._key, self._nt = exact, np.array(key, dtype=np.uint32), int(n_threads)
        self._store_Q, self._store_EQ = np.empty((d, 0)), np.empty((d, 0))    # capacity, grown by doubling
        self._m, self._stream, self._ended = 0, 0, False

    _Q = property(lambda self: self._store_Q[:, :self._m])
    _EQ = property(lambda self: self._store_EQ[:, :self._m])

    def _append(self, Qn, EQn):
        m, p = self._m, Qn.shape[1]
        if m + p > self._store_Q.shape[1]:
            cap = min(self.shape[0], max(2 * (m + p), 32))
            for name in ("_store_Q", "_store_EQ"):
                grown = np.empty((self.shape[0], cap))
                grown[:, :m] = getattr(self, name)[:, :m]
                setattr(self, name, grown)
        self._store_Q[:, m:m + p] = Qn
        self._store_EQ[:, m:m + p] = EQn
        self._m = m + p

    def __reduce__(self):
        raise TypeError("a released operator holds the exact statistic: it cannot be pickled")

    def __repr__(self):
        return f"ReleasedOperator(shape={self.shape}, sigma={self.sigma:.6g})"

    @property
    def n_revealed(self):
        """Directions of E revealed so far (a function of the queries only)."""
        return self._Q.shape[1]

    def _normals(self, size, scale):
        out = np.empty(int(size))
        if size:
            _core_rng.fill_normal(self._key, self._stream, float(scale), out, self._nt)
            self._stream += -(-int(size) // SAMPLER_BLOCK)
        return out

    def _project_out(self, V, Q):
        # twice is enough (Giraud et al. 2005); once where no column lost more than ~30 % of its
        # norm (Kahan–Parlett: then a second pass changes nothing that matters)
        before = np.linalg.norm(V, axis=0)
        V = V - Q @ (Q.T @ V)
        if np.any(np.linalg.norm(V, axis=0) < 0.7 * before):
            V = V - Q @ (Q.T @ V)
        return V

    def _reveal(self, V):
        """Reveal E on the part of ``span V`` outside the revealed basis (module docstring)."""
        d, m = self._Q.shape
        if m >= d:
            return
        R = self._project_out(V, self._Q)
        U, s, _ = linalg.svd(R, full_matrices=False, check_finite=False)
        scale = max(float(np.max(np.abs(V))) if V.size else 0.0, np.finfo(float).tiny)
        keep = s > 1e-10 * scale * math.sqrt(d)
        if not np.any(keep):
            return
        Qn, _ = linalg.qr(self._project_out(U[:, keep], self._Q), mode="economic", check_finite=False)
        p = Qn.shape[1]
        if m + p > d:
            Qn, p = Qn[:, :d - m], d - m
        z = self._normals(p * p, self.sigma).reshape(p, p)
        B = np.triu(z, 1) * math.sqrt(0.5)
        B = B + B.T
        B[np.diag_indices(p)] = np.diag(z)
        g = self._normals(d * p, self.sigma * math.sqrt(0.5)).reshape(d, p)
        g = self._project_out(self._project_out(g, self._Q), Qn)     # P g: off span[Q, Qn]
        EQn = self._Q @ (self._EQ.T @ Qn) + Qn @ B + g
        self._append(Qn, EQn)

    def __matmul__(self, V):
        if self._ended:
            raise RuntimeError("the released operator was ended by weighted_trace")
        V = np.asarray(V, dtype=np.float64)
        vec = V.ndim == 1
        V = V.reshape(self.shape[0], -1)
        with blas_single_thread():
            self._reveal(V)
            # everything answered is A on span Q: the part of V the reveal judged numerically
            # inside span Q (below 1e-10 of V) is projected on it, never read noise-free
            C = self._Q.T @ V
            out = self._exact @ (self._Q @ C) + self._EQ @ C
        return out[:, 0] if vec else out

    def weighted_trace(self, w):
        """``Σ_i w_i A_ii`` (released: exact part plus the conditional law of the noise's part,
        module docstring).  Ends the operator (a later product would need to condition on it)."""
        if self._ended:
            raise RuntimeError("the released operator was ended by weighted_trace")
        self._ended = True
        w = np.asarray(w, dtype=np.float64)
        Q, EQ = self._Q, self._EQ
        if w.size and np.all(w == w[0]):            # R = w0 I: tr(QᵀEQ) w0 + N(0, σ² w0² (d − m))
            known = w[0] * float(np.einsum("ij,ij->", Q, EQ))
            sd = self.sigma * abs(float(w[0])) * math.sqrt(max(self.shape[0] - Q.shape[1], 0))
            return float(w @ self._exact.diagonal()) + known + float(self._normals(1, sd)[0])
        RQ = w[:, None] * Q
        QRQ = Q.T @ RQ
        QEQ = Q.T @ EQ
        QEQ = (QEQ + QEQ.T) / 2
        known = float(np.sum(QRQ * QEQ)) + 2.0 * float(np.sum(RQ * (EQ - Q @ QEQ)))
        var = float(w @ w) - 2.0 * float(np.sum((w * w)[:, None] * Q * Q)) + float(np.sum(QRQ * QRQ))
        noise = known + float(self._normals(1, self.sigma * math.sqrt(max(var, 0.0)))[0])
        return float(w @ self._exact.diagonal()) + noise
