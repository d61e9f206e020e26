"""Contract shared by all accountants (modelled on dp_accounting's tests)."""
import dataclasses
import functools
import math

import pytest

from dpem_fast.accounting import (
    AdvancedAccountant, ComposedEvent, DiscreteGaussianEvent, GaussianEvent,
    GDPAccountant, LaplaceEvent, LinearAccountant, MomentsAccountant,
    NeighbouringEvent, NeighbouringMismatchError, PLDAccountant,
    PoissonSampledEvent, RDPAccountant, SampledWithoutReplacementEvent,
    SelfComposedEvent, UnsupportedEventError, ZCDPAccountant)

G = GaussianEvent(2.0)
OTHER = {"add_remove": "replace", "replace": "add_remove"}


def tag_leaves(event, relation):
    """``event`` with every non-composite sub-event wrapped in a tag
    (inside sampling wrappers and compositions too)."""
    changes = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if f.name == "event":
            changes["event"] = tag_leaves(value, relation)
        elif f.name == "events":
            changes["events"] = tuple(tag_leaves(e, relation) for e in value)
    if not changes:
        return NeighbouringEvent(relation, event)
    return dataclasses.replace(event, **changes)


class AccountantConformance:
    """Subclass and set ``make`` (factory), ``event`` and ``unsupported``."""

    make = None
    event = G
    unsupported = None
    delta = 1e-5
    rtol = 1e-9  # discretising accountants (PLD) override

    def test_empty_accountant_has_zero_epsilon_and_delta(self):
        acct = self.make()
        assert acct.get_epsilon(self.delta) == 0.0
        assert acct.get_delta(1.0) == 0.0
        assert acct.ledger == []

    def test_compose_returns_self(self):
        acct = self.make()
        assert acct.compose(self.event) is acct
        assert acct.compose(self.event, 3) is acct

    def test_ledger_is_a_copy(self):
        acct = self.make().compose(self.event, 2)
        ledger = acct.ledger
        assert ledger == [(self.event, 2)]
        ledger.append("junk")
        assert acct.ledger == [(self.event, 2)]

    def test_neighbouring_attribute(self):
        acct = self.make()
        assert acct.neighbouring in ("add_remove", "replace")

    def test_supports(self):
        acct = self.make()
        assert acct.supports(self.event)
        assert acct.supports(SelfComposedEvent(self.event, 4))
        if self.unsupported is not None:
            assert not acct.supports(self.unsupported)

    def test_failed_compose_leaves_state_unchanged(self):
        if self.unsupported is None:
            pytest.skip("accountant supports every test event")
        acct = self.make().compose(self.event)
        eps = acct.get_epsilon(self.delta)
        with pytest.raises(UnsupportedEventError):
            acct.compose(self.unsupported)
        assert acct.ledger == [(self.event, 1)]
        assert acct.get_epsilon(self.delta) == eps

    def test_self_composition_equals_repeated_compose(self):
        a = self.make().compose(self.event, 3)
        b = self.make().compose(self.event).compose(self.event).compose(
            self.event)
        c = self.make().compose(SelfComposedEvent(self.event, 3))
        ea, eb, ec = (x.get_epsilon(self.delta) for x in (a, b, c))
        assert ea == pytest.approx(eb, rel=self.rtol)
        assert ea == pytest.approx(ec, rel=self.rtol)

    def test_more_compositions_never_lower_epsilon(self):
        e1 = self.make().compose(self.event, 2).get_epsilon(self.delta)
        e2 = self.make().compose(self.event, 5).get_epsilon(self.delta)
        assert e2 >= e1 > 0

    def test_get_epsilon_get_delta_inverse_consistent(self):
        acct = self.make().compose(self.event, 5)
        eps = acct.get_epsilon(self.delta)
        assert math.isfinite(eps)
        # the delta at that epsilon cannot exceed the target (soundness
        # of the pair), up to rounding
        assert acct.get_delta(eps) <= self.delta * (1 + 1e-6 + self.rtol)
        # and a smaller epsilon needs a larger delta
        assert acct.get_delta(eps * 0.9) >= acct.get_delta(eps)

    # -- neighbouring relation tags ----------------------------------
    def test_matching_tag_gives_exactly_the_untagged_epsilon(self):
        rel = self.make().neighbouring
        plain = ComposedEvent([self.event, SelfComposedEvent(self.event, 2)])
        tagged = [
            NeighbouringEvent(rel, plain),
            ComposedEvent([NeighbouringEvent(rel, self.event),
                           SelfComposedEvent(NeighbouringEvent(rel,
                                                               self.event), 2)]),
            tag_leaves(plain, rel),
            NeighbouringEvent(rel, tag_leaves(plain, rel)),   # nested tags
        ]
        want = self.make().compose(plain)
        for ev in tagged:
            acct = self.make()
            assert acct.supports(ev)
            acct.compose(ev)
            assert acct.get_epsilon(self.delta) == want.get_epsilon(self.delta)
            assert acct.get_delta(1.0) == want.get_delta(1.0)
            assert acct.ledger == [(ev, 1)]

    def test_mismatched_tag_raises_and_leaves_state_unchanged(self):
        rel = self.make().neighbouring
        other = OTHER[rel]
        bad = [
            NeighbouringEvent(other, self.event),
            tag_leaves(self.event, other),
            ComposedEvent([self.event, NeighbouringEvent(other, self.event)]),
            SelfComposedEvent(NeighbouringEvent(other, self.event), 3),
            ComposedEvent([SelfComposedEvent(tag_leaves(self.event, other),
                                             2)]),
            # a matching outer tag does not hide a mismatched inner one
            NeighbouringEvent(rel, ComposedEvent(
                [NeighbouringEvent(other, self.event)])),
        ]
        acct = self.make().compose(self.event)
        eps, dlt = acct.get_epsilon(self.delta), acct.get_delta(1.0)
        for ev in bad:
            assert not acct.supports(ev)
            with pytest.raises(NeighbouringMismatchError) as info:
                acct.compose(ev, 2)
            msg = str(info.value)
            assert repr(rel) in msg and repr(other) in msg
            assert acct.ledger == [(self.event, 1)]
            assert acct.get_epsilon(self.delta) == eps
            assert acct.get_delta(1.0) == dlt
        # the accountant still works and composes as a fresh one would
        acct.compose(self.event)
        assert acct.get_epsilon(self.delta) == pytest.approx(
            self.make().compose(self.event, 2).get_epsilon(self.delta),
            rel=self.rtol)

    def test_mismatch_error_is_unsupported_and_value_error(self):
        other = OTHER[self.make().neighbouring]
        acct = self.make()
        for cls in (UnsupportedEventError, ValueError):
            with pytest.raises(cls):
                acct.compose(NeighbouringEvent(other, self.event))
        assert acct.ledger == []

    def test_delta_monotone_in_epsilon(self):
        acct = self.make().compose(self.event, 5)
        ds = [acct.get_delta(e) for e in (0.5, 1.0, 2.0, 4.0, 8.0)]
        assert all(0.0 <= d <= 1.0 for d in ds)
        assert ds == sorted(ds, reverse=True)


