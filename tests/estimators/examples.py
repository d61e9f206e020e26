"""One small private fit of every estimator, for the checks that apply to all of them
(what a pickle, a saved file or a Dask task carries).

``EXAMPLES`` maps a name to ``(factory, data)``: ``factory(**overrides)`` builds an unfitted
private estimator seeded with :data:`SEED` (a distinctive integer, so that a test can look
for it in serialised bytes); ``data()`` returns the rows (or the document-term counts) it is
fitted on.  ``DASK`` names the estimators whose ``fit`` takes a dask array.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import dpem_fast

#: the seed of every example: distinctive, so that its bytes are recognisable
SEED = 918273645


def _gauss(n=120, d=3):
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(-2, 0.5, (n // 2, d)), rng.normal(2, 0.5, (n - n // 2, d))])


def _binary(n=120, d=5):
    rng = np.random.default_rng(1)
    return (rng.random((n, d)) < np.linspace(0.1, 0.9, d)).astype(float)


def _mixed(n=120):
    """Two numeric columns and one of three category codes that follows the class."""
    X = _gauss(n, 2)
    return np.column_stack([X[:, 0], (X[:, 1] > 0) + (X[:, 0] > 2), X[:, 1]])


def _corpus(n=60, V=12):
    rng = np.random.default_rng(2)
    return sp.csr_matrix(rng.poisson(1.0, (n, V)).astype(float))


def _make(cls, **params):
    def factory(**kw):
        return cls(**{**params, "random_state": SEED, **kw})
    return factory


EXAMPLES = {
    "gmm": (_make(dpem_fast.DPGaussianMixture, n_components=2, epsilon=1.0, max_iter=3, bounds=(-4, 4)), _gauss),
    "bernoulli": (_make(dpem_fast.DPBernoulliMixture, n_components=2, epsilon=1.0, max_iter=3), _binary),
    "gradient_em": (_make(dpem_fast.DPGradientEM, epsilon=1.0, max_iter=3, means_init=np.ones(3)), _gauss),
    "sep": (_make(dpem_fast.DPStochasticEP, n_components=2, epsilon=10.0, n_epochs=2, bounds=(-4, 4),
                   component_variance=0.25), _gauss),
    "kmeans": (_make(dpem_fast.DPKMeans, n_clusters=2, epsilon=1.0, max_iter=3, data_norm=5.0), _gauss),
    "fa": (_make(dpem_fast.DPFactorAnalysis, n_components=1, epsilon=1.0, data_norm=5.0), _gauss),
    "pca": (_make(dpem_fast.DPPCA, n_components=1, epsilon=1.0, data_norm=5.0), _gauss),
    "poisson": (_make(dpem_fast.DPPoissonMixture, n_components=2, max_count=6.0, epsilon=1.0, max_iter=3),
                lambda: np.random.default_rng(3).poisson([[1.0, 4.0]], (120, 2)).astype(float)),
    "mixed": (_make(dpem_fast.DPMixedMixture, n_components=2, epsilon=3.0, max_iter=3, bounds=(-4, 4),
                    categories={"x1": 3}), _mixed),
    "lda": (_make(dpem_fast.DPLatentDirichletAllocation, n_components=3, epsilon=2.0, batch_size=20,
                  max_doc_length=30, total_samples=60, vocabulary=[f"w{i}" for i in range(12)]), _corpus),
}

#: estimators whose fit takes a dask array (DP-SEP is sequential over rows and refuses one)
DASK = ("gmm", "mixed", "bernoulli", "gradient_em", "kmeans", "fa", "pca", "poisson", "lda")
