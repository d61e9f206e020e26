"""The utility floor of issue 23, one case per registered private estimator.

``CASES`` maps an estimator's registry name (``_cli_name``) to a :class:`Case`: synthetic
train/test data with the model's structure and a declared public domain, the estimator at a
given ε, and its **trivial private model** — the simplest model the same (ε, δ) and relation
buy (one Gaussian — with a diagonal covariance for factor analysis, its model with no factor —,
one centre, one component, the unigram (one-topic) model, the prior mean).  The conformance suite's
utility test (``privacy_conformance.PrivacyConformance``) fits both at several ε and row counts
(small n included) and checks the contract of issue 23:

1. never absurd: finite parameters, means / centres inside the declared box, ``sample`` works
   where the model has it (``sane``);
2. never below the trivial model held out, up to the noise of the comparison (``slack``: a few
   standard errors of the held-out mean score, per row); a fit that cannot reach it must say
   so — an error or a ``UserWarning`` — and is then exempt.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

import dpem_fast
from dpem_fast._reference.fa import PrivateDiagonalGaussian
from dpem_fast.mixture._gaussian_block import COVARIANCES


@dataclasses.dataclass(frozen=True)
class Case:
    data: Callable            # data(n, seed) -> (train, test)
    model: Callable           # model(epsilon, seed) -> unfitted private estimator
    trivial: Callable         # trivial(epsilon, seed, fitted) -> fitted trivial model
    sane: Callable            # sane(fitted, train) -> None (asserts)
    score: Callable = lambda m, X: float(m.score(X))
    sizes: tuple = (300, 3000)   # row counts of the test grid (small n included)


def _refit(**overrides):
    """The trivial model: the same estimator with ``overrides`` fitted at the same ε."""
    def trivial(epsilon, seed, fitted, X):
        return fitted.__class__(**{**fitted.get_params(), **overrides, "epsilon": epsilon,
                                   "random_state": seed + 1000}).fit(X)
    return trivial


def _blobs(n, seed, d=3, K=3, sd=0.6, box=6.0):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(12345).uniform(-box / 2, box / 2, (K, d))
    X = centres[rng.integers(K, size=n)] + rng.normal(scale=sd, size=(n, d))
    return X.clip(-box, box)


def _diagonal_gaussian(epsilon, seed, fitted, X):
    """The trivial model of factor analysis and PCA: one Gaussian with a diagonal covariance."""
    return PrivateDiagonalGaussian(epsilon, bounds=(-6, 6), random_state=seed + 1000).fit(X)


def _split(make):
    def data(n, seed):
        return make(n, seed), make(4000, seed + 7919)
    return data


def _inside(a, lo, hi, what):
    a = np.asarray(a, dtype=np.float64)
    assert np.all(np.isfinite(a)), f"{what} not finite"
    assert np.all(a >= lo - 1e-9) and np.all(a <= hi + 1e-9), \
        f"{what} outside the declared box [{lo}, {hi}]: {a.min():.3g} .. {a.max():.3g}"


def _sane_gmm(m, X):
    _inside(m.means_, -6, 6, "means_")
    covs = COVARIANCES[m.covariance_type].to_full(np.asarray(m.covariances_, dtype=np.float64), *m.means_.shape)
    eig = np.linalg.eigvalsh(covs)
    assert np.all(eig > 0) and np.all(eig <= 3 * 12.0 ** 2), "covariances not PSD or beyond the box"
    assert np.all(np.isfinite(m.sample(50)[0]))


def _sane_kmeans(m, X):
    _inside(m.cluster_centers_, -6, 6, "cluster_centers_")


def _sane_mixture_in(lo, hi, attr="means_"):
    def sane(m, X):
        _inside(getattr(m, attr), lo, hi, attr)
        w = np.asarray(m.weights_)
        assert np.all(w >= 0) and abs(w.sum() - 1) < 1e-9
        if hasattr(m, "sample"):
            assert np.all(np.isfinite(m.sample(50)[0]))
    return sane


def _binary(n, seed, d=20, K=3):
    rng = np.random.default_rng(seed)
    protos = np.random.default_rng(54321).uniform(0.05, 0.95, (K, d))
    return (rng.random((n, d)) < protos[rng.integers(K, size=n)]).astype(float)


def _counts(n, seed, d=10, K=3):
    rng = np.random.default_rng(seed)
    rates = np.random.default_rng(6789).uniform(0.2, 6.0, (K, d))
    return rng.poisson(rates[rng.integers(K, size=n)]).astype(float)


def _sym(n, seed, d=3, sep=1.5):
    rng = np.random.default_rng(seed)
    theta = np.full(d, sep / np.sqrt(d))
    s = rng.choice([-1.0, 1.0], size=n)[:, None]
    return s * theta + rng.normal(size=(n, d))


def _zero_means(epsilon, seed, fitted, X):
    """The prior mean: the fitted model with every mean at 0 (data-independent, free)."""
    import copy
    t = copy.deepcopy(fitted)
    t.means_ = np.zeros_like(np.asarray(t.means_))
    if hasattr(t, "_means_param"):
        t._means_param = np.zeros_like(np.asarray(t._means_param))
    return t


def _low_rank(n, seed, d=6, k=2):
    rng = np.random.default_rng(seed)
    W = np.random.default_rng(2468).normal(size=(d, k))
    return (rng.normal(size=(n, k)) @ W.T + 0.5 * rng.normal(size=(n, d))).clip(-6, 6)


def _mixed(n, seed):
    """The blobs with two category columns that follow the class (codes; the "other" slot unused)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(12345).uniform(-3, 3, (3, 3))
    z = rng.integers(3, size=n)
    X = (centres[z] + rng.normal(scale=0.6, size=(n, 3))).clip(-6, 6)
    c1 = np.where(rng.random(n) < 0.8, z, rng.integers(3, size=n))
    c2 = (rng.random(n) < np.array([0.1, 0.5, 0.9])[z]).astype(float)
    return np.column_stack([X[:, 0], c1, X[:, 1:], c2])


