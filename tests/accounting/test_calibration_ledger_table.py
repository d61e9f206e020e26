import functools
import math

import pytest

from dpem_fast.accounting import (
    BudgetExceededError, BudgetLedger, GaussianEvent, GDPAccountant,
    LinearAccountant, MomentsAccountant, PrivacyLeakWarning, RDPAccountant,
    SelfComposedEvent, ZCDPAccountant, calibrate_epsilon_per_release,
    calibrate_noise_multiplier, format_noise_table, noise_table)
from dpem_fast.mixture import dpem_plan

GGG = functools.partial(dpem_plan, "GGG", 3, 5)
LLG = functools.partial(dpem_plan, "LLG", 3, 5)


@pytest.mark.parametrize("acct", [RDPAccountant, MomentsAccountant,
                                  ZCDPAccountant, GDPAccountant,
                                  LinearAccountant])
@pytest.mark.parametrize("target", [0.1, 1.0, 4.0])
def test_calibrated_noise_meets_target_exactly(acct, target):
    z = calibrate_noise_multiplier(GGG, target, 1e-4, acct)
    assert acct().compose(GGG(z)).get_epsilon(1e-4) <= target
    assert acct().compose(GGG(z * (1 - 1e-5))).get_epsilon(1e-4) > target


def test_calibrated_epsilon_per_release_llg():
    for acct in (ZCDPAccountant, MomentsAccountant, LinearAccountant):
        e_i = calibrate_epsilon_per_release(LLG, 1.0, 1e-4, acct)
        assert acct().compose(LLG(e_i)).get_epsilon(1e-4) <= 1.0
        assert acct().compose(LLG(e_i * 1.0001)).get_epsilon(1e-4) > 1.0


def test_unreachable_target_raises():
    with pytest.raises(ValueError, match="unreachable"):
        calibrate_noise_multiplier(GGG, 1.0, 1e-9,
                                   functools.partial(LinearAccountant,
                                                     delta_per_release=1e-8))


def test_budget_ledger():
    ledger = BudgetLedger(1.0, 1e-5, accountant=GDPAccountant)
    assert ledger.spent() == (0.0, 0.0)
    g = GaussianEvent(10.0)
    assert ledger.check(g)
    total = ledger.spend(g, label="means")
    assert ledger.spent()[0] == pytest.approx(total)
    assert ledger.remaining()[0] == pytest.approx(1.0 - total)
    entries = ledger.entries
    entries.clear()
    assert ledger.entries == [("means", g, 1)]
    big = SelfComposedEvent(GaussianEvent(1.0), 10)
    assert not ledger.check(big)
    with pytest.raises(BudgetExceededError, match="budget"):
        ledger.spend(big, label="too much")
    assert isinstance(BudgetExceededError("x"), ValueError)
    assert ledger.entries == [("means", g, 1)]
    assert ledger.spent()[0] == pytest.approx(total)


def test_privacy_leak_warning_is_user_warning():
    assert issubclass(PrivacyLeakWarning, UserWarning)


def test_noise_table_orders_accountants():
    accts = {"Linear": LinearAccountant, "zCDP": ZCDPAccountant,
             "RDP": RDPAccountant, "GDP": GDPAccountant}
    table = noise_table(GGG, (0.5, 2.0), 1e-4, accts)
    rows = table["rows"]
    for i in range(2):
        assert rows["GDP"][i] <= rows["RDP"][i]
        assert rows["RDP"][i] <= rows["zCDP"][i] * (1 + 2e-4)  # grid
        assert rows["zCDP"][i] <= rows["Linear"][i]
    text = format_noise_table(table)
    assert "| GDP" in text and "0.5" in text
    assert math.isfinite(rows["GDP"][0])
