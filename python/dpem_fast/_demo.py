"""``python -m dpem_fast demo``: a private Gaussian mixture on a real dataset."""
from __future__ import annotations

import time

import numpy as np


def run_demo(epsilon: float = 1.0, n_threads=None, n_components: int = 5, max_iter: int = 10) -> int:
    from . import DPGaussianMixture
    from .datasets import SHUTTLE_BOUNDS, load_shuttle

    X, _ = load_shuttle()
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(X))
    n_test = len(X) // 10
    X_test, X_train = X[perm[:n_test]], X[perm[n_test:]]
    print(f"Statlog Shuttle (river): {X_train.shape[0]} training rows, {n_test} held-out rows, "
          f"{X.shape[1]} features; K={n_components}, {max_iter} EM iterations\n")

    common = dict(max_iter=max_iter, bounds=SHUTTLE_BOUNDS, random_state=0, n_threads=n_threads)
    t0 = time.perf_counter()
    dp = DPGaussianMixture(n_components, epsilon=epsilon, delta=1e-5, **common).fit(X_train)
    t_dp = time.perf_counter() - t0
    # non-private EM on the same clipped rows, from a random start in the data's box
    lo, hi = SHUTTLE_BOUNDS
    t0 = time.perf_counter()
    exact = DPGaussianMixture(n_components, epsilon=float("inf"), max_iter=max_iter, random_state=0,
                              n_threads=n_threads).fit(np.clip(X_train, lo, hi))
    t_np = time.perf_counter() - t0

    print("Privacy report")
    print("--------------")
    print(dp.privacy_)
    print()
    ll_dp = dp.score(np.clip(X_test, lo, hi))
    ll_np = exact.score(np.clip(X_test, lo, hi))
    print(f"held-out log-likelihood per row: private (epsilon={epsilon:g}) {ll_dp:.3f}   "
          f"non-private EM {ll_np:.3f}")
    print(f"fit time: private {t_dp:.2f} s, non-private {t_np:.2f} s")
    print(f"mixture weights (private): {np.round(dp.weights_, 3)}")
    return 0
