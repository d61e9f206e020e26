"""DP k-means on Google's synthetic benchmark, regenerated from its description.

Google's differential-privacy library reports its private LSH-coreset clustering on a
synthetic benchmark: 100,000 rows in 100 dimensions, 64 Gaussian clusters whose centres are
uniform in the unit ball, per-coordinate standard deviation 0.0125, ε = 1, δ = 1e-6,
add/remove neighbours; "normalised k-means loss" = mean squared distance of a row to its
nearest centre.  This script regenerates that data set from the description (our generator,
not theirs: equal-probability cluster labels, seed per run) and prints, per k:

* ``DPKMeans`` (init=None: the data-independent start; init="private": the private start, the
  default of ``method="dpem"`` since issue 24),
* non-private ``sklearn.cluster.KMeans`` (k-means++, n_init=1, the same seeds),
* Google's reported numbers (0.658 / 0.561 / 0.384 / 0.086 at k = 8 / 16 / 32 / 64),

with the mean (and max) over the seeds, and the fit time of one DPKMeans fit on ONE thread
(OpenMP and BLAS: ``n_threads=1`` and threadpoolctl).

Declared domain (public, from the generator's description only): ``data_norm = 1.25``.  A row
is a centre (norm ≤ 1) plus 100 i.i.d. N(0, 0.0125²) coordinates, whose norm is
0.0125 · χ₁₀₀ ≈ 0.125 ± 0.009; 1.25 = 1 + 0.125 + 0.125 (a margin of about 14 standard
deviations of the noise norm), so no row is clipped in practice.  The private fits use the
whole (ε, δ) = (1, 1e-6) with ``neighbouring="add_remove"``.

Run: ``python bench/kmeans_google.py [--seeds 10] [--ks 8 16 32 64] [--max-iter 10]
[--inits none private]``.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

N, D, N_CLUSTERS, SD = 100_000, 100, 64, 0.0125
EPSILON, DELTA = 1.0, 1e-6
DATA_NORM = 1.25
GOOGLE = {8: 0.658, 16: 0.561, 32: 0.384, 64: 0.086}
SKLEARN_REPORTED = {8: 0.634, 16: 0.517, 32: 0.323, 64: 0.0156}


def make_data(seed, n=N, d=D, k=N_CLUSTERS, sd=SD):
    """Google's benchmark from its description: k centres uniform in the unit ball of R^d,
    n rows each a uniformly chosen centre plus N(0, sd² I)."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(k, d))
    centres = g / np.linalg.norm(g, axis=1, keepdims=True) * rng.uniform(size=(k, 1)) ** (1.0 / d)
    labels = rng.integers(k, size=n)
    return centres[labels] + rng.normal(scale=sd, size=(n, d))


def loss(X, C):
    """Normalised k-means loss: mean squared distance to the nearest centre."""
    C = np.asarray(C, dtype=np.float64)
    d2 = (X * X).sum(1)[:, None] - 2.0 * X @ C.T + (C * C).sum(1)[None, :]
    return float(np.maximum(d2.min(axis=1), 0.0).mean())


def fit_dp(X, k, seed, init, max_iter, epsilon=EPSILON):
    import dpem_fast

    kw = {"init": None if init == "none" else init}
    m = dpem_fast.DPKMeans(k, epsilon=epsilon, delta=DELTA, neighbouring="add_remove", data_norm=DATA_NORM,
                           max_iter=max_iter, random_state=seed, n_threads=1, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        m.fit(X)
        return m, time.perf_counter() - t


def main():
    from threadpoolctl import threadpool_limits
    from sklearn.cluster import KMeans

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--ks", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--max-iter", type=int, default=10)
    ap.add_argument("--inits", nargs="+", default=["none", "private"])
    ap.add_argument("--no-sklearn", action="store_true")
    args = ap.parse_args()
    res = {(i, k): [] for i in args.inits for k in args.ks}
    times = {(i, k): [] for i in args.inits for k in args.ks}
    sk = {k: [] for k in args.ks}
    with threadpool_limits(1):
        for s in range(args.seeds):
            X = make_data(1000 + s)
            for k in args.ks:
                for init in args.inits:
                    m, t = fit_dp(X, k, s, init, args.max_iter)
                    res[init, k].append(loss(X, m.cluster_centers_))
                    times[init, k].append(t)
                if not args.no_sklearn:
                    km = KMeans(k, init="k-means++", n_init=1, random_state=s).fit(X)
                    sk[k].append(loss(X, km.cluster_centers_))
            print(f"seed {s} done", flush=True)
    print(f"\nGoogle benchmark regenerated: n={N}, d={D}, {N_CLUSTERS} clusters, sd={SD}; eps={EPSILON}, "
          f"delta={DELTA}, add_remove, data_norm={DATA_NORM}, max_iter={args.max_iter}, "
          f"{args.seeds} seeds, ONE thread")
    head = f"{'k':>4} {'Google':>8} {'sk-report':>9} {'sklearn++':>10}"
    for init in args.inits:
        head += f" {'DP init=' + init + ' mean(max)':>28} {'time s':>7}"
    print(head)
    for k in args.ks:
        row = f"{k:>4} {GOOGLE.get(k, float('nan')):8.3f} {SKLEARN_REPORTED.get(k, float('nan')):9.4f} "
        row += f"{np.mean(sk[k]) if sk[k] else float('nan'):10.4f}"
        for init in args.inits:
            v = np.asarray(res[init, k])
            row += f" {v.mean():20.4f} ({v.max():.3f}) {np.median(times[init, k]):7.2f}"
        print(row)


if __name__ == "__main__":
    main()
