"""The restricted-order RDP calibration and the secant search against the
previous full-grid brentq calibration (kept below as the reference)."""
import functools
import math

import numpy as np
import pytest
from scipy import optimize

from dpem_fast.accounting import (
    ComposedEvent, GaussianEvent, GDPAccountant, LaplaceEvent,
    MomentsAccountant, PoissonSampledEvent, RDPAccountant, SelfComposedEvent,
    ZCDPAccountant, calibrate_epsilon_per_release, calibrate_noise_multiplier)
from dpem_fast.accounting import _calibration
from dpem_fast.mixture import dpem_plan


def _reference(make_event, epsilon, delta, accountant, lo, hi, decreasing,
               xtol=1e-7):
    """The full-grid calibration before the restricted-order search."""
    cache = {}

    def eps_at(x):
        if x not in cache:
            cache[x] = accountant().compose(
                make_event(math.exp(x))).get_epsilon(delta)
        return cache[x]

    def feasible(x):
        return eps_at(x) <= epsilon

    log_lo, log_hi = math.log(lo), math.log(hi)
    x = min(max(0.0, log_lo), log_hi)
    step = math.log(4.0)
    toward = 1.0 if decreasing else -1.0
    if feasible(x):
        b, a = x, x
        while feasible(a):
            b = a
            a = a - toward * step
            if not log_lo <= a <= log_hi:
                edge = log_lo if decreasing else log_hi
                if feasible(edge):
                    return math.exp(edge)
                a = edge
                break
    else:
        a, b = x, x
        while not feasible(b):
            a = b
            b = b + toward * step
            if not log_lo <= b <= log_hi:
                b = log_hi if decreasing else log_lo
                break
    root = optimize.brentq(lambda x: min(eps_at(x), 1e300) - epsilon,
                           min(a, b), max(a, b), xtol=xtol, rtol=1e-12,
                           maxiter=200)
    step, cand = xtol, root
    while not feasible(cand):
        cand = root + (1.0 if decreasing else -1.0) * step
        step *= 2.0
    return math.exp(cand)


def _sg(q, n):
    return lambda z: SelfComposedEvent(
        PoissonSampledEvent(q, GaussianEvent(z)), n)


def _hetero(z):
    return ComposedEvent([
        SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(z)), 500),
        SelfComposedEvent(PoissonSampledEvent(0.2, GaussianEvent(2 * z)), 20),
        SelfComposedEvent(GaussianEvent(5 * z), 10),
        LaplaceEvent(0.05)])


NOISE_PLANS = [
    ("gaussian", lambda z: GaussianEvent(z), 1.0, 1e-5),
    ("gaussian_x100", lambda z: SelfComposedEvent(GaussianEvent(z), 100),
     0.5, 1e-6),
    ("sg_q0.001", _sg(0.001, 10000), 1.0, 1e-5),
    ("sg_q0.01", _sg(0.01, 1000), 2.0, 1e-5),
    ("sg_q0.1", _sg(0.1, 200), 4.0, 1e-6),
    ("sg_q0.5", _sg(0.5, 10), 0.3, 1e-5),
    ("sg_high_order", _sg(0.01, 10), 0.05, 1e-5),
    ("hetero", _hetero, 3.0, 1e-5),
    ("ggg", functools.partial(dpem_plan, "GGG", 3, 5), 1.0, 1e-4),
]


def _accts():
    return [RDPAccountant,
            functools.partial(RDPAccountant, conversion="classic"),
            lambda: RDPAccountant(neighbouring="add_remove"),
            MomentsAccountant]


def _check(z, ref, acct, make, target, delta, xtol=1e-7, decreasing=True):
    # same answer as the full-grid search, to the tolerance of both
    assert abs(math.log(z) - math.log(ref)) <= 2 * xtol
    # feasible when recomputed, and (at least) the boundary within xtol
    assert acct().compose(make(z)).get_epsilon(delta) <= target
    worse = z * math.exp(-xtol if decreasing else xtol)
    assert acct().compose(make(worse)).get_epsilon(delta) > target


@pytest.mark.parametrize("name,make,target,delta", NOISE_PLANS,
                         ids=[p[0] for p in NOISE_PLANS])
@pytest.mark.parametrize("ia", range(4))
def test_noise_equals_full_grid(name, make, target, delta, ia):
    acct = _accts()[ia]
    z = calibrate_noise_multiplier(make, target, delta, acct)
    ref = _reference(make, target, delta, acct, 1e-3, 1e6, True)
    _check(z, ref, acct, make, target, delta)


def _llg(e):
    c = math.sqrt(2 * math.log(1.25 / 1e-8))
    return SelfComposedEvent(ComposedEvent(
        [LaplaceEvent(0.5 * e), LaplaceEvent(e), GaussianEvent(c / e)]), 10)


EPS_PLANS = [
    ("laplace", lambda e: SelfComposedEvent(LaplaceEvent(e), 50), 1.0, 1e-6),
    ("llg", _llg, 1.0, 1e-4),
    ("llg_paper", functools.partial(dpem_plan, "LLG", 3, 5), 0.5, 1e-5),
]


@pytest.mark.parametrize("name,make,target,delta", EPS_PLANS,
                         ids=[p[0] for p in EPS_PLANS])
@pytest.mark.parametrize("ia", range(4))
def test_epsilon_per_release_equals_full_grid(name, make, target, delta, ia):
    acct = _accts()[ia]
    e = calibrate_epsilon_per_release(make, target, delta, acct)
    ref = _reference(make, target, delta, acct, 1e-6, 1e3, False)
    _check(e, ref, acct, make, target, delta, decreasing=False)


