"""Numpy twins of the private domain estimate's histogram kernels (``dpem_fast._dpcore._domain``).

Test oracle and benchmark baseline: the same bin maps, written with ``np.frexp`` and
``np.bincount``, in float64 whatever the dtype of ``X``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["scale_bins_reference", "refine_bins_reference", "histogram_reference", "E_MIN", "ZERO_BIN"]

#: the smallest ``frexp`` exponent of a double (5e-324 = 0.5 * 2^-1073) and the bin of 0, one
#: bin per exponent in [E_MIN, 1024] on each side of it (the kernel's public constants, written
#: out; ``tests/engine/test_domain.py`` checks that they are the kernel's)
E_MIN = -1073
ZERO_BIN = 1024 - E_MIN + 1


def scale_bins_reference(X):
    """Stage-1 bin of every value: ``ZERO_BIN`` for 0, ``ZERO_BIN ± (e - E_MIN + 1)`` by sign
    for a value with frexp exponent e."""
    X = np.asarray(X, dtype=np.float64)
    _, e = np.frexp(X)
    return ZERO_BIN + np.sign(X).astype(np.int64) * (e.astype(np.int64) - (E_MIN - 1))


def refine_bins_reference(X, lo, hi, n_bins):
    """Stage-2 bin of every value: equal-width bins of [lo, hi] (per column), values clipped."""
    X = np.asarray(X, dtype=np.float64)
    t = (np.clip(X, lo, hi) / 2 - lo / 2) / (hi / 2 - lo / 2) * n_bins
    return np.clip(np.floor(t), 0, n_bins - 1).astype(np.int64)


def histogram_reference(bins, n_bins):
    """Per-column counts ``(d, n_bins)`` (int64) of an ``(n, d)`` array of bin indices."""
    d = bins.shape[1]
    idx = bins + np.arange(d, dtype=np.int64) * n_bins
    return np.bincount(idx.ravel(), minlength=d * n_bins).reshape(d, n_bins)
