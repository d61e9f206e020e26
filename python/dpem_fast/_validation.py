"""Small validation helpers: every error names the parameter and quotes the value."""
from __future__ import annotations

from numbers import Integral

import numpy as np

from .accounting import _validation as _acc

__all__ = [
    "check_size",
    "check_positive_real",
    "check_nonnegative_real",
    "check_positive_int",
    "check_probability",
    "check_delta",
    "check_real",
    "as_kernel_rows",
]


def check_size(size, name: str = "size") -> tuple[int, ...]:
    """Normalise an int or tuple of ints (each >= 0) to a shape tuple."""
    if isinstance(size, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int or a tuple of ints, got bool")
    if isinstance(size, (Integral, np.integer)):
        size = (int(size),)
    try:
        shape = tuple(size)
    except TypeError:
        raise TypeError(f"{name} must be an int or a tuple of ints, got {type(size).__name__}") from None
    for s in shape:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (Integral, np.integer)):
            raise TypeError(f"{name} must contain ints, got {s!r}")
        if s < 0:
            raise ValueError(f"{name} must be non-negative, got {size!r}")
    return tuple(int(s) for s in shape)


# One implementation of the scalar checks: the accounting subpackage's (which takes
# ``(name, value)``); these wrappers keep the ``(value, name)`` order of the samplers
# and estimators.


def check_positive_real(value, name: str, *, allow_inf: bool = False) -> float:
    """A real > 0 (finite unless ``allow_inf``), as float; not NaN, not bool."""
    return _acc.check_positive(name, value, allow_inf=allow_inf)


def check_nonnegative_real(value, name: str) -> float:
    """A finite real >= 0, as float."""
    return _acc.check_nonnegative(name, value)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An int (not bool) >= ``minimum``."""
    return _acc.check_int(name, value, minimum=minimum)


def check_probability(value, name: str) -> float:
    """A real strictly inside (0, 1)."""
    return _acc.check_open_unit(name, value)


def check_delta(value, name: str = "delta") -> float:
    """A privacy delta under the public policy (:func:`dpem_fast.accounting._validation.check_delta`):
    in (0, 1), refused above ``DELTA_MAX``, ``LargeDeltaWarning`` above ``DELTA_WARN``."""
    return _acc.check_delta(name, value, stacklevel=4)


def check_real(value, name: str) -> float:
    """A finite real, as float; not NaN, not bool."""
    value = _acc._check_real(name, value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def as_kernel_rows(X) -> np.ndarray:
    """``X`` as the kernels read it: C-contiguous, 2-D, float32 or float64 (other dtypes are
    converted to float64; no copy when ``X`` already qualifies)."""
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = np.ascontiguousarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    return X
