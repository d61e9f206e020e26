"""DP-EM paper, Figure 4: private k-means on location data, NICV of three methods at eps = 0.01.

    python bench/kmeans_figure.py [--n-rows 1256384] [--splits 10] [--clusters 5] [--iters 10]
                                  [--out docs/figures/kmeans_figure4.png]

The paper used 1,256,384 Gowalla check-ins (not available offline).  Here: the 28,298 airport
locations of ``dpem_fast.datasets.load_airports`` **replicated to 1,256,384 rows with Gaussian
jitter of 0.5 degrees** (clipped to the globe), the same size; the declared domain is the globe
(``AIRPORTS_BOUNDS``, public knowledge), mapped into the unit ball.  The rows are shuffled into
10 folds; each method is fitted on 9 folds at (eps, delta) = (0.01, 1e-4) with K clusters and J
iterations from a data-independent start (the same start for every method: the same
``random_state``), and the NICV ``(1/N) sum_i min_k |x_i - c_k|^2`` (unit-ball units) is measured
on the held-out fold.  Methods, as in the paper:

* DPLloyd, linear composition (Laplace, the original algorithm);
* DPLloyd, zCDP composition of the same Laplace releases;
* DP-EM k-means (``method="dpem"``): Gaussian noise, exact Gaussian DP accounting, joint
  accounting of counts and sums (the paper used Laplace noise with zCDP composition).

A non-private Lloyd fit from the same start is printed as the floor.  The plot shows one split:
a subsample of the data and each method's centres (gray crosses), with mean NICV over the splits.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kmeans import make_data  # noqa: E402

EPS, DELTA = 0.01, 1e-4
METHODS = [
    ("DPLloyd (linear)", dict(method="dplloyd", accountant="linear")),
    ("DPLloyd (zCDP)", dict(method="dplloyd", accountant="zcdp")),
    ("DP-EM k-means", dict(method="dpem")),
]


def main(argv=None):
    from threadpoolctl import threadpool_limits

    from dpem_fast import DPKMeans
    from dpem_fast._engine._sources._memory import DataSummary
    from dpem_fast._rng import make_key
    from dpem_fast.cluster import nicv
    from dpem_fast.datasets import AIRPORTS_BOUNDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-rows", type=int, default=1_256_384)
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--clusters", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "figures",
                                                  "kmeans_figure4.png"))
    args = ap.parse_args(argv)
    X = make_data(args.n_rows)
    rng = np.random.default_rng(0)
    folds = np.array_split(rng.permutation(X.shape[0]), args.splits)
    K, J = args.clusters, args.iters
    print(f"X: {X.shape} (airports x{X.shape[0] / 28298:.1f}, 0.5-degree jitter); K={K}, J={J}, "
          f"eps={EPS}, delta={DELTA}, {args.splits} splits; NICV on the held-out fold, unit-ball units")
    names = [m for m, _ in METHODS] + ["Lloyd (not private)"]
    scores = {m: [] for m in names}
    shown = {}
    t0 = time.perf_counter()
    with threadpool_limits(1, "blas"):
        for s, test in enumerate(folds):
            train = np.ones(X.shape[0], bool)
            train[test] = False
            Xtr, Xte = X[train], X[test]
            fits = {}
            for name, kw in METHODS:
                # init=None: the paper's protocol, every method from the same data-independent start
                fits[name] = DPKMeans(K, epsilon=EPS, delta=DELTA, max_iter=J, bounds=AIRPORTS_BOUNDS,
                                      random_state=s, init=None, **kw).fit(Xtr)
            ref = fits["DP-EM k-means"]
            dom = ref._domain
            # the private fits' data-independent start, in the original units
            start = dom.to_original(ref._initial_parameters(DataSummary(Xtr.shape[0], 2), dom,
                                                            make_key(s), True))
            fits[names[-1]] = DPKMeans(K, epsilon=float("inf"), init=start, max_iter=J).fit(Xtr)
            for name, km in fits.items():
                C = dom.to_scaled(km.cluster_centers_)
                Z = dom.to_scaled(np.clip(Xte, *AIRPORTS_BOUNDS))     # inside the ball already (per feature)
                scores[name].append(nicv(Z, C))
            if s == 0:
                shown = {name: km.cluster_centers_ for name, km in fits.items()}
    print(f"({time.perf_counter() - t0:.1f} s)")
    for name in names:
        v = np.asarray(scores[name])
        print("%-22s NICV mean %.5f  sd %.5f  (min %.5f, max %.5f)" % (name, v.mean(), v.std(ddof=1) if v.size > 1
                                                                         else 0.0, v.min(), v.max()))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure")
        return
    sub = X[rng.choice(X.shape[0], 30000, replace=False)]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, (name, _) in zip(axes, METHODS):
        ax.scatter(sub[:, 1], sub[:, 0], s=0.3, c="tab:blue", alpha=0.3, rasterized=True)
        c = shown[name]
        ax.scatter(c[:, 1], c[:, 0], marker="x", s=120, linewidths=3, c="0.35")
        ax.set_title("%s (NICV %.4f)" % (name, np.mean(scores[name])))
        ax.set_xlim(-180, 180)
        ax.set_ylim(-90, 90)
        ax.set_xlabel("longitude")
    axes[0].set_ylabel("latitude")
    fig.suptitle(f"Private k-means, eps = {EPS}, delta = {DELTA}, K = {K}, J = {J}; airports replicated to "
                 f"{X.shape[0]:,} rows (mean NICV over {args.splits} held-out folds)", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=90)
    print("wrote", os.path.abspath(args.out))


if __name__ == "__main__":
    main()
