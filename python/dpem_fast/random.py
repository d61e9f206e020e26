"""Public samplers of dpem_fast: counter-based ChaCha20 streams, OpenMP blocks.

Every function takes ``random_state=None`` and ``n_threads=None`` keyword
arguments.  Output for a fixed ``random_state`` is bit-identical for any
number of threads: the output is cut into fixed blocks and block ``b`` draws
from ChaCha20 stream ``b`` of a key derived from ``random_state`` and the
function's name (see :mod:`dpem_fast._rng`).

``random_state=None`` uses the operating system's entropy.  Seeded runs are
for testing and research: the noise of a seeded run can be recomputed by
anyone who knows the seed, so never publish a release made with a known seed.

The continuous samplers (:func:`uniform`, :func:`standard_normal`,
:func:`laplace`, :func:`symmetric_gaussian`) return IEEE doubles and are
therefore exposed to floating-point attacks (Mironov 2012).  The discrete
samplers (:func:`discrete_laplace`, :func:`discrete_gaussian`,
:func:`symmetric_discrete_gaussian`) are exact: integer arithmetic only.
"""
from __future__ import annotations

import math
from fractions import Fraction
from numbers import Integral, Rational

import numpy as np

from ._dpcore import _contract
from ._dpcore import _rng as _core
from ._rng import derive_key, make_key
from ._threads import effective_n_threads
from ._validation import check_positive_int, check_positive_real, check_size

__all__ = [
    "uniform",
    "standard_normal",
    "laplace",
    "integers",
    "symmetric_gaussian",
    "discrete_laplace",
    "discrete_gaussian",
    "symmetric_discrete_gaussian",
    "discrete_gaussian_parameters",
    "sampler_key",
]

#: Outputs per ChaCha20 stream in the continuous samplers (reproducibility contract).
SAMPLER_BLOCK = _contract.SAMPLER_BLOCK


def _prepare(size, random_state, n_threads, purpose):
    shape = check_size(size)
    key = derive_key(make_key(random_state), "dpem_fast.random", purpose)
    return shape, key, effective_n_threads(n_threads)


def uniform(size, *, random_state=None, n_threads=None) -> np.ndarray:
    """Uniform doubles in [0, 1) with 53 random bits each.

    Parameters
    ----------
    size : int or tuple of int
        Output shape.
    random_state : None, int, SeedSequence or Generator, default=None
        Key source; ``None`` = OS entropy.
    n_threads : int, default=None
        OpenMP threads (``None``: ``OMP_NUM_THREADS`` or all cores).

    Returns
    -------
    ndarray of float64 of shape ``size``
    """
    shape, key, nt = _prepare(size, random_state, n_threads, "uniform")
    out = np.empty(shape, dtype=np.float64)
    _core.fill_uniform(key, 0, out.reshape(-1), nt)
    return out


def standard_normal(size, *, random_state=None, n_threads=None) -> np.ndarray:
    """Standard normal doubles (Marsaglia–Tsang 256-strip ziggurat, exact tail).

    Parameters and returns as :func:`uniform`.
    """
    shape, key, nt = _prepare(size, random_state, n_threads, "standard_normal")
    out = np.empty(shape, dtype=np.float64)
    _core.fill_normal(key, 0, 1.0, out.reshape(-1), nt)
    return out


def laplace(scale, size, *, random_state=None, n_threads=None) -> np.ndarray:
    """Laplace(0, ``scale``) doubles: density ``exp(-|x|/scale) / (2 scale)``.

    Parameters
    ----------
    scale : float > 0
        Scale b (variance 2 b²).
    size, random_state, n_threads
        As :func:`uniform`.
    """
    scale = check_positive_real(scale, "scale")
    shape, key, nt = _prepare(size, random_state, n_threads, "laplace")
    out = np.empty(shape, dtype=np.float64)
    _core.fill_laplace(key, 0, scale, out.reshape(-1), nt)
    return out


def integers(high, size, *, random_state=None, n_threads=None) -> np.ndarray:
    """Unbiased uniform integers in ``{0, ..., high - 1}`` (Lemire's rejection, no modulo bias).

    Parameters
    ----------
    high : int, 1 <= high < 2**64
    size, random_state, n_threads
        As :func:`uniform`.

    Returns
    -------
    ndarray of uint64
    """
    high = check_positive_int(high, "high")
    if high >= 2**64:
        raise ValueError(f"high must be < 2**64, got {high}")
    shape, key, nt = _prepare(size, random_state, n_threads, "integers")
    out = np.empty(shape, dtype=np.uint64)
    _core.fill_integers(key, 0, high, out.reshape(-1), nt)
    return out


