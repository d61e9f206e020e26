"""Declarations that several models share, each derived once: the statistics of rows in the
unit ball, their joint bound, and the one rule for the row count an update may divide by.

Setting.  Every row ``x`` lies in the unit ball (``‖x‖ ≤ 1``, after the domain map and the
clip) and carries weights ``γ`` on the simplex (``γ_k ≥ 0``, ``Σ_k γ_k = 1``: posteriors,
or a one-hot hard assignment).  Under add/remove one row is added or removed; under
replace-one a row ``(x, γ)`` becomes ``(x', γ')``.

* :func:`soft_counts` ``Σ_i γ_i`` (shape ``(K,)``): add/remove moves it by ``γ``, so
  ``‖·‖₂ ≤ ‖γ‖₂ ≤ 1`` and ``‖·‖₁ = 1``; replace by ``γ − γ'``, ``‖·‖₂ ≤ √2`` (two vertices of
  the simplex) and ``‖·‖₁ ≤ 2``.
* :func:`weighted_sums` ``Σ_i γ_ik x_i`` (shape ``(K, d)``, or ``(d,)`` for the plain sum
  ``Σ_i x_i``: K = 1): add/remove ``‖γ‖₂ ‖x‖ ≤ 1`` (ℓ1: ``Σ_k γ_k ‖x‖₁ ≤ √d``); replace
  ``‖γ x − γ' x'‖_F ≤ ‖γ‖‖x‖ + ‖γ'‖‖x'‖ ≤ 2`` (ℓ1 ``2√d``), attained by ``x' = −x`` in one
  component.
* :func:`second_moments` ``Σ_i γ_ik x_i x_iᵀ`` (symmetric; the release layer's symmetric Gaussian
  noise, σ on the diagonal and σ/√2 above it): add/remove ``‖γ‖₂ ‖x‖² ≤ 1``; replace
  ``‖A − B‖²_F = ‖A‖² + ‖B‖² − 2⟨A, B⟩ ≤ 2`` since ``⟨γ_k x xᵀ, γ'_k x' x'ᵀ⟩ = γ_k γ'_k (xᵀx')² ≥ 0``:
  ``√2``.  (The release draws σ per coordinate of ``(δ_ii; √2 δ_ij, i < j)``, whose norm is
  ``‖δ‖_F`` exactly: the bound is the mechanism's sensitivity, not a loose one.)  With one weight
  (``K = 1``, ``γ = 1``: the pooled ``Σ_i x_i x_iᵀ`` of a tied covariance) the same values hold:
  ``‖x xᵀ‖_F = ‖x‖² ≤ 1`` and ``‖x xᵀ − x' x'ᵀ‖²_F = ‖x‖⁴ + ‖x'‖⁴ − 2 (xᵀx')² ≤ 2``, attained by
  orthogonal unit rows (d ≥ 2).
* :func:`diagonal_second_moments` ``Σ_i γ_ik x_i²`` (squares per coordinate; shape ``(K, d)``):
  the diagonals of the second moments.  add/remove ``‖γ‖₂ ‖x²‖₂ ≤ ‖x‖² ≤ 1``
  (``‖x²‖₂² = Σ_j x_j⁴ ≤ (Σ_j x_j²)²``); replace
  ``‖γ x² − γ' x'²‖² = ‖γ‖²‖x²‖² + ‖γ'‖²‖x'²‖² − 2 Σ_k γ_k γ'_k ⟨x², x'²⟩ ≤ 2``: every entry is
  nonnegative, so the cross term is ``≥ 0``: ``√2``, attained by ``x = e_1`` in component 1 and
  ``x' = e_2`` in component 2.
* :func:`squared_norms` ``Σ_i γ_ik ‖x_i‖²`` (shape ``(K,)``; the traces of the second moments):
  add/remove ``‖γ‖₂ ‖x‖² ≤ 1``; replace ``‖γ ‖x‖² − γ' ‖x'‖²‖² ≤ 2`` (nonnegative entries again),
  ``√2``, attained by two unit rows in two components.
* :func:`row_count` ``n`` (released under add/remove only; under replace-one it is public and
  never released): ℓ2 = ℓ1 = 1, an integer.
* :func:`column_histograms` (issue 37): one histogram per column on public cells, stacked
  (``D`` columns, ``n_cells`` cells in all; a numeric column's cells are public bins of its
  box, a categorical column's its declared categories and "other").  A row adds exactly 1 to
  one cell of each column.  Add/remove: ``D`` entries change by 1, ℓ2 = √D, ℓ1 = D.  Replace:
  per column at most two cells change (−1 and +1), ℓ2 = √(2D), ℓ1 = 2D, attained by a row
  whose every column moves to another cell.  An integer statistic (exact in float64); the
  group level is the engine's (:mod:`~dpem_fast._engine._groups`: m times these).  The same
  spec serves the mixed model's 2-way calibration (:mod:`dpem_fast.mixture._calibrate`) with
  ``D = P``, the number of column pairs: each pair's table is one "column" whose cells are the
  pairs of the two columns' cells, and a row adds exactly 1 to one cell of each of the P
  tables, so √P (add/remove) and √(2P) (replace), attained by a row whose every column moves.

Joint bound (:func:`moments_joint_bound`).  Releases of one iteration with ``a_r = Δ_r²/σ_r²``
are one Gaussian mechanism with ``μ² = sup Σ_r ‖δ_r‖²/σ_r²``.  Under replace-one, with soft
counts (``a_c``), weighted sums (``a_1``) and second moments (``a_2``), per component the
contribution is ``‖γ_k u − γ'_k u'‖²`` for the stacked ``u = (√(a_c/2), √a_1 x/2, √(a_2/2) xxᵀ)``;
jointly convex in (γ, γ'), so maximal at vertices ``γ = e_i``, ``γ' = e_j``.  For ``i ≠ j`` it
is ``‖u‖² + ‖u'‖² ≤ a_c + a_1/2 + a_2``; for ``i = j`` it is
``a_1‖x − x'‖²/4 + a_2‖xxᵀ − x'x'ᵀ‖²/2``, whose maximum over the unit ball is
``a_1/2 + a_2 + φ`` with ``φ = a_1²/(16 a_2)`` if ``a_1 ≤ 4 a_2`` else ``a_1/2 − a_2``
(maximise ``a_1 v/2 − a_2 v²`` over ``0 ≤ v ≤ 1``, v = −cos of the angle).  Hence
``sup = a_1/2 + a_2 + max(a_c, φ)`` (``a_c = 0`` without counts: the sum and second moment of
factor analysis).  Under add/remove the sum is at most ``Σ_r a_r``: no gain.

The same bound holds, and is attained for d ≥ 2, with the per-component second moments replaced
by (``second=``):

* ``"diag"`` (:func:`diagonal_second_moments`): the released ``x²`` is the diagonal of ``xxᵀ``,
  and ``‖diag M‖ ≤ ‖M‖_F``, so every term is at most the full one and the bound holds.  It is
  attained: the ``i ≠ j`` case by ``x = e_1``, ``x' = e_2``; the ``i = j`` case by
  ``x = (a, b, 0, …)``, ``x' = (−b, −a, 0, …)`` (``a² + b² = 1``), where ``xxᵀ − x'x'ᵀ`` is
  diagonal (its off-diagonal entries are ``ab − ab``) and ``xᵀx' = −2ab`` takes every value in
  ``[−1, 0]``, so the diagonal term equals the full one at the maximising angle.
* ``"tied"`` (one pooled :func:`second_moments` ``Σ_i x_i x_iᵀ``, no weights): the row's
  contribution ``a_c‖γ − γ'‖²/2 + a_1‖γ⊗x − γ'⊗x'‖²/4 + a_2‖xxᵀ − x'x'ᵀ‖²/2`` is jointly convex in
  (γ, γ'), so maximal at vertices; ``i ≠ j``: ``a_c + a_1 (‖x‖² + ‖x'‖²)/4 + a_2 (‖x‖⁴ + ‖x'‖⁴ −
  2 (xᵀx')²)/2 ≤ a_c + a_1/2 + a_2`` (orthogonal unit rows); ``i = j``: the full case's
  expression exactly.  Same bound; add/remove ``≤ Σ_r a_r``.
* ``"spherical"`` (:func:`squared_norms`): vertices again; ``i ≠ j`` gives
  ``a_c + a_1/2 + a_2`` (two unit rows); ``i = j`` gives ``a_1‖x − x'‖²/4 + a_2 (r² − s²)²/2``
  with ``r = ‖x‖ ≥ s = ‖x'‖``, largest at ``x' = −(s/r) x`` and ``r = 1`` (both terms grow with
  r): ``f(s) = a_1(1 + s)²/4 + a_2(1 − s²)²/2``.  ``f(1) = a_1``; ``f'(s) = (1 + s)(a_1/2 −
  2 a_2 s(1 − s))`` has an interior maximum only when ``a_1 < a_2``, and there
  ``f(s) ≤ a_1/2 + a_2`` (``a_1((1 + s)²/4 − 1/2) ≤ a_2/2 ≤ a_2 (1 − (1 − s²)²/2)``).  Hence
  ``sup = max(a_c + a_1/2 + a_2, a_1)``, attained (the first by two unit rows in two components,
  the second by ``x' = −x`` in one), at most the full bound (``φ ≥ a_1/2 − a_2``).

The row count an update divides by (:func:`count_for_update`).  Under replace-one the count
is public: it is used.  Under add/remove only the released noisy count may be used, floored
at ``max(1, 3 sd)`` where ``sd`` is its noise's standard deviation (σ for Gaussian noise,
``√2 b`` for Laplace): a count within three noise deviations of zero is indistinguishable
from noise, and dividing by it would blow the update up.
Float32 rows (issue 26).  A model may compute float32 rows in single precision (its
``_float32_statistics`` hook, used where ``PrivateEM._float32_path`` allows it: row-level
replace-one; the Gaussian mixture); its statistics then
carry float rounding, which :func:`float32_specs` folds into every sensitivity (the factor
:data:`FLOAT32_WIDENING`).  What the kernels guarantee (``_estep.pyx``, ``_estep_diag.pyx``,
``dpc_f32.h``; ``u = 2⁻²⁴``, the unit roundoff of float32):

(a) a row the kernel reads lies in the ball of radius ``1 + u``: ``‖x̃‖ ≤ 1 + u``.  Either it is
    clipped into the unit ball in float64 (``‖x‖ ≤ 1``, the float64 loader), then rounded
    (``|x̃_j| ≤ (1 + u)|x_j|``), or (issue 41, ``dpf_load_domain32``, wherever the domain is
    representable in float) the box, centre and scale are applied in float and the ball is
    tested on those very floats, their squared norm summed in float64 (each square exact,
    ``d`` roundings): a row kept as it is has ``‖x̃‖² ≤ 1 + γ_d`` (float64 ``γ``), so
    ``‖x̃‖ ≤ 1 + u`` for ``d < 2²⁹``, and a rescaled one is float64 values of norm ``≤ 1``
    (``clip_target``'s margin) rounded once.  The map itself is any function of the row
    alone, so the bound, and hence the factor below, is unchanged by clipping in float;
(b) its responsibilities are ``γ̃_k = fl₃₂(fl₆₄(e_k · fl₆₄(1/s)))`` with ``s = Σ_k e_k`` summed in
    float64: ``γ̃_k ≥ 0`` and ``Σ_k γ̃_k ≤ (1 + u)(1 + 2⁻⁵³)²(1 + (K − 1) 2⁻⁵³) =: 1 + κ``,
    ``κ ≤ 1.01 u`` for ``K ≤ 2²⁰`` (:data:`FLOAT32_MAX_COMPONENTS`; more components run in
    float64);
(c) every entry of a statistic is summed over rows in float partial sums that each cover at
    most ``m = 128`` rows (:data:`~dpem_fast._dpcore._contract.F32_LANE_ROWS`: 16 rows of a
    lane per chunk, the lanes flushed every 8 chunks; at ``d ≥ 16`` one register-tiled product
    per 128 rows, ``dpf_s2_piece`` in ``dpc_f32_prod.h``, issue 41, formerly one ``ssyrk``),
    each then added exactly into float64 (every float is a double);
(d) a row's term in such a sum is the exact product ``T_r`` of its float inputs (``γ̃_k``,
    ``γ̃_k x̃_i``, ``γ̃_k x̃_i x̃_j`` or ``γ̃_k x̃_j²``) up to at most 5 rounded products (the BLAS
    path's ``fl(√γ̃)``, twice, ``w_i``, ``w_j`` and ``w_i w_j``), so a sum holds
    ``ŝ = Σ_r T_r (1 + θ_r)`` with ``|θ_r| ≤ γ_{m+5} = (m + 5)u / (1 − (m + 5)u)`` whatever the
    order or tree of the additions (Higham 2002, *Accuracy and Stability of Numerical
    Algorithms*, Lemma 3.1 and Sec. 4.2; no cancellation tricks).  Since issue 41 a second
    moment's term is ``fl(fl(γ̃_k x̃_i) x̃_j)`` at every ``d`` (two rounded products, within the
    5; the tiled product sums an entry's rows in 8 fma lanes, then a fixed shuffle tree).
    Underflow: the float32 GMM blocks (the full kernel's and, since issue 41's diagonal
    follow-up, the diagonal one's: ``"diag"``, ``"spherical"``) run flush-to-zero (issue 41,
    ``dpf_ftz_begin``), so a result below ``2⁻¹²⁶`` becomes 0 (``|fl(v)| ≤ |v|``; gradual
    underflow errs by ``2⁻¹⁴⁹``): an absolute error of at most ``6 m 2⁻¹²⁶`` per entry of a
    partial sum (5 products and one addition a row; the diagonal kernel's terms ``γ̃_k x̃_j``
    and ``fl(γ̃_k x̃_j) x̃_j`` take at most 2 products and one addition, within it; two partial
    sums differ between neighbours), outside the relative model above but, over a statistic's
    ``E`` entries (a pooled one -- tied ``Σ_k``, spherical ``Σ_j`` -- counting the entries of
    the partials it pools, ``E ≤ K d²``), 9 orders of magnitude inside the slack
    ``(FLOAT32_WIDENING − factor) Δ_p ≈ 1.9·10⁻³ Δ_p`` for any ``E < 10²⁰`` and ``Δ_p ≥ 10⁻³``.
    The rows' ball (a) and the responsibilities' sum (b) only shrink (a flushed log-density
    term or ``e_k`` changes only which ``γ̃`` a row gets: still a function of the row alone,
    ``≥ 0``, their sum at most the bound of (b)).

Replace-one neighbours differ in the row at one index ``i`` (the rows are a sequence; the
relation of index positions, as in :mod:`dpem_fast.model_selection`).  Every other row sits in
the same partial sum at the same place, so every partial sum but the ones holding row ``i`` is
bit-identical, and the float64 sums above them are the float64 path's.  For each statistic and
``p ∈ {1, 2}``::

    ‖f̃(D) − f̃(D')‖_p ≤ ‖T_i − T'_i‖_p + γ_{m+5} (Σ_r ‖T_r‖_p + Σ_r ‖T'_r‖_p)
                     ≤ (1 + κ)(1 + u)² (Δ_p + 2 m γ_{m+5} B_p)
                     ≤ Δ_p (1 + κ)(1 + u)² (1 + 2 m γ_{m+5})  =  Δ_p (1 + 2.03·10⁻³),

because each statistic is linear in γ and of degree at most two in x (the derivations above
then hold for ``γ̃`` on ``(1 + κ)`` times the simplex and ``x̃`` in the ball of radius ``1 + u``,
scaled by at most ``(1 + κ)(1 + u)²``), and one row's own contribution ``B_p`` (the add/remove
sensitivity) is at most ``Δ_p``.  :func:`float32_rounding_factor` computes the factor and
:data:`FLOAT32_WIDENING` ``= 1 + 2⁻⁸`` bounds it (the noise of a float32 fit is 0.4 % larger
at the same ε).  The joint bound: write ``δ̃_r = δ_r + e_r`` with ``δ_r = T_i − T'_i`` and
``‖e_r‖ ≤ 2 m γ_{m+5} (1 + κ)(1 + u)² B_r``; by Minkowski
``√(Σ_r a_r ‖δ̃_r‖²/Δ_r²) ≤ (1 + κ)(1 + u)² (√J + 2 m γ_{m+5} √(Σ_r a_r B_r²/Δ_r²))``, and under
replace-one ``B_r²/Δ_r² ≤ 1/2`` for every statistic above while ``J ≥ a_c + a_1/2 + a_2`` in both
joint bounds, so ``Σ_r a_r B_r²/Δ_r² ≤ (a_c + a_1 + a_2)/2 ≤ J``: the sup is at most
``J · FLOAT32_WIDENING²``, the joint bound of the widened sensitivities (``J`` is homogeneous of
degree one in ``a``).

Rounding of the float64 sums (issue 34, item 7).  The derivations above are exact-arithmetic
statements; the kernels sum in floats.  What they guarantee, with ``u = 2⁻⁵³`` and
``γ_k = k u / (1 − k u)`` (Higham 2002, Lemma 3.1):

(e) rows are summed inside a block (lanes, chunks, BLAS calls: any order or tree) into one
    float64 partial per block and statistic entry; a block holds at most ``b`` rows (the
    kernel's block plan, ``dpc_contract.h``: 1,024 rows until the partial budget binds; the
    factor-analysis "tiles" layout one partial per 1,024 rows), and a row's term is its exact
    product up to at most 5 rounded products, so a block's partial is ``Σ_r T_r (1 + θ_r)``,
    ``|θ_r| ≤ γ_{b+5}``, and its error is at most ``γ_{b+5} Σ_r |T_r|``;
(f) the partials of the blocks are summed **exactly** and rounded once
    (``_contract.sum_blocks``, a superaccumulator: the correctly rounded sum, independent of
    the order and of the thread count; a pooled statistic — the tied covariance's ``Σ_k S2_k``,
    the spherical one's ``Σ_j`` — is one exact sum of the partials of every component or
    feature): an error of at most ``u |S_j|`` per entry of the call's total ``S_j``;
(g) the calls' totals are added by Ogita–Rump–Oishi's Sum2
    (:class:`~dpem_fast._engine._statistics.StatisticsSum`), at most ``u |S| + γ_{J−1}² Σ_j |S_j|``
    for ``J`` totals, on at most two levels: the superblocks of a Dask chunk (``J ≤ ⌈n/256⌉``:
    a superblock has at least 256 rows) and then the superblocks in this process or the chunks
    (``J ≤ n``).

Per entry these are at most ``γ_{b+5}`` times the block's ``Σ_r |T_r|`` plus ``λ_n = 3u + γ_n² +
γ_{⌈n/256⌉}²`` times ``Σ_r |T_r|`` over all rows, and by Minkowski the same holds for the ℓ1 and
ℓ2 norms of the error with ``‖T_r‖_p ≤ B_p``, a row's own contribution (the add/remove
sensitivity, at most the replace one).  Hence, with the responsibilities' float sum
``Σ_k γ̂_k ≤ 1 + κ`` (``κ ≤ 1.01 (K + 2) u`` for ``K ≤ 2²⁰`` components, as (b) in float64) and a
clipped row in the unit ball:

* replace-one (row level; ``n`` public): only the block, superblock and chunk of the replaced
  row differ, every other partial is bit-identical, so
  ``‖Ŝ(D) − Ŝ(D')‖_p ≤ (1 + κ) Δ_p (1 + 2 γ_{b+5} b + 2 λ_n n)``;
* add/remove, and person-level fits (a removed row, or a group of another size, moves every
  later row to another block, so every block's rounding may change):
  ``≤ (1 + κ) Δ_p (1 + 2 (γ_{b+5} + λ_N) N)`` for ``n ≤ N`` (per group: ``m Δ_p`` on the left
  and in place of ``Δ_p``, the bound divided by ``m ≥ 1``, so the same factor).

:func:`float64_rounding_factor` is that factor; every fit applies it
(``PrivateEM._rounding_factor``) to every non-integer iteration statistic; integer statistics —
counts of hard assignments, the row count, the histograms — are sums of small integers, exact in
float64, and keep theirs.  The joint bound widens the same way as for float32 rows (Minkowski,
above); the float32 path's factor multiplies it (its float lanes flush into the float64 sums
covered here).  The relation between the factor and the fit:

* row-level replace-one: ``N = n`` (public), ``b`` = the model's ``_block_rows(n, d)`` (its
  kernel's block plan, :func:`~dpem_fast._dpcore._contract.max_block_rows`); ``1 + 1.0·10⁻⁹``
  at 10⁶ rows and ``b = 1,024``;
* add/remove and person-level (``n`` private): ``N`` = the public cap :data:`ROUNDING_ROW_CAP`
  = 2³², ``b`` = ``_block_rows(superblock_rows(d), d)``, the most rows one block of one kernel
  call can hold: every path hands a kernel at most one superblock (in-memory arrays, memory
  maps, block sources and a person-level fit's kept rows are read in superblocks of
  ``superblock_rows(d)`` rows; a Dask task cuts its chunk into superblocks; a private
  selection's trials are in-memory rows), and the block plan of a call on at most that many
  rows has blocks of at most ``b`` rows.  ``b = 1,024`` for every model and shape here (GMM full
  K = 3, d = 8; diag K = 10, d = 30; k-means K = 50, d = 2; factor analysis d = 784;
  Bernoulli K = 10, d = 784): the factor is ``1 + 2.97·10⁻³`` (0.3 % more noise; its terms:
  ``2 γ_{b+5} N = 9.8·10⁻⁴``, ``2 γ_N² N = 2⁻⁹ = 1.95·10⁻³`` from Sum2 over up to N parts).  A fit
  on more rows than the cap is refused before the budget is charged
  (:func:`check_row_cap`: a count-dependent refusal, as the refusal of an empty X is, at a count
  no in-memory fit reaches; its message names the cap, never the count).

One-off releases.  The private start's cell sums (``_start.cell_sums``) and the unigram's word
counts (``_contract.sum_segments``), the private selection's hold-out score (``math.fsum``'s
value) sum their per-row terms **exactly** in each call, so only the calls' roundings and Sum2
remain: :func:`float64_exact_sum_factor` ``(1 + u)² (1 + 2 λ_N N)`` (N = n public under
row-level replace, else the cap: ``1 + 1.98·10⁻³``).  The domain estimate's histograms and
outside counts are integers (exact).  LDA's topic-word statistic uses the factor above with
``b = 128`` documents (``_kernels.lda``: a minibatch is cut into calls of a public size):
``1 + 2.10·10⁻³``; DP-SEP (N public) has its own bound (``docs/models/stochastic_ep.rst``, "Rounding").

Why ``m`` is bounded: a float sum over a whole block (1,024 rows, more when the partial budget
caps the block count) would make ``2 m γ_{m+5}`` grow with n.  Why add/remove has no such bound:
removing a row moves every later row into another partial sum, so all of them change and the
float rounding of the change grows with n.  A model computes float32 rows in float64 there (its
kernel upcasts them) and declares the float64 sums' values (widened at the public cap, "Rounding"
above), not the float32 path's; so it does without a domain (the non-private fit).
"""
from __future__ import annotations

