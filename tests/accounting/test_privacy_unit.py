"""The privacy unit of an event (issue 27): row-level and group-level (person-level) events
never mix in one accountant or one ledger; the unit survives a saved file."""
import json

import pytest

from dpem_fast import _persist
from dpem_fast.accounting import (
    ACCOUNTANTS, BudgetLedger, ComposedEvent, GaussianEvent, NeighbouringEvent,
    NeighbouringMismatchError, get_accountant)

G = GaussianEvent(10.0)


def tagged(unit, rel="replace", z=10.0):
    return NeighbouringEvent(rel, GaussianEvent(z), privacy_unit=unit)


def test_the_unit_is_validated_and_defaults_to_row():
    assert NeighbouringEvent("replace", G).privacy_unit == "row"
    assert tagged("group").privacy_unit == "group"
    with pytest.raises(ValueError, match="privacy_unit"):
        NeighbouringEvent("replace", G, privacy_unit="person")


@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_an_accountant_never_composes_both_units(name):
    factory = get_accountant(name, "replace")
    # one unit: the arithmetic is the unit-free one
    assert factory().compose(tagged("group")).get_epsilon(1e-5) == pytest.approx(
        factory().compose(tagged("row")).get_epsilon(1e-5), rel=1e-12)
    # both units in one event
    mixed = ComposedEvent([tagged("row"), tagged("group")])
    acct = factory()
    assert not acct.supports(mixed)
    with pytest.raises(NeighbouringMismatchError, match="privacy units"):
        acct.compose(mixed)
    assert acct.ledger == []
    # one unit after the other: refused, the state unchanged
    acct = factory().compose(tagged("group"))
    before = acct.get_epsilon(1e-5)
    assert not acct.supports(tagged("row"))
    with pytest.raises(NeighbouringMismatchError, match="privacy_unit='row'"):
        acct.compose(tagged("row"))
    assert len(acct.ledger) == 1 and acct.get_epsilon(1e-5) == before
    acct.compose(G)                              # untagged: read under the accountant's unit so far
    assert len(acct.ledger) == 2


@pytest.mark.parametrize("unit, other", [("row", "group"), ("group", "row")])
def test_a_ledger_refuses_the_other_unit_and_records_nothing(unit, other):
    ledger = BudgetLedger(10.0, 1e-5, "gdp", privacy_unit=unit)
    assert ledger.privacy_unit == unit and f"privacy_unit={unit!r}" in repr(ledger)
    ledger.spend(tagged(unit), label="ok")
    with pytest.raises(NeighbouringMismatchError, match=f"accounts per {unit!r}"):
        ledger.spend(tagged(other), label="other unit")
    with pytest.raises(NeighbouringMismatchError):
        ledger.check(ComposedEvent([tagged(unit), tagged(other)]))
    assert [label for label, _, _ in ledger.entries] == ["ok"]
    ledger.spend(G, label="untagged")            # read under the ledger's unit
    assert len(ledger.entries) == 2


def test_the_default_ledger_is_row_level_and_the_unit_is_checked():
    assert BudgetLedger(1.0, 1e-5).privacy_unit == "row"
    with pytest.raises(ValueError, match="privacy_unit"):
        BudgetLedger(1.0, 1e-5, privacy_unit="person")


def test_the_unit_round_trips_and_a_row_level_event_is_written_as_before():
    row = NeighbouringEvent("add_remove", ComposedEvent([G, GaussianEvent(3.0)]))
    group = NeighbouringEvent("add_remove", ComposedEvent([G, GaussianEvent(3.0)]), privacy_unit="group")
    js_row, js_group = _persist.event_to_json(row), _persist.event_to_json(group)
    # the format before issue 27, byte for byte: no privacy_unit field in a row-level event
    assert "privacy_unit" not in js_row and js_group["privacy_unit"] == "group"
    assert _persist.event_from_json(json.loads(json.dumps(js_row))) == row
    assert _persist.event_from_json(json.loads(json.dumps(js_group))) == group
    bad = dict(js_group, privacy_unit="person")
    with pytest.raises(_persist.ModelFormatError, match="privacy_unit"):
        _persist.event_from_json(bad)
    extra = dict(js_row, colour="red")
    with pytest.raises(_persist.ModelFormatError, match="fields"):
        _persist.event_from_json(extra)
