"""Soundness and tightness of dpem_fast.audit over repeated seeds (issue 25).

Prints, per estimator and scope, how many of the seeds gave a lower bound above the claimed
ε (a sound audit of correct code: none, up to the 5 % the confidence allows), the ratio
epsilon_lower / epsilon_claimed (min, mean, max), for the fit scope also
epsilon_lower / the whole fit's ε (the issue's target: ≥ 0.8 at ε = 1), and seconds per
audit.  ε = 1, δ = 1e-5, each estimator's default relation (replace-one; LDA add/remove),
default trials (10⁶ per side; 10⁵ rounds of J releases for the fit scope), 95 % confidence,
the machine's threads.

Usage: ``python bench/bench_audit_soundness.py [n_seeds] [--quick]`` (``--quick``: the
cases of the issue's targets only).  The measured table is in ``docs/audit.rst``.
"""
import os
import sys
import time

import numpy as np

from dpem_fast import (DPBernoulliMixture, DPFactorAnalysis, DPGaussianMixture, DPKMeans,
                       DPLatentDirichletAllocation, DPPoissonMixture, DPStochasticEP)
from dpem_fast.audit import audit

VOCAB = [f"w{i}" for i in range(20)]


def _lda():
    return DPLatentDirichletAllocation(n_components=3, epsilon=1.0, batch_size=50, total_samples=1000,
                                       vocabulary=VOCAB, max_doc_length=30)


TARGETS = [
    ("DPGaussianMixture(K=3)", lambda: DPGaussianMixture(n_components=3, data_norm=1.0), "fit", {}),
    ("DPKMeans(K=3, init=None)", lambda: DPKMeans(n_clusters=3, data_norm=1.0, init=None), "fit", {}),
    ("DPFactorAnalysis(k=1)", lambda: DPFactorAnalysis(n_components=1, data_norm=1.0), "fit", {}),
    ("DPLatentDirichletAllocation", _lda, "release", {"statistic": "topic_word"}),
]
OTHERS = [
    ("DPGaussianMixture(K=3)", lambda: DPGaussianMixture(n_components=3, data_norm=1.0), "release", {}),
    ("DPGaussianMixture(K=3)", lambda: DPGaussianMixture(n_components=3, data_norm=1.0), "iteration", {}),
    ("DPKMeans(K=3)", lambda: DPKMeans(n_clusters=3, data_norm=1.0), "iteration", {}),
    ("DPLatentDirichletAllocation", _lda, "release", {"statistic": "unigram"}),
    ("DPBernoulliMixture(K=3)", lambda: DPBernoulliMixture(n_components=3), "iteration", {}),
    ("DPPoissonMixture(K=3)", lambda: DPPoissonMixture(n_components=3), "iteration", {}),
    ("DPStochasticEP(J=3)", lambda: DPStochasticEP(3, bounds=(-1.0, 1.0), component_variance=0.05), "fit", {}),
]


def main(n_seeds=20, quick=False):
    print(f"threads: {os.cpu_count()} cores, the estimators' default n_threads")
    print(f"{'estimator':28s} {'scope':10s} {'above claim':>11s} {'min':>6s} {'mean':>6s} {'max':>6s} "
          f"{'of fit eps':>10s} {'s/audit':>8s}")
    for label, make, scope, kw in TARGETS + ([] if quick else OTHERS):
        ratios, of_fit, above, t0 = [], [], 0, time.perf_counter()
        for seed in range(n_seeds):
            r = audit(make(), random_state=seed, scope=scope, **kw)
            ratios.append(r.epsilon_lower / r.epsilon_claimed)
            of_fit.append(r.epsilon_lower / r.plan_epsilon)
            above += r.violated
        dt = (time.perf_counter() - t0) / n_seeds
        name = scope if scope != "release" else kw.get("statistic", "release")
        fit = f"{np.mean(of_fit):10.3f}" if scope == "fit" else f"{'-':>10s}"
        print(f"{label:28s} {name:10s} {above:>5d}/{n_seeds:<5d} {min(ratios):6.3f} {np.mean(ratios):6.3f} "
              f"{max(ratios):6.3f} {fit} {dt:8.2f}", flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 20, quick="--quick" in sys.argv)
