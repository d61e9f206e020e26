"""Issue 24, small-n floor per covariance type: which fits fall below the same-type trivial
model (one component) without a warning, and what the released noise levels were.

The utility floor's GMM data (``tests/estimators/utility_cases.py``: three blobs of sd 0.6 in
d = 3, centres in [-3, 3], declared box [-6, 6], ``neighbouring="replace"``), K = 3,
``max_iter=10``, held-out log-likelihood on 4,000 rows.  Per fit: model − trivial (nats/row),
W if it warned, the live components, and for the smallest live noisy count Ñ (the tail
average the last M-step used) the two public ratios of ``warn_if_covariances_unresolved``:

* ``cov/U``: the noise of one released variance entry of that component (σ₂/Ñ full and diag,
  σ₂/(d Ñ) spherical, σ₂/n tied) over the uniform feature variance on the box image, b²/3;
  full, diag and tied warn at ≥ 1 (spherical: over the mean of b_i²/3);
* ``mean/b``: the noise standard deviation of one coordinate of its mean, σ₁/Ñ, over b.

**Reads the noisy counts through the estimator's ``_finish`` hook** (released values, but
not attributes of the fitted model): a diagnostic, not an API.

Run: ``python bench/gmm_type_floor_small_n.py [--n 300] [--epsilon 1] [--seeds 12]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "estimators"))
from utility_cases import CASES, GMM_TYPE_CASES  # noqa: E402

from dpem_fast.mixture import _dp_gmm  # noqa: E402
from dpem_fast._engine._components import count_threshold, noise_std  # noqa: E402
from dpem_fast.mixture._common import floored_counts  # noqa: E402
from dpem_fast._kernels.gmm import COUNTS, FIRST, SECOND  # noqa: E402

_seen = {}
_finish = _dp_gmm.DPGaussianMixture._finish


def _spy(self, params, noisy, ctx):
    if self.n_components > 1:      # the K-component fit, not its trivial model
        _seen.update(counts=np.array(noisy[COUNTS]), releases=ctx.releases,
                     box=np.minimum(np.asarray(ctx.domain.box_image, dtype=float), 1.0), n=ctx.n_public)
    return _finish(self, params, noisy, ctx)


def ratios(ct, d):
    rel, nk = _seen["releases"], _seen["counts"]
    live = nk > count_threshold(rel[COUNTS])
    nk_f = floored_counts(nk, rel[COUNTS])[live].min()
    s1, s2 = noise_std(rel[FIRST]), noise_std(rel[SECOND])
    b2 = _seen["box"] ** 2
    cov = {"full": s2 / nk_f, "diag": s2 / nk_f, "spherical": s2 / (d * nk_f), "tied": s2 / _seen["n"]}[ct]
    unif = (b2.mean() if ct == "spherical" else b2.min()) / 3.0
    return int(live.sum()), cov / unif, s1 / nk_f / np.sqrt(b2.min())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=12)
    args = ap.parse_args(argv)
    _dp_gmm.DPGaussianMixture._finish = _spy
    cases = {**GMM_TYPE_CASES, "full": CASES["gmm"]}
    print(f"n = {args.n}, eps = {args.epsilon}, d = 3, K = 3; per seed: model - trivial (nats/row), W = warned, "
          "live, cov/U, mean/b")
    for ct in ("full", "diag", "tied", "spherical"):
        case, silent_below = cases[ct], 0
        for seed in range(args.seeds):
            X, X_test = case.data(args.n, seed)
            _seen.clear()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    m = case.model(args.epsilon, seed).fit(X)
                except ValueError:
                    print(f"{ct:9s} seed {seed:2d}  refused")
                    continue
            warned = any(issubclass(w.category, UserWarning) for w in caught)
            live, cov, mean = ratios(ct, X.shape[1])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = case.trivial(args.epsilon, seed, m, X)
            diff = case.score(m, X_test) - case.score(t, X_test)
            silent_below += (diff < 0) and not warned
            print(f"{ct:9s} seed {seed:2d}  {diff:+.2f} {'W' if warned else '-'}  live {live}  cov/U {cov:.2f}  "
                  f"mean/b {mean:.2f}", flush=True)
        print(f"{ct}: {silent_below} of {args.seeds} below the trivial model without a warning")


if __name__ == "__main__":
    main()
