"""The private domain estimate against the declared public box (issue 23's domain target).

For each real table with declared public bounds in :mod:`dpem_fast.datasets`, and each ε, the
box that :class:`~dpem_fast.DPGaussianMixture` estimates privately when nothing is declared
(10 % of the plan, two Gaussian histograms; ``privacy_.data_domain``) against the declared
box: per feature the ratio of the estimated width to the declared width (median and max over
features), and the share of rows outside the estimated box (clipped onto it).  Subsamples of
each table show the small-n end, where the estimate must refuse with a clear message rather
than build a box from noise (issue 23: a 178-row table at ε = 1 used to get radius 2.4e288).
Also sklearn's wine (178 x 13) with no bounds at ε = 1: the message the user gets.

Run: ``python bench/domain_estimate.py [--seeds 3]``; prints a markdown table.
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np

from dpem_fast import DPGaussianMixture
from dpem_fast.datasets import (AIRPORTS_BOUNDS, NYCFLIGHTS_BOUNDS, SHUTTLE_BOUNDS, load_airports,
                                load_nycflights, load_shuttle)

TABLES = {
    "shuttle": (lambda: load_shuttle()[0], SHUTTLE_BOUNDS),
    "nycflights": (load_nycflights, NYCFLIGHTS_BOUNDS),
    "airports": (load_airports, AIRPORTS_BOUNDS),
}


def estimated_box(X, epsilon, seed, neighbouring="replace"):
    """The privately estimated box of a one-iteration fit (the domain share is 10 % of the
    plan whatever the iteration count), or the refusal's message."""
    try:
        m = DPGaussianMixture(2, epsilon=epsilon, max_iter=1, neighbouring=neighbouring,
                              random_state=seed).fit(X)
    except ValueError as exc:
        return None, str(exc)
    return m.privacy_.data_domain["bounds"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    print("| table | n | d | ε | refused | width ratio median | max | rows outside |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (load, bounds) in TABLES.items():
        X_all = np.asarray(load(), dtype=np.float64)
        lo_d, hi_d = (np.broadcast_to(np.asarray(b, float), (X_all.shape[1],)) for b in bounds)
        X_all = np.clip(X_all, lo_d, hi_d)       # the declared box is the reference
        for n in (200, 2000, 20000, X_all.shape[0]):
            if n > X_all.shape[0]:
                continue
            X = X_all[np.random.default_rng(0).permutation(X_all.shape[0])[:n]]
            for eps in (0.3, 1.0, 3.0):
                ratios, outside, refused = [], [], 0
                for seed in range(args.seeds):
                    box, msg = estimated_box(X, eps, seed)
                    if box is None:
                        refused += 1
                        continue
                    lo, hi = box
                    ratios.append((hi - lo) / (hi_d - lo_d))
                    outside.append(np.mean(np.any((X < lo) | (X > hi), axis=1)))
                if ratios:
                    r = np.concatenate(ratios)
                    print(f"| {name} | {n} | {X.shape[1]} | {eps} | {refused}/{args.seeds} | "
                          f"{np.median(r):.3g} | {r.max():.3g} | {np.mean(outside):.2%} |")
                else:
                    print(f"| {name} | {n} | {X.shape[1]} | {eps} | {refused}/{args.seeds} | – | – | – |")
    from sklearn.datasets import load_wine
    wine = load_wine().data
    for rel in ("replace", "add_remove"):
        _, msg = estimated_box(wine, 1.0, 0, rel)
        print(f"\nwine (178 x 13), no bounds, ε = 1, {rel}: {msg or 'fitted'}")


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main()
