"""Cross-checks against Google's dp_accounting 0.6.0 (test-only dependency)."""
import numpy as np
import pytest

from dpem_fast.accounting import (ComposedEvent, GaussianEvent, GDPAccountant,
                                  LaplaceEvent, PLDAccountant,
                                  PoissonSampledEvent, RDPAccountant,
                                  SampledWithoutReplacementEvent,
                                  SelfComposedEvent, UnsupportedEventError)
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
    pld = PLDAccountant().compose(ev).get_epsilon(delta)
    assert pld == pytest.approx(eps_pld, abs=1e-3)


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


# -------------------------------------------- PLDAccountant and relations --
# dp_accounting's REPLACE_ONE PLD reads GaussianDpEvent(s) as noise s*C on a
# sum of records of norm <= C, a replacement shifting it by 2C; ours is
# relative to the replace-one sensitivity itself, hence GaussianDpEvent(2z).

def _pld(rel, vdi=1e-4):
    return PLDAccountant(neighbouring=rel, value_discretization_interval=vdi)


def _g(z, k=None):
    g = GaussianEvent(z)
    return g if k is None else SelfComposedEvent(g, k)


REPLACE_GAUSSIAN_PLANS = [
    (_g(0.5), 1e-5),
    (_g(1.0), 1e-5),
    (_g(1.0), 1e-3),
    (_g(3.0), 1e-5),
    (_g(3.0, 50), 1e-5),
    (ComposedEvent([_g(1.5), _g(3.0), _g(2.0, 4)]), 1e-5),
    # DP-EM's GGG shape: 2K + 1 releases per iteration
    (SelfComposedEvent(ComposedEvent([_g(20.0), _g(20.0, 3), _g(20.0, 3)]),
                       20), 1e-5),
]


@pytest.mark.parametrize("event, delta", REPLACE_GAUSSIAN_PLANS)
def test_pld_replace_matches_exact_gdp_replace(event, delta):
    vdi = 1e-3
    pld = _pld("replace", vdi).compose(event).get_epsilon(delta)
    gdp = GDPAccountant(neighbouring="replace").compose(event).get_epsilon(
        delta)
    assert pld == pytest.approx(gdp, rel=1e-3)
    assert pld >= gdp - vdi            # pessimistic discretisation
    # and it is the add/remove PLD of the same pair of Gaussians
    same_pair = _pld("add_remove", vdi).compose(event).get_epsilon(delta)
    assert pld == pytest.approx(same_pair, rel=1e-6)


def test_pld_replace_is_their_replace_one_with_twice_the_multiplier():
    for z in (0.7, 1.0, 4.0):
        ours = _pld("replace", 1e-3).compose(GaussianEvent(z)).get_epsilon(
            1e-5)
        theirs = dpa.pld.PLDAccountant(
            neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE,
            value_discretization_interval=1e-3)
        theirs.compose(dpa.GaussianDpEvent(2.0 * z))
        assert ours == theirs.get_epsilon(1e-5)
    # z = 1, delta = 1e-5: the untranslated multiplier gave 9.997
    eps = _pld("replace").compose(GaussianEvent(1.0)).get_epsilon(1e-5)
    assert eps == pytest.approx(4.3772, abs=1e-3)


@pytest.mark.parametrize("ours, theirs", [
    (GaussianEvent(1.3), lambda: dpa.GaussianDpEvent(1.3)),
    (SelfComposedEvent(GaussianEvent(2.0), 30),
     lambda: dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 30)),
    (LaplaceEvent(0.5), lambda: dpa.LaplaceDpEvent(2.0)),
    (SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.1)), 40),
     lambda: dpa.SelfComposedDpEvent(
         dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.1)), 40)),
    (PoissonSampledEvent(0.1, LaplaceEvent(1.0)),
     lambda: dpa.PoissonSampledDpEvent(0.1, dpa.LaplaceDpEvent(1.0))),
])
def test_pld_add_remove_translation_unchanged(ours, theirs):
    acct = dpa.pld.PLDAccountant(value_discretization_interval=1e-3)
    acct.compose(theirs())
    mine = _pld("add_remove", 1e-3).compose(ours)
    assert mine.get_epsilon(1e-5) == acct.get_epsilon(1e-5)
    assert mine.get_delta(1.0) == acct.get_delta(1.0)


