"""The private start of DPKMeans (``init="private"``) against the data-independent start
(``init=None``) on real tables and on Google's synthetic benchmark, across ε.

For each table, ε ∈ {0.5, 1, 4} and k, the mean over seeds of the NICV (mean squared distance
to the nearest centre, in the fit's unit-ball units: rows mapped by the same declared domain,
so both starts are measured on one scale), and the non-private k-means++ optimum
(``sklearn.cluster.KMeans``, n_init=1, on the mapped rows) for reference.  Tables (declared
public bounds, ``dpem_fast.datasets``): shuttle (49,097 × 9), nycflights (first 20,000 × 8),
airports (28,298 × 2), the same rows bench/utility_floor.py fits; and Google's benchmark
(bench/kmeans_google.py, data_norm 1.25, add/remove).  ``max_iter`` 5 (utility_floor's) and 10
(DPKMeans's default); one thread.

Run: ``python bench/kmeans_start.py [--seeds 5] [--tables shuttle nycflights_20k airports google]``.
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np

import dpem_fast
from dpem_fast.cluster import nicv
from dpem_fast._preprocess import resolve_domain, scale_and_clip
from dpem_fast.datasets import (AIRPORTS_BOUNDS, NYCFLIGHTS_BOUNDS, SHUTTLE_BOUNDS, load_airports,
                                load_nycflights, load_shuttle)


def _google():
    from kmeans_google import DATA_NORM, make_data
    return make_data(1000), dict(data_norm=DATA_NORM, neighbouring="add_remove", delta=1e-6)


TABLES = {
    "shuttle": lambda: (load_shuttle()[0], dict(bounds=SHUTTLE_BOUNDS)),
    "nycflights_20k": lambda: (load_nycflights()[:20000], dict(bounds=NYCFLIGHTS_BOUNDS)),
    "airports": lambda: (load_airports(), dict(bounds=AIRPORTS_BOUNDS)),
    "google": _google,
}


def main():
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tables", nargs="+", default=list(TABLES))
    ap.add_argument("--ks", type=int, nargs="+", default=[3, 8, 16])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    ap.add_argument("--max-iter", type=int, nargs="+", default=[5, 10])
    args = ap.parse_args()
    print(f"{'table':>15} {'k':>3} {'eps':>4} {'J':>3} {'kmeans++':>9} {'init=None':>10} {'private':>10}  winner")
    wins = {"None": 0, "private": 0}
    with threadpool_limits(1):
        for name in args.tables:
            X, dom = TABLES[name]()
            domain = resolve_domain(X.shape[1], dom.get("data_norm"), dom.get("bounds"))
            Z = scale_and_clip(np.asarray(X, dtype=np.float64), domain)[0]
            for k in args.ks:
                ref = np.mean([KMeans(k, n_init=1, random_state=s).fit(Z).inertia_ / Z.shape[0]
                               for s in range(min(args.seeds, 3))])
                for eps in args.epsilons:
                    for J in args.max_iter:
                        res = {}
                        for init in (None, "private"):
                            v = []
                            for s in range(args.seeds):
                                km = dpem_fast.DPKMeans(k, epsilon=eps, max_iter=J, init=init, random_state=s,
                                                        n_threads=1, **dom)
                                with warnings.catch_warnings():
                                    warnings.simplefilter("ignore")
                                    km.fit(X)
                                v.append(nicv(Z, domain.to_scaled(km.cluster_centers_)))   # the paper's NICV
                            res[str(init)] = float(np.mean(v))
                        win = min(res, key=res.get)
                        wins[win] += 1
                        print(f"{name:>15} {k:>3} {eps:>4} {J:>3} {ref:9.4f} {res['None']:10.4f} "
                              f"{res['private']:10.4f}  {win}", flush=True)
    print("cells won:", wins)


if __name__ == "__main__":
    main()
