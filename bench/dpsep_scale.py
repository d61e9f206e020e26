"""DP-SEP in the data's own units (issue 40, item 4): the paper's clustering problem fitted on X
and on X / c, c its largest row norm (the same problem in other units), same seeds.

    python bench/dpsep_scale.py [--seeds 20] [--epsilons 5.5 1]

The problem and the error are ``bench/sep_figure.py``'s (N = 1,000, J = 4, d = 2, s = 0.5,
means ~ N(0, I); F-norm with the paper's pairing, in the raw units: the scaled fit's means
times c).  Two declarations, each on both scalings, with everything declared scaled by c:

* ``declared``: bounds (-5, 5), prior N(0, I), s² = 0.25 (sep_figure's fit); scaled: bounds / c,
  prior covariance / c², s² / c²;
* ``defaults``: s² = 0.25 only (no bounds, no prior); scaled: s² / c².

A model in the data's own units gives equal columns ("max |dm|": the largest difference of a
mean between the two fits of a seed, raw units: the rounding of X / c, which the mixture's
dynamics amplify over ten epochs as much as a 1-ulp change of X; a power-of-two c gives 0).
The estimator's defaults (10 epochs, four releases per epoch, the default clip), δ = 1e-5, one
thread.  Results and the issue's before/after: ``docs/benchmarks.rst``, "DP-SEP, Section 4".
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sep_figure import PAPER, S2, make_data, metrics, true_posterior  # noqa: E402

from dpem_fast import DPStochasticEP  # noqa: E402

DECLARATIONS = ("declared", "defaults")


def fit(X, eps, seed, declaration, c):
    """The fit on X / c with the declaration scaled by c; (means, covariances) in raw units."""
    kw = dict(component_variance=S2 / c ** 2)
    if declaration == "declared":
        kw.update(bounds=(-5 / c, 5 / c), prior_mean=np.zeros(2), prior_covariance=np.eye(2) / c ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPStochasticEP(4, epsilon=eps, delta=1e-5, random_state=1000 + seed, n_threads=1, **kw).fit(X / c)
    return est.means_ * c, est.means_covariance_ * c * c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[5.5, 1.0])
    args = ap.parse_args(argv)
    print(f"{args.seeds} seeds; F-norm (paper pairing), raw units; c = the largest row norm of X")
    print(f"{'epsilon':>8} {'declaration':>12} {'X':>14} {'X / c':>14} {'max |dm|':>10} {'paper':>8}")
    for eps in args.epsilons:
        for declaration in DECLARATIONS:
            err = {1: [], 0: []}
            gap = 0.0
            for seed in range(args.seeds):
                X, mu, h = make_data(seed)
                pm, pS = true_posterior(X, h, 4, 2)
                c = float(np.linalg.norm(X, axis=1).max())
                (m1, V1), (mc, Vc) = fit(X, eps, seed, declaration, 1.0), fit(X, eps, seed, declaration, c)
                err[1].append(metrics(mu, pm, pS, m1, V1)[0])
                err[0].append(metrics(mu, pm, pS, mc, Vc)[0])
                gap = max(gap, float(np.abs(m1 - mc).max()))
            paper = PAPER.get(f"DP-SEP eps={eps:g}", (float("nan"),))[0]
            print(f"{eps:>8g} {declaration:>12} {np.mean(err[1]):>7.3f} +- {np.std(err[1]):<4.2f}"
                  f"{np.mean(err[0]):>7.3f} +- {np.std(err[0]):<4.2f}{gap:>10.2g} {paper:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
