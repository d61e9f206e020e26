"""A private start: candidate centres from a noisy random-hyperplane histogram of the rows.

A data-independent start (K points uniform in a ball) cannot seed many small clusters: in
Google's synthetic benchmark (64 clusters of 1,500 rows in R^100) Lloyd's iterations from it
merge clusters, whatever their noise.  This start spends a stated share of the fit's budget,
:data:`START_SHARE` of the whole plan, on two releases made once before the loop, both in the
fit's one plan (its event, its budget charge before any statistic, its record):

1. **Bucket counts** (``start_counts``, shape ``(B,)``, ``B = 2^m``).  ``m`` random hyperplanes
   through the domain's centre, ``{z : u_j·z = 0}`` with ``u_j`` uniform on the sphere, drawn from
   the fit's key and nothing else, cut the unit ball into ``B`` cones (angular LSH, Charikar
   2002); a row (mapped into the ball by the domain and clipped, as in every statistic) falls
   in exactly one cell, the bits ``[u_j·z > 0]``.  The histogram of the cells is released with
   Gaussian noise σ_c.
2. **Cell sums** (``start_sums``, shape ``(M, d)``).  The ``M`` cells with the largest noisy
   counts above ``τ = σ_c Φ⁻¹(1 − p/B)`` (p = 0.1: with probability ≥ 0.9 no empty cell
   passes; post-processing of release 1) get the sums of their rows, released with Gaussian
   noise σ_s; a row in no selected cell contributes nothing.

Candidate ``i`` is ``S̃_i / Ñ_i`` (a private average, moved into the image of the domain),
with weight ``Ñ_i``.  The K initial centres are chosen among the candidates by weighted
k-means on them alone (:func:`choose_centres`: k-means++ seeding and Lloyd iterations,
weighted by ``Ñ_i``, the best of a few restarts by weighted cost).  If fewer than K
candidates pass, the rest are the model's data-independent points.  All of this is post-processing of the two releases and public constants.

Sensitivities (rows in the unit ball, working units).  The cell of a row depends on that row
and on public hyperplanes only.

* counts: a row adds 1 to one cell.  Add/remove: ℓ2 = ℓ1 = 1.  Replace: −1 in one cell, +1 in
  another (or nothing): ℓ2 √2, ℓ1 2.  (:func:`~dpem_fast._engine._specs.soft_counts` with
  one-hot weights.)
* sums: the selection is fixed by release 1 (adaptive composition: both releases are in the
  plan).  Add/remove: one row adds ``x`` to one selected cell or nothing: ℓ2 ‖x‖ ≤ 1
  (ℓ1 ≤ √d).  Replace: ``x' e_jᵀ − x e_iᵀ``; for i ≠ j ℓ2 ≤ √2, for i = j ‖x' − x‖ < 2 (a cell
  lies in a half-space through the centre; x and x' on either side of its boundary's normal,
  near the boundary, approach 2): ℓ2 2, ℓ1 2√d.
  (:func:`~dpem_fast._engine._specs.weighted_sums`; the plan widens these exact-arithmetic
  values for float rounding, "Rounding" below.)

Constants, all public and fixed before any data is read: ``m = min(16, max(4, 2⌈log₂ K⌉ + 4))``
bits (K well separated clusters fall in distinct cells of ``B ≥ 16K²`` uniformly random cells
with probability about ``1 − K²/(2B) ≥ 31/32``, the birthday bound; capped at 2^16 cells),
``M = min(B, max(16, 8K))`` candidate cells, p = 0.1, the share :data:`START_SHARE` (in
Gaussian units, μ²), :data:`START_LLOYD` weighted iterations
and :data:`START_RESTARTS` restarts on the candidates, and the split of the share between
the two releases (:func:`start_shares`: 1 : √d under add/remove).  They are functions of K and d only and
the same for every data set; two design choices were compared on several data sets before
they were fixed (bench/kmeans_start.py, docs in its docstring): 16K² rather than 4K² cells,
and hyperplanes through the centre rather than through random points of the ball of radius
1/2 (cells of biased bits collided more often).

Rounding (:mod:`~dpem_fast._engine._specs`, "Rounding").  The counts are integers, exact.  Each
entry of a cell sum is the exact sum of its rows' values, rounded once per superblock (a Dask
chunk: once per chunk), the superblocks (chunks) then added by Sum2; so two neighbours' sums
differ by the row's own change plus at most ``2 λ_n`` times the sum of every row's norm, and the
plan widens the sums' sensitivity by :func:`~dpem_fast._engine._specs.float64_exact_sum_factor`
(n the public row count under row-level replace, else the public cap ``ROUNDING_ROW_CAP``;
``PrivateEM._one_off_factor``).

The passes are numpy/BLAS (a ``(rows, m)`` matrix product and exact segment sums per
superblock), single-threaded BLAS in the fit: results do not depend on the thread count.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import ndtri

from .._dpcore import _contract
from .._dpcore import _rng as _core_rng
from .._preprocess import project_into_domain, scale_and_clip
from .._rng import derive_key
from ._specs import soft_counts, weighted_sums
from ._statistics import Statistics

__all__ = ["START_SHARE", "START_COUNTS", "START_SUMS", "start_bits", "start_candidates", "start_specs", "start_shares",
           "hyperplanes", "private_start", "choose_centres"]

#: Fraction of the whole plan (its μ² in Gaussian units) spent on the private start.
START_SHARE = 0.2
#: Release names of the start.
START_COUNTS, START_SUMS = "start_counts", "start_sums"
#: Probability that some empty cell passes the count threshold.
_FALSE_POSITIVE = 0.1
#: Weighted Lloyd iterations on the candidates, and restarts of the seeding (post-processing).
START_LLOYD, START_RESTARTS = 10, 10


def start_bits(n_centres):
    """Hyperplanes m (public: from K only): ``min(16, max(4, 2⌈log₂ K⌉ + 4))``."""
    K = max(int(n_centres), 1)
    return int(min(16, max(4, 2 * math.ceil(math.log2(K)) + 4))) if K > 1 else 4


def start_candidates(n_centres):
    """Candidate cells M (public): ``min(2^m, max(16, 8K))``."""
    return int(min(2 ** start_bits(n_centres), max(16, 8 * int(n_centres))))


def start_specs(n_centres, n_features):
    """The two releases of the start (module docstring: sensitivities)."""
    B, M = 2 ** start_bits(n_centres), start_candidates(n_centres)
    return (soft_counts(START_COUNTS, B, integer=True), weighted_sums(START_SUMS, (M, int(n_features)),
                                                                       int(n_features)))


def start_shares(n_features, neighbouring):
    """Fractions of the whole plan of the two releases, summing to :data:`START_SHARE`: in
    proportion ``Δ_c : √d Δ_s`` (1 : √d under add/remove, 1 : √(2d) under replace).

    A candidate's error is ``(ξ_s − c ξ_c)/N`` (ξ the two noises, ``‖c‖ ≤ 1``), of variance at
    most ``(d σ_s² + σ_c²)/N²``; with ``μ_r² = Δ_r²/σ_r²`` and ``μ_c² + μ_s²`` fixed (the share),
    Lagrange gives ``μ_c² : μ_s² = Δ_c : √d Δ_s`` (as the loop's own split of DPKMeans, whose
    releases are composed separately).  Public: d and the relation."""
    c, s_ = start_specs(1, n_features)
    wc = c.sensitivity("l2", neighbouring)
    ws = math.sqrt(int(n_features)) * s_.sensitivity("l2", neighbouring)
    return {START_COUNTS: START_SHARE * wc / (wc + ws), START_SUMS: START_SHARE * ws / (wc + ws)}


def hyperplanes(key, n_bits, n_features):
    """``(U, b)``: m unit normals (shape (m, d)) from the fit's key alone (data-independent),
    and their offsets ``b = 0``: every hyperplane passes through the domain's centre."""
    m, d = int(n_bits), int(n_features)
    g = np.empty(m * d)
    _core_rng.fill_normal(derive_key(key, "start", "normals"), 0, 1.0, g, 1)
    U = g.reshape(m, d)
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    return U, np.zeros(m)


