"""Lower bounds on ε from samples of a scalar test statistic on two neighbouring datasets.

The auditor holds ``a`` (the statistic's values over trials on D) and ``b`` (on D′).  Two
bounds, each valid at the stated confidence:

* :func:`gdp_lower_bound` ("gdp", the default for Gaussian releases).  Assumption: the
  samples are ``a_i ~ N(m_a, σ²)`` and ``b_i ~ N(m_b, σ²)``, independent — exactly what a
  white-box auditor sees when it projects a Gaussian release on a fixed direction (the noise
  is data-independent, so both sides have the same σ; σ itself is *estimated*, not taken
  from the plan, so a release with too little noise shows up).  The pair
  ``(N(m_a, σ²), N(m_b, σ²))`` has the trade-off curve of μ-GDP with ``μ = |m_b − m_a| / σ``
  (Dong, Roth & Su 2019, Sec. 2.2), so a mechanism that produces it is (ε, δ)-DP only if
  ``ε ≥ ε_μ(δ)``, the exact μ-GDP privacy profile
  ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong et al. 2019, Cor. 2.13); ``ε_μ(δ)``
  increases with μ.  The interval: with ``n_a``, ``n_b`` samples, pooled variance ``s²`` on
  ``ν = n_a + n_b − 2`` degrees of freedom and ``D̄ = b̄ − ā``,

  - ``σ ≤ σ_up = s √(ν / χ²_{ν, α/2})`` with probability ``1 − α/2`` (``ν s²/σ² ~ χ²_ν``),
  - ``D̄ − D ≤ z_{1−α/2} σ √(1/n_a + 1/n_b)`` with probability ``1 − α/2``,

  so with probability at least ``1 − α`` (union bound) both hold and then
  ``μ ≥ μ_lo = (D̄ − z_{1−α/2} σ_up √(1/n_a + 1/n_b)) / σ_up`` (clipped at 0): a
  conservative, exactly valid one-sided bound (no large-sample approximation).  The audit
  uses ``D = m_b − m_a ≥ 0`` by orienting the projection from f(D) to f(D′) before any
  noise is drawn.  This is the Gaussian-DP audit of Nasr et al. 2023 (Tight auditing of
  differentially private machine learning, Sec. 4) with a finite-sample interval.
* :func:`threshold_lower_bound` ("threshold", distribution-free).  A threshold test fixed
  before the samples are seen ("D′ if the statistic > t") has false-positive rate
  ``α_t = P(a > t)`` and false-negative rate ``β_t = P(b ≤ t)``; (ε, δ)-DP implies
  ``α_t + e^ε β_t ≥ 1 − δ`` and ``β_t + e^ε α_t ≥ 1 − δ`` (Kairouz, Oh & Viswanath 2015), so
  ``ε ≥ max(log((1 − δ − β̂_up)/α̂_up), log((1 − δ − α̂_up)/β̂_up))`` with Clopper–Pearson
  upper limits at ``1 − α/2`` each (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).  It
  needs no Gaussian assumption and is much weaker at small per-release μ.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..accounting._gdp import gaussian_epsilon

__all__ = ["gdp_lower_bound", "threshold_lower_bound", "gdp_epsilon"]


def gdp_epsilon(mu, delta):
    """ε of a μ-GDP mechanism at ``delta`` (0 for μ = 0)."""
    mu = float(mu)
    if mu <= 0.0:
        return 0.0
    return float(gaussian_epsilon(mu, float(delta)))


def _check_samples(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    for name, v in (("a", a), ("b", b)):
        if v.size < 2:
            raise ValueError(f"{name}: need at least 2 samples, got {v.size}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}: samples must be finite")
    return a, b


def _check_level(confidence, delta):
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    return confidence, delta


def gdp_lower_bound(a, b, delta, confidence=0.95):
    """``(epsilon_lower, mu_lower)`` from Gaussian samples ``a`` (on D) and ``b`` (on D′),
    oriented so that ``E b ≥ E a``; see the module docstring for the interval."""
    a, b = _check_samples(a, b)
    confidence, delta = _check_level(confidence, delta)
    alpha = 1.0 - confidence
    na, nb = a.size, b.size
    nu = na + nb - 2
    ss = math.fsum(((a - a.mean()) ** 2).tolist()) + math.fsum(((b - b.mean()) ** 2).tolist())
    s = math.sqrt(ss / nu)
    if s == 0.0:
        raise ValueError("a, b: the samples have no spread; the Gaussian fit needs noisy outputs")
    sigma_up = s * math.sqrt(nu / stats.chi2.ppf(alpha / 2.0, nu))
    z = stats.norm.ppf(1.0 - alpha / 2.0)
    diff = float(b.mean() - a.mean())
    mu_lo = max(0.0, (diff - z * sigma_up * math.sqrt(1.0 / na + 1.0 / nb)) / sigma_up)
    return gdp_epsilon(mu_lo, delta), mu_lo


def cp_upper(k, n, level):
    """Clopper–Pearson one-sided upper limit of a binomial proportion at ``level`` (``k``
    successes of ``n``; ``k`` may be an array)."""
    k = np.asarray(k)
    out = np.where(k >= n, 1.0, stats.beta.ppf(level, k + 1, np.maximum(n - k, 1)))
    return float(out) if out.ndim == 0 else out


def threshold_lower_bound(a, b, threshold, delta, confidence=0.95):
    """``epsilon_lower`` of the threshold test "D′ if the statistic > ``threshold``" (the
    threshold fixed before the samples: e.g. the midpoint of the two exact means)."""
    a, b = _check_samples(a, b)
    confidence, delta = _check_level(confidence, delta)
    level = 1.0 - (1.0 - confidence) / 2.0
    fp = cp_upper(int(np.count_nonzero(a > threshold)), a.size, level)
    fn = cp_upper(int(np.count_nonzero(b <= threshold)), b.size, level)
    best = 0.0
    for num, den in ((1.0 - delta - fn, fp), (1.0 - delta - fp, fn)):
        if num > 0.0 and den > 0.0:
            best = max(best, math.log(num / den))
    return best
