"""The one release of the second-moment models (factor analysis, PCA): its specs, budget split,
joint bound and kernel, declared once.

Rows ``x`` are mapped into the unit ball by the domain (``‖x‖ ≤ 1`` after the map and the
clip).  The statistics (:mod:`dpem_fast._engine._specs`, where each bound is derived):

* ``second_moment`` ``Σ x xᵀ`` (symmetric Gaussian noise: σ on the diagonal, σ/√2 above it):
  Δ₂ = 1 add/remove, √2 replace;
* ``sum`` ``Σ x`` (only where the model centres at the released mean): Δ₂ = 1 / 2;
* ``count`` ``N`` (only where N is private: add/remove, person-level): Δ₂ = 1.

Joint bound: :func:`~dpem_fast._engine._specs.moments_joint_bound` with ``count="rows"``
(``a_1 = 0`` without the sum: the bound with no sum term).  The whole plan is one release
round (``_n_release_rounds() = 1``); everything the model does afterwards is post-processing.
"""
from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract, _moments
from .._dpcore import _rng as _core_rng
from .._engine._specs import moments_joint_bound, operator_rounding_factor, row_count, second_moments, weighted_sums
from .._kernels.moments import COUNT, SECOND, SUM, held_rows, second_moment_rows, second_moment_stats
from .._rng import derive_key
from .._validation import validate_table
from ._krylov import BLOCK, krylov_columns, uses_operator

__all__ = ["SecondMomentRelease"]

#: the pass's mark (never in a model's parameters) that the second moment is held as its rows
_HELD = "_rows_held"


def _moment_statistics(X, params, domain, n_threads):
    """The second-moment kernel (it reads no parameter; a Dask task holds the domain and the
    thread count)."""
    return second_moment_stats(X, domain, n_threads)


