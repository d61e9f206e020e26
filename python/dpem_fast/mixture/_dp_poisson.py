"""Differentially private EM for mixtures of independent Poissons (count data), on the engine."""
from __future__ import annotations

import functools

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract
from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM
from .._engine._components import live_components
from .._engine._specs import soft_counts, weighted_sums
from .._kernels.poisson import poisson_log_resp, poisson_stats, unit_map
from .._preprocess import cube_corners
from .._rng import derive_key
from .._validation import _column_list, _verb, check_positive_int, interval
from ._common import CountAndSumMixture, MixtureInferenceMixin, as_frame, shrunk_means, weights_from_counts

__all__ = ["DPPoissonMixture"]


def _statistics(X, params, domain, n_threads, max_count):
    """The E-step statistics kernel (a Dask task's: public parameters only)."""
    return poisson_stats(X, params[0], params[1], max_count, n_threads=n_threads)


#: rows per slice of the count check (bounds its temporary arrays)
_CHECK_ROWS = 1 << 15


def _count_rows(X, names=None):
    """Rows of counts (finite, checked before): non-negative whole numbers, else a ValueError
    naming X and the column(s) (``names``: the table's column names, public), quoting no value.
    Runs before the budget is charged: on the array, on every superblock of the scanning pass
    of a block source, in every validation task of a dask array."""
    negative = np.zeros(X.shape[1], dtype=bool)
    fractional = np.zeros(X.shape[1], dtype=bool)
    for s in range(0, X.shape[0], _CHECK_ROWS):
        part = X[s:s + _CHECK_ROWS]
        negative |= (part < 0).any(axis=0)
        fractional |= (part != np.floor(part)).any(axis=0)
    if negative.any():
        raise ValueError(f"Negative values in data passed to X ({_column_list(negative, names, positions=True)}): "
                         "counts must be non-negative whole numbers")
    if fractional.any():
        raise ValueError(f"X: {_column_list(fractional, names, positions=True)} {_verb(fractional)} "
                         "fractional values: DPPoissonMixture models counts (whole numbers); round them "
                         "(numpy.rint), or fit a model of continuous columns (DPGaussianMixture)")
    return X