import dataclasses
import math

from .._dpcore._contract import F32_LANE_ROWS
from ._diagonal import DIAGONAL_TAU
from ._statistics import StatSpec

__all__ = ["soft_counts", "weighted_sums", "second_moments", "diagonal_second_moments", "squared_norms",
           "row_count", "column_histograms", "moments_joint_bound", "count_for_update", "FLOAT32_WIDENING",
           "FLOAT32_MAX_COMPONENTS",
           "float32_rounding_factor", "float32_specs", "float64_rounding_factor", "float64_exact_sum_factor",
           "operator_rounding_factor", "operator_diagonal_rounding_factor",
           "rounding_specs", "check_row_cap", "ROUNDING_ROW_CAP"]

#: Every sensitivity of a float32 path is multiplied by this (module docstring, "Float32 rows").
FLOAT32_WIDENING = 1.0 + 2.0 ** -8
#: Components up to which the float32 path's responsibilities keep (b) of the derivation.
FLOAT32_MAX_COMPONENTS = 2 ** 20
#: The public bound on the row count where it is private (add/remove, person-level): the float64
#: rounding widening there is computed at this n (module docstring, "Rounding").
ROUNDING_ROW_CAP = 2 ** 32


def soft_counts(name, K, *, integer=False):
    """``Σ_i γ_i``, shape ``(K,)``: ℓ2 1 / √2, ℓ1 1 / 2 (add/remove / replace)."""
    return StatSpec(name, (K,), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)},
                    l1={"add_remove": 1.0, "replace": 2.0}, integer=integer)


