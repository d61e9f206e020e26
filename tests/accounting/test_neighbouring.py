"""NeighbouringEvent: the relation travels with the event.

(The per-accountant contract is in ``test_conformance.py``; this file has
the event itself, the memo, the calibration and accountants that bypass
the generic fold.)
"""
import functools
import math

import numpy as np
import pytest

from dpem_fast.accounting import (
    ComposedEvent, GaussianEvent, GDPAccountant, LaplaceEvent,
    MomentsAccountant, NeighbouringEvent, NeighbouringMismatchError,
    PoissonSampledEvent, PrivacyAccountant, RDPAccountant,
    SampledWithoutReplacementEvent, SelfComposedEvent, UnsupportedEventError,
    ZCDPAccountant, calibrate_epsilon_per_release, calibrate_noise_multiplier)
from dpem_fast.accounting import _calibration, _rdp_accountants
from dpem_fast.accounting._base import AdditiveAccountant
from dpem_fast.accounting._events import tagged_relations

G = GaussianEvent(1.5)


# ------------------------------------------------------------- the event --
def test_fields_and_validation():
    ev = NeighbouringEvent("replace", G)
    assert ev.neighbouring == "replace" and ev.event is G
    with pytest.raises(ValueError, match="neighbouring.*swap"):
        NeighbouringEvent("swap", G)
    with pytest.raises(ValueError, match="neighbouring"):
        NeighbouringEvent(None, G)
    with pytest.raises(TypeError, match="event"):
        NeighbouringEvent("replace", 1.5)
    with pytest.raises(TypeError, match="event"):
        NeighbouringEvent("replace", None)


def test_frozen_hashable_and_distinct_from_untagged():
    a = NeighbouringEvent("replace", ComposedEvent([G, G]))
    b = NeighbouringEvent("replace", ComposedEvent((G, G)))
    assert a == b and hash(a) == hash(b)
    assert a != NeighbouringEvent("add_remove", ComposedEvent([G, G]))
    assert a != ComposedEvent([G, G])
    with pytest.raises(AttributeError):
        a.neighbouring = "add_remove"
    assert {a: 1}[b] == 1


def test_tagged_relations_walks_every_wrapper():
    tree = ComposedEvent([
        G,
        SelfComposedEvent(NeighbouringEvent("replace", G), 2),
        PoissonSampledEvent(0.1, NeighbouringEvent("add_remove", G)),
        SampledWithoutReplacementEvent(10, 5, NeighbouringEvent(
            "replace", NeighbouringEvent("replace", G))),
    ])
    assert tagged_relations(tree) == {"replace", "add_remove"}
    assert tagged_relations(G) == set()
    assert tagged_relations(NeighbouringEvent("add_remove", G)) == {
        "add_remove"}


# ---------------------------------------------- accountants, bypass paths --
class _Counting(AdditiveAccountant):
    """Counts composed events; never looks inside them (no generic fold)."""

    def _contribution(self, event):
        return 1.0

    def _leaf(self, event):  # pragma: no cover - _contribution overrides
        return 1.0

    def _epsilon(self, delta):
        return self._state

    def _delta(self, epsilon):
        return 0.0


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_base_class_refuses_mismatch_for_accountants_that_ignore_tags(rel):
    other = "replace" if rel == "add_remove" else "add_remove"
    acct = _Counting(neighbouring=rel)
    acct.compose(NeighbouringEvent(rel, G))
    with pytest.raises(NeighbouringMismatchError, match="_Counting"):
        acct.compose(ComposedEvent([G, NeighbouringEvent(other, G)]))
    assert not acct.supports(NeighbouringEvent(other, G))
    assert acct.get_epsilon(0.5) == 1.0 and len(acct.ledger) == 1


@pytest.mark.parametrize("event", [
    NeighbouringEvent("add_remove", G),
    ComposedEvent([G, NeighbouringEvent("add_remove", G)]),
    SampledWithoutReplacementEvent(100, 10,
                                   NeighbouringEvent("add_remove", G)),
    SampledWithoutReplacementEvent(100, 10, NeighbouringEvent(
        "add_remove", LaplaceEvent(1.0))),
])
def test_rdp_curve_function_checks_tags_itself(event):
    # the calibration's per-order search calls it without compose
    orders = (2.0, 8.0, 32.0)
    with pytest.raises(NeighbouringMismatchError):
        _rdp_accountants._event_rdp(event, orders, "replace")


def test_rdp_curve_of_tagged_event_equals_untagged_and_is_memoised():
    orders = tuple(float(a) for a in range(2, 40))
    plain = SampledWithoutReplacementEvent(1000, 30, G)
    tagged = SelfComposedEvent(NeighbouringEvent("replace", plain), 1)
    want = _rdp_accountants._event_rdp(plain, orders, "replace")
    info = _rdp_accountants._event_rdp.cache_info
    got = _rdp_accountants._event_rdp(tagged, orders, "replace")
    np.testing.assert_array_equal(got, want)
    hits = info().hits
    again = _rdp_accountants._event_rdp(tagged, orders, "replace")
    assert info().hits == hits + 1
    np.testing.assert_array_equal(again, want)
    assert not again.flags.writeable


@pytest.mark.parametrize("rel, base", [
    ("add_remove", PoissonSampledEvent(0.05, NeighbouringEvent(
        "add_remove", G))),
    ("replace", SampledWithoutReplacementEvent(500, 20, NeighbouringEvent(
        "replace", LaplaceEvent(0.7)))),
])
def test_tags_under_sampling_wrappers_are_seen_through(rel, base):
    untagged = base.__class__(*[
        f.event if isinstance(f, NeighbouringEvent) else f
        for f in (getattr(base, n) for n in base.__dataclass_fields__)])
    for make in (RDPAccountant, MomentsAccountant):
        a = make(neighbouring=rel).compose(base, 10)
        b = make(neighbouring=rel).compose(untagged, 10)
        assert a.get_epsilon(1e-5) == b.get_epsilon(1e-5)
        assert np.array_equal(a.rdp, b.rdp)


