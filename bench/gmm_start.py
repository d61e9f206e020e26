"""The private start for DPGaussianMixture's means (``means_init="private"``) against the
data-independent start, on real tables: mean over seeds of the average log-likelihood per row
(``score``; the tables' rows, declared public bounds) at ε ∈ {0.5, 1, 4}, K ∈ {3, 8},
max_iter 10 (the estimator's default averaging), one thread.

Run: ``python bench/gmm_start.py [--seeds 3] [--tables shuttle nycflights_20k airports]``.
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np

import dpem_fast
from kmeans_start import TABLES


def main():
    from threadpoolctl import threadpool_limits

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tables", nargs="+", default=["shuttle", "nycflights_20k", "airports"])
    ap.add_argument("--ks", type=int, nargs="+", default=[3, 8])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    args = ap.parse_args()
    print(f"{'table':>15} {'K':>3} {'eps':>4} {'means_init=None':>16} {'private':>10}  winner")
    wins = {"None": 0, "private": 0}
    with threadpool_limits(1):
        for name in args.tables:
            X, dom = TABLES[name]()
            for k in args.ks:
                for eps in args.epsilons:
                    res = {}
                    for init in (None, "private"):
                        v = []
                        for s in range(args.seeds):
                            gm = dpem_fast.DPGaussianMixture(k, epsilon=eps, max_iter=10, means_init=init,
                                                             random_state=s, n_threads=1, **dom)
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                gm.fit(X)
                                v.append(gm.score(X))
                        res[str(init)] = float(np.mean(v))
                    win = max(res, key=res.get)
                    wins[win] += 1
                    print(f"{name:>15} {k:>3} {eps:>4} {res['None']:16.4f} {res['private']:10.4f}  {win}", flush=True)
    print("cells won:", wins)


if __name__ == "__main__":
    main()
