"""Accounting benchmarks: dpem_fast.accounting (RDP and native PLD) vs
dp_accounting (RDP and PLD).

Run: python -m pytest bench/bench_accounting.py --benchmark-only -q
Script mode (ratio table, medians): python bench/bench_accounting.py
  --baseline REV  also times the accounting package of git revision REV
                  (e.g. main) in the same process, for before/after numbers
  --repeat N      runs per timing (median; default 21)
"""
import argparse
import importlib
import pathlib
import subprocess
import sys
import tempfile
import time

import pytest

from dpem_fast.accounting import (  # noqa: E402
    GaussianEvent, PLDAccountant, PoissonSampledEvent, RDPAccountant,
    SelfComposedEvent, calibrate_noise_multiplier)

Q, Z, STEPS, DELTA, TARGET = 0.01, 1.0, 10_000, 1e-5, 2.0


def ours_compose():
    ev = PoissonSampledEvent(Q, GaussianEvent(Z))
    return RDPAccountant().compose(ev, STEPS).get_epsilon(DELTA)


def ours_pld_compose():
    """Native PLD, cold: the single-event PLDs are rebuilt."""
    from dpem_fast.accounting import _pld
    _pld._leaf_plds.cache_clear()
    ev = PoissonSampledEvent(Q, GaussianEvent(Z))
    return PLDAccountant().compose(ev, STEPS).get_epsilon(DELTA)


def ours_pld_calibrate():
    from dpem_fast.accounting import _pld
    _pld._leaf_plds.cache_clear()
    return calibrate_noise_multiplier(_plan, TARGET, DELTA, accountant="pld")


def theirs_compose(kind="rdp"):
    import dp_accounting as dpa
    acct = dpa.rdp.RdpAccountant() if kind == "rdp" else dpa.pld.PLDAccountant()
    acct.compose(dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(Z)), STEPS)
    return acct.get_epsilon(DELTA)


def _plan(z):
    return SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(z)), 1000)


def _clear_caches(pkg=None, everything=True):
    """Clear the memoised curves (every trial z then needs a fresh curve);
    with ``everything`` also the z-independent tables (log-factorials, flat
    layouts of the binomial sums), i.e. a calibration in a fresh process."""
    if pkg is None:
        from dpem_fast import accounting as pkg
    rdp = importlib.import_module(pkg.__name__ + "._rdp")
    accts = importlib.import_module(pkg.__name__ + "._rdp_accountants")
    rdp._subsampled_gaussian_rdp_cached.cache_clear()
    accts._event_rdp.cache_clear()
    if everything:
        for name in ("_log_factorials", "_integer_layout", "_binomial_block"):
            if hasattr(rdp, name):
                getattr(rdp, name).cache_clear()


def ours_calibrate(pkg=None, everything=True):
    _clear_caches(pkg, everything)
    if pkg is None:
        return calibrate_noise_multiplier(_plan, TARGET, DELTA)

    def plan(z):
        return pkg.SelfComposedEvent(
            pkg.PoissonSampledEvent(Q, pkg.GaussianEvent(z)), 1000)
    return pkg.calibrate_noise_multiplier(plan, TARGET, DELTA)


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
def test_ours_pld_compose_cold(benchmark):
    eps = benchmark(ours_pld_compose)
    benchmark.extra_info.update(epsilon=eps)


@pytest.mark.benchmark(group="calibrate")
def test_ours_pld_calibrate(benchmark):
    z = benchmark.pedantic(ours_pld_calibrate, rounds=11, warmup_rounds=1)
    benchmark.extra_info.update(noise_multiplier=z)


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
    z = benchmark.pedantic(ours_calibrate, rounds=11, warmup_rounds=1)
    benchmark.extra_info.update(noise_multiplier=z)


@pytest.mark.benchmark(group="calibrate")
def test_theirs_calibrate(benchmark):
    pytest.importorskip("dp_accounting")
    z = benchmark.pedantic(theirs_calibrate, rounds=2, warmup_rounds=0)
    benchmark.extra_info.update(noise_multiplier=z)


def _time(fn, repeat):
    """Median wall time over ``repeat`` runs (and the last value)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2], value


def _baseline_package(rev):
    """Import ``python/dpem_fast/accounting`` of git revision ``rev`` as a
    stand-alone package (it only uses relative imports, numpy and scipy)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="acct_baseline_"))
    name = "acct_baseline"
    dest = tmp / name
    dest.mkdir()
    prefix = "python/dpem_fast/accounting/"
    files = subprocess.run(
        ["git", "-C", str(root), "ls-tree", "--name-only", rev, prefix],
        check=True, capture_output=True, text=True).stdout.split()
    for f in files:
        if f.endswith(".py"):
            text = subprocess.run(["git", "-C", str(root), "show",
                                   f"{rev}:{f}"], check=True,
                                  capture_output=True, text=True).stdout
            (dest / f[len(prefix):]).write_text(text)
    sys.path.insert(0, str(tmp))
    return importlib.import_module(name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="REV")
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args(argv)
    rep = args.repeat
    from dpem_fast.accounting import _rdp, _rdp_accountants

    def cold():
        _rdp._subsampled_gaussian_rdp_cached.cache_clear()
        _rdp_accountants._event_rdp.cache_clear()
        return ours_compose()

    rows = [
        ("compose+eps (cached curve)", lambda: ours_compose(),
         theirs_compose, 200),
        ("compose+eps (cold)", cold, theirs_compose, rep),
        ("calibrate z (RDP, all cold)", ours_calibrate, theirs_calibrate,
         rep),
        ("calibrate z (RDP, curves cold)",
         lambda: ours_calibrate(everything=False), theirs_calibrate, rep),
        ("PLD compose+eps (cold)", ours_pld_compose,
         lambda: theirs_compose("pld"), rep),
        ("PLD calibrate z (cold)", ours_pld_calibrate, theirs_calibrate,
         rep),
    ]
    print(f"median of {rep} runs (200 for the cached row; dp_accounting: "
          f"{min(rep, 11)} runs)")
    print(f"{'task':32s} {'ours [ms]':>10s} {'theirs [ms]':>12s} "
          f"{'ratio':>8s}  values (ours / theirs)")
    theirs_cache = {}
    for name, ours, theirs, n in rows:
        t_o, v_o = _time(ours, n)
        if theirs not in theirs_cache:
            theirs_cache[theirs] = _time(theirs, min(rep, 11))
        t_t, v_t = theirs_cache[theirs]
        print(f"{name:32s} {t_o * 1e3:10.3f} {t_t * 1e3:12.1f} "
              f"{t_t / t_o:8.0f}x  {v_o:.10g} / {v_t:.6g}")
    if args.baseline:
        pkg = _baseline_package(args.baseline)
        for everything, label in ((True, "all cold"), (False, "curves cold")):
            tb, to = [], []
            for _ in range(rep):   # interleaved: same machine load for both
                t_b, v_b = _time(lambda: ours_calibrate(pkg, everything), 1)
                t_o, v_o = _time(lambda: ours_calibrate(None, everything), 1)
                tb.append(t_b)
                to.append(t_o)
            t_b, t_o = sorted(tb)[rep // 2], sorted(to)[rep // 2]
            print(f"calibrate z ({label}): {args.baseline} {t_b * 1e3:.2f} ms"
                  f" (z={v_b:.10g})  ->  this tree {t_o * 1e3:.2f} ms "
                  f"(z={v_o:.10g}), {t_b / t_o:.1f}x")
    print("(the PLD rows compare with dp_accounting's PLD for compose and "
          "its RDP calibration; their PLD calibration takes minutes)")


if __name__ == "__main__":
    main()