CASES = {
    "gmm": Case(
        data=_split(_blobs),
        model=lambda eps, seed: dpem_fast.DPGaussianMixture(3, epsilon=eps, max_iter=10, bounds=(-6, 6),
                                                            random_state=seed),
        trivial=_refit(n_components=1), sane=_sane_gmm),
    "mixed": Case(
        data=_split(_mixed),
        model=lambda eps, seed: dpem_fast.DPMixedMixture(3, epsilon=eps, max_iter=10, bounds=(-6, 6),
                                                         categories={"x1": 3, "x4": 2}, random_state=seed),
        trivial=_refit(n_components=1), sane=_sane_mixture_in(-6, 6)),
    "kmeans": Case(
        data=_split(_blobs),
        model=lambda eps, seed: dpem_fast.DPKMeans(3, epsilon=eps, max_iter=5, bounds=(-6, 6), random_state=seed),
        trivial=_refit(n_clusters=1), sane=_sane_kmeans),
    "bernoulli": Case(
        data=_split(_binary),
        model=lambda eps, seed: dpem_fast.DPBernoulliMixture(3, epsilon=eps, max_iter=10, random_state=seed),
        trivial=_refit(n_components=1), sane=_sane_mixture_in(0, 1)),
    "poisson": Case(
        data=_split(_counts),
        model=lambda eps, seed: dpem_fast.DPPoissonMixture(3, max_count=12.0, epsilon=eps, max_iter=10,
                                                           random_state=seed),
        trivial=_refit(n_components=1), sane=_sane_mixture_in(0, 12, "rates_")),
    "gradient-em": Case(
        data=_split(_sym),
        model=lambda eps, seed: dpem_fast.DPGradientEM(epsilon=eps, max_iter=10, random_state=seed),
        trivial=_zero_means, sane=lambda m, X: _inside(m.means_, -1e6, 1e6, "means_")),
    "sep": Case(
        data=_split(_blobs),
        model=lambda eps, seed: dpem_fast.DPStochasticEP(3, epsilon=eps, n_epochs=5, random_state=seed),
        trivial=_zero_means, sane=_sane_mixture_in(-6, 6)),
    "fa": Case(
        data=_split(_low_rank),
        model=lambda eps, seed: dpem_fast.DPFactorAnalysis(2, epsilon=eps, bounds=(-6, 6), random_state=seed),
        trivial=_diagonal_gaussian,
        sane=lambda m, X: (_inside(m.mean_, -6, 6, "mean_"),
                           _inside(m.noise_variance_, 0, 144, "noise_variance_"))),
    # the probabilistic PCA of the released components against the same diagonal Gaussian
    "pca": Case(
        data=_split(_low_rank),
        model=lambda eps, seed: dpem_fast.DPPCA(2, epsilon=eps, bounds=(-6, 6), random_state=seed),
        trivial=_diagonal_gaussian,
        sane=lambda m, X: (_inside(m.mean_, -6, 6, "mean_"),
                           _inside(m.explained_variance_, 0, 144 * X.shape[1], "explained_variance_"))),
}


