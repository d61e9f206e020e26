"""Small validation helpers: every error names the parameter and quotes the value."""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = [
    "check_size",
    "check_positive_real",
    "check_nonnegative_real",
    "check_positive_int",
    "check_probability",
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


def check_positive_real(value, name: str, *, allow_inf: bool = False) -> float:
    """A finite real > 0 (or +inf when allowed), as float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if math.isnan(v):
        raise ValueError(f"{name} must be a number, got nan")
    if math.isinf(v) and not (allow_inf and v > 0):
        raise ValueError(f"{name} must be finite, got {v}")
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    return v


def check_nonnegative_real(value, name: str) -> float:
    """A finite real >= 0, as float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {v}")
    return v


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Integral, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_probability(value, name: str) -> float:
    """A real strictly inside (0, 1)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not (0.0 < v < 1.0):
        raise ValueError(f"{name} must be in (0, 1), got {value}")
    return v