def test_mixture_plan_read_under_the_wrong_relation_understates():
    # DPGaussianMixture's three releases, add/remove sensitivities (1, 1, 1);
    # replace-one sensitivities are (sqrt 2, 2, sqrt 2): an add/remove noise
    # multiplier read as a replace one claims the wrong, smaller mu.
    s = 5.0
    zs_ar = [s, s, s]
    sens_ratio = [math.sqrt(2.0), 2.0, math.sqrt(2.0)]
    plan = ComposedEvent([GaussianEvent(z) for z in zs_ar])
    mu_claimed = GDPAccountant(neighbouring="replace").compose(plan).mu
    mu_true = GDPAccountant(neighbouring="replace").compose(ComposedEvent(
        [GaussianEvent(z / r) for z, r in zip(zs_ar, sens_ratio)])).mu
    assert mu_true / mu_claimed == pytest.approx(math.sqrt(8 / 3))  # ~1.63
    # tagged, the mistake cannot be made
    acct = GDPAccountant(neighbouring="replace")
    with pytest.raises(NeighbouringMismatchError):
        acct.compose(NeighbouringEvent("add_remove", plan))
    assert acct.mu == 0.0


# ------------------------------------------------------------ calibration --
def _poisson_plan(z):
    return SelfComposedEvent(PoissonSampledEvent(0.02, GaussianEvent(z)), 300)


def _wor_plan(z):
    return SelfComposedEvent(
        SampledWithoutReplacementEvent(2000, 40, GaussianEvent(z)), 200)


def _ggg_plan(z):
    g = GaussianEvent(z)
    return SelfComposedEvent(ComposedEvent([g, SelfComposedEvent(g, 3)]), 5)


def _llg_plan(e):
    lap = LaplaceEvent(e)
    return SelfComposedEvent(ComposedEvent([lap, GaussianEvent(4.0 / e)]), 5)


def _tagged(plan, rel, where):
    if where == "outer":
        return lambda p: NeighbouringEvent(rel, plan(p))
    if where == "inner":   # tag under the SelfComposedEvent
        return lambda p: SelfComposedEvent(
            NeighbouringEvent(rel, plan(p).event), plan(p).count)
    raise AssertionError(where)


@pytest.mark.parametrize("where", ["outer", "inner"])
@pytest.mark.parametrize("plan, rel, accountant", [
    (_poisson_plan, "add_remove", RDPAccountant),       # restricted orders
    (_poisson_plan, "add_remove", MomentsAccountant),
    (_wor_plan, "replace", RDPAccountant),              # restricted orders
    (_ggg_plan, "replace", RDPAccountant),              # generic search
    (_ggg_plan, "replace", GDPAccountant),
    (_ggg_plan, "add_remove", ZCDPAccountant),
])
def test_calibration_identical_for_tagged_and_untagged(plan, rel, accountant,
                                                       where):
    factory = functools.partial(accountant, neighbouring=rel)
    want = calibrate_noise_multiplier(plan, 1.0, 1e-5, factory)
    got = calibrate_noise_multiplier(_tagged(plan, rel, where), 1.0, 1e-5,
                                     factory)
    assert got == want


@pytest.mark.parametrize("where", ["outer", "inner"])
@pytest.mark.parametrize("plan, rel", [(_poisson_plan, "add_remove"),
                                       (_wor_plan, "replace")])
def test_tagged_subsampled_plan_takes_the_restricted_order_search(
        monkeypatch, plan, rel, where):
    calls = []
    orig = _calibration._epsilon_of

    def counted(*args):
        calls.append(args[2])
        return orig(*args)

    monkeypatch.setattr(_calibration, "_epsilon_of", counted)
    factory = functools.partial(RDPAccountant, neighbouring=rel)
    calibrate_noise_multiplier(plan, 1.0, 1e-5, factory)
    n_untagged = len(calls)
    calls.clear()
    calibrate_noise_multiplier(_tagged(plan, rel, where), 1.0, 1e-5, factory)
    assert len(calls) == n_untagged == 1   # certification only


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_epsilon_per_release_identical_for_tagged_and_untagged(rel):
    factory = functools.partial(RDPAccountant, neighbouring=rel)
    want = calibrate_epsilon_per_release(_llg_plan, 1.0, 1e-5, factory)
    got = calibrate_epsilon_per_release(_tagged(_llg_plan, rel, "outer"),
                                        1.0, 1e-5, factory)
    assert got == want


@pytest.mark.parametrize("plan, rel", [
    (_poisson_plan, "add_remove"),      # restricted-order path
    (_wor_plan, "replace"),             # restricted-order path
    (_ggg_plan, "replace"),             # generic path
])
@pytest.mark.parametrize("where", ["outer", "inner"])
def test_calibration_refuses_a_plan_of_the_other_relation(plan, rel, where):
    other = "replace" if rel == "add_remove" else "add_remove"
    factory = functools.partial(RDPAccountant, neighbouring=rel)
    with pytest.raises(NeighbouringMismatchError,
                       match=f"RDPAccountant.*{rel}.*{other}"):
        calibrate_noise_multiplier(_tagged(plan, other, where), 1.0, 1e-5,
                                   factory)


def test_mismatch_error_hierarchy():
    assert issubclass(NeighbouringMismatchError, UnsupportedEventError)
    assert issubclass(NeighbouringMismatchError, ValueError)
    assert not issubclass(UnsupportedEventError, ValueError)
    assert issubclass(_Counting, PrivacyAccountant)
