"""Sampler throughput: exact discrete Gaussian / Laplace against peers.

Run with ``pytest bench/bench_samplers.py --benchmark-only`` (pytest-benchmark;
``bench/`` is outside the default test paths), or as a script,
``python bench/bench_samplers.py [n]``, for a table of samples per second and
ratios.  Every pytest benchmark records ``threads``, ``sigma``, ``n`` and
``samples_per_s`` in ``benchmark.extra_info``.

Peers (measured only when installed): numpy's ``standard_normal`` (continuous,
not exact), the pure-Python CKS reference in ``dpem_fast._reference``,
diffprivlib's ``GaussianDiscrete`` (floating-point implementation of CKS, not
exact) and OpenDP's integer ``make_gaussian`` (exact discrete Gaussian).  The
figures are noisy on shared machines: compare ratios taken in one run.
"""
from __future__ import annotations

import importlib
import importlib.util
import random
import sys
import time
import types
from fractions import Fraction

import numpy as np
import pytest

import dpem_fast.random as dr
from dpem_fast._reference import samplers as ref

N = 2_000_000          # compiled samplers
N_PY = 2_000           # pure-Python reference
N_PEER = 20_000        # diffprivlib / OpenDP

# name -> (sigma or scale, callable(n, n_threads))
DPEM_CASES = {
    "discrete_gaussian sigma=10": (10, lambda n, nt: dr.discrete_gaussian(100, n, random_state=1, n_threads=nt)),
    "discrete_gaussian sigma=1000": (1000, lambda n, nt: dr.discrete_gaussian(10**6, n, random_state=1, n_threads=nt)),
    "discrete_laplace scale=10": (10, lambda n, nt: dr.discrete_laplace(10, n, random_state=1, n_threads=nt)),
    "standard_normal (dpem_fast)": (1, lambda n, nt: dr.standard_normal(n, random_state=1, n_threads=nt)),
    "uniform": (1, lambda n, nt: dr.uniform(n, random_state=1, n_threads=nt)),
    "laplace scale=1": (1, lambda n, nt: dr.laplace(1.0, n, random_state=1, n_threads=nt)),
    "integers high=10**9+7": (1, lambda n, nt: dr.integers(10**9 + 7, n, random_state=1, n_threads=nt)),
    # n // 55 matrices of 10 x 10: 55 upper-triangle draws each, i.e. ~n normals
    "symmetric_gaussian d=10": (1, lambda n, nt: dr.symmetric_gaussian(10, 1.0, batch=n // 55,
                                                                        random_state=1, n_threads=nt)),
}


def _numpy_normal(n):
    return np.random.default_rng(1).standard_normal(n)


def _reference_cks(sigma):
    u = ref.python_source(random.Random(1))
    s2 = Fraction(sigma) ** 2
    return lambda n: [ref.discrete_gaussian(s2, u) for _ in range(n)]


def _diffprivlib_gaussian_discrete(sigma):
    """diffprivlib's GaussianDiscrete with its scale set to ``sigma``, or None.

    diffprivlib 0.6 imports sklearn internals at package import that newer
    scikit-learn releases removed; the mechanisms themselves do not need
    them, so on that ImportError the subpackage is loaded under a bare parent.
    """
    if "diffprivlib.mechanisms" in sys.modules:
        GaussianDiscrete = sys.modules["diffprivlib.mechanisms"].GaussianDiscrete
    else:
        spec = importlib.util.find_spec("diffprivlib")
        if spec is None:
            return None
        try:
            from diffprivlib.mechanisms import GaussianDiscrete
        except ImportError:
            sys.modules.pop("diffprivlib", None)
            pkg = types.ModuleType("diffprivlib")
            pkg.__path__ = list(spec.submodule_search_locations)
            sys.modules["diffprivlib"] = pkg
            GaussianDiscrete = importlib.import_module("diffprivlib.mechanisms").GaussianDiscrete
    mech = GaussianDiscrete(epsilon=1.0, delta=1e-5, sensitivity=1, random_state=1)
    mech._scale = float(sigma)           # randomise() reads the scale from here
    return lambda n: [mech.randomise(0) for _ in range(n)]


