"""Monotonicity, soundness and ordering properties (hypothesis)."""
import functools

from hypothesis import given, settings, strategies as st

from dpem_fast.accounting import (
    AdvancedAccountant, GaussianEvent, GDPAccountant, LinearAccountant,
    PoissonSampledEvent, RDPAccountant, SelfComposedEvent, ZCDPAccountant,
    calibrate_noise_multiplier)

# derandomize: CI must be reproducible; the examples still span the whole strategy space
SET = settings(max_examples=30, deadline=None, derandomize=True)
qs = st.floats(1e-4, 1.0)
zs = st.floats(0.5, 20.0)
steps = st.integers(1, 5000)
deltas = st.sampled_from([1e-8, 1e-6, 1e-5, 1e-4])   # 1e-4: the largest delta without LargeDeltaWarning


def eps(q, z, n, delta):
    ev = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(z)), n)
    return RDPAccountant().compose(ev).get_epsilon(delta)


@SET
@given(qs, zs, steps, st.integers(1, 100), deltas)
def test_more_steps_never_lower_epsilon(q, z, n, extra, delta):
    assert eps(q, z, n + extra, delta) >= eps(q, z, n, delta)


@SET
@given(qs, qs, zs, steps, deltas)
def test_larger_q_never_lowers_epsilon(q1, q2, z, n, delta):
    lo, hi = sorted((q1, q2))
    assert eps(hi, z, n, delta) >= eps(lo, z, n, delta) * (1 - 1e-12)


@SET
@given(qs, zs, zs, steps, deltas)
def test_smaller_sigma_never_lowers_epsilon(q, z1, z2, n, delta):
    lo, hi = sorted((z1, z2))
    assert eps(q, lo, n, delta) >= eps(q, hi, n, delta) * (1 - 1e-12)


@SET
@given(st.floats(1.0, 50.0), st.integers(1, 500), deltas)
def test_accountant_ordering_for_gaussian_compositions(z, n, delta):
    ev = SelfComposedEvent(GaussianEvent(z), n)
    e = [A().compose(ev).get_epsilon(delta) for A in (
        GDPAccountant, RDPAccountant, ZCDPAccountant)]
    classic = functools.partial(ZCDPAccountant, conversion="classic")
    e.append(classic().compose(ev).get_epsilon(delta))
    assert e[0] <= e[1] * (1 + 1e-9)
    # zCDP (tight) optimises over continuous orders, RDP over its grid:
    # equal curves for pure Gaussians, so equal up to grid resolution (the
    # default grid is ~13% apart between orders 64 and 180, which costs up to
    # ~0.3% of epsilon there; hypothesis found 0.23%)
    assert e[1] <= e[2] * (1 + 1e-2)
    assert e[2] <= e[3]
    d_i = delta / (2 * n)
    for A in (LinearAccountant, AdvancedAccountant):
        other = A(delta_per_release=d_i).compose(ev).get_epsilon(delta)
        assert e[0] <= other * (1 + 1e-9)
        if n >= 10:  # for a handful of releases (eps_i, delta_i) can win
            assert e[2] <= other * (1 + 1e-9)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.floats(1e-3, 0.2), st.integers(10, 2000),
       st.floats(0.3, 8.0), deltas)
def test_calibration_round_trip_never_exceeds_target(q, n, target, delta):
    make = lambda z: SelfComposedEvent(  # noqa: E731
        PoissonSampledEvent(q, GaussianEvent(z)), n)
    z = calibrate_noise_multiplier(make, target, delta, bracket=(0.05, 1e3))
    assert RDPAccountant().compose(make(z)).get_epsilon(delta) <= target
    assert RDPAccountant().compose(make(z * 0.999)).get_epsilon(delta) > target
