"""Cross-checks against Google's dp_accounting 0.6.0 (test-only dependency)."""
import numpy as np
import pytest

from dpem_fast.accounting import (GaussianEvent, GDPAccountant, PLDAccountant,
                                  PoissonSampledEvent, RDPAccountant,
                                  SampledWithoutReplacementEvent,
                                  SelfComposedEvent)
from dpem_fast.accounting import _rdp

dpa = pytest.importorskip("dp_accounting")
rdp_mod = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

THEIR_ORDERS = ([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
                + [128, 256, 512, 1024])


@pytest.mark.parametrize("q, z", [(0.05, 1.24), (0.01, 1.0), (1e-4, 0.8),
                                  (0.5, 3.0), (0.9, 0.6)])
def test_subsampled_gaussian_rdp_integer_orders(q, z):
    orders = tuple(float(a) for a in [2, 3, 4, 7, 11, 32, 63, 128, 256, 1024])
    ours = _rdp.subsampled_gaussian_rdp(q, z, orders)
    theirs = rdp_mod._compute_rdp_poisson_subsampled_gaussian(q, z, orders)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)


# (q, z, steps, delta, RDP eps, PLD eps), verified with dp_accounting 0.6.0
REFERENCE = [
    (0.05, 1.24, 20, 1e-5, 1.5316, 1.2192),
    (0.01, 1.0, 1000, 1e-5, 2.1014, 1.8282),
]


@pytest.mark.parametrize("q, z, steps, delta, eps_rdp, eps_pld", REFERENCE)
def test_reference_values(q, z, steps, delta, eps_rdp, eps_pld):
    ev = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(z)), steps)
    theirs_orders = RDPAccountant(orders=THEIR_ORDERS).compose(ev)
    assert theirs_orders.get_epsilon(delta) == pytest.approx(eps_rdp,
                                                             abs=1e-4)
    theirs = dpa.rdp.RdpAccountant()
    theirs.compose(dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps))
    # same orders: equal up to their (conservative) fractional-order series
    assert theirs_orders.get_epsilon(delta) == pytest.approx(
        theirs.get_epsilon(delta), rel=1e-5)
    assert theirs_orders.get_epsilon(delta) <= theirs.get_epsilon(delta)
    ours = RDPAccountant().compose(ev).get_epsilon(delta)
    assert ours <= theirs.get_epsilon(delta) + 1e-12
    # the native PLD (connect-the-dots, h = 1e-3) against dp_accounting's
    # PLD at its default h = 1e-4: an upper bound, within 0.05%
    pld = PLDAccountant().compose(ev).get_epsilon(delta)
    assert pld == pytest.approx(eps_pld, rel=5e-4)
    assert pld >= eps_pld - 1e-4


def test_gaussian_composition_rdp_and_exact():
    ev = SelfComposedEvent(GaussianEvent(1.24), 20)
    rdp_theirs_grid = RDPAccountant(orders=THEIR_ORDERS).compose(ev)
    assert rdp_theirs_grid.get_epsilon(1e-4) == pytest.approx(20.7096,
                                                              abs=1e-3)
    assert RDPAccountant().compose(ev).get_epsilon(1e-4) <= 20.70957
    exact = GDPAccountant().compose(ev).get_epsilon(1e-4)
    assert exact == pytest.approx(19.2328, abs=1e-3)
    pld = dpa.pld.PLDAccountant()
    pld.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(1.24), 20))
    assert exact <= pld.get_epsilon(1e-4) + 1e-9
    assert exact == pytest.approx(pld.get_epsilon(1e-4), rel=1e-4)


def test_sampled_without_replacement_is_conservative_vs_theirs():
    g = GaussianEvent(1.5)
    ours = RDPAccountant(neighbouring="replace").compose(
        SelfComposedEvent(_wor(g), 50)).get_epsilon(1e-5)
    acct = dpa.rdp.RdpAccountant(
        neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acct.compose(dpa.SelfComposedDpEvent(
        dpa.SampledWithoutReplacementDpEvent(1000, 50,
                                             dpa.GaussianDpEvent(1.5)), 50))
    theirs = acct.get_epsilon(1e-5)
    # general WBK Thm 9 bound: never tighter than their Gaussian-specific one
    assert theirs <= ours <= 2.0 * theirs


def _wor(g):
    return SampledWithoutReplacementEvent(1000, 50, g)
