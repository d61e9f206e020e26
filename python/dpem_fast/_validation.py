"""Small validation helpers: every error names the parameter and quotes the value.

Declarative parameter checks: an estimator declares ``_parameter_constraints = {name: [entry,
...]}`` (a :class:`Constraint`, or None for the value None; merged along its bases by
:func:`declared_constraints`) and :func:`validate_params` refuses a value no entry accepts:
``TypeError`` when no entry takes its type, else ``ValueError``, naming the parameter, the
allowed values and the value ("n_components must be an int in [1, inf), got 0"), plus a hint.
"""
from __future__ import annotations

import math
import reprlib
from numbers import Integral, Real

import numpy as np

from .accounting import _validation as _acc

__all__ = [
    "Constraint", "interval", "options", "instance_of", "predicate", "positive_numbers", "BOOLEAN", "ARRAY_LIKE",
    "FINITE", "declared_constraints", "validate_params",
    "check_size",
    "check_positive_real",
    "check_positive_int",
    "check_delta",
    "as_kernel_rows",
    "validate_table",
    "missing_values_message",
]


class Constraint:
    """One allowed form of a parameter's value: ``typed(v)``, v is of a type it is about (a
    value of a type no entry takes is a ``TypeError``); ``test(v)``, such a v satisfies it (an
    exception counts as False); ``description``, the allowed values as a message says them;
    ``hint``, a remedy the message adds when the value's type is taken."""

    def __init__(self, typed, test, description, hint=None):
        self.typed, self.test, self.description, self.hint = typed, test, description, hint

    def takes_type(self, value):
        return _holds(self.typed, value)

    def accepts(self, value):
        return _holds(self.typed, value) and _holds(self.test, value)

    def __str__(self):
        return self.description


def _holds(check, value):
    try:
        return bool(check(value))
    except (TypeError, ValueError):         # e.g. an array that numpy cannot read as numbers
        return False


def _num(x):
    return "inf" if x == math.inf else str(x) if isinstance(x, int) else f"{x:g}"


def interval(kind, left=None, right=None, closed="both", *, hint=None):
    """A number of ``kind`` ``"int"`` or ``"real"`` (never a bool; NaN fails every bound)
    between ``left`` and ``right`` (None: unbounded and open, so ``interval("real", 0)`` is a
    finite real >= 0; ``interval("real", 0, math.inf, "right")`` takes inf), ``closed`` at
    ``"both"``, ``"left"``, ``"right"`` or ``"neither"`` end."""
    lo, hi = -math.inf if left is None else left, math.inf if right is None else right
    shut_lo = left is not None and closed in ("both", "left")
    shut_hi = right is not None and closed in ("both", "right")
    text = (f"{'an int' if kind == 'int' else 'a real'} in {'[' if shut_lo else '('}{_num(lo)}, "
            f"{_num(hi)}{']' if shut_hi else ')'}")
    number = Integral if kind == "int" else Real
    return Constraint(lambda v: isinstance(v, number) and not isinstance(v, (bool, np.bool_)),
                      lambda v: (lo <= v if shut_lo else lo < v) and (v <= hi if shut_hi else v < hi), text, hint)


def options(*values, hint=None):
    """One of ``values``; of their type (``options("auto")`` takes str: 1.5 is a wrong type)."""
    return Constraint(lambda v: any(type(v) is type(o) for o in values), lambda v: v in values,
                      repr(values[0]) if len(values) == 1 else f"one of {values}", hint)


def predicate(types, test, description, *, hint=None):
    """A value of ``types`` for which ``test(value)`` holds."""
    return Constraint(lambda v: isinstance(v, types), test, description, hint)


def instance_of(*types, name=None):
    """An instance of one of ``types`` (``name``: how a message says it)."""
    return predicate(types, lambda v: True, name or " or ".join(f"a {t.__name__}" for t in types))


def _arraylike(v):
    return not isinstance(v, (str, bytes, dict)) and (hasattr(v, "__array__") or hasattr(v, "__len__"))


#: True or False (numpy's bool too)
BOOLEAN = instance_of(bool, np.bool_, name="True or False")
#: a sequence or an array (not a str, bytes or dict); its shape is the model's to check
ARRAY_LIKE = Constraint(_arraylike, lambda v: True, "an array-like")
#: a real or an array of reals, all finite
FINITE = Constraint(lambda v: not isinstance(v, (str, bytes, dict)) and np.asarray(v, dtype=np.float64).size >= 0,
                    lambda v: np.all(np.isfinite(np.asarray(v, dtype=np.float64))),
                    "finite real numbers (a scalar or an array)")
NONE = Constraint(lambda v: v is None, lambda v: True, "None")


def positive_numbers(n=None):
    """``n`` (any number where None) positive finite numbers, in a list, tuple or array."""
    def test(v):
        a = np.asarray(v, dtype=np.float64)
        return a.ndim == 1 and a.size == (n or a.size) > 0 and np.all(np.isfinite(a) & (a > 0))
    return predicate((list, tuple, np.ndarray), test, f"{n or 'some'} positive finite numbers")


def declared_constraints(cls):
    """``{name: [constraint, ...]}`` of ``cls``: the ``_parameter_constraints`` of its bases,
    updated by each subclass's own (a subclass's entry replaces its base's)."""
    out = {}
    for klass in reversed(cls.__mro__):
        out.update(vars(klass).get("_parameter_constraints", {}))
    return out


