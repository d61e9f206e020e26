"""Twin of ``_contract.sum_blocks`` (issue 34): every entry the correctly rounded sum of its block
partials, by ``math.fsum`` (exact, then rounded once to nearest).  Plain Python; imports nothing
from the engine, the kernels or the models."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["exact_sum", "sum_blocks_reference"]


def exact_sum(values):
    """The correctly rounded sum of the doubles ``values``: ``math.fsum``, with IEEE results where
    it raises (a NaN, or +inf with -inf: NaN; an infinity: itself) or overflows (the exact sum
    rounded past the largest double: ±inf)."""
    v = [float(x) for x in values]
    if any(math.isnan(x) for x in v) or (math.inf in v and -math.inf in v):
        return math.nan
    if math.inf in v or -math.inf in v:
        return math.inf if math.inf in v else -math.inf
    try:
        return math.fsum(v)
    except OverflowError:                   # an intermediate overflow: round the exact rational
        total = sum((Fraction(x) for x in v), Fraction(0))
        try:
            return float(total)
        except OverflowError:
            return math.inf if total > 0 else -math.inf


def sum_blocks_reference(part):
    """``part`` (shape ``(n_blocks, ...)``) summed over axis 0, each entry :func:`exact_sum`."""
    part = np.asarray(part, dtype=np.float64)
    flat = part.reshape(part.shape[0], -1)
    out = np.array([exact_sum(flat[:, j]) for j in range(flat.shape[1])], dtype=np.float64)
    return out.reshape(part.shape[1:])
