import math

import pytest

from dpem_fast.accounting import (
    AdvancedAccountant, BudgetLedger, ComposedEvent, DiscreteGaussianEvent,
    GaussianEvent, LaplaceEvent, PoissonSampledEvent, RDPAccountant,
    SampledWithoutReplacementEvent, SelfComposedEvent,
    calibrate_noise_multiplier)

G = GaussianEvent(1.0)


@pytest.mark.parametrize("factory, match", [
    (lambda: GaussianEvent(0.0), "noise_multiplier"),
    (lambda: GaussianEvent(-1.0), "noise_multiplier"),
    (lambda: GaussianEvent(math.nan), "noise_multiplier.*NaN"),
    (lambda: GaussianEvent(math.inf), "noise_multiplier"),
    (lambda: LaplaceEvent(0.0), "epsilon"),
    (lambda: LaplaceEvent(-0.5), r"epsilon.*-0\.5"),
    (lambda: DiscreteGaussianEvent(0.0, 1.0), "sigma"),
    (lambda: DiscreteGaussianEvent(1.0, -1.0), "sensitivity"),
    (lambda: DiscreteGaussianEvent(1.0, 1.0, 0), "dimension"),
    (lambda: PoissonSampledEvent(0.0, G), "sampling_probability"),
    (lambda: PoissonSampledEvent(1.5, G), r"sampling_probability.*1\.5"),
    (lambda: PoissonSampledEvent(math.nan, G), "sampling_probability"),
    (lambda: SampledWithoutReplacementEvent(10, 11, G), "sample_size"),
    (lambda: SampledWithoutReplacementEvent(0, 0, G), "population_size"),
    (lambda: SelfComposedEvent(G, 0), "count"),
])
def test_bad_event_values(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


@pytest.mark.parametrize("factory", [
    lambda: GaussianEvent("1"),
    lambda: GaussianEvent(True),
    lambda: SelfComposedEvent(G, 2.0),
    lambda: PoissonSampledEvent(0.1, 3.0),
    lambda: ComposedEvent([G, 1.0]),
    lambda: ComposedEvent(G),
])
def test_bad_event_types(factory):
    with pytest.raises(TypeError):
        factory()


def test_events_are_frozen_hashable_and_normalised():
    e = ComposedEvent([G, SelfComposedEvent(LaplaceEvent(1), 3)])
    assert isinstance(e.events, tuple)
    assert hash(e) == hash(ComposedEvent((G, SelfComposedEvent(
        LaplaceEvent(1.0), 3))))
    with pytest.raises(AttributeError):
        G.noise_multiplier = 2.0
    assert GaussianEvent(2).noise_multiplier == 2.0
    assert type(GaussianEvent(2).noise_multiplier) is float


@pytest.mark.parametrize("call, match", [
    (lambda: RDPAccountant().compose(G).get_epsilon(0.0), "delta"),
    (lambda: RDPAccountant().compose(G).get_epsilon(1.0), "delta"),
    (lambda: RDPAccountant().compose(G).get_epsilon(math.nan), "delta"),
    (lambda: RDPAccountant().compose(G).get_delta(-1.0), "epsilon"),
    (lambda: RDPAccountant().compose(G, 0), "count"),
    (lambda: RDPAccountant(neighbouring="swap"), "neighbouring.*swap"),
    (lambda: RDPAccountant(orders=[0.5, 2]), "orders"),
    (lambda: RDPAccountant(conversion="magic"), "conversion"),
    (lambda: AdvancedAccountant(delta_slack=2.0), "delta_slack"),
    (lambda: AdvancedAccountant(delta_per_release=0.0), "delta_per_release"),
    (lambda: calibrate_noise_multiplier(GaussianEvent, 0.0, 1e-5), "epsilon"),
    (lambda: calibrate_noise_multiplier(GaussianEvent, 1.0, 1.0), "delta"),
    (lambda: BudgetLedger(-1.0, 1e-5), "epsilon"),
    (lambda: BudgetLedger(1.0, 0.0), "delta"),
])
def test_bad_accountant_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_compose_rejects_non_events():
    with pytest.raises(TypeError):
        RDPAccountant().compose(1.0)
    with pytest.raises(TypeError):
        RDPAccountant().compose(G, 1.5)