def _rows_and_cells(domain, U, b, block, columns=None):
    """Rows of ``block`` in working units (clipped into the ball) and their cells; ``columns``:
    the domain's columns of the block (public positions; None: all)."""
    A = np.asarray(block, dtype=np.float64)
    if columns is not None:
        A = A[:, np.asarray(columns, dtype=np.intp)]
    Z = scale_and_clip(A, domain)[0]
    bits = (Z @ U.T) > b
    cells = bits.astype(np.int64) @ (np.int64(1) << np.arange(U.shape[0], dtype=np.int64))
    return Z, cells


def cell_counts(domain, U, b, block, columns=None):
    """Rows per cell of one superblock (a pass's kernel: ``functools.partial`` of public values)."""
    _, cells = _rows_and_cells(domain, U, b, block, columns)
    counts = np.bincount(cells, minlength=2 ** U.shape[0]).astype(np.float64)
    return Statistics({START_COUNTS: counts}, n_rows=int(cells.size))


def cell_sums(domain, U, b, slot, n_slots, block, columns=None):
    """Sums of the rows of each selected cell (``slot[cell]`` its row of the output, −1: none),
    each entry the exact sum of its rows' values rounded once (``_contract.sum_segments``; the
    rounding bound of the release, module docstring)."""
    Z, cells = _rows_and_cells(domain, U, b, block, columns)
    s = slot[cells]
    keep = np.flatnonzero(s >= 0)
    by_slot = keep[np.argsort(s[keep], kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(s[keep], minlength=int(n_slots)))])
    sums = _contract.sum_segments(np.ascontiguousarray(Z[by_slot].T), bounds)     # (d, M)
    return Statistics({START_SUMS: np.ascontiguousarray(sums.T)}, n_rows=int(cells.size))


