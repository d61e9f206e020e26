"""Differentially private EM for mixtures of independent Bernoullis, on the private-EM engine."""
from __future__ import annotations

import functools
import math

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract
from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM, StatSpec
from .._engine._components import live_components
from .._preprocess import cube_corners
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import FINITE, check_positive_int, interval
from ._common import (CountAndSumMixture, MixtureInferenceMixin, as_frame, floored_counts, shrunk_means,
                      weights_from_counts)
from .._kernels.bernoulli import bernoulli_log_resp, bernoulli_stats

__all__ = ["DPBernoulliMixture"]

MEAN_FLOOR = 1e-10  # success probabilities are kept in [MEAN_FLOOR, 1 - MEAN_FLOOR]
#: variance of a success probability under the data-independent uniform prior (shrinkage)
PRIOR_VAR = 1.0 / 12.0


def _bernoulli_statistics(X, params, domain, n_threads):
    """The E-step statistics kernel (a Dask task's: the current parameters only)."""
    return bernoulli_stats(X, *params, n_threads=n_threads)


def _binary_rows(X, binarize=None):
    """The rows as 0/1: ``X > binarize``, or checked binary when ``binarize`` is None."""
    if binarize is not None:
        return (X > binarize).astype(X.dtype)
    if not np.all((X == 0) | (X == 1)):
        raise ValueError("X must be binary (every value 0 or 1), or set binarize=threshold")
    return X


