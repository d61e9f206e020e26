"""DPPCA vs scikit-learn's ``PCA(svd_solver="randomized")`` at (400, 4096), k = 10 (issue 41).

One process, the thread count set before numpy loads (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS,
``n_threads``); ratios from the same run, median of ``--repeat`` rounds, each round timing every
case once (interleaved).  Ours private (epsilon=1,
declared data_norm) on the matrix-free path (the second moment released as an operator,
:mod:`dpem_fast._engine._operator`) and, for reference, on the dense path (the moment formed and
noised as a d x d matrix, forced); and non-private (epsilon=inf: the exact covariance through
products of the rows, and for reference formed, forced):

    python bench/bench_pca.py [--repeat 3] [--threads 1] [--shape 400x4096] [--k 10]
"""
from __future__ import annotations

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shape", default="400x4096")
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import time
    import warnings

    import numpy as np
    from sklearn.decomposition import PCA

    from dpem_fast import DPPCA

    n, d = map(int, a.shape.split("x"))
    k = a.k
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, k)) @ rng.normal(size=(k, d)) + rng.normal(size=(n, d))
    X /= np.sqrt(np.mean(np.sum(X * X, axis=1)))      # rows of norm about 1 (bench_fa.py's data)

    def ours():
        return DPPCA(k, epsilon=1.0, data_norm=3.0, random_state=0, n_threads=a.threads).fit(X)

    def exact():
        return DPPCA(k, epsilon=np.inf, random_state=0, n_threads=a.threads).fit(X)

    def forced_dense(fit):
        def run():
            DPPCA._operator_path = False           # the moment mixin's switch (tests, benches)
            try:
                return fit()
            finally:
                del DPPCA._operator_path
        return run

    cases = {"sklearn PCA randomized": lambda: PCA(k, svd_solver="randomized", random_state=0).fit(X),
             "DPPCA matrix-free": ours, "DPPCA dense (forced)": forced_dense(ours),
             "DPPCA eps=inf": exact, "DPPCA eps=inf dense": forced_dense(exact)}
    # interleaved: each round times every case once, in order, so that a drift of the machine's
    # speed between rounds (this shared 2-core machine's scikit-learn time ranged 0.042-0.066 s
    # between runs) moves every case alike; medians over the rounds
    samples = {name: [] for name in cases}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fit in cases.values():
            fit()                                        # warm
        for _ in range(a.repeat):
            for name, fit in cases.items():
                t = time.perf_counter()
                fit()
                samples[name].append(time.perf_counter() - t)
    times = {name: float(np.median(ts)) for name, ts in samples.items()}
    base = times["sklearn PCA randomized"]
    print(f"({n}, {d}), k = {k}, {a.threads} thread(s), median of {a.repeat} interleaved rounds")
    for name, t in times.items():
        print(f"  {name:<26} {t:8.3f} s   {t / base:6.2f} x scikit-learn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
