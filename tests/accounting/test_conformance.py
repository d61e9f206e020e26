"""Contract shared by all accountants (modelled on dp_accounting's tests)."""
import functools
import math

import pytest

from dpem_fast.accounting import (
    AdvancedAccountant, DiscreteGaussianEvent, GaussianEvent, GDPAccountant,
    LaplaceEvent, LinearAccountant, MomentsAccountant, PLDAccountant,
    PoissonSampledEvent, RDPAccountant, SampledWithoutReplacementEvent,
    SelfComposedEvent, UnsupportedEventError, ZCDPAccountant)

G = GaussianEvent(2.0)


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


class TestGDP(AccountantConformance):
    make = GDPAccountant
    unsupported = LaplaceEvent(1.0)


class TestLinear(AccountantConformance):
    make = LinearAccountant
    event = LaplaceEvent(0.1)
    unsupported = SampledWithoutReplacementEvent(10, 5, G)


class TestAdvanced(AccountantConformance):
    make = functools.partial(AdvancedAccountant, delta_per_release=1e-8)
    event = GaussianEvent(8.0)
    unsupported = SampledWithoutReplacementEvent(10, 5, G)


class TestPLD(AccountantConformance):
    @staticmethod
    def make():
        pytest.importorskip("dp_accounting")
        return PLDAccountant(value_discretization_interval=1e-3)

    unsupported = DiscreteGaussianEvent(4.0, 1.0)
    rtol = 1e-3


def test_poisson_replace_is_refused_with_clear_message():
    acct = RDPAccountant(neighbouring="replace")
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        acct.compose(PoissonSampledEvent(0.1, G))
    assert acct.ledger == []
    # q = 1 is not subsampling and stays supported
    assert acct.supports(PoissonSampledEvent(1.0, G))
