"""The variational quantities of LDA that the estimator uses (not kernels): ``exp E[log β]``
and the variational bound behind ``score`` / ``perplexity``.  Production code; the numpy
twin of the E-step kernel (``dpem_fast._reference.lda``) re-exports them."""
from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, gammaln, logsumexp

from .._kernels.lda import exp_dirichlet_expectation

__all__ = ["exp_dirichlet_expectation", "approx_bound", "default_clip_norm", "noise_threshold",
           "shrink_to_fallback", "shrink_to_unigram", "unigram_distribution", "plugin_log_likelihood"]


def approx_bound(X, gamma, lam, alpha, eta, doc_ratio=1.0):
    """The variational lower bound of ``log p(X)`` (Hoffman et al. 2010, Eq. 3).

    ``sum_d [ sum_v c_dv log sum_k exp(E log theta_dk + E log beta_kv)
    + E log p(theta_d | alpha) - E log q(theta_d | gamma_d) ]`` times ``doc_ratio``, plus
    ``E log p(beta | eta) - E log q(beta | lam)``.  The same bound as scikit-learn's
    ``LatentDirichletAllocation`` (whose ``perplexity`` is ``exp(-bound / word count)``).
    """
    n, K = gamma.shape
    V = lam.shape[1]
    elog_theta = digamma(gamma) - digamma(gamma.sum(axis=1))[:, None]
    elog_beta = digamma(lam) - digamma(lam.sum(axis=1))[:, None]
    score = 0.0
    for d in range(n):
        ids = X.indices[X.indptr[d]:X.indptr[d + 1]]
        cnts = X.data[X.indptr[d]:X.indptr[d + 1]]
        score += cnts @ logsumexp(elog_theta[d][:, None] + elog_beta[:, ids], axis=0)
    score += np.sum((alpha - gamma) * elog_theta)
    score += np.sum(gammaln(gamma) - gammaln(alpha))
    score += np.sum(gammaln(alpha * K) - gammaln(gamma.sum(axis=1)))
    score *= doc_ratio
    score += np.sum((eta - lam) * elog_beta)
    score += np.sum(gammaln(lam) - gammaln(eta))
    score += np.sum(gammaln(eta * V) - gammaln(lam.sum(axis=1)))
    return float(score)


def default_clip_norm(N, V):
    """The default per-document clip norm ``C = N / sqrt(min(N, V))`` (public: the token cap N
    and the vocabulary size V).

    A document of L <= N tokens with counts c_v has the statistic s[k, v] = c_v φ_vk, so
    ``‖s‖_F² = Σ_v c_v² ‖φ_v‖² ≤ Σ_v c_v²`` (equality when every term is hard-assigned, which
    the E-step approaches as the topics sharpen; diffuse φ only lowers it, down to
    ``Σ_v c_v² / K``).  Spread over distinct terms, ``Σ_v c_v² = L ≤ N``; with L > V some term
    repeats and the smallest possible value is L² / V.  So C is the largest norm an
    N-token document can have when its tokens are spread as evenly as the vocabulary allows:
    such a document is never clipped, one made of a few repeated terms is scaled down (the
    worst case, one term N times, has norm N).  C is sub-linear in N (√N for N ≤ V), where
    the paper's a·N (a = 0.1, N = 500: C = 50) is about six times the norm of a short text.
    """
    N, V = int(N), int(V)
    return N / math.sqrt(min(N, V))


def noise_threshold(n_entries):
    """``c = sqrt(2 ln n)``: the universal threshold (Donoho & Johnstone 1994) in noise standard
    deviations for ``n`` i.i.d. Gaussian entries.  The largest of n pure-noise entries exceeds
    it with probability below ``n φ(c) / c = 1 / sqrt(4π ln n)``, and the pure-noise entries
    that do clear it carry an expected mass of ``n E[Z 1(Z > c)] = n φ(c) = 1 / sqrt(2π)`` noise
    sds *in all n entries together*: noise alone puts (almost) no mass on any word."""
    return math.sqrt(2.0 * math.log(max(float(n_entries), 2.0)))


