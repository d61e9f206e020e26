"""Bernoulli-mixture E-step: the fused kernel against its numpy twin.

pytest-benchmark::

    python -m pytest bench/bench_bernoulli.py --benchmark-only

Ratio table from one run (medians; the machine is shared, so take ratios from one run)::

    python bench/bench_bernoulli.py [--repeat 7]

What is timed: one E-step pass, ``bernoulli_stats`` (counts, first moments, log-likelihood)
against ``bernoulli_stats_reference`` (``X log mu^T + (1 - X) log(1 - mu)^T``, scipy
``logsumexp``, ``exp``, ``g^T X``), both with BLAS held to one thread.  Rows are binary,
float64; (70000, 64, 10) is a binarised-features shape, (60000, 784, 10) binarised MNIST.
"""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from dpem_fast._dpcore import _contract
from dpem_fast._reference.bernoulli import bernoulli_stats_reference
from dpem_fast._kernels.bernoulli import bernoulli_stats
from _timing import median_time

SHAPES = [(70_000, 64, 10), (60_000, 784, 10)]


def make_problem(n, d, K, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.05, 0.95, size=(K, d))
    weights = rng.dirichlet(np.ones(K))
    comp = rng.integers(K, size=n)
    X = (rng.random((n, d)) < means[comp]).astype(np.float64)
    return X, weights, means


# --------------------------------------------------------------------------- pytest-benchmark
@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """BLAS on one thread throughout (numpy included): idle BLAS threads would spin."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):
        yield


@pytest.fixture(scope="module", params=SHAPES, ids=lambda s: "n%d-d%d-K%d" % s)
def problem(request):
    return request.param, make_problem(*request.param)


@pytest.mark.benchmark(group="bernoulli")
@pytest.mark.parametrize("n_threads", [1, 2])
def test_dpem_fast(benchmark, problem, n_threads):
    shape, (X, w, means) = problem
    benchmark.extra_info.update(shape=shape, n_threads=n_threads, dtype="float64",
                                chunk_size=_contract.CHUNK_SIZE, impl="dpem_fast",
                                path="blas" if shape[1] >= _contract.BERNOULLI_BLAS_MIN_D else "hand")
    benchmark.pedantic(bernoulli_stats, args=(X, w, means, n_threads), rounds=7, warmup_rounds=1)


@pytest.mark.benchmark(group="bernoulli")
def test_numpy_reference(benchmark, problem):
    shape, (X, w, means) = problem
    benchmark.extra_info.update(shape=shape, n_threads=1, dtype="float64", impl="numpy")
    benchmark.pedantic(bernoulli_stats_reference, args=(X, w, means), rounds=3, warmup_rounds=1)


# --------------------------------------------------------------------------- table
def main(argv=None):
    from threadpoolctl import threadpool_limits

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    rows = []
    print(f"medians of {args.repeat}; ms per E-step pass; BLAS limited to 1 thread")
    print("%-18s %9s %9s %9s %10s %10s" % ("shape (n,d,K)", "dpem 1t", "dpem 2t", "numpy", "numpy/1t", "numpy/2t"))
    with threadpool_limits(1, "blas"):
        for n, d, K in SHAPES:
            X, w, means = make_problem(n, d, K)
            bernoulli_stats(X, w, means, 1)
            t1 = median_time(lambda: bernoulli_stats(X, w, means, 1), args.repeat)
            t2 = median_time(lambda: bernoulli_stats(X, w, means, 2), args.repeat)
            tn = median_time(lambda: bernoulli_stats_reference(X, w, means), max(1, args.repeat // 2))
            rows.append((n, d, K, t1, t2, tn))
            print("%-18s %9.2f %9.2f %9.1f %9.1fx %9.1fx" % (
                f"({n},{d},{K})", t1 * 1e3, t2 * 1e3, tn * 1e3, tn / t1, tn / t2), flush=True)
    return rows


if __name__ == "__main__":
    main()
