"""One gradient-EM statistics pass (symmetric mixture): the Cython kernel at 1 and 2 threads
against its numpy twin (``_reference/gradem.py``), medians from one run.

Run: python bench/bench_gradem.py [--reps 5]
"""
from __future__ import annotations

import argparse

import numpy as np

from dpem_fast._reference.gradem import gradem_stats_reference
from dpem_fast._kernels.gradem import gradem_stats
from _timing import median_time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(f"{'estimator':>10} {'n':>7} {'d':>3} {'numpy ms':>9} {'1 thr ms':>9} {'2 thr ms':>9} "
          f"{'numpy/1thr':>10} {'1thr/2thr':>9}")
    for estimator in ("truncated", "clipped"):
        for n, d in ((10_000, 10), (10_000, 50), (100_000, 10)):
            rng = np.random.default_rng(0)
            beta = np.full(d, 2.0 / np.sqrt(d))
            X = rng.choice([-1.0, 1.0], size=n)[:, None] * beta + rng.normal(size=(n, d))
            means = (beta + 0.1)[None, :]
            ref = median_time(lambda: gradem_stats_reference(X, means, 1.0, symmetric=True, estimator=estimator,
                                                             scale=1.0), args.reps, warmup=True)
            one = median_time(lambda: gradem_stats(X, means, 1.0, symmetric=True, estimator=estimator, scale=1.0,
                                                   n_threads=1), args.reps, warmup=True)
            two = median_time(lambda: gradem_stats(X, means, 1.0, symmetric=True, estimator=estimator, scale=1.0,
                                                   n_threads=2), args.reps, warmup=True)
            print(f"{estimator:>10} {n:>7} {d:>3} {ref * 1e3:9.2f} {one * 1e3:9.2f} {two * 1e3:9.2f} "
                  f"{ref / one:10.1f} {one / two:9.2f}")


if __name__ == "__main__":
    main()
