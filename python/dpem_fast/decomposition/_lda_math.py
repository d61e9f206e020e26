"""The variational quantities of LDA that the estimator uses (not kernels): ``exp E[log β]``
and the variational bound behind ``score`` / ``perplexity``.  Production code; the numpy
twin of the E-step kernel (``dpem_fast._reference.lda``) re-exports them."""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, logsumexp

__all__ = ["exp_dirichlet_expectation", "approx_bound"]


def exp_dirichlet_expectation(alpha):
    """``exp(E[log x])`` for ``x ~ Dirichlet(alpha)``, row-wise: ``exp(psi(a) - psi(sum a))``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 1:
        return np.exp(digamma(alpha) - digamma(alpha.sum()))
    return np.exp(digamma(alpha) - digamma(alpha.sum(axis=1))[:, None])


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