@pytest.mark.parametrize("event", [
    LaplaceEvent(1.0),
    PoissonSampledEvent(0.1, GaussianEvent(1.0)),
    PoissonSampledEvent(1.0, LaplaceEvent(1.0)),
    SampledWithoutReplacementEvent(1000, 50, GaussianEvent(1.0)),
    ComposedEvent([GaussianEvent(1.0), LaplaceEvent(1.0)]),
])
def test_pld_replace_refuses_what_has_no_exact_translation(event):
    acct = _pld("replace").compose(GaussianEvent(2.0))
    eps = acct.get_epsilon(1e-5)
    assert not acct.supports(event)
    with pytest.raises(UnsupportedEventError):
        acct.compose(event)
    assert acct.ledger == [(GaussianEvent(2.0), 1)]
    assert acct.get_epsilon(1e-5) == eps


def test_pld_replace_refusals_do_not_rely_on_dp_accounting_refusing(
        monkeypatch):
    # were dp_accounting to accept them (its relation conventions differ),
    # the translation would still be inexact: refuse regardless
    acct = _pld("replace")
    monkeypatch.setattr(acct._inner, "supports", lambda event: True)
    for event in (LaplaceEvent(1.0),
                  PoissonSampledEvent(0.1, GaussianEvent(1.0)),
                  SampledWithoutReplacementEvent(1000, 50,
                                                 GaussianEvent(1.0))):
        assert not acct.supports(event)
        with pytest.raises(UnsupportedEventError):
            acct.compose(event)
    assert acct.ledger == []


def test_pld_trivial_sampling_is_the_base_event():
    plain = _pld("replace").compose(GaussianEvent(1.5)).get_epsilon(1e-5)
    for trivial in (PoissonSampledEvent(1.0, GaussianEvent(1.5)),
                    SampledWithoutReplacementEvent(40, 40,
                                                   GaussianEvent(1.5))):
        eps = _pld("replace").compose(trivial).get_epsilon(1e-5)
        assert eps == pytest.approx(plain, rel=1e-9)
    wor = SampledWithoutReplacementEvent(40, 40, GaussianEvent(1.5))
    assert _pld("add_remove").compose(wor).get_epsilon(1e-5) == (
        pytest.approx(plain, rel=1e-9))


def test_pld_without_replacement_is_refused_in_both_relations():
    # dp_accounting 0.6.0's PLD accountant has no SampledWithoutReplacement
    # branch (pld_privacy_accountant.PLDAccountant._maybe_compose)
    ev = dpa.SampledWithoutReplacementDpEvent
    for rel in (dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                dpa.NeighboringRelation.REPLACE_ONE):
        assert not dpa.pld.PLDAccountant(neighboring_relation=rel).supports(
            ev(1000, 50, dpa.GaussianDpEvent(1.0)))
    for rel in ("add_remove", "replace"):
        assert not _pld(rel).supports(
            SampledWithoutReplacementEvent(1000, 50, GaussianEvent(1.0)))


def test_pld_replace_vs_rdp_replace_on_a_subsampled_plan():
    # RDP(replace) accounts the sampled-without-replacement releases; PLD
    # cannot (refused above), so compare on the plan with the population
    # sampled in full (m = n: the base event) and on its Gaussian part,
    # where PLD must be the tighter of the two and within a sane factor.
    def plan(m):
        g = GaussianEvent(2.5)
        return SelfComposedEvent(ComposedEvent([
            SampledWithoutReplacementEvent(1000, m, g), g]), 30)

    rdp_sub = RDPAccountant(neighbouring="replace").compose(plan(100))
    rdp_full = RDPAccountant(neighbouring="replace").compose(plan(1000))
    pld_full = _pld("replace").compose(plan(1000))
    assert not _pld("replace").supports(plan(100))
    e_rdp_sub, e_rdp, e_pld = (a.get_epsilon(1e-5)
                               for a in (rdp_sub, rdp_full, pld_full))
    assert e_rdp_sub < e_rdp                   # subsampling helps RDP
    assert e_pld <= e_rdp
    assert e_rdp <= 1.25 * e_pld
    gdp = GDPAccountant(neighbouring="replace").compose(
        SelfComposedEvent(GaussianEvent(2.5), 60)).get_epsilon(1e-5)
    assert e_pld == pytest.approx(gdp, rel=1e-3)
