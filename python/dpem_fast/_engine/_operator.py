"""A symmetric Gaussian release read through its products, its noise revealed lazily (issue 41).

A statistic ``S = Σ_r y_r y_rᵀ`` (d x d, rows ``y_r`` mapped and clipped into the unit ball)
can be handed to the release layer as :class:`RowProducts`: its rows, not the matrix.  The
layer then returns a :class:`ReleasedOperator` ``A = S + E`` instead of an array — the **same**
release (same plan entry, same key, same record, one observer call; the plan, the charge and
the record do not know the difference) — which answers products ``A V = Yᵀ(Y V) + E V`` without
ever forming S or E.  Cost ``n d m + d m²`` for ``m`` queried directions, against ``n d²`` to
form S and ``d²/2`` normals to draw E.

What is released, and why it is the materialised release in law.  The symmetric Gaussian
noise of the release layer (σ on the diagonal, σ/√2 above it, :mod:`~dpem_fast._engine._release`)
is the isotropic Gaussian N(0, σ²) on the space of symmetric matrices with the Frobenius inner
product: for any symmetric ``U`` with ``‖U‖_F = 1``, ``⟨U, E⟩ ~ N(0, σ²)``, and orthogonal ``U``'s
give independent draws.  The materialised release is ``S + E``; any orthonormal set of
coordinates ``⟨U_t, S + E⟩`` chosen adaptively (each ``U_t`` orthogonal to the earlier ones and a
function of their values) is, in law, the same coordinates read off the materialised matrix,
and its privacy is that of the one Gaussian mechanism with sensitivity ``‖δS‖_F``: the
coordinates of ``δS`` on an orthonormal set have norm at most ``‖δS‖_F``.

The operator keeps an orthonormal basis ``Q`` (d x m) of every direction queried so far and the
released columns ``AQ`` (d x m), held as their coordinates ``AQ = Q U + R`` (below).  A query
``V`` first extends ``Q`` by a block ``Qn`` spanning the part of ``V`` outside ``span Q`` (below
10⁻¹⁰ of V it counts as inside), then is answered as ``AQ (Qᵀ V)`` — from released columns only,
never from a new product with the exact rows.  A block already orthonormal and orthogonal to Q
to :data:`ORTHO_TOL` = 10⁻¹⁴ (a Krylov solver's: ~2·10⁻¹⁶ measured at d = 4096, 1024 and 784 after
one projection) is ``Qn`` exactly as given (not even normalised), its part along Q (below 10⁻¹⁴)
not answered; :meth:`ReleasedOperator.reveal_block` takes only such blocks and returns their
coordinates, so the solver's basis is the operator's, column for column, and it reads ``Qᵀ C Q``
and the next block's raw part from them (no product of its own with the basis for them).  The
coordinates below are orthonormal only to the level of the floats either way (the general
path's QR leaves ~10⁻¹⁵ too): every block is checked (post-processing of released values) to
deviate by at most :data:`ORTHO_TOL` per entry of ``[Q, Qn]ᵀ[Q, Qn] − I`` (so each column's norm
is 1 within 10⁻¹⁴), orthogonalised once more where it does not (a solver's block is declined
instead, nothing revealed), and dropped (nothing new revealed) should that fail too.  So the
basis' Gram matrix G has ``‖G − I‖₂ ≤ m_max ORTHO_TOL = η`` and the coordinate map's norm is at
most ``1 + η`` per side: the widening's ``(1 + η)²`` factor
(:func:`~dpem_fast._engine._specs.operator_rounding_factor`, ~1 + 2·10⁻¹² at m_max = 80).  The
new columns ``A Qn`` release exactly the coordinates not yet released, with P the projection
off ``span [Q, Qn]``:

* ``Qᵀ A Qn = (A Q)ᵀ Qn``: already released (symmetry), not read again from S;
* ``Qnᵀ A Qn = sym(Qnᵀ S Qn) + B``, ``B`` a fresh p x p draw (σ on the diagonal, σ/√2 above):
  the coordinates ``⟨q_i q_iᵀ, ·⟩`` and ``⟨(q_i q_jᵀ + q_j q_iᵀ)/√2, ·⟩``;
* ``P A Qn = P (S Qn + g)``, ``g`` i.i.d. N(0, σ²/2) of shape (d, p): the coordinates
  ``⟨(w q_jᵀ + q_j wᵀ)/√2, ·⟩`` for an orthonormal basis ``w`` of the complement (computed as
  ``R_n = X − Q (Qᵀ X)`` (twice where a column lost more than ~30 % of its norm to Q), then off
  ``Qn``, ``X = S Qn + g``).

The columns are kept as these coordinates: ``A Qn = Q K + Qn (sym(H) + B) + R_n``, i.e.
``AQ = Q U + R`` with ``U`` (m x m) block upper triangular (block j's column: ``K`` over the
blocks before it, its own ``sym(H) + B``) and ``R`` the ``R_n``'s; ``K`` of a later block is
``(Q U + R)ᵀ Qn = Rᵀ Qn + Uᵀ (Qᵀ Qn)`` (``Qᵀ Qn`` from its check: below 10⁻¹⁴), the released
columns read against Qn.  So ``Qᵀ A Q`` is U with its strictly upper blocks mirrored: exactly
symmetric by construction, and a rounding difference between two
routes to the same entry is never released without noise.  The weighted trace
``Σ_i w_i A_ii`` (:meth:`ReleasedOperator.weighted_trace`, R = diag(w)) is
``tr(QᵀRQ QᵀAQ) + 2 tr(QᵀR P AQ)`` (released columns; ``w tr(U)`` for constant weights) plus the one new coordinate
``⟨PRP, S⟩ + N(0, σ² ‖PRP‖²_F)`` (``PRP`` is orthogonal to every revealed coordinate); it is
computed for constant weights only (PCA's equal scales) — for other weights the new coordinate
is ``tr(PS)`` with R's mean on the complement, ``tr(PR)/(d − m)``, as its weight (an estimate,
post-processing).  Seeded draws are not the dense path's (another sampler on the same key),
only their law is.

Randomness: the release's own sub-key (the one :func:`~dpem_fast._engine._release.add_noise`
would use), counter-based: each draw of ``L`` normals takes the next ``⌈L / SAMPLER_BLOCK⌉``
streams (``_rng.fill_normal`` with a stream offset), so the answers do not depend on the
thread count.

Rounding (:mod:`~dpem_fast._engine._specs`, "Rounding").  A column ``S q`` is summed as the
dense kernel sums S — per block of at most ``b = TILE_ROWS`` rows in floats, the blocks'
partials exactly (``_contract.sum_blocks``) — but a row's term ``y_r (y_rᵀ q)`` is its exact
value up to ``d + 2`` rounded operations, not 5 (BLAS: a d-term dot product and a product; the
fused kernel ``_rowprod`` for a block of 8 columns: ``y_rᵀ q`` an fma chain of d rounded
operations from 0, each entry of the block's column an fma chain over its rows in order, so
``d + 1`` for the term and the block's ``b`` for its sum, the same order on every path and
thread count): (e) holds with ``γ_{b+d+5}``, i.e. the factor
:func:`~dpem_fast._engine._specs.float64_rounding_factor` at ``b + d`` rows per block bounds
one column's rounding change ``e Δ`` (``‖T_r‖ ≤ ‖y_r‖² ≤ 1``).  The released coordinates of the
``m ≤ m_max`` columns weigh a column's error by at most √2, so together by ``√(2 m_max) e Δ``.
The trace's new coordinate, normalised by ``‖PRP‖_F = √(d − m) ≥ 1`` (R = I), has per-row
terms ``‖y_r‖² − ‖Qᵀ y_r‖²``, each sum of squares exact up to ``γ_{d+m+5}`` of its value (at most
``‖y_r‖²``): at most ``2 e' Δ`` with ``e'`` at ``b + d + 2 m_max`` rows per block.  ``‖Qᵀ y_r‖²``
is summed while the blocks are read (:meth:`RowProducts.products`: each ``q_jᵀ y_r`` the slab
product's (or the kernel's fma chain's) d-term dot product, its square, per block p of them
(the kernel: an fma chain of the p squares), then over the blocks — m − 1
additions of m squares in all, any order: the same count as one pass with Q), the rows then per
block of at most b: the bound is unchanged, and the trace reads only the rows'
``‖y_r‖²`` (the clip's d-term sums where it kept them, else its own; no product with Q).  The slabs (:data:`_SLAB` rows) only reorder a block's sum (any order within a
block is covered).
:func:`~dpem_fast._engine._specs.operator_rounding_factor` is ``1 + (√(2 m_max) + 2) e'`` (``e' ≥ e``; the two groups
of coordinates add by Minkowski).  This holds where the row count is public (row-level
replace-one: only the replaced row's block differs); DPPCA runs the matrix-free path only there
(add/remove moves every row's block, and the bound would grow with the public row cap) and
applies the factor wherever the path may run (a public test on d, k and the relation), about
``1 + 7·10⁻⁸`` at d = 4096, m_max = 80.

The operator holds the exact rows: it is the release layer's answer to the model's update and
must not be kept, copied or pickled (:meth:`ReleasedOperator.__reduce__` refuses).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from scipy import linalg

from .._dpcore import _basis, _contract, _moments, _rowprod
from .._dpcore import _rng as _core_rng
from .._dpcore._contract import SAMPLER_BLOCK
from .._threads import blas_single_thread
from .._workspace import workspace
from ._diagonal import projected_diagonal, released_diagonal

__all__ = ["RowProducts", "ReleasedOperator"]

#: largest deviation from orthonormality (entries of ``Qnᵀ Qn − I`` and ``Qᵀ Qn``) of a query block
#: taken as the new directions as it is (a Krylov solver's blocks, orthogonalised as the general
#: path orthogonalises: ≤ 2.2·10⁻¹⁵ measured); anything further is orthogonalised here
ORTHO_TOL = 1e-14      # == _specs.OPERATOR_ORTHO_TOL (a test checks; _specs imports this module's sum)

#: rows per slab of a product (a slab stays in cache between its two products; 24 rows measured
#: 12 % faster than 16 at (400, 4096) x 8 with OpenBLAS, 32 or more twice slower)
_SLAB = 24


def _stores(d, cap):
    """The basis' and its released columns' stores (d x ``cap`` each, column-major: the first m
    columns are one contiguous block, read whole by every product), in one workspace."""
    both = workspace((2, int(cap), int(d)))
    return both[0].T, both[1].T


def _orthonormal_to_tol(Qn, QtQn):
    """Whether the block ``Qn`` is orthonormal, and orthogonal to the basis (``QtQn = Qᵀ Qn``), to
    :data:`ORTHO_TOL` per Gram entry (the widening's assumption, module docstring)."""
    G = Qn.T @ Qn
    G.flat[::G.shape[0] + 1] -= 1.0
    return np.max(np.abs(G)) <= ORTHO_TOL and (QtQn.size == 0 or np.max(np.abs(QtQn)) <= ORTHO_TOL)


@functools.lru_cache(maxsize=4)
def _upper(p):
    """The strictly upper triangle of a p x p matrix, as a mask (read-only)."""
    mask = np.triu(np.ones((p, p), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def _put_columns(rows, V):
    """A store's next columns (given as its rows, ``rows``) set to V's: the transposing kernel
    for a C-contiguous V (~2x numpy's strided copy), else numpy."""
    if V.flags.c_contiguous and V.dtype == np.float64:
        _basis.transpose(V, rows)
    else:
        rows[...] = V.T


def _tdot(Qt, V):
    """``Qt V`` for a store's columns as rows (``Qt``, C-contiguous) and a C-contiguous block:
    the fixed-order kernel for 8 columns (``_basis``), else BLAS."""
    if V.shape[1] == _basis.COLUMNS and _basis.FAST and V.flags.c_contiguous:
        out = np.empty((Qt.shape[0], V.shape[1]))
        _basis.tdot8(Qt, V, out)
        return out
    return Qt @ V


def _colsq(X):
    """X's columns' squared norms (the kernel for 8 columns)."""
    if X.shape[1] == _basis.COLUMNS and _basis.FAST and X.flags.c_contiguous:
        out = np.empty(X.shape[1])
        _basis.colsq8(X, out)
        return out
    return np.einsum("ij,ij->j", X, X)


def _subtract(Qt, C, X):
    """``X −= Qtᵀ C`` in place (X C-contiguous): the kernel for 8 columns, else BLAS."""
    if X.shape[1] == _basis.COLUMNS and _basis.FAST:
        _basis.sub8(Qt, np.ascontiguousarray(C), X)
    elif Qt.shape[0]:
        X -= Qt.T @ C


class RowProducts:
    """The exact ``S = Σ_r y_r y_rᵀ`` held as its rows (blocks of float64 rows, in order) and,
    where given, the rows' squared norms (one float64 d-term sum each: the clip's,
    :func:`~dpem_fast._preprocess.scale_and_clip`); ``+`` joins the rows of disjoint parts (the
    engine's sum over superblocks)."""

    def __init__(self, blocks, d, sq_norms=None):
        keep = [i for i, b in enumerate(blocks) if b.shape[0]]
        self._blocks = [np.ascontiguousarray(blocks[i], dtype=np.float64) for i in keep]
        self._norms = None if sq_norms is None else [np.asarray(sq_norms[i], dtype=np.float64) for i in keep]
        self.shape = (int(d), int(d))

    def __add__(self, other):
        if not isinstance(other, RowProducts) or other.shape != self.shape:
            return NotImplemented
        norms = None if self._norms is None or other._norms is None else self._norms + other._norms
        return RowProducts(self._blocks + other._blocks, self.shape[0], norms)

    def _parts(self, norms=False):
        step = _moments.TILE_ROWS
        for i, b in enumerate(self._blocks):
            for r0 in range(0, b.shape[0], step):
                yield (b[r0:r0 + step], self._norms[i][r0:r0 + step]) if norms else b[r0:r0 + step]

    def _sum(self, parts, shape, n_threads):
        parts = list(parts)
        if not parts:
            return np.zeros(shape)
        return parts[0] if len(parts) == 1 else _contract.sum_blocks(np.stack(parts), n_threads)

    def _product(self, Y, V):
        # Y_bᵀ (Y_b V) and each row's ‖Vᵀ y_r‖² (its p squares summed), for the trace's new
        # coordinate: the fused kernel for a Krylov block of 8 columns (fma chains in a fixed
        # order, _rowprod), else by slabs of _SLAB rows, each read from memory once (still in
        # cache for its second product), the slabs added in floats inside the block, as any
        # block sum may
        if V.shape[1] == _rowprod.COLUMNS and _rowprod.FAST:
            out, sq = np.empty((Y.shape[1], V.shape[1])), np.empty(Y.shape[0])
            _rowprod.products8(Y, V, out, sq)
            return out, sq
        out = np.zeros((Y.shape[1], V.shape[1]))
        sq = np.empty(Y.shape[0])
        for r0 in range(0, Y.shape[0], _SLAB):
            Z = Y[r0:r0 + _SLAB]
            W = Z @ V
            out += Z.T @ W
            np.einsum("ij,ij->i", W, W, out=sq[r0:r0 + _SLAB])
        return out, sq

    def products(self, V):
        """``(S V, sq)``: per block ``Y_bᵀ (Y_b V)``, the blocks summed exactly, and per part
        (:meth:`_parts`, in order) each row's ``‖Vᵀ y_r‖²`` — one read of the rows."""
        V = np.ascontiguousarray(V, dtype=np.float64)
        done = [self._product(Y, V) for Y in self._parts()]
        return self._sum((o for o, _ in done), V.shape, 1), [q for _, q in done]

    def __matmul__(self, V):
        """``S V`` (d x p): per block ``Y_bᵀ (Y_b V)``, the blocks summed exactly."""
        return self.products(V)[0]

    def row_sum(self, n_threads=1):
        """``Σ_r y_r`` (the sum statistic of the same rows), per part, the parts summed exactly
        as the dense kernel sums it."""
        return self._sum((np.sum(Y, axis=0) for Y in self._parts()), (self.shape[0],), n_threads)

    def projected_trace(self, sq=None):
        """``tr(P S) = Σ_r (‖y_r‖² − ‖Qᵀ y_r‖²)``, ``P = I − Q Qᵀ``, given per part the rows'
        ``‖Qᵀ y_r‖²`` accumulated over the blocks of Q by :meth:`products` (exact statistic; the
        operator releases it only with noise); ``sq`` None: ``tr S`` (the non-private fit's).  Each row's term is two sums of squares (of d,
        and of m dot products of d terms, summed per block then over the blocks: m − 1
        additions in all), so its rounding is at most ``γ_{d+m+5}`` times ``2 ‖y_r‖²`` (module
        docstring, "Rounding")."""
        def part(y2, s):
            return np.array([float(np.sum(y2)) - (0.0 if s is None else float(np.sum(s)))])
        rows = self._parts(norms=True) if self._norms is not None else (
            (Y, np.einsum("ij,ij->i", Y, Y)) for Y in self._parts())
        sq = itertools.repeat(None) if sq is None else sq
        return float(self._sum((part(y2, s) for (_, y2), s in zip(rows, sq)), (1,), 1)[0])

    def diagonal(self, n_threads=1):
        """``diag S = Σ_r y_r ∘ y_r`` (exact statistic: the non-private fit's; the operator
        releases it only with noise), per part in floats, the parts summed exactly."""
        return self._sum((np.einsum("ij,ij->j", Y, Y) for Y in self._parts()), (self.shape[0],), n_threads)

    def projected_diagonal(self, Q):
        """``diag(R S R) = Σ_r (R y_r) ∘ (R y_r)``, ``R = I − Q Qᵀ`` (exact statistic; the operator
        releases it only with noise): per part in floats, the parts summed exactly
        (:mod:`~dpem_fast._engine._diagonal`, its rounding bound)."""
        Q = np.ascontiguousarray(Q, dtype=np.float64)
        with blas_single_thread():
            return self._sum(projected_diagonal(self._parts(), Q), (self.shape[0],), 1)

    def dense(self, n_threads=1):
        """``S`` formed (for a mechanism the operator does not serve)."""
        with blas_single_thread():
            S = self._sum((Y.T @ Y for Y in self._parts()), self.shape, n_threads)
        return (S + S.T) / 2


class ReleasedOperator:
    """``A = S + E`` of one symmetric Gaussian release, read through products (module
    docstring): ``A @ V``, :meth:`reveal_block` (a solver's next block: its coordinates),
    ``weighted_trace(w)`` (the last read: it ends the operator).

    The released columns are held as their coordinates: ``A Q = Q U + R``, ``U`` (m x m) block
    upper triangular (block j's column: ``Qᵀ A Q_j`` against the basis up to and including its
    own block, the released ``K`` and ``sym(H) + B``), ``R_j`` the released part of ``A Q_j`` off
    the basis as it stood (``P (S Q_j + g)``).  ``QᵀAQ`` is U with its strictly upper blocks
    mirrored: exactly symmetric by construction."""

    def __init__(self, exact, sigma, key, n_threads=1):
        d = exact.shape[0]
        self.shape = (d, d)
        self.sigma = float(sigma)
        self._exact, self._key, self._nt = exact, np.array(key, dtype=np.uint32), int(n_threads)
        self._store_Q, self._store_R = _stores(d, 0)      # capacity, grown by doubling
        self._U = np.zeros((0, 0))
        self._m, self._stream, self._ended = 0, 0, False
        self._starts = []               # each revealed block's first column
        self._as_given = True           # every block so far a query block taken exactly as given
        self._sq = [np.zeros(Y.shape[0]) for Y in exact._parts()]    # rows' ‖Qᵀ y_r‖², per part

    _Q = property(lambda self: self._store_Q[:, :self._m])
    _R = property(lambda self: self._store_R[:, :self._m])
    #: the number of directions revealed so far (post-processing: of the queries and released values)
    revealed = property(lambda self: self._m)

    @property
    def _AQ(self):
        """The released columns ``A Q = Q U + R``, formed (a general query's answer, varying trace
        weights)."""
        m = self._m
        return self._Q @ self._U[:m, :m] + self._R

    def reserve(self, cols):
        """Room for ``cols`` revealed directions (a solver's largest basis; public): no regrowth."""
        self._grow(min(self.shape[0], int(cols)))

    def _grow(self, cap):
        m = self._m
        if cap > self._store_Q.shape[1]:
            Q, R = _stores(self.shape[0], cap)
            Q[:, :m], R[:, :m] = self._store_Q[:, :m], self._store_R[:, :m]
            U = np.zeros((cap, cap))
            U[:m, :m] = self._U[:m, :m]
            self._store_Q, self._store_R, self._U = Q, R, U

    def _room(self, p):
        m = self._m
        if m + p > self._store_Q.shape[1]:
            self._grow(min(self.shape[0], max(2 * (m + p), 32)))

    def _append(self, Qn, staged=False):
        """``Qn`` appended to the basis (already in the store's next columns where ``staged``);
        returns the store's view for its columns' part off the basis (the caller fills it, and
        U's new columns, before any other read)."""
        m, p = self._m, Qn.shape[1]
        if not staged:
            self._room(p)
            self._store_Q[:, m:m + p] = Qn
        self._starts.append(m)
        self._m = m + p
        return self._store_R[:, m:m + p]

    def _stage(self, V):
        """``(C, ok)``: ``C = Qᵀ V`` and whether V is orthonormal and orthogonal to the basis to
        :data:`ORTHO_TOL` per Gram entry (:func:`_orthonormal_to_tol`'s test), from one product
        ``[Q, V]ᵀ V`` with V written into the store's next columns (not yet in the basis:
        :meth:`_append` with ``staged`` takes it)."""
        m, p = self._m, V.shape[1]
        self._room(p)
        _put_columns(self._store_Q.T[m:m + p], V)
        G = _tdot(self._store_Q.T[:m + p], V)
        C = G[:m].copy()
        G[m:].flat[::p + 1] -= 1.0
        return C, bool(np.max(np.abs(G)) <= ORTHO_TOL)

    def _check_open(self, end=False):
        """Refuse a read after the last one (:meth:`diagonal` or :meth:`weighted_trace`); with
        ``end``, this read is the last."""
        if self._ended:
            raise RuntimeError("the released operator was ended (by weighted_trace or diagonal)")
        self._ended = bool(end)

    def __reduce__(self):
        raise TypeError("a released operator holds the exact statistic: it cannot be pickled")

    def __repr__(self):
        return f"ReleasedOperator(shape={self.shape}, sigma={self.sigma:.6g})"

    def _normals(self, size, scale):
        out = np.empty(int(size))
        if size:
            _core_rng.fill_normal(self._key, self._stream, float(scale), out, self._nt)
            self._stream += -(-int(size) // SAMPLER_BLOCK)
        return out

    @staticmethod
    def _project_out(V, Q, C=None):
        # twice is enough (Giraud et al. 2005); once where no column lost more than ~30 % of its
        # norm (Kahan–Parlett: then a second pass changes nothing that matters); C = Qᵀ V if known
        before = np.einsum("ij,ij->j", V, V)
        V = V - Q @ (Q.T @ V if C is None else C)
        if np.any(np.einsum("ij,ij->j", V, V) < 0.49 * before):
            V = V - Q @ (Q.T @ V)
        return V

    def _new_block(self, V, C):
        """``(Qn, Qᵀ Qn)``: an orthonormal basis of the part of ``span V`` outside ``span Q``
        (``C = Qᵀ V``): projected off Q (twice where needed), its numerical range (SVD, below
        10⁻¹⁰ of V dropped), projected again and QR'd until orthonormal to :data:`ORTHO_TOL`.
        None where nothing is new."""
        d = self.shape[0]
        Q = self._Q
        R = self._project_out(V, Q, C)
        U, sv, _ = linalg.svd(R, full_matrices=False, check_finite=False)
        scale = max(float(np.max(np.abs(V))) if V.size else 0.0, np.finfo(float).tiny)
        keep = sv > 1e-10 * scale * math.sqrt(d)
        if not np.any(keep):
            return None, None
        Qn = U[:, keep]
        for _ in range(2):          # the coordinates' orthonormality the widening assumes (docstring)
            Qn = linalg.qr(self._project_out(Qn, Q), mode="economic", check_finite=False)[0]
            QtQn = Q.T @ Qn
            if _orthonormal_to_tol(Qn, QtQn):
                return Qn, QtQn
        return None, None

    def _release(self, Qn, C, staged=False):
        """Release the columns ``A Qn`` of new directions ``Qn`` (orthonormal to the basis to
        :data:`ORTHO_TOL`, checked by the caller; ``C = Qᵀ Qn``), module docstring; returns their
        coordinates ``(K, Qnᵀ A Qn, R_n)``: ``K = Qᵀ A Qn`` (the released columns A Q read against
        Qn: symmetry, not read again from S), the fresh ``sym(H) + B`` and ``R_n`` (a view of the
        store) the part off ``span [Q, Qn]``."""
        d, m, p = self.shape[0], self._m, Qn.shape[1]
        Qt, Rt, U = self._store_Q.T[:m], self._store_R.T[:m], self._U[:m, :m]
        Qn = np.ascontiguousarray(Qn)
        SQn, sq = self._exact.products(Qn)                  # the only read of the exact statistic
        for acc, part in zip(self._sq, sq):                 # rows' ‖Qnᵀ y_r‖², for the trace
            acc += part
        z = self._normals(p * p, self.sigma).reshape(p, p)
        B = np.where(_upper(p), z, 0.0)                     # np.triu(z, 1), without its mask's build
        B *= math.sqrt(0.5)
        B += B.T
        B.flat[::p + 1] = z.flat[::p + 1]
        g = self._normals(d * p, self.sigma * math.sqrt(0.5)).reshape(d, p)
        H = Qn.T @ SQn
        B += (H + H.T) / 2                                  # Qnᵀ A Qn: sym + fresh B
        K = _tdot(Rt, Qn)                                   # (A Q)ᵀ Qn, A Q = Q U + R
        K += U.T @ C
        # P (S Qn + g): off Q (twice where a column lost more than ~30 % of its norm to it:
        # Kahan–Parlett, as _project_out), then off Qn; row-major (the kernels'), then stored
        X = SQn
        X += g
        C1 = _tdot(Qt, X)
        again = np.any(np.einsum("ij,ij->j", C1, C1) > 0.51 * _colsq(X))
        _subtract(Qt, C1, X)
        if again:
            _subtract(Qt, _tdot(Qt, X), X)
        Qnt = self._store_Q.T[m:m + p] if staged else np.ascontiguousarray(Qn.T)
        _subtract(Qnt, _tdot(Qnt, X), X)
        Rn = self._append(Qn, staged)
        _put_columns(self._store_R.T[m:m + p], X)            # Rn's columns (the store's rows)
        self._U[:m, m:m + p] = K
        self._U[m:m + p, m:m + p] = B
        return K, B, Rn

    def reveal_block(self, V):
        """A solver's next block: where ``V`` (d x p) is orthonormal and orthogonal to the
        revealed basis to :data:`ORTHO_TOL` (checked here) and every earlier block was taken as
        given, V becomes the new directions exactly as it is and the coordinates of ``A V`` are
        returned: ``(Qᵀ A V, Vᵀ A V, W)``, W its part off ``span [Q, V]`` (a view: read, not
        written).  The caller's basis is then this operator's, column for column.  Else None,
        nothing revealed (the caller asks ``A @ V``)."""
        self._check_open()
        V = np.ascontiguousarray(V, dtype=np.float64)
        if not self._as_given or self._m + V.shape[1] > self.shape[0]:
            return None
        with blas_single_thread():
            C, ok = self._stage(V)
            return self._release(V, C, staged=True) if ok else None

    def __matmul__(self, V):
        self._check_open()
        V = np.asarray(V, dtype=np.float64)
        vec = V.ndim == 1
        V = V.reshape(self.shape[0], -1)
        d, m, p = self.shape[0], self._m, V.shape[1]
        with blas_single_thread():
            C, ok = self._stage(V) if m + p <= d else (self._Q.T @ V, False)
            if ok:
                # taken as given (its part along Q, below ORTHO_TOL, not answered): A V is the
                # released new columns, Q K + V (Vᵀ A V) + W
                K, Bn, W = self._release(np.ascontiguousarray(V), C, staged=True)
                out = self._Q[:, :m] @ K + V @ Bn + W
            else:
                # A on span Q from the released columns only (the part of V the reveal judged
                # inside span Q, below 1e-10 of V, is projected on it)
                if m < d:
                    Qn, QtQn = self._new_block(V, C)
                    if Qn is not None:
                        self._as_given = False
                        if m + Qn.shape[1] > d:
                            Qn, QtQn = Qn[:, :d - m], QtQn[:, :d - m]
                        self._release(Qn, QtQn)
                out = self._AQ @ (self._Q.T @ V)
        return out[:, 0] if vec else out

    def diagonal(self):
        """``diag A``: from the released columns, the rows' ``diag(R S R)`` and fresh noise of its
        conditional law, plus a small cover (:mod:`~dpem_fast._engine._diagonal`).  Ends the
        operator."""
        self._check_open(end=True)
        Q, m = self._Q, self._m
        exact = self._exact.projected_diagonal(Q)
        D = np.zeros((m, m))                    # U's diagonal blocks (each block's own Qₙᵀ A Qₙ)
        for a, b in zip(self._starts, self._starts[1:] + [m]):
            D[a:b, a:b] = self._U[a:b, a:b]
        with blas_single_thread():
            return released_diagonal(Q, D, self._R, exact, self._normals, self.sigma)

    def weighted_trace(self, w):
        """``Σ_i w_i A_ii``: the released columns' part plus one new coordinate (module
        docstring; exact in law for constant weights, else the complement's part estimated
        with the weights' mean there).  Ends the operator."""
        self._check_open(end=True)
        d, m = self.shape[0], self._m
        w = np.asarray(w, dtype=np.float64)
        Q = self._Q
        with blas_single_thread():
            if np.all(w == w[0]):
                # R = w I: tr(QᵀRQ QᵀAQ) + 2 tr(QᵀR P AQ) = w tr(QᵀAQ) (Qᵀ P = 0) = w tr(U); w on
                # the complement
                w_rest = float(w[0])
                known = w_rest * float(np.trace(self._U[:m, :m]))
            else:
                AQ = self._AQ
                RQ = w[:, None] * Q
                QAQ = Q.T @ AQ
                QAQ = (QAQ + QAQ.T) / 2
                # tr(QᵀRQ QᵀAQ) + 2 tr(QᵀR P AQ) = 2 tr(QᵀR AQ) − tr(QᵀRQ QᵀAQ)
                known = 2.0 * float(np.sum(RQ * AQ)) - float(np.sum((Q.T @ RQ) * QAQ))
                w_rest = None
            rest = d - m
            if rest == 0:
                return known
            # the complement's trace tr(P S) + N(0, σ² (d − m)), weighted by R's mean there
            if w_rest is None:
                w_rest = (float(np.sum(w)) - float(np.sum(w[:, None] * Q * Q))) / rest
            new = self._exact.projected_trace(self._sq) + float(self._normals(1, self.sigma * math.sqrt(rest))[0])
        return known + w_rest * new