def symmetric_gaussian(d, sigma, batch=None, *, random_state=None, n_threads=None) -> np.ndarray:
    """Analyze-Gauss noise: symmetric d×d matrices with i.i.d. N(0, σ²) upper triangle.

    The upper triangle including the diagonal holds independent N(0, σ²)
    draws and is mirrored below, so ``M == M.T`` exactly (Dwork, Talwar,
    Thakurta, Zhang 2014, "Analyze Gauss"; DP-EM Eq. 16–18).  Row ``i`` of
    matrix ``m`` draws from its own stream ``m * d + i``.

    Parameters
    ----------
    d : int >= 1
    sigma : float > 0
    batch : int >= 0 or None
        ``None`` gives one (d, d) matrix; an int gives shape (batch, d, d).
    random_state, n_threads
        As :func:`uniform`.
    """
    from ._dpcore import _symnoise

    d = check_positive_int(d, "d")
    sigma = check_positive_real(sigma, "sigma")
    nb = 1 if batch is None else check_positive_int(batch, "batch", minimum=0)
    key = derive_key(make_key(random_state), "dpem_fast.random", "symmetric_gaussian")
    out = np.empty((nb, d, d), dtype=np.float64)
    _symnoise.fill_symmetric_normal(key, 0, sigma, out, effective_n_threads(n_threads))
    return out[0] if batch is None else out


# ---------------------------------------------------------------------------
# Exact discrete samplers (Canonne, Kamath, Steinke 2020, Algorithms 1-3)
# ---------------------------------------------------------------------------

#: Outputs per ChaCha20 stream in the discrete samplers (reproducibility contract).
DISCRETE_SAMPLER_BLOCK = _contract.SAMPLER_BLOCK

_X_LIMIT = 2**62         # every |sample| and every Laplace intermediate stays below this
_LAPLACE_T_MAX = 2**56   # scale numerator: overflow probability <= exp(-2^62 / t) <= exp(-64)
_LAPLACE_S_MAX = 2**64 - 1
_D_LIMIT = 2**126        # D = 2 a b t^2 and |Y| b t must stay below 2^126
_YMAX_OVER_T = 2**20     # |Y| <= Ymax with Ymax / t >= 2^20: P(|Y| > Ymax) < exp(-2^20)


