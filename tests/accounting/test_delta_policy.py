"""The public δ policy (issue 34 item 6): δ above DELTA_MAX is refused with a ValueError naming
``delta``, δ above DELTA_WARN warns (LargeDeltaWarning), a usual δ is silent — at every
accounting entry point that takes the δ of a claim."""
import functools
import warnings

import pytest

import dpem_fast
from dpem_fast import accounting as acc


def _z_plan(z):
    return acc.NeighbouringEvent("replace", acc.SelfComposedEvent(acc.GaussianEvent(z), 5))


def _eps_plan(e):
    return acc.SelfComposedEvent(acc.LaplaceEvent(e), 5)


ENTRY_POINTS = {
    "BudgetLedger": lambda d: acc.BudgetLedger(1.0, d),
    "calibrate_noise_multiplier": lambda d: acc.calibrate_noise_multiplier(_z_plan, 1.0, d, "gdp"),
    "calibrate_epsilon_per_release": lambda d: acc.calibrate_epsilon_per_release(_eps_plan, 1.0, d, "rdp"),
    "noise_table": lambda d: acc.noise_table(_z_plan, epsilons=(1.0,), delta=d,
                                             accountants={"GDP": functools.partial(acc.GDPAccountant,
                                                                                   neighbouring="replace")}),
}


def test_the_thresholds():
    assert acc.DELTA_MAX == 1e-2 and acc.DELTA_WARN == 1e-4
    assert dpem_fast.LargeDeltaWarning is acc.LargeDeltaWarning
    assert issubclass(acc.LargeDeltaWarning, UserWarning)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("delta", [0.5, 0.05, 0.0100001])
def test_a_large_delta_is_refused_naming_delta(entry, delta):
    with pytest.raises(ValueError, match=r"delta=.*above 0\.01.*1/n"):
        ENTRY_POINTS[entry](delta)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("delta", [1e-2, 1e-3, 1.5e-4])
def test_a_delta_in_the_band_warns(entry, delta):
    with pytest.warns(acc.LargeDeltaWarning, match=r"delta=.*above 0\.0001"):
        ENTRY_POINTS[entry](delta)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("delta", [1e-4, 1e-5, 1e-9])
def test_a_usual_delta_is_silent(entry, delta):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ENTRY_POINTS[entry](delta)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, float("nan")])
def test_outside_the_unit_interval_is_still_refused(delta):
    for entry in ENTRY_POINTS.values():
        with pytest.raises(ValueError, match="delta"):
            entry(delta)


def test_a_privacy_profile_takes_any_delta():
    """The accountants' ``get_epsilon(delta)`` is a curve, not a claim: no policy there."""
    a = acc.GDPAccountant(neighbouring="replace").compose(acc.GaussianEvent(1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert a.get_epsilon(0.5) < a.get_epsilon(1e-3) < a.get_epsilon(1e-5)
