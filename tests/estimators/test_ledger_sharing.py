"""A BudgetLedger and a fit's own calibration (issue 34 item 5).

* A fit calibrated to (ε, δ) with its plan's accountant fits a ledger of (ε, δ): the ledger
  bounds the spend with the accountant the fit declares, exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

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
