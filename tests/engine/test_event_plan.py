"""The plan's event seam (issue 36): ``make_event_plan`` calibrates a mechanism given by its event
factory and records the releases it cannot derive from StatSpecs; the release layer lets an
open-ended statistic (its event accounts for a random number of releases) pass its recorded count."""
import math

import numpy as np
import pytest

from dpem_fast import accounting as acc
from dpem_fast._engine import EventRelease, ReleaseLayer, build_record, make_event_plan
from dpem_fast._rng import make_key


def _event(z, n=5, unit="row"):
    return acc.NeighbouringEvent("replace", acc.SelfComposedEvent(acc.GaussianEvent(z), n), unit)


def test_calibrates_the_factory_and_records_the_releases():
    plan = make_event_plan(_event, [EventRelease("f", 2.0, (3,), 5, 3)], epsilon=1.0, delta=1e-5,
                           neighbouring="replace", accountant="rdp")
    z = plan.event.event.event.noise_multiplier
    r = plan.releases["f"]
    assert (r.mechanism, r.norm, r.sensitivity, r.noise_scale, r.count, r.size) == ("gaussian", "l2", 2.0, 2.0 * z, 5, 3)
    assert plan.epsilon_spent <= 1.0 and plan.epsilon_spent > 0.99
    assert plan.epsilon_spent == acc.RDPAccountant(neighbouring="replace").compose(plan.event).get_epsilon(1e-5)
    rec = build_record(plan, mechanism="m", n_iter=5, delta=1e-5, data_domain={})
    assert rec.releases == plan.releases and rec.event is plan.event and rec.privacy_unit == "row"


def test_fixed_multiplier_delta_tail_and_group_unit():
    plan = make_event_plan(lambda z: _event(z, unit="group"), [EventRelease("f", 1.0, (), 2, 1, lambda p: 1.0 / (1.0 / p))],
                           epsilon=None, delta=1e-5, neighbouring="replace", accountant="rdp",
                           max_rows_per_group=3, noise_multiplier=4.0, delta_tail=2e-6)
    assert plan.releases["f"].noise_scale == 4.0 and plan.delta_tail == 2e-6
    assert (plan.privacy_unit, plan.max_rows_per_group) == ("group", 3)
    assert plan.epsilon_spent == acc.RDPAccountant(neighbouring="replace").compose(plan.event).get_epsilon(1e-5 - 2e-6)
    rec = build_record(plan, mechanism="m", n_iter=2, delta=1e-5, data_domain={}, epsilon=1.0)
    assert rec.delta_tail == 2e-6 and rec.event_delta == 1e-5 - 2e-6 and rec.max_rows_per_group == 3


@pytest.mark.parametrize("factory, match", [
    (lambda z: _event(z, unit="group"), "tagged"),                        # the plan is row-level
    (lambda z: acc.NeighbouringEvent("add_remove", acc.GaussianEvent(z)), "tagged"),
])
def test_an_event_of_another_relation_or_unit_is_refused(factory, match):
    with pytest.raises(ValueError, match=match):
        make_event_plan(factory, [EventRelease("f", 1.0, ())], epsilon=1.0, delta=1e-5, neighbouring="replace",
                        accountant="rdp", noise_multiplier=1.0)


def test_bad_declarations_are_refused():
    kw = dict(epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="rdp", noise_multiplier=1.0)
    with pytest.raises(TypeError, match="EventRelease"):
        make_event_plan(_event, [("f", 1.0)], **kw)
    with pytest.raises(ValueError, match="distinct"):
        make_event_plan(_event, [EventRelease("f", 1.0, ())] * 2, **kw)
    with pytest.raises(ValueError, match="open_ended"):
        make_event_plan(_event, [EventRelease("f", 1.0, ())], open_ended=("g",), **kw)
    with pytest.raises(ValueError, match="noise_multiplier"):
        make_event_plan(_event, [EventRelease("f", 1.0, ())], **{**kw, "noise_multiplier": math.inf})


def test_only_an_open_ended_statistic_passes_its_count():
    kw = dict(epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="rdp", noise_multiplier=1.0)
    rels = [EventRelease("open", 1.0, (), 2, 1), EventRelease("closed", 1.0, (), 2, 1)]
    layer = ReleaseLayer(make_event_plan(_event, rels, open_ended=("open",), **kw), make_key(0))
    a = layer.release({"open": np.zeros(())}, 7)["open"]
    b = ReleaseLayer(make_event_plan(_event, rels, **kw), make_key(0)).release({"closed": np.zeros(())}, 1)["closed"]
    assert np.isfinite(a) and np.isfinite(b)
    with pytest.raises(ValueError, match="outside"):
        layer.release({"closed": np.zeros(())}, 2)
    with pytest.raises(ValueError, match="outside"):
        layer.release({"open": np.zeros(())}, -1)
    with pytest.raises(ValueError, match="already released"):
        layer.release({"open": np.zeros(())}, 7)
