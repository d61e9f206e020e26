"""Private selection (Papernot & Steinke 2022): the event, the distribution of the number
of runs, the RDP curve (closed forms, dp_accounting), and refusals by the other accountants."""
import math

import numpy as np
import pytest

import dpem_fast.accounting as acc
from dpem_fast.accounting import _rdp
from dpem_fast._persist._codec import event_from_json, event_to_json

SHAPES = [None, 0.0, 0.5, 1.0, 2.0]


def _eps(event, neighbouring="add_remove", delta=1e-5, orders=None):
    a = acc.RDPAccountant(orders, neighbouring=neighbouring)
    a.compose(event)
    return a.get_epsilon(delta)


# ------------------------------------------------------------------ the event
def test_event_validates_its_fields():
    g = acc.GaussianEvent(3.0)
    with pytest.raises(ValueError, match="mean must be >= 1"):
        acc.RepeatAndSelectEvent(g, 0.5, 1.0)
    with pytest.raises(ValueError, match="shape"):
        acc.RepeatAndSelectEvent(g, 4.0, -1.0)
    with pytest.raises(ValueError, match="mean"):
        acc.RepeatAndSelectEvent(g, math.inf, 1.0)
    with pytest.raises(TypeError, match="event must be a DpEvent"):
        acc.RepeatAndSelectEvent("gaussian", 4.0, 1.0)
    with pytest.raises(TypeError, match="shape"):
        acc.RepeatAndSelectEvent(g, 4.0, "poisson")


@pytest.mark.parametrize("shape", SHAPES)
def test_event_survives_the_saved_model_codec(shape):
    ev = acc.NeighbouringEvent("replace", acc.RepeatAndSelectEvent(
        acc.SelfComposedEvent(acc.GaussianEvent(7.0), 20), 12.5, shape))
    assert event_from_json(event_to_json(ev)) == ev


# --------------------------------------------------- the number of runs
@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 2.0, 7.0])
@pytest.mark.parametrize("mean", [1.5, 10.0, 40.0])
def test_gamma_gives_the_mean_and_the_pmf_is_the_papers(shape, mean):
    gamma = acc.repetition_gamma(shape, mean)
    k = np.arange(1, 20001)
    # Papernot & Steinke (2022), Sec. 3: P[T = k] ∝ (1-γ)^k Π_{l<k} (l+η)/(l+1), k >= 1
    if shape == 0.0:           # the product vanishes for eta = 0: the logarithmic law 1/k
        log_w = k * math.log1p(-gamma) - np.log(k)
    else:
        ell = np.arange(k.size, dtype=float)               # the product over l = 0 .. k-1
        log_w = k * math.log1p(-gamma) + np.cumsum(np.log((ell + shape) / (ell + 1.0)))
    w = np.exp(log_w - log_w.max())
    p = w / w.sum()
    assert np.sum(k * p) == pytest.approx(mean, rel=1e-9)
    assert np.sum(k * p) >= mean * (1 - 1e-12)
    pmf = acc.repetition_pmf(shape, mean, 60)
    np.testing.assert_allclose(pmf[1:], p[:60], rtol=1e-9, atol=1e-300)
    assert pmf[0] == 0.0
    for kk in (1, 5, 30):
        assert acc.repetition_tail(shape, mean, kk) == pytest.approx(p[kk:].sum(), rel=1e-7, abs=1e-300)


def test_poisson_pmf_and_tail():
    pmf = acc.repetition_pmf(None, 6.0, 40)
    k = np.arange(41)
    ref = np.exp(k * math.log(6.0) - 6.0 - np.array([math.lgamma(x + 1) for x in k]))
    np.testing.assert_allclose(pmf, ref, rtol=1e-12)
    assert acc.repetition_tail(None, 6.0, 40) == pytest.approx(1 - ref.sum(), abs=1e-15)
    assert acc.repetition_tail(None, 6.0, 40) < 1e-13


def test_mean_one_is_a_single_run():
    assert acc.repetition_gamma(1.0, 1.0) == 1.0
    np.testing.assert_array_equal(acc.repetition_pmf(1.0, 1.0, 3), [0.0, 1.0, 0.0, 0.0])
    assert acc.repetition_tail(1.0, 1.0, 1) == 0.0