def weighted_sums(name, shape, d):
    """``Σ_i γ_ik x_i`` of rows in the unit ball of dimension ``d`` (shape ``(K, d)`` or
    ``(d,)``): ℓ2 1 / 2, ℓ1 √d / 2√d."""
    return StatSpec(name, tuple(shape), l2={"add_remove": 1.0, "replace": 2.0},
                    l1={"add_remove": math.sqrt(d), "replace": 2.0 * math.sqrt(d)})


def second_moments(name, shape):
    """``Σ_i γ_ik x_i x_iᵀ`` (symmetric; shape ``(..., d, d)``): ℓ2 1 / √2."""
    return StatSpec(name, tuple(shape), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)}, symmetric=True)


def diagonal_second_moments(name, shape):
    """``Σ_i γ_ik x_i²`` (per coordinate; shape ``(K, d)``): ℓ2 1 / √2 (module docstring)."""
    return StatSpec(name, tuple(shape), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)})


def squared_norms(name, K):
    """``Σ_i γ_ik ‖x_i‖²`` (shape ``(K,)``): ℓ2 1 / √2 (module docstring)."""
    return StatSpec(name, (K,), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)})


def row_count(name):
    """``n``, shape ``(1,)``, an integer: ℓ2 = ℓ1 = 1 (released under add/remove only; the
    replace value is a bound of the true 0, for completeness)."""
    return StatSpec(name, (1,), l2={"add_remove": 1.0, "replace": 1.0}, integer=True)