def validate_params(constraints, params):
    """Check every ``params[name]`` (a name absent from ``params`` is skipped) against its
    ``constraints[name]``: ``TypeError`` when no entry takes its type, else ``ValueError``."""
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        entries = [NONE if c is None else c for c in allowed]
        if any(c.accepts(value) for c in entries):
            continue
        words = [str(c) for c in entries]
        either = " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
        typed = [c for c in entries if c.takes_type(value)]
        got = reprlib.repr(value) + ("" if typed else f" of type {type(value).__name__}")
        hints = "".join(f"; {c.hint}" for c in typed if c.hint)
        raise (ValueError if typed else TypeError)(f"{name} must be {either}, got {got}{hints}")


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


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An int (not bool) >= ``minimum``."""
    return _acc.check_int(name, value, minimum=minimum)


def check_delta(value, name: str = "delta") -> float:
    """A privacy delta under the public policy (:func:`dpem_fast.accounting._validation.check_delta`):
    in (0, 1), refused above ``DELTA_MAX``, ``LargeDeltaWarning`` above ``DELTA_WARN``."""
    return _acc.check_delta(name, value, stacklevel=4)


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


# ------------------------------------------------------------------ a table's columns
#: how many column names a message lists before "and N more"
_NAMES_SHOWN = 8


def _column_list(mask, names=None, positions=False):
    """The columns ``mask`` selects, named: by ``names`` (a table's column names, public), else
    ``column 3`` (indices); ``positions``: each index with its name, ``column 3 ('visits')``."""
    idx = np.flatnonzero(mask)

    def one(i):
        if names is None:
            return str(int(i))
        return f"{int(i)} ({str(names[i])!r})" if positions else repr(str(names[i]))
    shown = [one(i) for i in idx[:_NAMES_SHOWN]]
    more = f" and {idx.size - _NAMES_SHOWN} more" if idx.size > _NAMES_SHOWN else ""
    return ("column " if idx.size == 1 else "columns ") + ", ".join(shown) + more


def _verb(mask, one="holds", many="hold"):
    return one if np.count_nonzero(mask) == 1 else many


def _missing_mask(X):
    """Which columns of X hold a missing value (NaN, or pandas' NA/None), or None if X cannot be read."""
    try:
        if hasattr(X, "isna") and hasattr(X, "columns"):
            return np.asarray(X.isna()).any(axis=0)
        if hasattr(X, "tocoo"):
            coo = X.tocoo()
            mask = np.zeros(coo.shape[1], dtype=bool)
            mask[coo.col[np.isnan(coo.data)]] = True
            return mask
        return np.isnan(np.asarray(X, dtype=np.float64)).any(axis=0)
    except (TypeError, ValueError):
        return None


def missing_values_message(X, model, note=""):
    """The refusal of missing values in X: scikit-learn's opening "Input X contains NaN" (its
    estimator checks match it), the column(s) that hold them, and the fix.  Never a value or a
    row count: column names are public, the rows are not."""
    mask = _missing_mask(X)
    where = f" in {_column_list(mask, getattr(X, 'columns', None))}" if mask is not None and mask.any() else ""
    return (f"Input X contains NaN (missing values){where}: {model} does not take missing values; drop "
            f"the rows (or the columns) that hold them, or impute them, before fitting{note}")


def _text_mask(X):
    """Which columns of X (a data frame, or an array of objects) hold a value that is not a number."""
    cols = (X.iloc[:, i] for i in range(X.shape[1])) if hasattr(X, "iloc") else np.asarray(X, dtype=object).T
    mask = []
    for col in cols:
        try:
            np.asarray(col, dtype=np.float64)
            mask.append(False)
        except (TypeError, ValueError):
            mask.append(True)
    return np.array(mask, dtype=bool)


def _not_numeric(X, model, text=True):
    """The refusal of the columns of X that are not numbers (a data frame's timestamps; with
    ``text``, text: a pass over X), or None."""
    names = getattr(X, "columns", None)
    times = np.zeros(X.shape[1], dtype=bool)
    if hasattr(X, "dtypes"):
        import pandas as pd

        times = np.array([pd.api.types.is_datetime64_any_dtype(t) or pd.api.types.is_timedelta64_dtype(t)
                          or isinstance(t, pd.PeriodDtype) for t in X.dtypes], dtype=bool)
    if times.any():
        return (f"X: {_column_list(times, names)} {_verb(times)} timestamps: convert each to a number (e.g. "
                "seconds since an epoch, or the day of the year) or drop it before fitting")
    text = _text_mask(X) if text else times
    if text.any():
        return (f"X: {_column_list(text, names)} {_verb(text, 'is', 'are')} not numeric: {model} takes numeric columns "
                "only; drop or encode it (DPMixedMixture takes categorical columns, declared with their public "
                "categories)")
    return None


def validate_table(estimator, X, **kwargs):
    """scikit-learn's ``validate_data(estimator, X, **kwargs)`` with messages that name the
    column and the fix, and quote no value of the data: a data frame's column of timestamps or
    text (``ValueError``), a column of an array that is not a number, missing values
    (:func:`missing_values_message`; an estimator's ``_MISSING_NOTE`` adds its own remark)."""
    from sklearn.utils.validation import validate_data

    model = type(estimator).__name__
    if hasattr(X, "dtypes") and hasattr(X, "iloc") and getattr(X, "ndim", 0) == 2:
        message = _not_numeric(X, model, text=False)       # from the dtypes only
        if message is not None:
            raise ValueError(message)
    try:
        return validate_data(estimator, X, **kwargs)
    except ValueError as exc:
        text = str(exc)
        if "contains NaN" in text:
            raise ValueError(missing_values_message(X, model, getattr(estimator, "_MISSING_NOTE", ""))) from None
        if "could not convert" in text:       # pandas' / numpy's text quotes the value
            raise ValueError(_not_numeric(X, model) or f"X holds a value that is not a number: {model} "
                             "takes numeric columns only") from None
        raise
