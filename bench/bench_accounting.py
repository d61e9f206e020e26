"""Accounting benchmarks: dpem_fast.accounting vs dp_accounting.

Run: python -m pytest bench/bench_accounting.py --benchmark-only -q
Script mode (ratio table): python bench/bench_accounting.py
"""
import time

import pytest

from dpem_fast.accounting import (  # noqa: E402
    GaussianEvent, PoissonSampledEvent, RDPAccountant, SelfComposedEvent,
    calibrate_noise_multiplier)

Q, Z, STEPS, DELTA, TARGET = 0.01, 1.0, 10_000, 1e-5, 2.0


def ours_compose():
    ev = PoissonSampledEvent(Q, GaussianEvent(Z))
    return RDPAccountant().compose(ev, STEPS).get_epsilon(DELTA)


def theirs_compose(kind="rdp"):
    import dp_accounting as dpa
    acct = dpa.rdp.RdpAccountant() if kind == "rdp" else dpa.pld.PLDAccountant()
    acct.compose(dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(Z)), STEPS)
    return acct.get_epsilon(DELTA)


def _plan(z):
    return SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(z)), 1000)


def _clear_caches():
    from dpem_fast.accounting import _rdp, _rdp_accountants
    _rdp._subsampled_gaussian_rdp_cached.cache_clear()
    _rdp_accountants._event_rdp.cache_clear()


def ours_calibrate():
    _clear_caches()  # cold: every trial z needs a fresh curve
    return calibrate_noise_multiplier(_plan, TARGET, DELTA)


def theirs_calibrate():
    import dp_accounting as dpa
    make = lambda z: dpa.SelfComposedDpEvent(  # noqa: E731
        dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(z)), 1000)
    return dpa.calibrate_dp_mechanism(dpa.rdp.RdpAccountant, make, TARGET,
                                      DELTA, dpa.ExplicitBracketInterval(0.5, 4.0))


@pytest.mark.benchmark(group="compose")
def test_ours_compose_cached(benchmark):
    ours_compose()  # warm the per-event curve cache
    eps = benchmark(ours_compose)
    benchmark.extra_info.update(epsilon=eps, steps=STEPS, q=Q, z=Z)


@pytest.mark.benchmark(group="compose")
def test_ours_compose_cold(benchmark):
    from dpem_fast.accounting import _rdp, _rdp_accountants
    def cold():
        _rdp._subsampled_gaussian_rdp_cached.cache_clear()
        _rdp_accountants._event_rdp.cache_clear()
        return ours_compose()
    eps = benchmark(cold)
    benchmark.extra_info.update(epsilon=eps)


@pytest.mark.benchmark(group="compose")
def test_theirs_rdp_compose(benchmark):
    pytest.importorskip("dp_accounting")
    eps = benchmark.pedantic(theirs_compose, rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(epsilon=eps)


@pytest.mark.benchmark(group="compose")
def test_theirs_pld_compose(benchmark):
    pytest.importorskip("dp_accounting")
    eps = benchmark.pedantic(theirs_compose, args=("pld",), rounds=2,
                             warmup_rounds=0)
    benchmark.extra_info.update(epsilon=eps)


@pytest.mark.benchmark(group="calibrate")
def test_ours_calibrate(benchmark):
    z = benchmark.pedantic(ours_calibrate, rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(noise_multiplier=z)


@pytest.mark.benchmark(group="calibrate")
def test_theirs_calibrate(benchmark):
    pytest.importorskip("dp_accounting")
    z = benchmark.pedantic(theirs_calibrate, rounds=2, warmup_rounds=0)
    benchmark.extra_info.update(noise_multiplier=z)


def _time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t)
    return best, value


if __name__ == "__main__":
    from dpem_fast.accounting import _rdp, _rdp_accountants

    def cold():
        _rdp._subsampled_gaussian_rdp_cached.cache_clear()
        _rdp_accountants._event_rdp.cache_clear()
        return ours_compose()

    rows = [
        ("compose+eps (cached curve)", lambda: ours_compose(),
         theirs_compose, 200),
        ("compose+eps (cold)", cold, theirs_compose, 5),
        ("calibrate z (RDP)", ours_calibrate, theirs_calibrate, 3),
    ]
    print(f"{'task':30s} {'ours [ms]':>10s} {'theirs [ms]':>12s} "
          f"{'ratio':>8s}  values (ours / theirs)")
    for name, ours, theirs, rep in rows:
        t_o, v_o = _time(ours, rep)
        t_t, v_t = _time(theirs, 2)
        print(f"{name:30s} {t_o * 1e3:10.3f} {t_t * 1e3:12.1f} "
              f"{t_t / t_o:8.0f}x  {v_o:.6g} / {v_t:.6g}")
    t_p, v_p = _time(lambda: theirs_compose("pld"), 1)
    print(f"{'dp_accounting PLD compose+eps':30s} {'':10s} {t_p * 1e3:12.1f}"
          f" {'':8s}  eps {v_p:.6g}")
