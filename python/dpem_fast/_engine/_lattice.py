"""The integer lattice of the exact discrete Gaussian releases (``noise="discrete_gaussian"``).

A real-valued statistic ``s`` (m noised coordinates: every entry, or the upper triangle of a
symmetric one) is released as ``γ (round(s / γ) + Z)`` with ``Z`` exact discrete Gaussian
integers ``N_Z(0, σ²)`` (Canonne, Kamath & Steinke 2020, Algorithm 3) and ``round`` to the
nearest integer.  Only integers meet the noise: no floating-point value enters the
mechanism's randomness, which removes the floating-point attack surface of Mironov (2012).
Mapping back (``γ ×``) is post-processing of the integer release.

Rounding widens the sensitivity
-------------------------------
For real u, v: ``|round(u) - round(v)| <= |u - v| + 1``, and ``= 0`` when ``u = v``.  So for
neighbouring statistics with ``‖s - s'‖₂ <= Δ`` (Δ: the spec's ℓ2 sensitivity under the
relation), Minkowski's inequality over the m coordinates gives

    ‖round(s/γ) - round(s'/γ)‖₂ <= ‖(s - s')/γ‖₂ + ‖(1, ..., 1)‖₂ <= Δ/γ + √m  =:  Δ_int.

It is attained up to rounding: coordinates sitting just below and just above a half-integer
each gain a whole unit.  The release is the discrete Gaussian mechanism on an integer query
of ℓ2 sensitivity Δ_int, hence ``Δ_int² / (2σ²)``-zCDP (CKS Thm 4, any dimension:
:class:`~dpem_fast.accounting.DiscreteGaussianEvent`); the continuous Gaussian's privacy
curve is never used for it.

The lattice step is ``γ = 2^floor(log2(Δ / (c √m)))`` with ``c = LATTICE_RESOLUTION = 100``:
a power of two (``s/γ`` and ``γ k`` are exact scalings) and fine enough that the widening
``γ √m <= Δ / c`` costs at most 1 % more noise.  Integer-valued statistics (histograms,
``StatSpec(integer=True)``) need no rounding: ``γ = 1`` and ``Δ_int = Δ``.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["LATTICE_RESOLUTION", "noised_size", "lattice", "to_lattice"]

#: c: the lattice step is at most Δ / (c √m), so rounding widens Δ by at most 1/c.
LATTICE_RESOLUTION = 100
_INT_LIMIT = 2.0 ** 62           # |round(s/γ) + Z| stays far inside int64


def noised_size(spec) -> int:
    """m: the number of coordinates that receive noise (the upper triangle if symmetric)."""
    shape = spec.shape
    if spec.symmetric:
        d = shape[-1]
        return int(np.prod(shape[:-2], dtype=np.int64)) * d * (d + 1) // 2
    return int(np.prod(shape, dtype=np.int64))


def lattice(spec, neighbouring):
    """(γ, Δ_int, m) of ``spec`` under ``neighbouring`` (see the module docstring)."""
    m = noised_size(spec)
    delta = spec.sensitivity("l2", neighbouring)
    if spec.integer:
        return 1.0, delta, m
    gamma = math.ldexp(1.0, math.floor(math.log2(delta / (LATTICE_RESOLUTION * math.sqrt(m)))))
    return gamma, delta / gamma + math.sqrt(m), m


def to_lattice(value, gamma, name):
    """``round(value / γ)`` as int64 (nearest, ties to even); ValueError if out of range."""
    u = np.asarray(value, dtype=np.float64) / gamma
    if not np.all(np.abs(u) < _INT_LIMIT):
        raise ValueError(f"statistic {name!r}: |value| / granularity reaches 2**62; the exact "
                         "discrete release cannot represent it (use noise='gaussian')")
    return np.rint(u).astype(np.int64)