# ------------------------------------------------------------------ the curve
@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
def test_tnb_curve_is_theorem_2_at_the_closed_form_gaussian(shape):
    # one run rho-zCDP: rdp(l) = rho l.  Thm 2: rdp(l) + (1+eta) min_lh [(1 - 1/lh) rho lh
    # + log(1/gamma)/lh] + log(E T)/(l - 1); the min over the reals is at
    # lh* = sqrt(log(1/gamma)/rho) (when >= 1): rho (lh* - 1) + log(1/gamma)/lh*.
    rho, mean = 0.01, 10.0
    orders = np.linspace(1.05, 400.0, 40000)
    out = _rdp.repeat_and_select_rdp(orders, rho * orders, mean, shape)
    gamma = acc.repetition_gamma(shape, mean)
    L = math.log(1 / gamma)
    lh = math.sqrt(L / rho)
    assert lh >= 1
    c = (1 + shape) * (rho * (lh - 1) + L / lh)
    ref = rho * orders + math.log(_rdp._tnb_mean(gamma, shape)) / (orders - 1) + c
    suffix = np.minimum.accumulate(ref[::-1])[::-1]
    assert np.all(out >= suffix - 1e-12)             # a grid minimum is never below the real one
    np.testing.assert_allclose(out, suffix, rtol=1e-5)


def test_poisson_curve_is_theorem_6():
    z, mean = 4.0, 8.0
    orders = np.array(_rdp.DEFAULT_ORDERS)
    inner = orders / (2 * z * z)
    out = _rdp.repeat_and_select_rdp(orders, inner, mean, None)
    for i in (30, 80, 150):
        lam = orders[i]
        dhat = _rdp.rdp_to_delta(orders, inner, math.log1p(1 / (lam - 1)))[0]
        assert out[i] <= inner[i] + mean * dhat + math.log(mean) / (lam - 1) + 1e-12
    assert np.all(np.diff(out) >= -1e-12)            # nondecreasing in the order


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("z,count", [(20.0, 20), (5.0, 20), (2.0, 1)])
def test_equals_dp_accounting_on_the_same_orders(neighbouring, shape, z, count):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as R
    mean = 10.0
    inner = acc.NeighbouringEvent(neighbouring, acc.SelfComposedEvent(acc.GaussianEvent(z), count))
    ours = _eps(acc.RepeatAndSelectEvent(inner, mean, shape), neighbouring)
    rel = {"add_remove": R.NeighborRel.ADD_OR_REMOVE_ONE, "replace": R.NeighborRel.REPLACE_ONE}[neighbouring]
    theirs = R.RdpAccountant(orders=list(acc.RDPAccountant().orders), neighboring_relation=rel)
    theirs.compose(dpa.dp_event.RepeatAndSelectDpEvent(
        dpa.dp_event.SelfComposedDpEvent(dpa.dp_event.GaussianDpEvent(z), count), mean,
        math.inf if shape is None else shape))
    assert ours == pytest.approx(theirs.get_epsilon(1e-5), rel=1e-6)
    default = R.RdpAccountant(neighboring_relation=rel)        # their default grid is a subset of ours
    default.compose(dpa.dp_event.RepeatAndSelectDpEvent(
        dpa.dp_event.SelfComposedDpEvent(dpa.dp_event.GaussianDpEvent(z), count), mean,
        math.inf if shape is None else shape))
    assert ours <= default.get_epsilon(1e-5) * (1 + 1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_selection_costs_more_than_one_run_and_more_with_more_runs(shape):
    inner = acc.SelfComposedEvent(acc.GaussianEvent(10.0), 10)
    one = _eps(inner)
    e = [_eps(acc.RepeatAndSelectEvent(inner, m, shape)) for m in (2.0, 5.0, 20.0, 80.0)]
    assert one < e[0] and all(a < b for a, b in zip(e, e[1:]))


@pytest.mark.parametrize("cls", [acc.GDPAccountant, acc.ZCDPAccountant, acc.PLDAccountant,
                                 acc.LinearAccountant, acc.AdvancedAccountant])
def test_other_accountants_refuse_it(cls):
    a = cls(neighbouring="add_remove")
    with pytest.raises(acc.UnsupportedEventError, match="RDP accountant only"):
        a.compose(acc.RepeatAndSelectEvent(acc.GaussianEvent(3.0), 5.0, 1.0))


def test_ledger_charges_it_under_rdp():
    ev = acc.NeighbouringEvent("replace", acc.RepeatAndSelectEvent(
        acc.SelfComposedEvent(acc.GaussianEvent(20.0), 20), 10.0, 1.0))
    eps = _eps(ev, "replace")
    ledger = acc.BudgetLedger(eps * 1.001, 1e-5, accountant="rdp", neighbouring="replace")
    ledger.spend(ev)
    with pytest.raises(acc.BudgetExceededError):
        ledger.spend(ev)
