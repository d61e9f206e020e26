"""``ACCOUNTANTS`` / ``get_accountant``: names to factories under a relation."""
import sys

import pytest

from dpem_fast.accounting import (
    ACCOUNTANTS, AdvancedAccountant, GaussianEvent, GDPAccountant,
    LinearAccountant, MomentsAccountant, PLDAccountant, PrivacyAccountant,
    RDPAccountant, ZCDPAccountant, get_accountant)

EXPECTED = {
    "gdp": GDPAccountant,
    "rdp": RDPAccountant,
    "zcdp": ZCDPAccountant,
    "moments": MomentsAccountant,
    "advanced": AdvancedAccountant,
    "linear": LinearAccountant,
    "pld": PLDAccountant,
}
RELATIONS = ("add_remove", "replace")


def test_names_in_order():
    assert ACCOUNTANTS == ("gdp", "rdp", "zcdp", "moments", "advanced",
                           "linear", "pld")
    assert isinstance(ACCOUNTANTS, tuple)


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_factory_makes_fresh_accountant_of_the_kind_and_relation(name,
                                                                 relation):
    factory = get_accountant(name, relation)
    a, b = factory(), factory()
    assert type(a) is EXPECTED[name]
    assert a.neighbouring == relation
    assert a is not b and a.ledger == [] and b.ledger == []
    a.compose(GaussianEvent(4.0))
    assert b.ledger == []


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("cls", list(EXPECTED.values()))
def test_class_is_accepted_as_name(cls, relation):
    acct = get_accountant(cls, relation)()
    assert type(acct) is cls
    assert acct.neighbouring == relation


def test_user_subclass_is_accepted():
    class Mine(GDPAccountant):
        pass

    acct = get_accountant(Mine, "replace")()
    assert type(acct) is Mine and acct.neighbouring == "replace"


@pytest.mark.parametrize("bad", ["GDP", "magic", "", None, 3, GDPAccountant(),
                                 PrivacyAccountant, dict, ("gdp",)])
def test_unknown_accountant_is_refused_with_the_choices(bad):
    with pytest.raises(ValueError, match="accountant") as info:
        get_accountant(bad, "replace")
    for name in ACCOUNTANTS:
        assert repr(name) in str(info.value)


@pytest.mark.parametrize("bad", ["swap", "replace_one", None, ""])
def test_bad_relation_is_refused(bad):
    with pytest.raises(ValueError, match="neighbouring"):
        get_accountant("rdp", bad)
    with pytest.raises(ValueError, match="neighbouring"):
        get_accountant(RDPAccountant, bad)


def test_pld_needs_no_dp_accounting(monkeypatch):
    # dp_accounting is a test-only cross-check: the native accountant must
    # work with it unimportable
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    acct = get_accountant("pld", "add_remove")()
    acct.compose(GaussianEvent(1.0))
    assert acct.get_epsilon(1e-5) == pytest.approx(4.3772, abs=1e-3)