def column_histograms(name, n_columns, n_cells):
    """One histogram per column on public cells, stacked (shape ``(n_cells,)``, ``n_columns``
    columns): ℓ2 √D / √(2D), ℓ1 D / 2D (module docstring); integer."""
    D = int(n_columns)
    return StatSpec(name, (int(n_cells),), l2={"add_remove": math.sqrt(D), "replace": math.sqrt(2.0 * D)},
                    l1={"add_remove": float(D), "replace": 2.0 * D}, integer=True)


def moments_joint_bound(a_first, a_second, a_count=0.0, *, neighbouring, second="full", count="soft"):
    """``sup Σ_r ‖δ_r‖²/σ_r²`` of one iteration's (counts,) weighted sums and second moments,
    given ``a_r = Δ_r²/σ_r²`` (module docstring); ``second``: which second moments are released
    (``"full"``, ``"diag"``, ``"tied"`` or ``"spherical"``, as a mixture's covariance type).

    ``count="rows"``: the count is the plain :func:`row_count` (factor analysis), released under
    replace only by a person-level fit (issue 27), whose group-level Δ's are m times the row
    ones (a group's pairs padded with "no row").  A pair of two rows leaves the count unchanged
    (the bound without it); a row against no row is an addition, ``a_c + a_1/4 + a_2/2`` in the
    replace units (Δ_c = m, Δ_1 = 2m, Δ_2 = √2 m; per pair 1, 1, 1).  The sup is the larger,
    attained by m copies of either pair (by homogeneity the group-level bound; Cauchy–Schwarz
    over a group's pairs, :mod:`~dpem_fast._engine._groups`)."""
    if second not in ("full", "diag", "tied", "spherical"):
        raise ValueError(f"second must be 'full', 'diag', 'tied' or 'spherical', got {second!r}")
    if count not in ("soft", "rows"):
        raise ValueError(f"count must be 'soft' or 'rows', got {count!r}")
    if neighbouring == "add_remove":
        return a_count + a_first + a_second
    if count == "rows" and a_count:
        return max(moments_joint_bound(a_first, a_second, neighbouring="replace", second=second),
                   a_count + a_first / 4.0 + a_second / 2.0)
    if second == "spherical":
        return max(a_count + a_first / 2.0 + a_second, a_first)
    phi = a_first * a_first / (16.0 * a_second) if a_first <= 4.0 * a_second else a_first / 2.0 - a_second
    return a_first / 2.0 + a_second + max(a_count, phi)