class SecondMomentRelease:
    """Mixin of the engine hooks of one release of the second moments (module docstring).

    A model sets :meth:`_releases_mean` (default True: the sum is released with the second
    moment, the model centres at the released mean)."""

    def _releases_mean(self):
        return True

    def _k(self, d):
        """The number of components (factors) for d features: ``n_components``, or d where None."""
        return d if self.n_components is None else int(self.n_components)

    def _check_X(self, X):
        """Rows for the fitted model's inference (``transform``, ``score_samples``): float64 or
        float32, as many columns as at fit."""
        check_is_fitted(self, "components_")
        with np.errstate(over="ignore", invalid="ignore"):
            return validate_table(self, X, dtype=[np.float64, np.float32], order="C", reset=False)

    def _n_release_rounds(self):
        return 1

    def _block_rows(self, n_rows, d):
        """Rows per block of the second-moment kernel for a call on at most ``n_rows`` rows (the
        ``b`` of the float64 rounding bound, :mod:`~dpem_fast._engine._specs`, "Rounding"): its
        "rows" layout (d < ``_moments.TILE_MIN_D``) sums blocks of the contract's plan (partials
        of d² + d doubles); the "tiles" layout one d x d partial per ``_moments.TILE_ROWS`` rows."""
        if d < _moments.TILE_MIN_D:
            return _contract.max_block_rows(int(n_rows), d * d + d)
        return max(1, min(int(n_rows), _moments.TILE_ROWS))

    def _statistic_specs(self, n_features):
        d = n_features
        specs = (second_moments(SECOND, (d, d)),)
        if self._releases_mean():
            specs = (weighted_sums(SUM, (d,), d),) + specs
        if self._count_private():
            # row-level replace: 1.0 is a (loose) bound of the true 0 and the count is public,
            # never released; person-level replace: a group's count changes by up to m
            specs = (row_count(COUNT),) + specs
        return specs

    def _shares(self):
        # a_1 : a_2 = the split that minimises the noise edge of the released covariance
        # (DPFactorAnalysis's docstring, step 3 of its post-processing) with ‖m‖ at its public
        # bound 1: about 1 : 1 under replace-one, 1 : 2 under add/remove.  The count (add/remove)
        # only rescales the covariance (relative error σ_N/N): 1/d of a share keeps
        # σ_N ≈ √d σ_2, below the second moment's noise edge.
        d = self.n_features_in_
        shares = {SUM: 0.5 if self.neighbouring == "add_remove" else 1.0} if self._releases_mean() else {}
        shares[SECOND] = 1.0
        if self._count_private():
            shares[COUNT] = 1.0 / d
        return shares

    def _joint_sensitivity(self, a, neighbouring):
        """sup over neighbours of Σ_r ‖δ_r‖²/σ_r² given ``a[r] = Δ_r²/σ_r²`` (module docstring)."""
        return moments_joint_bound(a.get(SUM, 0.0), a[SECOND], a.get(COUNT, 0.0), neighbouring=neighbouring,
                                   count="rows")

    def _statistics_task(self):
        return _moment_statistics

    # ------------------------------------------------ matrix-free path (issue 41)
    #: the matrix-free path where its conditions hold (a switch for benchmarks and tests)
    _operator_path = True

    def _matrix_free(self, d):
        """Public: the second moment is read through its products (never formed) where its Krylov
        basis is small against d and the row count is public (row-level replace-one; under
        add/remove and person-level fits every row's block may move, and the products' rounding
        bound would cost far more than the dense sum's)."""
        return self._operator_sized(d) and not self._count_private()

    def _operator_sized(self, d):
        """Public: the Krylov basis is small against d (and the path not switched off)."""
        return self._operator_path and uses_operator(d, self._k(d))

    #: the non-private fit (``epsilon=inf``) also reads the second moment through its products
    #: where the private one would (a model whose exact update takes them sets it)
    _exact_matrix_free = False

    def _krylov_start(self, d, key, private):
        """The matrix-free path's data-independent start block (d x ``BLOCK``, from the fit's
        key), or None where the path does not run.  The non-private fit takes it where the
        model's exact update reads products (:attr:`_exact_matrix_free`) and the basis is small
        against d: nothing is released there, so the row count's privacy does not matter."""
        if not (self._matrix_free(d) if private else self._exact_matrix_free and self._operator_sized(d)):
            return None
        start = np.empty(d * BLOCK)
        _core_rng.fill_normal(derive_key(key, "init", "krylov"), 0, 1.0, start, 1)
        return start.reshape(d, BLOCK)

    #: the widening of what the model reads of the operator (:mod:`dpem_fast._engine._specs`):
    #: its columns (PCA); FA, which reads the diagonal after them, sets its own
    _operator_widening = staticmethod(operator_rounding_factor)

    def _operator_factor(self, n_public, d):
        """The matrix-free path's float64 widening (:attr:`_operator_widening` at this fit's
        public row count, block rows, d and Krylov basis size)."""
        return self._operator_widening(n_public, max(self._block_rows(n_public, d), 1), d,
                                       krylov_columns(self._k(d)))

    def _rounding_factor(self, d, n_public):
        """The engine's float64 widening, or the matrix-free path's larger one where that path
        may run (:meth:`_operator_factor`, derived in :mod:`dpem_fast._engine._operator`, "Rounding")."""
        base = super()._rounding_factor(d, n_public)
        if n_public is None or not self._matrix_free(d):
            return base
        return max(base, self._operator_factor(n_public, d))

    def _pass(self, rows, params, domain, n_threads):
        """The engine's pass; for in-memory rows with a Krylov start, with the statistic held as
        its rows (:meth:`_statistics`; a private fit's released as an operator)."""
        if params.get("krylov") is not None and not rows.remote and rows.in_memory:
            params = {**params, _HELD: True}
        return super()._pass(rows, params, domain, n_threads)

    def _statistics(self, X, params, domain, n_threads):
        """The kernel's statistics, or on the matrix-free pass (:meth:`_pass`) the second moment
        held as its rows (:class:`~dpem_fast._engine._operator.RowProducts`)."""
        if params.get(_HELD):
            if domain is not None:
                return second_moment_rows(X, domain, n_threads)
            if self._is_private():          # (a private fit always has its domain: never here)
                raise RuntimeError("the rows of a private fit are held only mapped into its domain")
            return held_rows(X, n_threads)  # the non-private fit's rows as they are
        return super()._statistics(X, params, domain, n_threads)
