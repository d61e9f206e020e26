"""Example consumer of dpem_fast's compiled backend (see README.md here)."""
import numpy as np

import dpem_fast.random as _random

from ._draw import fill_discrete_gaussian

__all__ = ["discrete_gaussian"]


def discrete_gaussian(sigma2, n, *, random_state=None, n_threads=1):
    """``n`` exact N_Z(0, sigma2) integers drawn in this package's own nogil prange loop.

    Equal to ``dpem_fast.random.discrete_gaussian(sigma2, n, random_state=...)``: the same key
    (:func:`dpem_fast.random.sampler_key`) and the same stream per block of 4,096 outputs.
    """
    key = _random.sampler_key(random_state, "discrete_gaussian")
    params = _random.discrete_gaussian_parameters(sigma2)
    out = np.empty(int(n), dtype=np.int64)
    if fill_discrete_gaussian(key, params, out, int(n_threads)):
        raise OverflowError("a draw left the exact integer range; draw again")
    return out