def _opendp_gaussian(sigma):
    """OpenDP's exact discrete Gaussian on a vector of ints (one call), or None."""
    if importlib.util.find_spec("opendp") is None:
        return None
    import opendp.prelude as dp

    dp.enable_features("contrib")
    meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=float),
                              scale=float(sigma))
    return lambda n: meas([0] * n)


# ---------------------------------------------------------------------------
# pytest-benchmark
# ---------------------------------------------------------------------------

def _run(benchmark, fn, n, **info):
    benchmark.extra_info.update(n=n, **info)
    benchmark.pedantic(fn, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["samples_per_s"] = n / benchmark.stats.stats.median


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("case", list(DPEM_CASES))
def test_dpem_fast(benchmark, case, n_threads):
    sigma, fn = DPEM_CASES[case]
    _run(benchmark, lambda: fn(N, n_threads), N, threads=n_threads, sigma=sigma, sampler=case)


def test_numpy_standard_normal(benchmark):
    _run(benchmark, lambda: _numpy_normal(N), N, threads=1, sigma=1, sampler="numpy standard_normal")


@pytest.mark.parametrize("sigma", [10, 1000])
def test_reference_cks(benchmark, sigma):
    _run(benchmark, lambda: _reference_cks(sigma)(N_PY), N_PY, threads=1, sigma=sigma,
         sampler="pure-Python CKS reference")


@pytest.mark.parametrize("sigma", [10, 1000])
def test_diffprivlib(benchmark, sigma):
    fn = _diffprivlib_gaussian_discrete(sigma)
    if fn is None:
        pytest.skip("diffprivlib is not installed")
    _run(benchmark, lambda: fn(N_PEER), N_PEER, threads=1, sigma=sigma, sampler="diffprivlib GaussianDiscrete")


@pytest.mark.parametrize("sigma", [10, 1000])
def test_opendp(benchmark, sigma):
    pytest.importorskip("opendp")
    fn = _opendp_gaussian(sigma)
    _run(benchmark, lambda: fn(N_PEER), N_PEER, threads=1, sigma=sigma, sampler="OpenDP make_gaussian (int)")


# ---------------------------------------------------------------------------
# Script mode: one table
# ---------------------------------------------------------------------------

def _rate(fn, n, repeats=5):
    fn(min(n, 1000))                                  # warm up (imports, first build)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - t0)
    return n / float(np.median(times))


def main(n=N):
    rows = []
    base = _rate(_numpy_normal, n)
    for case, (sigma, fn) in DPEM_CASES.items():
        r1 = _rate(lambda m: fn(m, 1), n)
        r2 = _rate(lambda m: fn(m, 2), n)
        rows.append((case, 1, r1, r1 / base, ""))
        rows.append((case, 2, r2, r2 / base, f"{r2 / r1:.2f}x vs 1 thread"))
    rows.append(("numpy standard_normal", 1, base, 1.0, ""))
    dg = {10: rows[0][2], 1000: rows[2][2]}
    for sigma in (10, 1000):
        peers = [("pure-Python CKS reference", _reference_cks(sigma), N_PY),
                 ("diffprivlib GaussianDiscrete", _diffprivlib_gaussian_discrete(sigma), N_PEER),
                 ("OpenDP make_gaussian (int)", _opendp_gaussian(sigma), N_PEER)]
        for name, fn, m in peers:
            if fn is None:
                rows.append((f"{name} sigma={sigma}", 1, float("nan"), float("nan"), "not installed"))
                continue
            r = _rate(fn, m, repeats=3)
            rows.append((f"{name} sigma={sigma}", 1, r, r / base,
                         f"dpem_fast 1 thread is {dg[sigma] / r:,.0f}x faster"))
    w = max(len(r[0]) for r in rows)
    print(f"{'sampler':<{w}}  threads  {'samples/s':>11}  {'vs numpy':>9}  note")
    for name, nt, r, ratio, note in rows:
        print(f"{name:<{w}}  {nt:>7}  {r:>11.3e}  {ratio:>9.3f}  {note}")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else N)
