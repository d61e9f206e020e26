"""A BudgetLedger through scikit-learn and through a fit's own calibration (issue 34 items 4, 5).

* ``clone`` deep-copies non-estimator parameters: every clone must charge the caller's ledger
  itself.  ``cross_val_score`` / ``GridSearchCV`` with ``n_jobs=1`` record every fit and refuse
  once the budget is spent; with ``n_jobs=2`` a worker would hold an independent copy, so the
  call refuses before any fit (the ledger refuses to be pickled).
* A fit calibrated to (ε, δ) with its plan's accountant fits a ledger of (ε, δ): the ledger
  bounds the spend with the accountant the fit declares, exactly.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score

from dpem_fast import DPGaussianMixture
from dpem_fast import accounting as acc

BOX = (-4.0, 4.0)


def data(n=900, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[-2.0, -2.0], [2.0, 2.0]])
    return np.clip(centres[rng.integers(2, size=n)] + 0.5 * rng.normal(size=(n, 2)), *BOX)


def gmm(ledger, **kw):
    return DPGaussianMixture(**{"n_components": 2, "epsilon": 1.0, "delta": 1e-5, "bounds": BOX,
                                "max_iter": 4, "budget": ledger, "random_state": 0, **kw})


def _chain(exc):
    """The messages of an exception and of everything it was raised from (a joblib pickling
    error carries the worker side's traceback as its cause)."""
    out = []
    while exc is not None:
        out.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(out)


# ------------------------------------------------------------------ n_jobs=1
def test_cross_val_score_charges_every_fit_and_refuses_when_the_budget_is_spent():
    """The issue's repro: a ledger of (1.5, 1e-5) and three folds of ε = 1.  On main the
    clones held deep copies and the ledger recorded nothing; now the first two fits are
    recorded (1.47 under exact Gaussian DP) and the third is refused."""
    X = data()
    ledger = acc.BudgetLedger(1.5, 1e-5)
    with pytest.raises(acc.BudgetExceededError):
        cross_val_score(gmm(ledger), X, cv=3, error_score="raise")
    assert len(ledger.entries) == 2 and ledger.spent()[0] <= 1.5
    assert [label for label, _, _ in ledger.entries] == ["DPGaussianMixture.fit"] * 2
    roomy = acc.BudgetLedger(10.0, 1e-5)
    scores = cross_val_score(gmm(roomy), X, cv=3)
    assert np.all(np.isfinite(scores)) and len(roomy.entries) == 3


def test_grid_search_charges_every_fit_including_the_refit():
    X = data()
    ledger = acc.BudgetLedger(20.0, 1e-5)
    search = GridSearchCV(gmm(ledger), {"n_components": [1, 2]}, cv=2).fit(X)
    assert len(ledger.entries) == 2 * 2 + 1                 # two candidates × two folds, the refit
    assert search.best_estimator_.budget is ledger
    # a budget of exactly three fits (candidates of one plan: only the seed differs): the
    # fourth is refused
    probe = acc.BudgetLedger(1e3, 1e-5)
    ev = gmm(None).fit(X).privacy_.event
    for _ in range(3):
        probe.spend(ev, accountant="gdp")
    tight = acc.BudgetLedger(probe.spent()[0], 1e-5)
    with pytest.raises(acc.BudgetExceededError):
        GridSearchCV(gmm(tight), {"random_state": [1, 2]}, cv=2, error_score="raise").fit(X)
    assert len(tight.entries) == 3 and tight.spent()[0] <= tight.total[0]


# ------------------------------------------------------------------ n_jobs=2
@pytest.mark.parametrize("call", ["cross_val_score", "GridSearchCV"])
def test_parallel_jobs_refuse_before_any_fit(call):
    """With ``n_jobs=2`` each clone would be pickled to a worker with an independent copy of
    the ledger (on main: every fit charged a copy, the user's ledger recorded nothing).  The
    ledger refuses to be pickled, so the call fails before any fit, naming the ledger."""
    X = data()
    ledger = acc.BudgetLedger(20.0, 1e-5)
    with pytest.raises(Exception) as info:
        if call == "cross_val_score":
            cross_val_score(gmm(ledger), X, cv=3, n_jobs=2)
        else:
            GridSearchCV(gmm(ledger), {"n_components": [1, 2]}, cv=2, n_jobs=2).fit(X)
    assert "BudgetLedger cannot be pickled" in _chain(info.value)
    assert ledger.entries == [] and ledger.spent() == (0.0, 0.0)
    # without a ledger the parallel call runs
    assert np.all(np.isfinite(cross_val_score(gmm(None), X, cv=2, n_jobs=2)))


def test_a_fitted_models_pickle_does_not_carry_the_account():
    ledger = acc.BudgetLedger(5.0, 1e-5)
    est = gmm(ledger).fit(data())
    loaded = pickle.loads(pickle.dumps(est))
    assert loaded.budget is None and est.budget is ledger
    np.testing.assert_array_equal(loaded.means_, est.means_)
    assert len(ledger.entries) == 1


# ------------------------------------------------------------------ item 5
def test_a_fit_of_epsilon_one_fits_a_ledger_of_epsilon_one():
    """The issue's repro: ``DPGaussianMixture(3, epsilon=1.0, delta=1e-5,
    budget=BudgetLedger(1.0, 1e-5))`` raised BudgetExceededError on main ("would bring epsilon
    to 1.09244 > budget 1": the fit calibrated with exact Gaussian DP, the ledger re-accounted
    with RDP).  The ledger now bounds the spend with the fit's accountant: tight, not over."""
    X = np.random.default_rng(1).normal(size=(4000, 2))
    ledger = acc.BudgetLedger(1.0, 1e-5)
    est = DPGaussianMixture(3, epsilon=1.0, delta=1e-5, budget=ledger, max_iter=5, random_state=0)
    est.fit(X)
    eps, delta = ledger.spent()
    assert 0.99 <= eps <= 1.0 and delta == 1e-5
    assert eps == est.privacy_.epsilon_spent
    assert ledger.spent_by == est.privacy_.accountant == "gdp" and ledger.declared == ["gdp"]
    with pytest.raises(acc.BudgetExceededError):         # and nothing more fits
        DPGaussianMixture(3, epsilon=0.05, delta=1e-5, budget=ledger, max_iter=5).fit(X)
    assert len(ledger.entries) == 1


@pytest.mark.parametrize("kw", [dict(accountant="pld"), dict(accountant="zcdp"), dict(accountant="rdp"),
                                dict(noise="discrete_gaussian"), dict(scenario="LLG")])
def test_the_ledger_agrees_with_the_fits_own_accountant(kw):
    """Whatever accountant calibrated the fit, a ledger of the fit's (ε, δ) holds it and reports
    the fit's own ε (``privacy_.epsilon_spent``)."""
    ledger = acc.BudgetLedger(1.0, 1e-5)
    est = gmm(ledger, **kw).fit(data(n=3000))
    rec = est.privacy_
    assert ledger.declared == [rec.accountant]
    assert ledger.spent()[0] == pytest.approx(rec.epsilon_spent, rel=1e-12)
    assert 0.99 <= ledger.spent()[0] <= 1.0
