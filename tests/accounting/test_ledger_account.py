"""BudgetLedger is one account (issue 34): atomic under threads, never copied, never pickled,
its unit checked from the first spend, and its bound agrees with the accountant a spend was
calibrated with."""
import copy
import pickle
import sys
import threading

import pytest

from dpem_fast import accounting as acc
from dpem_fast.accounting import (BudgetExceededError, BudgetLedger, ComposedEvent, GaussianEvent,
                                  LaplaceEvent, NeighbouringEvent, NeighbouringMismatchError,
                                  PoissonSampledEvent, UnsupportedEventError)

SMALL = GaussianEvent(60.0)       # about 220 of these fit in (1, 1e-5) under RDP


def _serial_accepted(event, n):
    ledger = BudgetLedger(1.0, 1e-5)
    ok = 0
    for _ in range(n):
        try:
            ledger.spend(event)
            ok += 1
        except BudgetExceededError:
            pass
    return ok, ledger.spent()[0]


def test_threads_sharing_a_ledger_never_overspend():
    """Issue 34 item 3: eight threads × 200 small spends against ε = 1, ten times.  Without a
    lock the check and the record of two spends interleave and the ledger ends above its
    budget (19 of 20 trials on main); with it every trial accepts exactly what a serial run
    accepts and never goes over."""
    threads, per_thread, trials = 8, 200, 10
    accepted, serial_eps = _serial_accepted(SMALL, threads * per_thread)
    assert 0 < accepted < threads * per_thread          # the budget runs out mid-way
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                         # switch threads as often as possible
    try:
        for trial in range(trials):
            ledger = BudgetLedger(1.0, 1e-5)
            start = threading.Barrier(threads)
            counts = [0] * threads

            def work(i):
                start.wait()
                for _ in range(per_thread):
                    try:
                        ledger.spend(SMALL)
                        counts[i] += 1
                    except BudgetExceededError:
                        pass

            pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            eps = ledger.spent()[0]
            assert eps <= 1.0, (trial, eps)
            assert sum(counts) == len(ledger.entries) == accepted, (trial, sum(counts), accepted)
            assert eps == serial_eps
    finally:
        sys.setswitchinterval(old)


def test_copies_of_a_ledger_are_the_ledger_itself():
    """Issue 34 item 4: ``copy.copy``/``copy.deepcopy`` (and so scikit-learn's ``clone``, which
    deep-copies non-estimator parameters) return the account itself; a spend through any copy
    is seen by all."""
    ledger = BudgetLedger(1.0, 1e-5)
    for dup in (copy.copy(ledger), copy.deepcopy(ledger), copy.deepcopy({"budget": ledger})["budget"]):
        assert dup is ledger
    copy.deepcopy([ledger])[0].spend(GaussianEvent(5.0))
    assert len(ledger.entries) == 1


def test_a_ledger_refuses_to_be_pickled():
    """Issue 34 item 4: a pickled ledger would be an independent account in another process;
    pickling refuses, and says what to do."""
    ledger = BudgetLedger(1.0, 1e-5)
    ledger.spend(GaussianEvent(5.0))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError, match="BudgetLedger cannot be pickled") as info:
            pickle.dumps(ledger, protocol=protocol)
        assert "n_jobs=1" in str(info.value) and "budget=" in str(info.value)
    with pytest.raises(TypeError, match="BudgetLedger"):
        pickle.dumps({"estimator params": {"budget": ledger}})
    assert len(ledger.entries) == 1


@pytest.mark.parametrize("unit, other", [("row", "group"), ("group", "row")])
@pytest.mark.parametrize("accountant", ["rdp", "gdp"])
def test_the_unit_is_checked_on_the_first_spend(unit, other, accountant):
    """Mutation gap of issue 34: a ledger of one unit refuses an event of the other as its
    very first spend (the accountant alone learns the unit from the events it already holds, so
    only the ledger's own check can refuse the first one)."""
    ledger = BudgetLedger(10.0, 1e-5, accountant, privacy_unit=unit)
    event = NeighbouringEvent("replace", GaussianEvent(5.0), privacy_unit=other)
    with pytest.raises(NeighbouringMismatchError, match=f"accounts per {unit!r}"):
        ledger.check(event)
    with pytest.raises(NeighbouringMismatchError, match=f"accounts per {unit!r}"):
        ledger.spend(event)
    assert ledger.entries == [] and ledger.spent() == (0.0, 0.0)
    ledger.spend(NeighbouringEvent("replace", GaussianEvent(5.0), privacy_unit=unit))
    assert len(ledger.entries) == 1


# ---------------------------------------------------------------- the accountants (item 5)
def test_a_spend_declaring_its_accountant_is_bounded_by_it_exactly():
    """Issue 34 item 5: one spend calibrated with exact Gaussian DP to (1, 1e-5) fits a default
    (RDP) ledger of (1, 1e-5): the ledger bounds it with the accountant it declares."""
    z = acc.calibrate_noise_multiplier(
        lambda z: NeighbouringEvent("replace", acc.SelfComposedEvent(GaussianEvent(z), 7)), 1.0, 1e-5, "gdp")
    event = NeighbouringEvent("replace", acc.SelfComposedEvent(GaussianEvent(z), 7))
    exact = acc.get_accountant("gdp", "replace")().compose(event).get_epsilon(1e-5)
    rdp = acc.get_accountant("rdp", "replace")().compose(event).get_epsilon(1e-5)
    assert exact <= 1.0 < rdp
    undeclared = BudgetLedger(1.0, 1e-5)
    with pytest.raises(BudgetExceededError, match="accountant rdp"):
        undeclared.spend(event)
    ledger = BudgetLedger(1.0, 1e-5)
    assert ledger.check(event, accountant="gdp")
    assert ledger.spend(event, accountant="gdp") == exact
    assert ledger.spent() == (exact, 1e-5) and ledger.spent_by == "gdp" and ledger.declared == ["gdp"]


