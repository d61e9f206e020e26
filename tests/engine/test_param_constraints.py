"""The declarative parameter checks (issue 36): every registered estimator declares a
constraint for each of its parameters (``_parameter_constraints``, merged along its bases),
each constraint refuses a bad value with a message naming the parameter before any budget is
charged, and the defaults pass.

A new constructor parameter without a constraint fails
:func:`test_every_parameter_has_a_constraint`; the bad values are derived from the
constraints themselves (:func:`_bad_values`), so a new constraint is exercised too.
"""
import importlib.util
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

import dpem_fast
from dpem_fast import _registry
from dpem_fast import accounting as acc
from dpem_fast._validation import (ARRAY_LIKE, BOOLEAN, FINITE, NONE, declared_constraints, instance_of, interval,
                                   options, positive_numbers, validate_params)

_spec = importlib.util.spec_from_file_location("_param_examples", Path(__file__).parents[1] / "estimators" /
                                               "examples.py")
_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_examples)
EXAMPLES = {type(factory()).__name__: (factory, data) for factory, data in _examples.EXAMPLES.values()}
ESTIMATORS = _registry.estimators()


def _parameters(cls):
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def test_the_examples_cover_the_registry():
    assert set(EXAMPLES) == set(ESTIMATORS)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_parameter_has_a_constraint(name):
    cls = ESTIMATORS[name]
    declared = declared_constraints(cls)
    missing = [p for p in _parameters(cls) if p not in declared]
    assert not missing, f"{name}: parameters without a constraint in _parameter_constraints: {missing}"
    own = vars(cls).get("_parameter_constraints", {})
    assert set(own) <= set(_parameters(cls)), f"{name} constrains what it does not take: {own}"
    for param, entries in declared.items():
        assert isinstance(entries, list) and entries, (name, param)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_defaults_and_the_examples_pass(name):
    cls = ESTIMATORS[name]
    validate_params(declared_constraints(cls), cls().get_params(deep=False))
    assert isinstance(cls()._validate_params(), bool)
    assert EXAMPLES[name][0]()._validate_params() is True      # a private example


#: candidate bad values: of every kind a constraint takes, at and beyond the usual bounds
_CANDIDATES = (object(), -1, 0, 2, 10 ** 12, -1.0, 0.0, 0.5, 1.0, 1.5, math.nan, math.inf, -math.inf, True,
               "no-such-option", [0.0, math.nan], [-1.0], [1.0])


def _bad_values(entries):
    """``(value, exception)``: the first candidate that every entry refuses with ``TypeError``
    (no entry takes its type), and the first with ``ValueError`` (one does)."""
    entries = [NONE if e is None else e for e in entries]
    out = {}
    for value in _CANDIDATES:
        if not any(e.accepts(value) for e in entries):
            out.setdefault(ValueError if any(e.takes_type(value) for e in entries) else TypeError, value)
    return [(value, exc) for exc, value in out.items()]


def _cases():
    for name in sorted(ESTIMATORS):
        for param, entries in declared_constraints(ESTIMATORS[name]).items():
            if param in _parameters(ESTIMATORS[name]):
                for k, (value, exc) in enumerate(_bad_values(entries)):
                    yield pytest.param(name, param, value, exc, id=f"{name}-{param}-{k}")


def _ledger(est):
    return acc.BudgetLedger(100.0, 1e-4, neighbouring=est._relation(), privacy_unit=est._privacy_unit())


@pytest.mark.parametrize("name, param, value, exc", list(_cases()))
def test_a_bad_value_is_refused_naming_the_parameter_before_the_charge(name, param, value, exc):
    factory, data = EXAMPLES[name]
    est = factory()
    ledger = _ledger(est)
    others = {"epsilon": None} if param == "noise_multiplier" else {}     # LDA: one of the two
    est.set_params(**{"budget": ledger, **others, param: value})
    with pytest.raises(exc, match=rf"\b{param}\b") as info:
        est.fit(data())
    assert ledger.entries == []                 # nothing charged
    assert not hasattr(est, "privacy_") or est.privacy_ is None
    if exc is ValueError and isinstance(value, (int, float, str)) and str(info.value).startswith(param):
        assert f"got {value!r}" in str(info.value)      # a declared constraint's message quotes it


