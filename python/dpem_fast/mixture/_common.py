"""Pieces shared by the private mixtures: noisy-count post-processing and inference methods."""
from __future__ import annotations

import math

import numpy as np
from sklearn.base import DensityMixin
from sklearn.utils.validation import check_is_fitted

from .._engine._components import check_counts_resolvable, noise_std
from .._validation import validate_table

__all__ = ["CountAndSumMixture", "weights_from_counts", "count_floor", "floored_counts", "REMEDY", "shrunk_means",
           "MixtureInferenceMixin"]

#: Smallest mixing weight after renormalisation (keeps log π finite).
WEIGHT_FLOOR = 1e-12

#: What the user can do about released moments (means, covariances) that their noise dominates
#: (no number of the data in it).  Each remedy lowers that noise relative to the data: the noise of
#: a component's moments is σ/N_k in the domain's units (N_k its rows), so more rows and fewer
#: components raise N_k, tighter declared bounds shrink the data's units, and σ falls as ε grows.
#: Fewer iterations are not in it: with the default tail averaging the last update's noise does
#: not depend on max_iter (σ grows as √max_iter, the average is over max_iter/2 releases).
REMEDY = ("fit on more rows, declare tighter bounds (where the model takes them), ask for fewer "
          "components, or raise epsilon")


def weights_from_counts(nk):
    """Mixing weights from (noisy) counts: clipped at 0 and renormalised (DP-EM footnote 5),
    uniform if all are ≤ 0, each at least :data:`WEIGHT_FLOOR`."""
    pos = np.maximum(nk, 0.0)
    total = pos.sum()
    w = pos / total if total > 0 else np.full(nk.shape, 1.0 / nk.size)
    w = np.maximum(w, WEIGHT_FLOOR)
    return w / w.sum()


def count_floor(counts_release):
    """The floor of :func:`floored_counts`: ``max(1, 3 σ_N)`` (public)."""
    return max(1.0, 3.0 * noise_std(counts_release))


def floored_counts(nk, counts_release):
    """Noisy counts floored so that divisions by them stay bounded: never below 1, nor below
    three noise standard deviations of the count release (public)."""
    return np.maximum(nk, count_floor(counts_release))


def shrunk_means(sums, counts, counts_release, sums_release, prior_mean, prior_var):
    """Component means from noisy sums and counts, shrunk towards the pooled mean (post-processing).

    ``sums`` (K, d) and ``counts`` (K,) are noisy (Gaussian noise of per-entry standard
    deviations σ_S and σ_N, the releases' public scales).  The raw estimate S̃_k / Ñ_k has
    noise σ_S / N_k per coordinate; a data-independent prior on a mean coordinate of variance
    ``prior_var`` (public: the model's domain) then gives the pseudo-count that minimises
    the mean squared error of (S̃_k + a m) / (Ñ_k + a) for a coordinate at prior distance:
    a_k = σ_S² / (N_k · prior_var) (minimise (a²Δ² + σ²)/(N + a)² over a: a = σ²/(NΔ²)),
    with N_k the count floored at max(1, 3σ_N).  The centre m is the pooled mean of all
    components, ΣS̃ / ΣÑ (the one-component estimate from the same release: noise √K σ_S on
    the sum), itself shrunk the same way towards ``prior_mean`` (the data-independent prior
    mean) with a_0 = K σ_S² / (N · prior_var).  When the noise dominates a component's
    statistics its mean moves to the pooled one, so a noise-dominated K-component fit
    approaches the one-component model instead of falling below it; with small noise the
    shrinkage vanishes (a_k → 0).  Everything here is a function of released values and public
    constants.
    """
    sums = np.asarray(sums, dtype=np.float64)
    K = sums.shape[0]
    s2 = noise_std(sums_release) ** 2
    nk = floored_counts(counts, counts_release)
    n_tot = max(float(np.sum(counts)), max(1.0, 3.0 * math.sqrt(K) * noise_std(counts_release)))
    a0 = K * s2 / (n_tot * prior_var)
    pooled = (sums.sum(axis=0) + a0 * np.asarray(prior_mean, dtype=np.float64)) / (n_tot + a0)
    a = s2 / (nk * prior_var)
    return (sums + a[:, None] * pooled) / (nk + a)[:, None]