def test_several_spends_are_bounded_by_one_accountant_over_all_of_them():
    """Each candidate bound composes every spend under one accountant; epsilons of different
    accountants are never added.  A Laplace spend (which GDP cannot account for) leaves only
    the RDP bound of the whole composition."""
    g = GaussianEvent(4.0)
    ledger = BudgetLedger(10.0, 1e-5)
    ledger.spend(g, accountant="gdp")
    ledger.spend(g, accountant="gdp")
    both_gdp = acc.get_accountant("gdp", "replace")().compose(g, 2).get_epsilon(1e-5)
    assert ledger.spent()[0] == both_gdp and ledger.spent_by == "gdp"
    lap = LaplaceEvent(0.5)
    ledger.spend(lap, accountant="rdp")
    rdp_all = acc.get_accountant("rdp", "replace")().compose(g, 1).compose(g, 1).compose(lap).get_epsilon(1e-5)
    assert ledger.spent()[0] == pytest.approx(rdp_all, rel=1e-12) and ledger.spent_by == "rdp"
    assert ledger.spent()[0] > both_gdp
    assert ledger.declared == ["gdp", "gdp", "rdp"]


def test_the_smallest_bound_is_a_bound_of_every_spend():
    """The ledger's own accountant stays a candidate: a declared accountant never makes the
    bound larger than the ledger's own, and the minimum is over accountants that hold every
    spend."""
    ledger = BudgetLedger(50.0, 1e-5, "gdp", neighbouring="add_remove")
    g = GaussianEvent(3.0)
    ledger.spend(g, accountant="rdp")
    gdp = acc.get_accountant("gdp", "add_remove")().compose(g).get_epsilon(1e-5)
    assert ledger.spent()[0] == gdp and ledger.spent_by == "gdp"
    sampled = PoissonSampledEvent(0.1, GaussianEvent(2.0))       # GDP cannot account for it
    ledger.spend(sampled, accountant="rdp")
    rdp = acc.get_accountant("rdp", "add_remove")().compose(g).compose(sampled).get_epsilon(1e-5)
    assert ledger.spent()[0] == pytest.approx(rdp, rel=1e-12) and ledger.spent_by == "rdp"
    # an event no accountant of the ledger can hold is refused, nothing recorded
    plain = BudgetLedger(50.0, 1e-5, "gdp", neighbouring="add_remove")
    with pytest.raises(UnsupportedEventError):
        plain.spend(sampled)
    assert plain.entries == []


def test_a_declared_accountant_must_be_a_registry_name():
    ledger = BudgetLedger(1.0, 1e-5)
    with pytest.raises(ValueError, match="accountant"):
        ledger.spend(GaussianEvent(5.0), accountant="magic")
    with pytest.raises(ValueError, match="accountant"):
        ledger.check(GaussianEvent(5.0), accountant=acc.GDPAccountant)
    assert ledger.entries == []


def test_a_refused_spend_changes_no_bound():
    ledger = BudgetLedger(1.0, 1e-5)
    ledger.spend(GaussianEvent(8.0), accountant="gdp")
    before = (ledger.spent(), ledger.spent_by, ledger.entries, ledger.declared)
    with pytest.raises(BudgetExceededError):
        ledger.spend(ComposedEvent([GaussianEvent(1.0), LaplaceEvent(5.0)]), accountant="rdp")
    assert (ledger.spent(), ledger.spent_by, ledger.entries, ledger.declared) == before
    # the next spend is bounded as if the refused one never happened
    again = BudgetLedger(1.0, 1e-5)
    again.spend(GaussianEvent(8.0), accountant="gdp")
    assert ledger.spend(GaussianEvent(9.0)) == again.spend(GaussianEvent(9.0))


def test_a_spends_delta_tail_is_charged_outside_its_event():
    """``delta_tail``: the δ a spend has outside its event adds to the composition's δ, so the
    ledger's ε is every event composed at δ - Σ δ_tail; a tail that leaves no δ is refused."""
    ledger = BudgetLedger(10.0, 1e-5)
    ledger.spend(GaussianEvent(2.0), delta_tail=4e-6)
    ledger.spend(GaussianEvent(3.0), delta_tail=1e-6)
    ref = acc.RDPAccountant().compose(GaussianEvent(2.0)).compose(GaussianEvent(3.0))
    assert ledger.spent()[0] == pytest.approx(ref.get_epsilon(5e-6), rel=1e-12)
    assert ledger.spent()[0] > ref.get_epsilon(1e-5)
    assert not ledger.check(GaussianEvent(3.0), delta_tail=5e-6)     # no δ left for the events
    with pytest.raises(BudgetExceededError):
        ledger.spend(GaussianEvent(3.0), delta_tail=5e-6)
    with pytest.raises(BudgetExceededError):
        ledger.spend(GaussianEvent(3.0), delta_tail=0.5)
    assert len(ledger.entries) == 2
    for bad in (-1e-9, 1.0, float("nan")):
        with pytest.raises(ValueError, match="delta_tail"):
            ledger.spend(GaussianEvent(3.0), delta_tail=bad)