def shrink_to_fallback(M, tau, fallback, soft=False):
    """Post-processing of noisy non-negative count rows: ``hard(M, c τ) + L · fallback``.

    ``M`` (K, V): noisy counts, unbiased (signed noise, nothing clamped), each entry with noise
    standard deviation ``tau`` (public, from the plan).  Every entry below ``c τ``, with
    ``c = noise_threshold(K V)``, is set to 0 and every entry above it is kept whole (hard
    thresholding: no shrinkage bias on the words the release does show), so a word gets
    topic-specific mass only where the released statistic shows it above the noise.  The
    mass the threshold removes, ``L_k = max(Σ_v M_kv − Σ_v hard(M)_kv, 0)`` (Σ_v M_kv is an
    unbiased estimate of the row's total), goes back spread as ``fallback`` (a distribution
    over the V words, or (K, V) rows: one per topic): a row that is all noise becomes
    ``L_k · fallback``, i.e. the fallback itself.  With ``tau = 0`` (no noise) and ``M >= 0``
    this is the identity.  ``soft=True`` subtracts ``c τ`` from the kept entries too (soft
    thresholding): a pure-noise entry that clears the threshold keeps only its excess,
    ``n E[(Z − c)+] ≤ 1 / (c² sqrt(2π))`` sds in all; for releases whose result is never
    revisited (``partial_fit``).

    Returns ``(P, retained)``: the (K, V) shrunk rows and the fraction of the noisy total
    mass that cleared the threshold (a public function of the release; near 0 means the
    release is noise-dominated).
    """
    M = np.asarray(M, dtype=np.float64)
    K, V = M.shape
    tau = float(tau)
    if tau <= 0:
        P = np.maximum(M, 0.0)
        return P, 1.0
    cut = noise_threshold(K * V) * tau
    kept_part = np.maximum(M - cut, 0.0) if soft else np.where(M > cut, M, 0.0)
    kept = kept_part.sum(axis=1)
    lost = np.maximum(M.sum(axis=1) - kept, 0.0)
    total = kept.sum() + lost.sum()
    retained = float(kept.sum() / total) if total > 0 else 0.0
    fallback = np.asarray(fallback, dtype=np.float64)
    return kept_part + lost[:, None] * (fallback if fallback.ndim == 2 else fallback[None, :]), retained


def shrink_to_unigram(M, tau, unigram):
    """Post-processing of a noisy topic-word statistic against the null model "every topic is
    the released unigram": ``m_k u + hard(M − m_k u, c τ)``, clamped at 0.

    ``M`` (K, V): noisy counts, each entry with public noise sd ``tau``; ``m_k = max(Σ_v M_kv, 0)``
    (unbiased for the row's total); ``u`` the released unigram distribution (a public
    post-processed release); ``c = noise_threshold(K V)``.  Under the null each deviation
    ``M_kv − m_k u_v`` is noise plus the small error of ``m_k``, and the universal threshold
    removes (almost) all of it: a topic keeps a word's deviation, up or down, only where the
    release shows it above the noise, and is otherwise the unigram scaled to its own total (no
    mass moved twice, unlike :func:`shrink_to_fallback`'s kept entries plus the fallback).
    ``tau = 0``: ``max(M, 0)``.  Returns ``(P, retained)``, ``retained`` the kept deviations'
    absolute mass over the rows' total (0: the topics are the unigram)."""
    M = np.asarray(M, dtype=np.float64)
    if float(tau) <= 0:
        return np.maximum(M, 0.0), 1.0
    total = np.maximum(M.sum(axis=1, keepdims=True), 0.0)
    base = total * np.asarray(unigram, dtype=np.float64)[None, :]
    dev = M - base
    kept = np.where(np.abs(dev) > noise_threshold(M.size) * float(tau), dev, 0.0)
    mass = float(total.sum())
    return np.maximum(base + kept, 0.0), (float(np.abs(kept).sum() / mass) if mass > 0 else 0.0)


def unigram_distribution(counts, tau, eta):
    """The word distribution from noisy (or exact, ``tau = 0``) word counts ``counts`` (V,):
    ``shrink_to_fallback`` towards the uniform distribution (the data-independent prior), plus
    the pseudo-count ``eta`` per word, normalised.  Strictly positive."""
    counts = np.asarray(counts, dtype=np.float64)
    V = counts.size
    P, _ = shrink_to_fallback(counts[None, :], tau, np.full(V, 1.0 / V))
    u = P[0] + float(eta)
    return u / u.sum()


def plugin_log_likelihood(X, gamma, lam):
    """Per-document plug-in log-likelihood ``Σ_v c_dv log Σ_k θ̂_dk β̂_kv`` with the expected
    topic-word distributions ``β̂_k = λ_k / Σ_v λ_kv`` (E[β] under q(β | λ)) and the expected
    topic proportions ``θ̂_d = γ_d / Σ_k γ_dk``; returns an (n_documents,) array (0 for an empty
    document).  No global term: a sum over the tokens of X only, so the per-token average does
    not depend on how many documents X has."""
    lam = np.asarray(lam, dtype=np.float64)
    beta = lam / lam.sum(axis=1, keepdims=True)
    theta = gamma / gamma.sum(axis=1, keepdims=True)
    out = np.zeros(X.shape[0])
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        if lo == hi:
            continue
        p = theta[d] @ beta[:, X.indices[lo:hi]]
        out[d] = float(X.data[lo:hi] @ np.log(p))
    return out
