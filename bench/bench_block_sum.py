"""Per-iteration cost of the exact reduction of block partials (issue 34, item 7; issue 41's
budget: at most 2 % of an iteration).

Since issue 34 ``_contract.sum_blocks`` adds every entry's block partials exactly (a
superaccumulator, ``src/dpcore/dpc_exactsum.h``) and rounds once; before, it added them in
float64 in block order (kept as ``_contract._sum_blocks_sequential``).  This script runs one
statistics pass of each kernel at a realistic shape, records the partials the kernel hands to
``sum_blocks`` (the real values: their exponent ranges decide the cost), then times

* ``pass``: the whole statistics pass (kernel + the exact reductions), one EM iteration's
  data pass;
* ``exact``: the exact reductions of that pass alone (``sum_blocks``, every partial array;
  ``sum_blocks_lower`` for the second moment's S2, which reads its lower triangles alone);
* ``sequential``: the same values summed the old way (``_sum_blocks_sequential``);

and prints ``(exact - sequential) / pass``: the share of an iteration the exactness costs.
Medians of ``--repeat`` runs; the machine may be shared, so read ratios from one run.

    python bench/bench_block_sum.py [--threads 1 2] [--repeat 5]

Shapes: GMM full (n, d, K) = (200,000, 10, 5); k-means (100,000, 100, 64); second moments
(factor analysis) at d = 784, n = 20,000.
"""
from __future__ import annotations

import argparse

import numpy as np

from dpem_fast._dpcore import _contract
from dpem_fast._kernels import gmm as gmm_k, kmeans as kmeans_k, moments as moments_k
from _timing import median_time


def _gmm(n=200_000, d=10, K=5, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=3.0, size=(K, d))
    P = np.stack([np.eye(d) / np.sqrt(1.0 + k) for k in range(K)])    # precision Cholesky factors
    X = means[rng.integers(K, size=n)] + rng.normal(size=(n, d))
    w = np.full(K, 1.0 / K)
    return "gmm full (2e5, 10, 5)", gmm_k, lambda nt: gmm_k.compute_stats(X, w, means, P, n_threads=nt)


def _kmeans(n=100_000, d=100, K=64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    C = X[rng.choice(n, K, replace=False)]
    return "kmeans (1e5, 100, 64)", kmeans_k, lambda nt: kmeans_k.kmeans_stats(X, C, n_threads=nt)


def _moments(n=20_000, d=784, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random(size=(n, d))
    return "second moments (2e4, 784)", moments_k, lambda nt: moments_k.second_moment_stats(X, n_threads=nt)


CASES = [_gmm, _kmeans, _moments]


def _recorded(module, run, nt):
    """The partial arrays ``run`` hands to the exact reductions, each with the reduction it
    went to: ``sum_blocks``, or ``sum_blocks_lower`` (the second moment's S2 partials, of which
    only the lower triangles are written and read; issue 41)."""
    seen = []
    real, real_lower = _contract.sum_blocks, _contract.sum_blocks_lower

    def spy(part, n_threads=1):
        seen.append((real, np.array(part)))
        return real(part, n_threads)

    def spy_lower(part, n_threads=1):
        seen.append((real_lower, np.array(part)))
        return real_lower(part, n_threads)
    module._contract.sum_blocks, module._contract.sum_blocks_lower = spy, spy_lower
    try:
        run(nt)
    finally:
        module._contract.sum_blocks, module._contract.sum_blocks_lower = real, real_lower
    return seen


def _entries_read(fn, p):
    """The (n_blocks, m) values ``fn`` reads of ``p``: all of them, or the lower triangles."""
    if fn is _contract.sum_blocks_lower:
        return np.ascontiguousarray(p[:, np.tril(np.ones(p.shape[1:], dtype=bool))])
    return p


def measure(case, nt, repeat):
    name, module, run = case()
    parts = _recorded(module, run, nt)
    read = [_entries_read(fn, p) for fn, p in parts]        # the float sum reads the same values
    t_pass = median_time(lambda: run(nt), repeat, warmup=True)
    t_exact = median_time(lambda: [fn(p, nt) for fn, p in parts], repeat, warmup=True)
    t_seq = median_time(lambda: [_contract._sum_blocks_sequential(p) for p in read], repeat, warmup=True)
    values = sum(p.size for p in read)
    return name, values, t_pass, t_exact, t_seq


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"{'shape':28s} {'thr':>3s} {'values':>9s} {'pass ms':>9s} {'exact ms':>9s} {'seq ms':>8s} "
          f"{'(exact-seq)/pass':>17s}")
    for case in CASES:
        for nt in args.threads:
            name, values, tp, te, ts = measure(case, nt, args.repeat)
            print(f"{name:28s} {nt:3d} {values:9d} {tp * 1e3:9.2f} {te * 1e3:9.3f} {ts * 1e3:8.3f} "
                  f"{(te - ts) / tp * 100:16.2f}%")


def test_exact_reduction_cost(benchmark):
    """pytest-benchmark: the exact reduction of the GMM pass's partials (small shape)."""
    name, module, run = _gmm(n=20_000)
    parts = _recorded(module, run, 1)
    benchmark(lambda: [fn(p, 1) for fn, p in parts])


if __name__ == "__main__":
    main()