def _documents(n, seed, V=100, K=4, length=40):
    """Documents of ``length`` tokens from K sparse topics over V words (a count matrix)."""
    import scipy.sparse as sp
    topics = np.random.default_rng(1357).dirichlet(np.full(V, 0.05), size=K)
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(K, 0.2), size=n)
    counts = np.stack([rng.multinomial(length, p) for p in theta @ topics]).astype(float)
    return sp.csr_matrix(counts)


def _lda(eps, seed, n_components=4, n=None):
    return dpem_fast.DPLatentDirichletAllocation(
        n_components, epsilon=eps, batch_size=64, max_doc_length=40, total_samples=n,
        n_epochs=1, vocabulary=[f"w{i}" for i in range(100)], random_state=seed)


def _lda_split(n, seed):
    return _documents(n, seed), _documents(2000, seed + 7919)


class _LDAModel:
    """``model(eps, seed)`` needs the public document count: the case's data sets it at fit."""

    def __init__(self, eps, seed, n_components=4):
        self.eps, self.seed, self.k = eps, seed, n_components

    def fit(self, X):
        return _lda(self.eps, self.seed, self.k, X.shape[0]).fit(X)


def _sane_lda(m, X):
    c = np.asarray(m.components_, dtype=np.float64)
    assert np.all(np.isfinite(c)) and np.all(c > 0), "topic-word parameters not finite and positive"
    perplexity = m.plugin_perplexity(X)
    assert np.isfinite(perplexity) and perplexity <= X.shape[1], \
        "plug-in perplexity above the vocabulary size (worse than uniform)"


CASES["lda"] = Case(
    data=_lda_split,
    model=_LDAModel,
    trivial=lambda eps, seed, fitted, X: _LDAModel(eps, seed + 1000, 1).fit(X),
    sane=_sane_lda,
    score=lambda m, X: -math.log(m.plugin_perplexity(X)),
    sizes=(300, 1500))


def _gmm_of_type(covariance_type):
    return Case(
        data=_split(_blobs),
        model=lambda eps, seed: dpem_fast.DPGaussianMixture(3, covariance_type=covariance_type, epsilon=eps,
                                                            max_iter=10, bounds=(-6, 6), random_state=seed),
        trivial=_refit(n_components=1), sane=_sane_gmm)


#: the GMM case for each covariance type other than "full" (CASES["gmm"]): the trivial model is
#: one component of the same type
GMM_TYPE_CASES = {ct: _gmm_of_type(ct) for ct in ("diag", "tied", "spherical")}


#: the mixture's ``n_components="auto"`` (one fit at ``max_components`` from the private start,
#: pruned): the trivial model is one component
GMM_AUTO_CASE = Case(
    data=_split(_blobs),
    model=lambda eps, seed: dpem_fast.DPGaussianMixture("auto", max_components=6, epsilon=eps, max_iter=10,
                                                        bounds=(-6, 6), random_state=seed),
    trivial=_refit(n_components=1), sane=_sane_gmm)
