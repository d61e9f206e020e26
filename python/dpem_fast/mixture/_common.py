"""Pieces shared by the private mixtures: noisy-count post-processing and inference methods."""
from __future__ import annotations

import math

import numpy as np
from sklearn.base import DensityMixin
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["weights_from_counts", "floored_counts", "noise_std", "MixtureInferenceMixin"]

#: Smallest mixing weight after renormalisation (keeps log π finite).
WEIGHT_FLOOR = 1e-12


def noise_std(release):
    """Standard deviation of one noise entry of ``release`` (Laplace(b): √2 b)."""
    return release.noise_scale * (math.sqrt(2.0) if release.mechanism == "laplace" else 1.0)


def weights_from_counts(nk):
    """Mixing weights from (noisy) counts: clipped at 0 and renormalised (DP-EM footnote 5),
    uniform if all are ≤ 0, each at least :data:`WEIGHT_FLOOR`."""
    pos = np.maximum(nk, 0.0)
    total = pos.sum()
    w = pos / total if total > 0 else np.full(nk.shape, 1.0 / nk.size)
    w = np.maximum(w, WEIGHT_FLOOR)
    return w / w.sum()


def floored_counts(nk, counts_release):
    """Noisy counts floored so that divisions by them stay bounded: never below 1, nor below
    three noise standard deviations of the count release (public)."""
    return np.maximum(nk, max(1.0, 3.0 * noise_std(counts_release)))


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
            return validate_data(self, X, dtype=[np.float64, np.float32], order="C", reset=False)

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
