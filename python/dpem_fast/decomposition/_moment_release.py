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
from .._engine._specs import moments_joint_bound, row_count, second_moments, weighted_sums
from .._kernels.moments import COUNT, SECOND, SUM, second_moment_stats
from .._validation import validate_table

__all__ = ["SecondMomentRelease"]


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
