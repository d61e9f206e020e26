"""Private argument checks shared by the accounting subpackage.

Every check raises ``TypeError`` for a wrong type and ``ValueError`` naming
the parameter and quoting the bad value otherwise.
"""
import math
import numbers

NEIGHBOURING_RELATIONS = ("add_remove", "replace")
#: What one neighbour differs by: one row, or all the rows of one group (a person).
PRIVACY_UNITS = ("row", "group")


def _check_real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} "
                        f"of type {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    return value


def check_positive(name, value, *, allow_inf=False):
    value = _check_real(name, value)
    if not value > 0 or (not allow_inf and math.isinf(value)):
        kind = "> 0" if allow_inf else "finite and > 0"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


def check_nonnegative(name, value):
    value = _check_real(name, value)
    if not value >= 0 or math.isinf(value):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return value


def check_open_unit(name, value):
    """Check ``0 < value < 1`` (a delta)."""
    value = _check_real(name, value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1), "
                         f"got {value!r}")
    return value


def check_half_open_unit(name, value):
    """Check ``0 < value <= 1`` (a sampling probability)."""
    value = _check_real(name, value)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return value


def check_int(name, value, *, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} "
                        f"of type {type(value).__name__}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def check_neighbouring(value):
    if value not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of "
                         f"{NEIGHBOURING_RELATIONS}, got {value!r}")
    return value


def check_privacy_unit(value):
    if value not in PRIVACY_UNITS:
        raise ValueError(f"privacy_unit must be one of {PRIVACY_UNITS}, "
                         f"got {value!r}")
    return value


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, "
                         f"got {value!r}")
    return value
