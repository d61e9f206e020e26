"""Private argument checks shared by the accounting subpackage.

Every check raises ``TypeError`` for a wrong type and ``ValueError`` naming
the parameter and quoting the bad value otherwise.
"""
import math
import numbers
import warnings

from ._warnings import LargeDeltaWarning

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


#: The largest δ accepted (a public constant): above it every entry point refuses δ with a
#: ``ValueError``.  (ε, δ)-DP allows publishing each record outright with probability δ, so a
#: δ above 1/100 voids the guarantee for any data set of more than 100 records: no reading of
#: it is meaningful, and the likely cause is a typo (``5e-1`` for ``1e-5``).
DELTA_MAX = 1e-2
#: Above this δ (and up to :data:`DELTA_MAX`) the entry points warn
#: (:class:`~dpem_fast.accounting.LargeDeltaWarning`): δ = 1e-4 is already 1/n for n = 10,000
#: records; the usual choice is δ ≤ 1/(10 n), e.g. the default 1e-5 up to 10,000 rows and
#: smaller for larger data.
DELTA_WARN = 1e-4


def check_delta(name, value, *, stacklevel=3):
    """Check a privacy ``delta`` against the public policy: in (0, 1) as
    :func:`check_open_unit`, refused above :data:`DELTA_MAX` (``ValueError`` naming
    ``name``), :class:`LargeDeltaWarning` above :data:`DELTA_WARN`.  Returns it as float."""
    value = check_open_unit(name, value)
    if value > DELTA_MAX:
        raise ValueError(
            f"{name}={value!r} is above {DELTA_MAX:g}: (epsilon, delta)-DP allows publishing each "
            f"record in the clear with probability delta, so delta must be far below 1/n for n "
            f"records (1e-5 or less is usual; at most 1/(10 n)); a delta this large voids the "
            f"guarantee for any data set of more than {1 / DELTA_MAX:.0f} records (a typo such as "
            f"5e-1 for 1e-5?)")
    if value > DELTA_WARN:
        warnings.warn(
            f"{name}={value!r} is above {DELTA_WARN:g}: the guarantee allows publishing each "
            f"record in the clear with probability delta, which is meaningful only for delta far "
            f"below 1/n; at n = {1 / value:,.0f} records this delta is 1/n.  Use delta <= 1/(10 n) "
            f"(e.g. 1e-5 up to 10,000 records)", LargeDeltaWarning, stacklevel=stacklevel)
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
