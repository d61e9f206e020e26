"""BudgetLedger: the budget's neighbouring relation and its accountant."""
import functools

import pytest

from dpem_fast.accounting import (
    ACCOUNTANTS, BudgetLedger, ComposedEvent, GaussianEvent, GDPAccountant,
    NeighbouringEvent, NeighbouringMismatchError, PoissonSampledEvent,
    RDPAccountant, SelfComposedEvent, UnsupportedEventError, ZCDPAccountant,
    get_accountant)
from dpem_fast.accounting._registry import _CLASSES

G = GaussianEvent(20.0)
OTHER = {"add_remove": "replace", "replace": "add_remove"}


def _accountant_of(ledger):
    return ledger._fresh()


def test_defaults_are_rdp_under_replace():
    ledger = BudgetLedger(1.0, 1e-5)
    assert ledger.neighbouring == "replace"
    acct = _accountant_of(ledger)
    assert type(acct) is RDPAccountant and acct.neighbouring == "replace"
    assert "neighbouring='replace'" in repr(ledger)
    none = BudgetLedger(1.0, 1e-5, None, neighbouring="add_remove")
    assert type(_accountant_of(none)) is RDPAccountant
    assert _accountant_of(none).neighbouring == "add_remove"


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_name_and_class_take_the_ledger_relation(name, rel):
    for spec in (name, _CLASSES[name]):
        ledger = BudgetLedger(1.0, 1e-5, spec, neighbouring=rel)
        assert ledger.neighbouring == rel
        acct = _accountant_of(ledger)
        assert type(acct) is _CLASSES[name] and acct.neighbouring == rel


def test_pld_name_under_replace():
    ledger = BudgetLedger(1.0, 1e-5, "pld")
    assert _accountant_of(ledger).neighbouring == "replace"


def test_ledger_spends_are_read_under_its_relation():
    # the relation reaches the accountant: a Poisson-subsampled Gaussian has
    # an RDP bound under add/remove only
    ev = PoissonSampledEvent(0.1, GaussianEvent(2.0))
    assert BudgetLedger(10.0, 1e-5, neighbouring="add_remove").check(ev)
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        BudgetLedger(10.0, 1e-5).check(ev)


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_factory_must_have_the_ledger_relation(rel):
    good = functools.partial(ZCDPAccountant, neighbouring=rel)
    assert BudgetLedger(1.0, 1e-5, good, neighbouring=rel).neighbouring == rel
    bad = functools.partial(ZCDPAccountant, neighbouring=OTHER[rel])
    with pytest.raises(ValueError, match="neighbouring"):
        BudgetLedger(1.0, 1e-5, bad, neighbouring=rel)
    with pytest.raises(ValueError, match="neighbouring"):
        BudgetLedger(1.0, 1e-5, get_accountant("gdp", OTHER[rel]),
                     neighbouring=rel)


def test_lambda_factory_of_the_default_relation_is_refused_under_replace():
    # GDPAccountant() defaults to add_remove; the ledger defaults to replace
    with pytest.raises(ValueError, match="neighbouring"):
        BudgetLedger(1.0, 1e-5, lambda: GDPAccountant())
    ledger = BudgetLedger(1.0, 1e-5, lambda: GDPAccountant(),
                          neighbouring="add_remove")
    assert ledger.neighbouring == "add_remove"


@pytest.mark.parametrize("bad, exc, match", [
    ("magic", ValueError, "accountant"),
    (3.0, TypeError, "accountant"),
    (lambda: 3.0, TypeError, "PrivacyAccountant"),
    ("rdp", None, None),
])
def test_bad_accountant(bad, exc, match):
    if exc is None:
        BudgetLedger(1.0, 1e-5, bad)
        return
    with pytest.raises(exc, match=match):
        BudgetLedger(1.0, 1e-5, bad)


def test_bad_relation():
    with pytest.raises(ValueError, match="neighbouring"):
        BudgetLedger(1.0, 1e-5, neighbouring="swap")