class DPPoissonMixture(MixtureInferenceMixin, CountAndSumMixture, PrivateEM):
    """Mixture of independent Poissons over count features, fitted by private EM.

    ``p(x) = Σ_k w_k Π_j Poisson(x_j; λ_kj)``.  ``max_count`` M is the public bound of a
    count: every count is clipped to [0, M] in the kernel (a data-independent map, like a
    declared box).  Other parameters as :class:`DPBernoulliMixture`.

    ``X`` holds counts: a negative or fractional value is refused with a ``ValueError`` naming
    the column before anything is charged (an array: at validation; a block source: on its
    scanning pass; a dask array: in its validation tasks).  A block source whose later pass
    yields other rows than its scan breaks its contract: the fit then raises after the charge
    (the ledger keeps it) and returns nothing.

    .. versionchanged:: 0.1 (issue 39): fractional counts are refused (they were fitted).

    Privacy
    -------
    A clipped row x ∈ [0, M]^d maps to ``z = (x − c)/R`` with c = M/2, R = (M/2)√d, so
    ‖z‖ ≤ 1; its responsibilities γ are on the simplex and depend on the row and released
    parameters only.  Per iteration two releases, whose sensitivities the engine declares
    once (:mod:`dpem_fast._engine._specs`): soft counts ``Σ γ`` (ℓ2 1 / √2 under
    add/remove / replace) and weighted sums ``Σ γ_k z`` (ℓ2 1 / 2).  The update
    ``λ_k = c + R z̄_k``, where z̄_k is S̃_k / Ñ_k (Ñ_k floored at max(1, 3σ_N)) shrunk
    towards the pooled mean of all components by the pseudo-count σ_S²/(Ñ_k/(3d)) (the
    noise against a uniform prior on each rate in [0, M], whose z-variance is 1/(3d); see
    :func:`~dpem_fast.mixture._common.shrunk_means`), clipped to [M/1000, M], and weights
    from the noisy counts, is post-processing.  After the last iteration components whose
    noisy count is at most max(1, 3σ_N) are dropped (``n_components_``; a
    ``NoiseDominatedWarning`` when most or all are dead), and under replace-one a fit with
    n ≤ max(1, 3σ_N) is refused before anything is charged.  Initialisation
    is data-independent (λ uniform in [M/4, 3M/4] from the fit's own stream).
    """

    _domain_kind = "fixed"
    _cli_name = "poisson"
    _saved = ("weights_", "rates_", "means_", "n_iter_", "n_features_in_")
    _parameter_constraints = {"n_components": [interval("int", 1)],
                              "max_count": [interval("real", 0, None, "neither")]}

    def __init__(self, n_components=1, *, max_count=10.0, epsilon=1.0, delta=1e-5, max_iter=20,
                 neighbouring="replace", accountant=None, noise="gaussian", n_threads=None, random_state=None,
                 budget=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.max_count = max_count
        self.epsilon = epsilon
        self.delta = delta
        self.max_iter = max_iter
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.noise = noise
        self.n_threads = n_threads
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    def _rows_task(self):
        names = getattr(self, "feature_names_in_", None)
        if names is None or len(names) != getattr(self, "n_features_in_", -1):
            return _count_rows
        return functools.partial(_count_rows, names=tuple(str(v) for v in names))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.categorical = True     # counts: scikit-learn's checks then pass integers
        return tags


    def _block_rows(self, n_rows, d):
        """Rows per block of the statistics kernel (partials of K (d + 1) + 1 doubles a block,
        its ``block_count``) for a call on at most ``n_rows`` rows (``_specs``, "Rounding")."""
        return _contract.max_block_rows(int(n_rows), int(self.n_components) * (d + 1) + 1)
    def _statistic_specs(self, d):
        K = self.n_components
        return soft_counts("counts", K), weighted_sums("sums", (K, d), d)

    def _describe(self):
        return "DP-EM moment perturbation for a Poisson mixture", ("initialisation: data-independent",) + self._components_note()

    def _initial_parameters(self, summary, domain, key, private):
        K, d, M = self.n_components, summary.n_features, float(self.max_count)
        u = np.empty(K * d)
        _core_rng.fill_uniform(derive_key(key, "init", "rates"), 0, u, 1)
        return np.full(K, 1.0 / K), M * (0.25 + 0.5 * u.reshape(K, d))

    def _statistics_task(self):
        return functools.partial(_statistics, max_count=float(self.max_count))

    def _extreme_rows(self, n_features, key):
        """Corners of the count box [0, M]^d (the kernel clips counts to ``max_count`` M)."""
        return float(self.max_count) * (cube_corners(n_features, key) + 1.0) / 2.0

    def _rates(self, counts, sums, d):
        M = float(self.max_count)
        c, R = unit_map(M, d)
        return np.clip((R * sums + c * counts[:, None]) / counts[:, None], M / 1000.0, M)

    def _update(self, noisy, params, ctx):
        d, M = noisy["sums"].shape[1], float(self.max_count)
        c, R = unit_map(M, d)
        # unit-ball units: a uniform rate on [0, M] has (λ - c)/R of variance (M²/12)/R² = 1/(3d)
        z = shrunk_means(noisy["sums"], noisy["counts"], ctx.releases["counts"], ctx.releases["sums"], 0.0,
                         1.0 / (3.0 * d))
        return weights_from_counts(noisy["counts"]), np.clip(c + R * z, M / 1000.0, M)

    def _finish(self, params, noisy, ctx):
        live = self._keep_live(live_components(noisy["counts"], ctx.releases["counts"], type(self).__name__,
                                               n_public=ctx.n_public))
        w, lam = params
        return w[live] / w[live].sum(), lam[live]

    def _exact_update(self, stats, params):
        nk = np.maximum(stats["counts"], 10 * np.finfo(np.float64).eps)
        return weights_from_counts(nk), self._rates(nk, stats["sums"], stats["sums"].shape[1])

    def _set_fitted(self, params, domain, dtype):
        self.weights_, self.rates_ = params
        self.means_ = self.rates_                        # a Poisson's mean is its rate

    def _log_resp(self, X):
        X = self._prepare_rows(self._check_X(X))
        return poisson_log_resp(X, self.weights_, self.rates_, self.max_count)

    def sample(self, n_samples=1, *, random_state=None):
        """Synthetic count rows (post-processing); returns (X, y), rows in random order."""
        check_is_fitted(self, "rates_")
        rng = np.random.default_rng(random_state)
        y = rng.choice(self.n_components_, size=check_positive_int(n_samples, "n_samples"), p=self.weights_)
        return as_frame(self, rng.poisson(self.rates_[y]).astype(np.float64)), y