def count_for_update(noisy_count, release, n_public):
    """The row count an update may divide by: ``n_public`` where it is public (replace-one),
    else the released noisy count floored at ``max(1, 3 sd)`` (module docstring)."""
    if n_public is not None:
        return float(n_public)
    if noisy_count is None or release is None:
        raise ValueError("count_for_update: under add/remove the noisy count and its release are needed")
    sd = release.noise_scale * (math.sqrt(2.0) if release.mechanism == "laplace" else 1.0)
    return max(float(noisy_count), 1.0, 3.0 * sd)


def float32_rounding_factor(lane_rows=F32_LANE_ROWS, n_components=FLOAT32_MAX_COMPONENTS):
    """``(1 + κ)(1 + u)² (1 + 2 m γ_{m+5})``: the factor by which float rounding on the float32 path
    can exceed a replace-one sensitivity, for ``m = lane_rows`` rows per float lane and ``K``
    components (module docstring, "Float32 rows"); at most :data:`FLOAT32_WIDENING`."""
    u, v = 2.0 ** -24, 2.0 ** -53
    kappa = (1.0 + u) * (1.0 + v) ** 2 * (1.0 + (n_components - 1) * v) - 1.0
    m5 = lane_rows + 5
    gamma = m5 * u / (1.0 - m5 * u)
    return (1.0 + kappa) * (1.0 + u) ** 2 * (1.0 + 2.0 * lane_rows * gamma)