def test_neighbouring_is_keyword_only():
    with pytest.raises(TypeError):
        BudgetLedger(1.0, 1e-5, "rdp", "replace")


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
@pytest.mark.parametrize("name", ["gdp", "rdp", "zcdp", "linear"])
def test_mismatched_spend_is_refused_and_nothing_recorded(rel, name):
    other = OTHER[rel]
    ledger = BudgetLedger(5.0, 1e-5, name, neighbouring=rel)
    first = ledger.spend(NeighbouringEvent(rel, G), label="ok")
    entries = ledger.entries
    spent = ledger.spent()
    for ev in (NeighbouringEvent(other, G),
               ComposedEvent([G, NeighbouringEvent(other, G)]),
               SelfComposedEvent(NeighbouringEvent(other, G), 2),
               NeighbouringEvent(rel, NeighbouringEvent(other, G))):
        with pytest.raises(NeighbouringMismatchError) as info:
            ledger.spend(ev, label="bad")
        assert "BudgetLedger" in str(info.value)
        assert repr(rel) in str(info.value) and repr(other) in str(info.value)
        with pytest.raises(NeighbouringMismatchError):
            ledger.check(ev)
        assert ledger.entries == entries
        assert ledger.spent() == spent
    # a matching tag spends exactly as the untagged event
    untagged = BudgetLedger(5.0, 1e-5, name, neighbouring=rel)
    assert untagged.spend(G) == first
    assert ledger.spend(NeighbouringEvent(rel, G)) == untagged.spend(G)


def test_ledger_checks_tags_even_if_its_accountant_does_not():
    class Blind(GDPAccountant):
        """Would read any tagged event as its inner one."""

        def _contribution(self, event):
            while isinstance(event, NeighbouringEvent):
                event = event.event
            return super()._contribution(event)

        def compose(self, event, count=1):
            self._state += self._scale(self._contribution(event), count)
            self._ledger.append((event, count))
            return self

    ledger = BudgetLedger(5.0, 1e-5, Blind)
    with pytest.raises(NeighbouringMismatchError, match="BudgetLedger"):
        ledger.spend(NeighbouringEvent("add_remove", G))
    assert ledger.entries == []


def test_estimator_style_class_accountant_under_replace():
    # tests/estimators: BudgetLedger(..., accountant=GDPAccountant) with the
    # estimator's default relation
    ledger = BudgetLedger(epsilon=1.2, delta=1e-5, accountant=GDPAccountant)
    acct = _accountant_of(ledger)
    assert type(acct) is GDPAccountant and acct.neighbouring == "replace"
    assert ledger.spend(G) == pytest.approx(
        GDPAccountant(neighbouring="replace").compose(G).get_epsilon(1e-5))


@pytest.mark.parametrize("accountant", ["rdp", "gdp", "zcdp"])
def test_ledger_accepts_exactly_the_budget_and_refuses_just_above(accountant):
    """The boundary: a spend that brings ε exactly to the budget is accepted; a budget 0.1 %
    below it refuses the same spend and records nothing (a ledger letting spending go a few
    per cent over would pass a test that only checks 10 %)."""
    from dpem_fast import accounting as acc

    event = acc.NeighbouringEvent("replace", acc.SelfComposedEvent(acc.GaussianEvent(3.0), 7))
    exact = acc.get_accountant(accountant, "replace")().compose(event).get_epsilon(1e-6)
    ok = acc.BudgetLedger(exact, 1e-6, accountant=accountant, neighbouring="replace")
    assert ok.spend(event) == exact and len(ok.entries) == 1
    tight = acc.BudgetLedger(exact / 1.001, 1e-6, accountant=accountant, neighbouring="replace")
    with pytest.raises(acc.BudgetExceededError):
        tight.spend(event)
    assert tight.entries == [] and not tight.check(event)
    # two spends: the second brings the total just over
    half = acc.NeighbouringEvent("replace", acc.GaussianEvent(3.0))
    two = acc.BudgetLedger(acc.get_accountant(accountant, "replace")().compose(half, 2).get_epsilon(1e-6) / 1.001,
                           1e-6, accountant=accountant, neighbouring="replace")
    two.spend(half)
    with pytest.raises(acc.BudgetExceededError):
        two.spend(half)
    assert len(two.entries) == 1