@pytest.mark.parametrize("acct", [ZCDPAccountant, GDPAccountant])
def test_generic_path_equals_reference(acct):
    make = functools.partial(dpem_plan, "GGG", 3, 5)
    z = calibrate_noise_multiplier(make, 1.0, 1e-5, acct)
    ref = _reference(make, 1.0, 1e-5, acct, 1e-3, 1e6, True)
    _check(z, ref, acct, make, 1.0, 1e-5)


def _count_full_evaluations(monkeypatch):
    calls = []
    orig = _calibration._epsilon_of

    def counted(*args):
        calls.append(args[2])
        return orig(*args)
    monkeypatch.setattr(_calibration, "_epsilon_of", counted)
    return calls


@pytest.mark.parametrize("name,make,target,delta", NOISE_PLANS,
                         ids=[p[0] for p in NOISE_PLANS])
def test_subsampled_plans_certify_with_one_accountant_call(
        monkeypatch, name, make, target, delta):
    calls = _count_full_evaluations(monkeypatch)
    z = calibrate_noise_multiplier(make, target, delta)
    if name.startswith(("sg", "hetero")):
        assert _calibration._has_costly_curve(make(1.0))
        assert calls == [z]   # no fallback: only the final certification
    else:   # cheap curves: the full grid is searched directly
        assert not _calibration._has_costly_curve(make(1.0))
        assert len(calls) > 3 and z in calls


@pytest.mark.parametrize("target", [0.5, 3.0])
def test_sampling_without_replacement_plan(monkeypatch, target):
    from dpem_fast.accounting import SampledWithoutReplacementEvent
    acct = functools.partial(RDPAccountant, neighbouring="replace")

    def make(z):
        return SelfComposedEvent(
            SampledWithoutReplacementEvent(1000, 20, GaussianEvent(z)), 100)
    calls = _count_full_evaluations(monkeypatch)
    z = calibrate_noise_multiplier(make, target, 1e-5, acct)
    assert calls == [z]
    ref = _reference(make, target, 1e-5, acct, 1e-3, 1e6, True)
    _check(z, ref, acct, make, target, 1e-5)


def test_other_accountants_use_generic_path(monkeypatch):
    calls = _count_full_evaluations(monkeypatch)
    make = functools.partial(dpem_plan, "GGG", 3, 5)
    calibrate_noise_multiplier(make, 1.0, 1e-5, ZCDPAccountant)
    assert len(calls) > 3


class _BadWindow(_calibration._Window):
    """A single, deliberately sub-optimal order: forces the second stage
    (orders feasible at ``uf`` other than the window's)."""

    def __init__(self, oe, centre, h=3):
        worse = int(np.searchsorted(oe.orders, 1.5 * oe.orders[centre]))
        super().__init__(oe, min(worse, oe.n - 1), h=0)


@pytest.mark.parametrize("name,make,target,delta", NOISE_PLANS[2:5],
                         ids=[p[0] for p in NOISE_PLANS[2:5]])
def test_second_stage_equals_full_grid(monkeypatch, name, make, target,
                                       delta):
    monkeypatch.setattr(_calibration, "_Window", _BadWindow)
    stages = []
    orig = _calibration._OrderEpsilons.g_on

    def g_on(self, idx):
        stages.append(idx.size)
        return orig(self, idx)
    monkeypatch.setattr(_calibration._OrderEpsilons, "g_on", g_on)
    z = calibrate_noise_multiplier(make, target, delta)
    assert stages and stages[0] > 1
    ref = _reference(make, target, delta, RDPAccountant, 1e-3, 1e6, True)
    _check(z, ref, RDPAccountant, make, target, delta)


def test_fallback_to_generic_search(monkeypatch):
    # order 4 alone never reaches eps = 0.3 here: the restricted search
    # gives up at the bracket edge and the full-grid search answers
    name, make, target, delta = NOISE_PLANS[5]
    monkeypatch.setattr(_calibration, "_Window", _BadWindow)
    calls = _count_full_evaluations(monkeypatch)
    z = calibrate_noise_multiplier(make, target, delta)
    assert len(calls) > 3
    ref = _reference(make, target, delta, RDPAccountant, 1e-3, 1e6, True)
    _check(z, ref, RDPAccountant, make, target, delta)


def test_edges_and_unreachable():
    make = _sg(0.01, 1000)
    # bracket's lower edge already feasible: returned as is
    z = calibrate_noise_multiplier(make, 2.0, 1e-5, bracket=(5.0, 10.0))
    assert z == pytest.approx(5.0, rel=1e-12)
    with pytest.raises(ValueError, match="unreachable"):
        calibrate_noise_multiplier(make, 2.0, 1e-5, bracket=(0.01, 0.5))
    e = calibrate_epsilon_per_release(_llg, 1e3, 1e-5, bracket=(1e-3, 0.1))
    assert e == pytest.approx(0.1, rel=1e-12)


@pytest.mark.parametrize("xtol", [1e-3, 1e-10])
def test_xtol_respected(xtol):
    make = _sg(0.05, 300)
    z = calibrate_noise_multiplier(make, 1.5, 1e-6, xtol=xtol)
    _check(z, _reference(make, 1.5, 1e-6, RDPAccountant, 1e-3, 1e6, True,
                         xtol=xtol), RDPAccountant, make, 1.5, 1e-6,
           xtol=max(xtol, 1e-9))