class TestRDP(AccountantConformance):
    make = RDPAccountant
    event = PoissonSampledEvent(0.1, G)
    unsupported = PoissonSampledEvent(0.1, LaplaceEvent(1.0))


class TestRDPClassic(AccountantConformance):
    make = functools.partial(RDPAccountant, conversion="classic")
    unsupported = PoissonSampledEvent(0.1, LaplaceEvent(1.0))


class TestRDPReplace(AccountantConformance):
    make = functools.partial(RDPAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(1000, 100, G)
    unsupported = PoissonSampledEvent(0.1, G)


class TestRDPReplaceLaplaceBase(AccountantConformance):
    # the pure-DP term of the without-replacement bound sees through tags
    make = functools.partial(RDPAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(1000, 100, LaplaceEvent(0.5))
    unsupported = PoissonSampledEvent(0.1, G)


class TestMoments(AccountantConformance):
    make = MomentsAccountant
    event = PoissonSampledEvent(0.05, G)
    unsupported = PoissonSampledEvent(0.1, LaplaceEvent(1.0))


class TestZCDP(AccountantConformance):
    make = ZCDPAccountant
    event = DiscreteGaussianEvent(4.0, 2.0)
    unsupported = PoissonSampledEvent(0.1, G)


class TestZCDPClassic(AccountantConformance):
    make = functools.partial(ZCDPAccountant, conversion="classic")
    unsupported = PoissonSampledEvent(0.1, G)


class TestZCDPReplace(AccountantConformance):
    make = functools.partial(ZCDPAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(50, 50, LaplaceEvent(0.3))
    unsupported = SampledWithoutReplacementEvent(50, 49, G)


class TestMomentsReplace(AccountantConformance):
    make = functools.partial(MomentsAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(1000, 100, G)
    unsupported = PoissonSampledEvent(0.1, G)


class TestGDP(AccountantConformance):
    make = GDPAccountant
    unsupported = LaplaceEvent(1.0)


class TestGDPReplace(AccountantConformance):
    make = functools.partial(GDPAccountant, neighbouring="replace")
    event = ComposedEvent([G, GaussianEvent(3.0)])
    unsupported = PoissonSampledEvent(0.1, G)


class TestLinear(AccountantConformance):
    make = LinearAccountant
    event = LaplaceEvent(0.1)
    unsupported = SampledWithoutReplacementEvent(10, 5, G)


class TestLinearPoisson(AccountantConformance):
    make = LinearAccountant
    event = PoissonSampledEvent(0.2, LaplaceEvent(0.1))
    unsupported = SampledWithoutReplacementEvent(10, 5, G)


class TestAdvanced(AccountantConformance):
    make = functools.partial(AdvancedAccountant, delta_per_release=1e-8)
    event = GaussianEvent(8.0)
    unsupported = SampledWithoutReplacementEvent(10, 5, G)


class TestLinearReplace(AccountantConformance):
    make = functools.partial(LinearAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(100, 10, LaplaceEvent(0.1))
    unsupported = PoissonSampledEvent(0.5, LaplaceEvent(0.1))


class TestAdvancedReplace(AccountantConformance):
    make = functools.partial(AdvancedAccountant, delta_per_release=1e-8,
                             neighbouring="replace")
    event = SampledWithoutReplacementEvent(100, 10, GaussianEvent(8.0))
    unsupported = PoissonSampledEvent(0.5, LaplaceEvent(0.1))


class TestPLD(AccountantConformance):
    make = PLDAccountant
    event = PoissonSampledEvent(0.1, G)
    unsupported = SampledWithoutReplacementEvent(1000, 100, G)
    rtol = 1e-6


class TestPLDGaussian(AccountantConformance):
    make = functools.partial(PLDAccountant, value_discretization=1e-2)
    unsupported = DiscreteGaussianEvent(4.0, 1.5)   # non-integer shift
    rtol = 1e-6


class TestPLDLaplacePoisson(AccountantConformance):
    make = PLDAccountant
    event = PoissonSampledEvent(0.2, LaplaceEvent(0.5))
    unsupported = PoissonSampledEvent(0.1, SelfComposedEvent(G, 2))
    rtol = 1e-6


class TestPLDDiscreteGaussian(AccountantConformance):
    make = PLDAccountant
    event = DiscreteGaussianEvent(4.0, 2.0)
    unsupported = DiscreteGaussianEvent(4.0, 2.0, dimension=3)
    rtol = 1e-6


class TestPLDReplace(AccountantConformance):
    make = functools.partial(PLDAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(1000, 100, G)
    unsupported = PoissonSampledEvent(0.1, G)
    rtol = 1e-6


class TestPLDReplaceLaplaceBase(AccountantConformance):
    make = functools.partial(PLDAccountant, neighbouring="replace")
    event = SampledWithoutReplacementEvent(1000, 100, LaplaceEvent(0.5))
    unsupported = PoissonSampledEvent(0.1, LaplaceEvent(0.5))
    rtol = 1e-6


class TestPLDOptimistic(AccountantConformance):
    make = functools.partial(PLDAccountant, pessimistic=False,
                             value_discretization=1e-4)
    event = PoissonSampledEvent(0.1, G)
    unsupported = SampledWithoutReplacementEvent(1000, 100, G)
    rtol = 1e-6


def test_poisson_replace_is_refused_with_clear_message():
    acct = RDPAccountant(neighbouring="replace")
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        acct.compose(PoissonSampledEvent(0.1, G))
    assert acct.ledger == []
    # q = 1 is not subsampling and stays supported
    assert acct.supports(PoissonSampledEvent(1.0, G))