def private_start(rows, layer, domain, key, n_centres, fallback, columns=None):
    """K initial centres (working units) from the two releases of the start (module docstring).

    ``rows``: the engine's rows; ``layer``: the fit's release layer (its plan holds
    :func:`start_specs`); ``fallback``: ``(K, d)`` data-independent points that fill in when
    fewer than K candidates pass; ``columns``: the public positions of the columns the domain
    maps (a mixed table's numeric ones; None: every column), the only ones the start reads.
    Everything after each release is post-processing.
    """
    K = int(n_centres)
    d = rows.n_features if columns is None else len(columns)
    cols = None if columns is None else tuple(int(c) for c in columns)
    m, M = start_bits(K), start_candidates(K)
    B = 2 ** m
    U, b = hyperplanes(key, m, d)
    counts = rows.reduce(functools.partial(cell_counts, domain, U, b, columns=cols))
    noisy = layer.release({START_COUNTS: counts[START_COUNTS]}, 0)[START_COUNTS]
    tau = max(1.0, layer.releases[START_COUNTS].noise_scale * float(ndtri(1.0 - _FALSE_POSITIVE / B)))
    order = np.argsort(-noisy, kind="stable")[:M]
    order = order[noisy[order] > tau]
    slot = np.full(B, -1, dtype=np.int64)
    slot[order] = np.arange(order.size)
    sums = rows.reduce(functools.partial(cell_sums, domain, U, b, slot, M, columns=cols))
    noisy_sums = layer.release({START_SUMS: sums[START_SUMS]}, 0)[START_SUMS]
    weights = noisy[order]
    cands = project_into_domain(noisy_sums[:order.size] / weights[:, None], domain)
    return choose_centres(cands, weights, K, fallback, key)


def _weighted_cost(cands, w, C):
    dist = (cands * cands).sum(1)[:, None] - 2.0 * cands @ C.T + (C * C).sum(1)[None, :]
    return dist, float(np.dot(w, np.maximum(dist.min(axis=1), 0.0)))


def choose_centres(cands, weights, n_centres, fallback, key):
    """K centres from weighted candidates (post-processing): :data:`START_RESTARTS` runs of
    weighted k-means++ seeding (the first centre drawn ∝ w, each next ∝ w D², D the distance
    to the centres so far; uniforms from the fit's key; the first run greedy, taking the
    argmax instead of a draw) each refined by :data:`START_LLOYD`
    weighted Lloyd iterations on the candidates; the run of least weighted cost
    ``Σ_i w_i min_k ‖c_i − C_k‖²`` is kept.  Rows of ``fallback`` fill in for missing
    candidates."""
    K = int(n_centres)
    cands = np.asarray(cands, dtype=np.float64)
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    if cands.shape[0] <= K:
        out = np.array(fallback, dtype=np.float64, copy=True)
        out[:cands.shape[0]] = cands
        return out
    best, best_cost = None, np.inf
    for r in range(START_RESTARTS):
        u = np.empty(K)
        _core_rng.fill_uniform(derive_key(key, "start", "seeding", r), 0, u, 1)
        p = w.copy()
        C = np.empty((K, cands.shape[1]))
        d2 = np.full(cands.shape[0], np.inf)
        for k in range(K):
            cum = np.cumsum(p)
            if r == 0:      # the first run is greedy: the heaviest, then argmax w D²
                i = int(np.argmax(p))
            else:
                i = int(min(np.searchsorted(cum, u[k] * cum[-1], side="right"), cands.shape[0] - 1))
            C[k] = cands[i]
            d2 = np.minimum(d2, ((cands - cands[i]) ** 2).sum(1))
            p = w * d2
            if not cum[-1] > 0 or not p.sum() > 0:
                p = w + (d2 > 0)            # every candidate chosen already, or no weight left
        for _ in range(START_LLOYD):
            dist, _ = _weighted_cost(cands, w, C)
            a = np.argmin(dist, axis=1)
            tot = np.bincount(a, weights=w, minlength=K)
            full = tot > 0
            S = np.zeros_like(C)
            np.add.at(S, a, w[:, None] * cands)
            C[full] = S[full] / tot[full, None]
        cost = _weighted_cost(cands, w, C)[1]
        if cost < best_cost:
            best, best_cost = C.copy(), cost
    return best
