"""Issue 23's utility floor, for every registered private estimator (part of the conformance
suite: :mod:`utility_cases` holds one case per estimator, and a registered estimator
without a case fails here).

For ε ∈ {0.3, 1, 10} and the case's two row counts (300 and 3,000 rows; 1,500 documents for
LDA), three seeds each:

1. **never absurd** — the case's ``sane`` check: finite parameters, means / centres inside
   the declared box, ``sample`` works;
2. **never below the trivial private model** held out, up to the noise of the comparison: the
   mean over seeds of (model − trivial) held-out score per row is at least −3 standard errors
   of that mean (the seeds' spread) — unless the fit refused or warned (``UserWarning``) that the
   released statistics are noise-dominated, which is the clear refusal the contract allows.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpem_fast import _registry

from utility_cases import CASES, GMM_AUTO_CASE, GMM_TYPE_CASES

GRID = [(size, eps) for size in (0, 1) for eps in (0.3, 1.0, 10.0)]    # size: index into Case.sizes
SEEDS = (0, 1, 2)


def test_every_registered_private_estimator_has_a_utility_case():
    names = {cls._cli_name for cls in _registry.estimators().values()}
    assert names == set(CASES), names ^ set(CASES)


def _fit(case, eps, seed, X):
    """(fitted model, warned) or (None, True) when the fit refused with a clear error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            m = case.model(eps, seed).fit(X)
        except ValueError as exc:
            assert any(w in str(exc) for w in ("bounds", "epsilon", "rows", "n_samples")), str(exc)
            return None, True
    warned = any(issubclass(w.category, UserWarning) for w in caught)
    return m, warned


@pytest.mark.parametrize("size, eps", GRID, ids=[f"{('small', 'large')[s]}-eps{e}" for s, e in GRID])
@pytest.mark.parametrize("name", sorted(CASES))
def test_never_absurd_and_never_below_the_trivial_model(name, size, eps):
    _check_floor(CASES[name], size, eps)


@pytest.mark.parametrize("size", [0, 1], ids=["small", "large"])
@pytest.mark.parametrize("covariance_type", sorted(GMM_TYPE_CASES))
def test_every_gmm_covariance_type_meets_the_floor_at_epsilon_1(covariance_type, size):
    """Issue 24: each covariance type beats one component of its own type at eps = 1 (or says so)."""
    _check_floor(GMM_TYPE_CASES[covariance_type], size, 1.0)


@pytest.mark.parametrize("size, eps", GRID)
def test_the_mixtures_auto_components_meet_the_floor(size, eps):
    """Issue 24: n_components="auto" beats one component at every ε and row count (or says so)."""
    _check_floor(GMM_AUTO_CASE, size, eps)


def _check_floor(case, size, eps):
    n = case.sizes[size]
    diffs = []
    for seed in SEEDS:
        X, X_test = case.data(n, seed)
        m, warned = _fit(case, eps, seed, X)
        if m is None:
            continue
        case.sane(m, X)
        if warned:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = case.trivial(eps, seed, m, X)
        diffs.append(case.score(m, X_test) - case.score(t, X_test))
    if len(diffs) < 2:
        return
    diffs = np.asarray(diffs)
    se = diffs.std(ddof=1) / math.sqrt(diffs.size)
    assert diffs.mean() >= -3.0 * se, f"below the trivial model: {diffs}"
