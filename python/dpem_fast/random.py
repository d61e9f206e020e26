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

import numpy as np

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
]

#: Outputs per ChaCha20 stream in the continuous samplers (reproducibility contract).
SAMPLER_BLOCK = _core.SAMPLER_BLOCK


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
    """Laplace(0, ``scale``) doubles: density exp(-|x|/scale) / (2 scale).

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