def as_frame(estimator, X):
    """``X`` as a pandas DataFrame with the fitted ``feature_names_in_`` when the model was fitted
    on a data frame (and pandas is importable); else ``X`` unchanged."""
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        return X
    try:
        import pandas as pd
    except ImportError:     # fitted on another frame library: plain arrays
        return X
    return pd.DataFrame(X, columns=list(names))


class MixtureInferenceMixin(DensityMixin):
    """``score_samples``, ``score``, ``predict_proba``, ``predict``, ``fit_predict`` from a
    model's ``_log_resp(X) -> (log_resp, log_prob)`` on validated rows."""

    def _check_X(self, X):
        check_is_fitted(self, "means_")
        with np.errstate(over="ignore", invalid="ignore"):     # as in the engine's fit
            return validate_table(self, X, dtype=[np.float64, np.float32], order="C", reset=False)

    def _keep_live(self, live):
        """``live`` (the mask of :func:`~dpem_fast._engine._components.live_components`), its
        count kept for the privacy report's note (:meth:`_components_note`)."""
        self._n_live = (int(np.count_nonzero(live)), int(np.size(live)))
        return live

    def _components_note(self):
        """The privacy report's note on ``n_components_`` (post-processing of the released
        counts), ``()`` where no component rule ran; the count is not kept on the model."""
        kept = self.__dict__.pop("_n_live", None)
        if kept is None:
            return ()
        return (f"n_components_ = {kept[0]} live of {kept[1]} (a component whose released count is not "
                "above its live threshold is dropped: post-processing)",)

    @property
    def n_components_(self):
        """Number of components of the fitted model: ``n_components`` less those a private fit
        dropped because their noisy counts were indistinguishable from zero."""
        return int(np.shape(self.weights_)[0])

    def score_samples(self, X):
        """Log density of each row under the fitted mixture, shape (n_samples,)."""
        return self._log_resp(X)[1]

    def score(self, X, y=None):
        """Mean log-likelihood per row."""
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X):
        """Responsibilities, shape (n_samples, n_components)."""
        return np.exp(self._log_resp(X)[0])

    def predict(self, X):
        """Most likely component of each row."""
        return np.argmax(self._log_resp(X)[0], axis=1)

    def fit_predict(self, X, y=None):
        """Fit, then predict the component of each row of X."""
        return self.fit(X).predict(X)


class CountAndSumMixture:
    """The budget, tail and refusal hooks of a mixture that releases soft counts ("counts")
    and per-component sums (``_sums``) each iteration (Bernoulli, Poisson): put before
    :class:`~dpem_fast._engine.PrivateEM` in the bases."""

    #: the name of the sums release
    _sums = "sums"

    def _shares(self):
        """Counts and sums get shares ∝ √(noised coordinates), √K : √(Kd) (the split that
        minimises the total noise variance in sensitivity units at a fixed privacy loss, as
        the Gaussian mixture's ``budget_split="auto"``; public: K and d)."""
        K, d = self.n_components, self.n_features_in_
        return {"counts": math.sqrt(K), self._sums: math.sqrt(K * d)}

    def _n_averaged(self, n_iter):
        """The last ``max_iter // 2`` updates see the running mean of the tail's releases
        (post-processing; see :class:`~dpem_fast._engine._base.PrivateEM`)."""
        return n_iter // 2

    def _check_plan(self, plan, n_public, rounds):
        check_counts_resolvable(n_public, plan.releases["counts"], self._n_averaged(rounds), type(self).__name__)