def test_every_estimator_has_bad_value_cases():
    names = {c.values[0] for c in _cases()}
    assert names == set(ESTIMATORS)


# ------------------------------------------------------------ the messages
@pytest.mark.parametrize("entries, value, exc, message", [
    ([interval("int", 1)], 0, ValueError, "n must be an int in [1, inf), got 0"),
    ([interval("int", 1)], 1.5, TypeError, "n must be an int in [1, inf), got 1.5 of type float"),
    ([interval("int", 1)], True, TypeError, "n must be an int in [1, inf), got True of type bool"),
    ([interval("int", None, -1)], 0, ValueError, "n must be an int in (-inf, -1], got 0"),
    ([interval("real", 0, 1, "neither")], 1.0, ValueError, "n must be a real in (0, 1), got 1.0"),
    ([interval("real", 0, math.inf, "right", hint="inf: no privacy")], -1.0, ValueError,
     "n must be a real in (0, inf], got -1.0; inf: no privacy"),
    ([interval("real", 0)], math.inf, ValueError, "n must be a real in [0, inf), got inf"),
    ([interval("real", 0)], math.nan, ValueError, "n must be a real in [0, inf), got nan"),
    ([None, options("a", "b")], "c", ValueError, "n must be None or one of ('a', 'b'), got 'c'"),
    ([interval("int", 1), options("auto")], 2.5, TypeError,
     "n must be an int in [1, inf) or 'auto', got 2.5 of type float"),
    ([options("auto"), BOOLEAN], "yes", ValueError, "n must be 'auto' or True or False, got 'yes'"),
    ([instance_of(dict), None], ["x"], TypeError, "n must be a dict or None, got ['x'] of type list"),
    ([None, FINITE], [1.0, np.inf], ValueError, "n must be None or finite real numbers"),
    ([None, FINITE], ["a"], TypeError, "n must be None or finite real numbers"),
    ([None, ARRAY_LIKE], "ab", TypeError, "n must be None or an array-like, got 'ab' of type str"),
    ([options("auto"), positive_numbers(2)], (1.0, 0.0), ValueError,
     "n must be 'auto' or 2 positive finite numbers, got (1.0, 0.0)"),
    ([None, ARRAY_LIKE], np.zeros((2, 3, 4)), None, None),
])
def test_messages_name_the_parameter_the_allowed_values_and_the_value(entries, value, exc, message):
    if exc is None:             # an array is array-like: accepted
        validate_params({"n": entries}, {"n": value})
        return
    with pytest.raises(exc) as info:
        validate_params({"n": entries}, {"n": value})
    assert str(info.value).startswith(message)


def test_a_subclass_entry_replaces_its_base_entry_and_absent_parameters_are_skipped():
    lda = dpem_fast.DPLatentDirichletAllocation
    assert declared_constraints(lda)["epsilon"][0] is None           # LDA: epsilon or noise_multiplier
    assert not declared_constraints(dpem_fast.DPGaussianMixture)["epsilon"][0].accepts(None)
    validate_params({"absent": [interval("int", 1)]}, {})


def test_existing_remedies_are_kept():
    with pytest.raises(ValueError, match=r"delta=0\.5 is above 0\.01"):
        dpem_fast.DPGaussianMixture(delta=0.5)._validate_params()
    with pytest.raises(ValueError, match="method='ep' is non-private"):
        dpem_fast.DPStochasticEP(method="ep")._check_params(2)
    with pytest.raises(ValueError, match="n_threads must be None.*got 0; None or -1: all cores"):
        dpem_fast.DPKMeans(n_threads=0)._validate_params()
