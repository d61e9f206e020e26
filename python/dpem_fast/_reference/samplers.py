"""Pure-Python reference for the exact discrete samplers, and exact pmfs.

The samplers follow Canonne, Kamath, Steinke (2020), "The Discrete Gaussian
for Differential Privacy", Algorithms 1-3, written plainly with Python ints
and :class:`fractions.Fraction`.  Their only source of randomness is
``uniform_below(m)``: a uniformly random int in ``{0, ..., m - 1}``, taken
from a caller-supplied random source (:func:`python_source` adapts any
object with ``randrange``, e.g. :class:`random.Random`, or
:class:`secrets.SystemRandom`).  They are slow (about 1e4 draws per second)
and exist to check the compiled samplers in :mod:`dpem_fast.random` and as
a benchmark baseline.

The pmf helpers return float64 probabilities whose relative error is a few
units in the last place wherever the probability is a normal double (above
about 1e-300); below that they underflow to 0.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

__all__ = [
    "python_source",
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_laplace_pmf",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
]

UniformBelow = Callable[[int], int]


def python_source(rng) -> UniformBelow:
    """``uniform_below`` drawing from ``rng.randrange`` (e.g. ``random.Random(0)``)."""
    return rng.randrange


def bernoulli(p: Fraction, uniform_below: UniformBelow) -> int:
    """Bernoulli(p) for a rational 0 <= p <= 1."""
    p = Fraction(p)
    return int(uniform_below(p.denominator) < p.numerator)


def bernoulli_exp(gamma: Fraction, uniform_below: UniformBelow) -> int:
    """Bernoulli(exp(-gamma)) for a rational gamma >= 0 (CKS 2020, Algorithm 1)."""
    gamma = Fraction(gamma)
    while gamma > 1:                      # exp(-gamma) = exp(-1) * exp(-(gamma - 1))
        if not bernoulli_exp(Fraction(1), uniform_below):
            return 0
        gamma -= 1
    k = 1
    while bernoulli(gamma / k, uniform_below):
        k += 1
    return k % 2


def discrete_laplace(scale: Fraction, uniform_below: UniformBelow) -> int:
    """Discrete Laplace, P(y) ∝ exp(-|y| / scale), scale = t/s (CKS 2020, Algorithm 2)."""
    scale = Fraction(scale)
    t, s = scale.numerator, scale.denominator
    while True:
        u = uniform_below(t)
        if not bernoulli_exp(Fraction(u, t), uniform_below):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), uniform_below):
            v += 1
        y = (u + t * v) // s
        b = uniform_below(2)
        if b == 1 and y == 0:
            continue
        return -y if b else y


def discrete_gaussian(sigma2: Fraction, uniform_below: UniformBelow) -> int:
    """Discrete Gaussian N_Z(0, sigma2), P(y) ∝ exp(-y²/(2 sigma2)) (CKS 2020, Algorithm 3)."""
    sigma2 = Fraction(sigma2)
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = discrete_laplace(Fraction(t), uniform_below)
        if bernoulli_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2), uniform_below):
            return y


# ---------------------------------------------------------------------------
# Exact pmfs
# ---------------------------------------------------------------------------

def _mp():
    import mpmath

    ctx = mpmath.mp.clone()
    ctx.dps = 40
    return ctx


def _gaussian_log_normaliser(sigma2: Fraction) -> float:
    return float(_gaussian_log_normaliser_mp(sigma2, _mp()))


def _gaussian_log_normaliser_mp(sigma2: Fraction, mp):
    """log of sum_{k in Z} exp(-k²/(2 sigma2)), to 40 digits (an mpmath number).

    Uses the direct sum for sigma2 <= 1 and the Poisson-summation (Jacobi
    theta) form sqrt(2 pi sigma2) * sum_k exp(-2 pi² sigma2 k²) above; both
    are truncated where the next term is below 1e-60 of the total.
    """
    s2 = mp.mpf(sigma2.numerator) / sigma2.denominator
    total = mp.mpf(0)
    if sigma2 <= 1:
        k = 0
        while True:
            term = mp.exp(-mp.mpf(k * k) / (2 * s2))
            total += term if k == 0 else 2 * term
            if term < mp.mpf(10) ** -60 * total:
                break
            k += 1
    else:
        k = 0
        while True:
            term = mp.exp(-2 * mp.pi ** 2 * s2 * k * k)
            total += term if k == 0 else 2 * term
            if term < mp.mpf(10) ** -60 * total:
                break
            k += 1
        total *= mp.sqrt(2 * mp.pi * s2)
    return mp.log(total)


def discrete_gaussian_pmf(sigma2, support) -> np.ndarray:
    """P(Y = y) for y in ``support`` (ints), Y ~ N_Z(0, sigma2).

    ``sigma2`` is converted exactly to a Fraction (floats included).  The
    normaliser is computed with mpmath to 40 digits; each probability is then
    ``exp(-y²/(2 sigma2) - log Z)`` in float64 (relative error below about
    ``1e-16 * (1 + y²/(2 sigma2))``).
    """
    sigma2 = Fraction(sigma2)
    y = np.asarray(support, dtype=np.int64)
    logz = _gaussian_log_normaliser(sigma2)
    yf = y.astype(np.float64)
    return np.exp(-(yf * yf) / (2.0 * float(sigma2)) - logz)


def discrete_gaussian_variance(sigma2) -> float:
    """Exact variance of N_Z(0, sigma2), to float precision (mpmath, 40 digits).

    ``sum_k k² exp(-k²/(2 s)) / Z`` with ``s = sigma2``.  For ``s <= 1`` by direct
    summation; above by Poisson summation:
    ``sum_k k² e^{-k²/(2s)} = sqrt(2 pi s) s sum_m (1 - 4 pi² s m²) e^{-2 pi² s m²}``.
    Both series are truncated below 1e-60 of the total.
    """
    sigma2 = Fraction(sigma2)
    mp = _mp()
    s2 = mp.mpf(sigma2.numerator) / sigma2.denominator
    eps = mp.mpf(10) ** -60
    num = mp.mpf(0)
    if sigma2 <= 1:
        k = 1
        while True:
            w = mp.mpf(k * k) * mp.exp(-mp.mpf(k * k) / (2 * s2))
            num += 2 * w
            if w < eps * num and k * k > 2 * s2:
                break
            k += 1
    else:
        m = 0
        while True:
            e = mp.exp(-2 * mp.pi ** 2 * s2 * m * m)
            term = (1 - 4 * mp.pi ** 2 * s2 * m * m) * e
            num += term if m == 0 else 2 * term
            if m > 0 and abs(term) < eps * abs(num):
                break
            m += 1
        num *= mp.sqrt(2 * mp.pi * s2) * s2
    return float(num / mp.exp(mp.mpf(_gaussian_log_normaliser_mp(sigma2, mp))))


def discrete_laplace_pmf(scale, support) -> np.ndarray:
    """P(Y = y) for y in ``support`` (ints), P(y) ∝ exp(-|y| / scale).

    Closed form ``tanh(1/(2 scale)) * exp(-|y|/scale)``, i.e.
    ``(1 - e^{-1/scale}) / (1 + e^{-1/scale}) * e^{-|y|/scale}``; the
    constant is computed with mpmath (40 digits), the exponentials in float64.
    """
    scale = Fraction(scale)
    mp = _mp()
    c = float(mp.tanh(mp.mpf(scale.denominator) / (2 * scale.numerator)))
    y = np.abs(np.asarray(support, dtype=np.int64)).astype(np.float64)
    return c * np.exp(-y / float(scale))