class DPBernoulliMixture(MixtureInferenceMixin, CountAndSumMixture, PrivateEM):
    """Mixture of independent Bernoullis over binary features, fitted by private EM.

    ``p(x) = Σ_k π_k Π_j μ_kj^x_j (1 − μ_kj)^(1 − x_j)`` for rows ``x ∈ {0, 1}^d``.
    Parameters as :class:`DPGaussianMixture` where they share a name; ``means_init`` are
    success probabilities in (0, 1).  ``binarize=t`` maps each value to ``x > t`` (row-wise,
    data-independent, as scikit-learn's ``BernoulliNB``); with ``None`` rows must be 0/1.
    No domain is declared: the rows' own domain is fixed.

    Privacy
    -------
    Rows are 0/1 vectors (checked), so ``‖x‖₂ ≤ √d``.  A row's responsibilities γ (γ_k ≥ 0,
    Σγ_k = 1) depend on it and on released parameters only.  Statistics (DP-EM Sec. 3,
    exponential family: T(x) = x):

    - counts ``N_k = Σ_i γ_ik``: ℓ2 ≤ ‖γ‖₂ ≤ 1 (add/remove); ‖γ − γ'‖₂ ≤ √2 (replace).
    - first moments ``S_k = Σ_i γ_ik x_i`` (all k jointly): add/remove ‖γ‖₂‖x‖₂ ≤ √d,
      attained by x = 1 and one-hot γ.  Replace: Σ_k‖γ_k x − γ'_k x'‖² = Σγ_k²‖x‖₁ +
      Σγ'_k²‖x'‖₁ − 2(γ·γ')(x·x') ≤ ‖x‖₁ + ‖x'‖₁ ≤ 2d − 1, since x ≠ x' differ in some
      coordinate (x = x' gives γ = γ' and no change); attained up to rounding by x = 1,
      x' = 1 − e_1 and components sharp enough that γ = e_1, γ' = e_2: √(2d − 1), not the
      √(2d) of the triangle inequality.

    Two Gaussian releases per iteration, calibrated like the Gaussian mixture's (exact
    GDP by default).  The M-step divides the noisy sums by the noisy counts floored at
    max(1, 3σ_N), shrunk towards the pooled mean of all components by a pseudo-count
    σ_S²/(Ñ_k/12) (the noise against a uniform prior on μ_kj, of variance 1/12; see
    :func:`~dpem_fast.mixture._common.shrunk_means`), and keeps each μ_kj within one noise
    std σ_S/Ñ_k of 0 and 1 (at least MEAN_FLOOR, at most 1/4): post-processing of released
    values and public constants.  After the last iteration, components whose noisy count
    is at most max(1, 3σ_N) are dropped (``n_components_`` holds the number left; see
    :func:`~dpem_fast._engine._components.live_components`: a ``NoiseDominatedWarning`` when
    most or all are dead).  Under replace-one a fit with n ≤ max(1, 3σ_N) is refused before
    anything is charged (n and σ_N are public there).
    Initialisation: uniform weights and μ_kj uniform in [1/4, 3/4] from the fit's own
    stream (data-independent), or the user's public parameters.
    """

    _domain_kind = "fixed"
    _audit_sharpening = "binary_rows"    # the audit's sharpened means: rows of {0, 1}^d

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line
    _cli_name = "bernoulli"
    _sums = "first_moments"      # the sums release (CountAndSumMixture)
    _saved = ("weights_", "means_", "n_iter_", "n_features_in_")
    _parameter_constraints = {"n_components": [interval("int", 1)], "binarize": [None, interval("real")],
                              "weights_init": [None, FINITE], "means_init": [None, FINITE]}

    def __init__(self, n_components=1, *, epsilon=1.0, delta=1e-5, max_iter=20, neighbouring="replace",
                 accountant=None, noise="gaussian", binarize=None, weights_init=None, means_init=None,
                 n_threads=None, random_state=None, budget=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.max_iter = max_iter
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.noise = noise
        self.binarize = binarize
        self.weights_init = weights_init
        self.means_init = means_init
        self.n_threads = n_threads
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    def _rows_task(self):
        if self.binarize is None:
            return _binary_rows
        return functools.partial(_binary_rows, binarize=float(self.binarize))

    def _check_model_params(self, n_samples, n_features):
        K = self.n_components
        super()._check_model_params(n_samples, n_features)     # n_samples >= K where public
        w, m = self.weights_init, self.means_init
        if w is not None and (np.shape(w) != (K,) or np.any(np.asarray(w) < 0) or not np.isclose(np.sum(w), 1.0)):
            raise ValueError("weights_init must have shape (n_components,), be >= 0 and sum to 1")
        if m is not None and (np.shape(m) != (K, n_features) or not np.all((np.asarray(m) > 0) & (np.asarray(m) < 1))):
            raise ValueError(f"means_init must have shape ({K}, {n_features}) with values in (0, 1)")


    def _block_rows(self, n_rows, d):
        """Rows per block of the statistics kernel (partials of K (d + 1) + 1 doubles a block,
        its ``block_count``) for a call on at most ``n_rows`` rows (``_specs``, "Rounding")."""
        return _contract.max_block_rows(int(n_rows), int(self.n_components) * (d + 1) + 1)
    def _statistic_specs(self, d):
        K = self.n_components
        return (StatSpec("counts", (K,), l2={"add_remove": 1.0, "replace": math.sqrt(2.0)}),
                StatSpec("first_moments", (K, d), l2={"add_remove": math.sqrt(d), "replace": math.sqrt(2.0 * d - 1)}))

    def _describe(self):
        init = "user-supplied public parameters" if self.means_init is not None else "data-independent"
        return "DP-EM moment perturbation for a Bernoulli mixture", (f"initialisation: {init}",) + self._components_note()

    def _initial_parameters(self, summary, domain, key, private):
        K, d = self.n_components, summary.n_features
        w = np.full(K, 1.0 / K) if self.weights_init is None else np.asarray(self.weights_init, dtype=float)
        if self.means_init is not None:
            return w, np.asarray(self.means_init, dtype=float)
        u = np.empty(K * d)
        _core_rng.fill_uniform(derive_key(key, "init", "means"), 0, u, 1)
        return w, 0.25 + 0.5 * u.reshape(K, d)

    def _statistics_task(self):
        return _bernoulli_statistics

    def _extreme_rows(self, n_features, key):
        """The rows of {0, 1}^d: all of them, or seeded ones beside the all-zero and all-one rows
        (the fixed domain's points; 0/1 pass any ``binarize`` threshold in [0, 1) unchanged)."""
        c = (cube_corners(n_features, key) + 1.0) / 2.0
        return np.vstack([np.zeros(n_features), np.ones(n_features), c])

    def _update(self, noisy, params, ctx):
        nk_f = floored_counts(noisy["counts"], ctx.releases["counts"])
        lo = np.clip(ctx.releases["first_moments"].noise_scale / nk_f, MEAN_FLOOR, 0.25)[:, None]
        means = shrunk_means(noisy["first_moments"], noisy["counts"], ctx.releases["counts"],
                             ctx.releases["first_moments"], 0.5, PRIOR_VAR)
        return weights_from_counts(noisy["counts"]), np.clip(means, lo, 1 - lo)

    def _finish(self, params, noisy, ctx):
        live = self._keep_live(live_components(noisy["counts"], ctx.releases["counts"], type(self).__name__,
                                               n_public=ctx.n_public))
        w, mu = params
        return w[live] / w[live].sum(), mu[live]

    def _exact_update(self, stats, params):
        nk = stats["counts"] + 10 * np.finfo(np.float64).eps
        return nk / nk.sum(), np.clip(stats["first_moments"] / nk[:, None], MEAN_FLOOR, 1 - MEAN_FLOOR)

    def _set_fitted(self, params, domain, dtype):
        self.weights_, self.means_ = params[0], params[1].astype(dtype, copy=False)

    def _log_resp(self, X):
        X = self._prepare_rows(self._check_X(X))
        return bernoulli_log_resp(X, self.weights_, self.means_, n_threads=effective_n_threads(self.n_threads))

    def sample(self, n_samples=1, *, random_state=None):
        """Synthetic binary rows from the fitted model (post-processing); returns (X, y).

        The components are drawn independently per row, so the rows come in random order.  ``X``
        is a pandas DataFrame with the fitted column names when the model was fitted on one."""
        check_is_fitted(self, "means_")
        rng = np.random.default_rng(random_state)
        y = rng.choice(self.n_components_, size=check_positive_int(n_samples, "n_samples"), p=self.weights_)
        X = (rng.random((y.size, self.means_.shape[1])) < self.means_[y]).astype(self.means_.dtype)
        return as_frame(self, X), y