def float32_specs(specs):
    """The specs of statistics computed on the float32 path: every ℓ2 and ℓ1 sensitivity, under
    both relations, times :data:`FLOAT32_WIDENING` (module docstring, "Float32 rows"; only the
    replace-one values are used by such a fit, the add/remove ones are widened alike for
    simplicity).  Integer statistics are refused: float rounding would make them non-integer."""
    if float32_rounding_factor() > FLOAT32_WIDENING:       # the contract constants moved
        raise RuntimeError("FLOAT32_WIDENING no longer bounds the float32 rounding; please report")
    out = []
    for s in specs:
        if s.integer:
            raise ValueError(f"statistic {s.name!r} is integer-valued: no float32 path")
        out.append(dataclasses.replace(
            s, l2={r: v * FLOAT32_WIDENING for r, v in s.l2.items()},
            l1=None if s.l1 is None else {r: v * FLOAT32_WIDENING for r, v in s.l1.items()}))
    return tuple(out)


def _gamma(k):
    """Higham's ``γ_k = k u / (1 − k u)`` for float64 (``u = 2⁻⁵³``)."""
    u = 2.0 ** -53
    if k * u >= 0.5:
        raise ValueError(f"float64 rounding: {k} terms per sum is too many for the bound")
    return k * u / (1.0 - k * u)