def _exact_positive_rational(value, name: str) -> Fraction:
    """``value`` (int, float, Fraction, numpy scalar) as an exact positive Fraction.

    Floats are converted exactly (``Fraction(0.1) == 3602879701896397 / 2**55``),
    never through a decimal string.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, a float or a Fraction, got bool")
    if isinstance(value, (Integral, np.integer)):
        q = Fraction(int(value))
    elif isinstance(value, Fraction):
        q = value
    elif isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            raise ValueError(f"{name} must be a number, got nan")
        if math.isinf(v):
            raise ValueError(f"{name} must be finite, got {v}")
        q = Fraction(v)
    elif isinstance(value, Rational):
        q = Fraction(value.numerator, value.denominator)
    else:
        raise TypeError(f"{name} must be an int, a float or a Fraction, got {type(value).__name__}")
    if q <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return q


def _discrete_gaussian_params(sigma2) -> tuple:
    """Exact integer parameters of CKS Algorithm 3 for sigma² = a/b.

    Returns ``(t, vcap, ymax, a, bt, D)`` with ``t = floor(sigma) + 1``,
    ``vcap = floor((2^62 - t) / t)`` (cap on the Laplace geometric part),
    ``ymax`` the largest |Y| with ``|Y| b t < 2^126``, ``bt = b t`` and
    ``D = 2 a b t²`` (the acceptance exponent is ``(|Y| b t - a)² / D``).
    """
    q = _exact_positive_rational(sigma2, "sigma2")
    a, b = q.numerator, q.denominator
    t = math.isqrt(a // b) + 1                   # floor(sqrt(a/b)) = isqrt(floor(a/b))
    bt = b * t
    D = 2 * a * b * t * t
    if D >= _D_LIMIT:
        raise ValueError(
            f"sigma2={sigma2!r} is outside the exact range: with sigma2 = a/b (reduced) and "
            f"t = floor(sigma) + 1, 2*a*b*t**2 must be < 2**126 (it is about 2**{D.bit_length() - 1}); "
            "see the supported range in the docstring of dpem_fast.random.discrete_gaussian"
        )
    ymax = min(_X_LIMIT, (_D_LIMIT - 1) // bt)
    if ymax < _YMAX_OVER_T * t:
        raise ValueError(
            f"sigma2={sigma2!r} is outside the exact range: b*t**2 must be <= 2**106 "
            f"(it is about 2**{(b * t * t).bit_length() - 1}); "
            "see the supported range in the docstring of dpem_fast.random.discrete_gaussian"
        )
    vcap = (_X_LIMIT - t) // t
    return (t, vcap, ymax, a, bt, D)


def discrete_gaussian_parameters(sigma2) -> tuple:
    """The exact integer parameters the discrete Gaussian sampler runs on, for compiled callers.

    For Cython code that ``cimport``s ``dpem_fast._dpcore.dpc_dgauss`` (see
    :func:`dpem_fast.get_include` and ``examples/cimport_consumer``): pass
    ``(t, vcap, ymax, a, bt, D)`` to ``dpc_dgauss_setup`` with ``a``, ``bt`` and ``D``
    split into their high and low 64-bit halves.  With ``sigma2 = a/b`` reduced,
    ``t = floor(sigma) + 1``, ``vcap = floor((2**62 - t) / t)``, ``bt = b t``,
    ``D = 2 a b t**2`` and ``ymax`` the largest ``|Y|`` with ``|Y| b t < 2**126``.

    Raises
    ------
    ValueError
        As :func:`discrete_gaussian` (``sigma2`` not > 0, not finite, or outside the exact
        range).
    """
    return _discrete_gaussian_params(sigma2)


def sampler_key(random_state, sampler) -> np.ndarray:
    """The ChaCha20 key that sampler ``sampler`` of this module uses for ``random_state``.

    A compiled caller that draws block ``b`` of ``SAMPLER_BLOCK`` (4,096) outputs from stream
    ``b`` of this key reproduces the module's output exactly (e.g.
    ``sampler_key(0, "discrete_gaussian")`` with :func:`discrete_gaussian_parameters`).

    Returns
    -------
    ndarray of uint32, shape (8,)
    """
    samplers = __all__[:8]
    if sampler not in samplers:
        raise ValueError(f"sampler must be one of {samplers}, got {sampler!r}")
    return derive_key(make_key(random_state), "dpem_fast.random", sampler)


def _overflow_error(what: str) -> OverflowError:
    return OverflowError(
        f"{what}: a draw left the exact 62-bit integer range (probability below exp(-64)); "
        "no wrong value was returned, draw again with another random_state"
    )


def discrete_laplace(scale, size, *, random_state=None, n_threads=None) -> np.ndarray:
    """Exact discrete Laplace integers: ``P(Y = y) ∝ exp(-|y| / scale)``.

    Canonne, Kamath, Steinke (2020), "The Discrete Gaussian for Differential
    Privacy", Algorithm 2 (with Algorithm 1 for the Bernoulli(exp(-γ)) coins):
    integer arithmetic and fair random bits only, no floating point.

    Parameters
    ----------
    scale : int, float or Fraction > 0
        Scale ``t/s``.  Floats are converted exactly with
        :class:`fractions.Fraction`.  Supported: reduced numerator
        ``t <= 2**56`` and denominator ``s < 2**64``; every float in
        ``[2**-10, 2**56]`` qualifies.
    size : int or tuple of int
        Output shape.
    random_state, n_threads
        As :func:`uniform`.

    Returns
    -------
    ndarray of int64 of shape ``size``

    Raises
    ------
    OverflowError
        If an intermediate would pass 2**62 (probability at most
        ``exp(-2**62 / t) <= exp(-64)`` per draw); no wrong value is returned.

    Notes
    -----
    Variance ``2 e^{-1/scale} / (1 - e^{-1/scale})²``.  Block ``b`` of
    :data:`DISCRETE_SAMPLER_BLOCK` outputs draws from stream ``b``, so the
    output does not depend on ``n_threads``.
    """
    from ._dpcore import _dgauss

    q = _exact_positive_rational(scale, "scale")
    t, s = q.numerator, q.denominator
    if t > _LAPLACE_T_MAX or s > _LAPLACE_S_MAX:
        raise ValueError(
            f"scale={scale!r} is outside the exact range: scale = t/s (reduced) needs "
            f"t <= 2**56 and s < 2**64"
        )
    vcap = (_X_LIMIT - t) // t
    shape, key, nt = _prepare(size, random_state, n_threads, "discrete_laplace")
    out = np.empty(shape, dtype=np.int64)
    flat = out.reshape(-1)
    overflow = np.zeros(-(-flat.size // DISCRETE_SAMPLER_BLOCK), dtype=np.uint8)
    _dgauss.fill_discrete_laplace(key, 0, t, s, vcap, flat, overflow, nt)
    if overflow.any():
        raise _overflow_error("discrete_laplace")
    return out


def discrete_gaussian(sigma2, size, *, random_state=None, n_threads=None) -> np.ndarray:
    """Exact discrete Gaussian integers N_Z(0, σ²): P(Y = y) ∝ exp(-y² / (2σ²)).

    Canonne, Kamath, Steinke (2020), "The Discrete Gaussian for Differential
    Privacy", Algorithm 3 (discrete Laplace proposals, Algorithm 2, with
    scale ``t = floor(σ) + 1``, accepted with ``Bernoulli(exp(-(|Y| - σ²/t)² / (2σ²)))``,
    Algorithm 1).  Every decision uses exact integer arithmetic (up to 256
    bits) on ``σ² = a/b``; no floating point is involved.

    Parameters
    ----------
    sigma2 : int, float or Fraction > 0
        The parameter σ² (the variance is slightly below σ² for σ < 1, and
        equal to it up to ``exp(-2π²σ²)`` terms above).  Floats are converted
        exactly (``1e-4`` becomes an odd integer over ``2**66``).  Supported:
        with ``σ² = a/b`` reduced and ``t = floor(σ) + 1``,
        ``2 a b t² < 2**126`` and ``b t² <= 2**106``.  This covers every
        float σ² in ``[2**-20, 2**62]`` (σ from about 0.001 to 2**31,
        e.g. ``1e-4`` for σ = 0.01 and ``1e12`` for σ = 10**6), every int
        σ² from 1 to ``4 * 10**18`` (σ up to 2e9), and a reduced
        ``Fraction(p, q)`` when ``2 p q t² < 2**126``, about
        ``2 σ⁴ q² < 2**126`` for σ >= 1 (e.g. any ``q <= 2**20`` with
        σ² <= 10**12).
    size : int or tuple of int
        Output shape.
    random_state, n_threads
        As :func:`uniform`.

    Returns
    -------
    ndarray of int64 of shape ``size``

    Raises
    ------
    ValueError
        If ``sigma2`` is not > 0, not finite, or outside the range above.
    OverflowError
        If a proposal leaves the exact integer range (probability below
        ``exp(-2**20)`` per proposal); no wrong value is returned.
    """
    from ._dpcore import _dgauss

    params = _discrete_gaussian_params(sigma2)
    shape, key, nt = _prepare(size, random_state, n_threads, "discrete_gaussian")
    out = np.empty(shape, dtype=np.int64)
    flat = out.reshape(-1)
    overflow = np.zeros(-(-flat.size // DISCRETE_SAMPLER_BLOCK), dtype=np.uint8)
    _dgauss.fill_discrete_gaussian(key, 0, params, flat, overflow, nt)
    if overflow.any():
        raise _overflow_error("discrete_gaussian")
    return out


def symmetric_discrete_gaussian(d, sigma2, granularity, batch=None, *, random_state=None,
                                n_threads=None) -> np.ndarray:
    """Exactly symmetric d×d matrices of discrete Gaussian noise on the grid ``granularity · Z``.

    Entry ``(i, j), j >= i`` is ``granularity * Z_ij`` with independent
    ``Z_ij ~ N_Z(0, sigma2)`` (CKS 2020, Algorithm 3, as
    :func:`discrete_gaussian`); the upper triangle is mirrored, so
    ``M == M.T`` exactly.  The variance of an entry is about
    ``sigma2 * granularity**2``.  Row ``i`` of matrix ``m`` draws from its own
    stream ``m * d + i``, so the output does not depend on ``n_threads``.

    Parameters
    ----------
    d : int >= 1
    sigma2 : int, float or Fraction > 0
        σ² of the integer noise ``Z`` (range as :func:`discrete_gaussian`).
    granularity : float > 0
        Grid step.  The integers ``Z`` are exact; ``float(Z) * granularity`` is
        exact too when ``granularity`` is a power of two (``2.0**-10``, ...),
        which is recommended: any other step rounds each entry to the
        nearest double.
    batch : int >= 0 or None
        ``None`` gives one (d, d) matrix; an int gives shape (batch, d, d).
    random_state, n_threads
        As :func:`uniform`.

    Returns
    -------
    ndarray of float64, shape (d, d) or (batch, d, d)
    """
    from ._dpcore import _dgauss

    d = check_positive_int(d, "d")
    params = _discrete_gaussian_params(sigma2)
    granularity = check_positive_real(granularity, "granularity")
    nb = 1 if batch is None else check_positive_int(batch, "batch", minimum=0)
    key = derive_key(make_key(random_state), "dpem_fast.random", "symmetric_discrete_gaussian")
    z = np.empty((nb, d, d), dtype=np.int64)
    overflow = np.zeros(nb * d, dtype=np.uint8)
    _dgauss.fill_symmetric_discrete_gaussian(key, 0, params, z, overflow, effective_n_threads(n_threads))
    if overflow.any():
        raise _overflow_error("symmetric_discrete_gaussian")
    out = z.astype(np.float64)      # exact: |Z| < 2**53 with overwhelming probability
    out *= granularity
    return out[0] if batch is None else out