def _levels(n):
    """The rounding above the exact reduction of a call's partials, per unit of ``Σ_r |T_r|``
    (module docstring, "Rounding", (f)-(g)): the call's correctly rounded total (``u``), at most
    two Sum2 levels (``u + γ_J²`` each: a Dask chunk's superblocks, or an LDA minibatch's
    slices, ``J ≤ ⌈n/256⌉`` parts of at least 256 rows; then the chunks or superblocks,
    ``J ≤ n``)."""
    u = 2.0 ** -53
    n = max(int(n), 1)
    return 3.0 * u + _gamma(n) ** 2 + _gamma(-(-n // 256)) ** 2


def float64_rounding_factor(n_rows, block_rows, *, shifts=False, n_components=FLOAT32_MAX_COMPONENTS):
    """The factor by which float64 rounding can exceed a sensitivity (module docstring,
    "Rounding"): ``(1 + κ)(1 + 2 γ_{b+5} b + 2 λ_n n)`` for row-level replace-one with ``n``
    public rows and at most ``b = block_rows`` rows per block (``λ_n = 3u + γ_n² + γ_{⌈n/256⌉}²``,
    the levels above the exact reduction); with ``shifts=True`` (add/remove, person-level:
    every row may move to another block) ``(1 + κ)(1 + 2 (γ_{b+5} + λ_n) n)``, ``n`` then the
    public cap :data:`ROUNDING_ROW_CAP`.  ``n_components`` bounds K in ``κ`` (the float sum of
    a row's responsibilities, ``Σ_k γ̂_k ≤ 1 + κ``)."""
    n, b = int(n_rows), int(block_rows)
    if n < 0 or b < 1:
        raise ValueError("n_rows must be >= 0 and block_rows >= 1")
    u = 2.0 ** -53
    kappa = (1.0 + u) ** 2 * (1.0 + (n_components + 1) * u) - 1.0
    g_block, lam = _gamma(b + 5), _levels(n)
    excess = 2.0 * (g_block + lam) * n if shifts else 2.0 * g_block * b + 2.0 * lam * n
    # the float evaluation of these few terms is itself rounded: one more u per operation is
    # far below the margin of 1.01 on the excess
    return (1.0 + kappa) * (1.0 + 1.01 * excess)


#: the operator's orthonormality check (``_operator.ORTHO_TOL``, the same value): the widening
#: assumes every entry of the revealed basis' ``QᵀQ − I`` is at most this
OPERATOR_ORTHO_TOL = 1e-14


def operator_rounding_factor(n_rows, block_rows, d, m_max, *, shifts=False):
    """The float64 widening of a second moment read by :class:`ReleasedOperator` with at most
    ``m_max`` revealed directions (:mod:`~dpem_fast._engine._operator`, "Rounding"):
    ``(1 + (√(2 m_max) + 2) e') (1 + m_max τ)²``, ``1 + e'``
    :func:`~dpem_fast._engine._specs.float64_rounding_factor` at ``block_rows + d + 2 m_max`` rows
    per block (``n_rows``, ``shifts`` as there), τ = :data:`OPERATOR_ORTHO_TOL` the largest
    entry of the revealed basis' ``QᵀQ − I`` the operator accepts."""
    e = float64_rounding_factor(n_rows, int(block_rows) + int(d) + 2 * int(m_max), shifts=shifts) - 1.0
    eta = int(m_max) * OPERATOR_ORTHO_TOL         # the revealed basis' Gram deviation, ‖G − I‖₂ ≤ η
    return (1.0 + (math.sqrt(2.0 * m_max) + 2.0) * e) * (1.0 + eta) ** 2


def operator_diagonal_rounding_factor(n_rows, block_rows, d, m_max):
    """The widening of a second moment read by :class:`ReleasedOperator` through at most ``m_max``
    columns and then its diagonal (:mod:`~dpem_fast._engine._diagonal`, "Privacy with
    rounding"; row-level replace-one, ``n_rows`` public, parts of at most ``block_rows`` rows):
    ``φ_op (1 + 3 √m_max η)^{1/2} + B_r / DIAGONAL_TAU``, φ_op :func:`operator_rounding_factor`,
    η = ``m_max`` · :data:`OPERATOR_ORTHO_TOL`, B_r the diagonal's rounding bound there."""
    n, b, m = int(n_rows), int(block_rows), int(m_max)
    eta = m * OPERATOR_ORTHO_TOL
    cross = 3.0 * math.sqrt(m) * eta
    if DIAGONAL_TAU ** 2 < (2.1 + cross / eta) * eta:        # the cover's assumption (docstring)
        raise ValueError("the diagonal's cover noise is too small for this basis")
    u = 2.0 ** -53
    rho = 5.0 * m * _gamma(int(d) + m + 2)
    g_b, grow = _gamma(b), (1.0 + eta) ** 2
    bound = 2.02 * (rho + g_b * b * (1.0 + rho) * grow + u * n * (1.0 + rho) * (1.0 + g_b) * grow)
    return operator_rounding_factor(n, b, d, m) * math.sqrt(1.0 + cross) + bound / DIAGONAL_TAU


def float64_exact_sum_factor(n_rows):
    """The factor by which float64 rounding can exceed the sensitivity of a sum whose per-row
    terms (each the exact value of at most two rounded operations of the row's own values) are
    summed **exactly** in each call (``_contract.sum_blocks`` / ``sum_segments``, ``math.fsum``)
    and rounded once, the calls' totals then added by at most two Sum2 levels (module
    docstring, "Rounding", one-off releases): ``(1 + u)² (1 + 2 λ_n n)`` for at most ``n`` rows —
    ``n_rows`` where the count is public, else None: the public cap :data:`ROUNDING_ROW_CAP` (read
    at call time) — no block term, whatever the relation."""
    n = ROUNDING_ROW_CAP if n_rows is None else int(n_rows)
    if n < 0:
        raise ValueError("n_rows must be >= 0")
    u = 2.0 ** -53
    return (1.0 + u) ** 2 * (1.0 + 1.01 * 2.0 * _levels(n) * n)


def check_row_cap(n_rows, what="X"):
    """Refuse (``ValueError``) more than :data:`ROUNDING_ROW_CAP` rows where the row count is
    private (add/remove, person-level): the float64 rounding bound folded into the
    sensitivities holds up to the cap only.  Called before the budget is charged.  A
    count-dependent refusal (as the refusal of no row at all), at a count no in-memory fit
    reaches; the message names the public cap, never the count.  The cap is read at call time
    (a test may lower it)."""
    if int(n_rows) > ROUNDING_ROW_CAP:
        raise ValueError(
            f"{what}: more rows than the public cap ROUNDING_ROW_CAP = {ROUNDING_ROW_CAP} "
            "(dpem_fast._engine._specs) up to which the float64 rounding of the released sums is "
            "bounded under add/remove and person-level privacy (the row count is private there, so "
            "the sensitivities are widened for the cap); fit on at most that many rows (a subsample)")


def rounding_specs(specs, factor):
    """``specs`` with every ℓ2 and ℓ1 sensitivity of a non-integer statistic times ``factor``
    (:func:`float64_rounding_factor`); integer statistics are sums of small integers, exact in
    float64, and keep theirs."""
    out = []
    for s in specs:
        if s.integer:
            out.append(s)
            continue
        out.append(dataclasses.replace(
            s, l2={r: v * factor for r, v in s.l2.items()},
            l1=None if s.l1 is None else {r: v * factor for r, v in s.l1.items()}))
    return tuple(out)

