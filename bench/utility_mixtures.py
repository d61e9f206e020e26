"""Utility floor of the private mixtures and k-means (issue 23): K components against one.

For each model, dataset, ε ∈ {0.3, 1, 3, 10} and seed 0-2 (seed s: a random 75 / 25 split drawn
with seed s, and ``random_state=s`` for the fits), the held-out score of

* ``K``     — the private K-component fit,
* ``one``   — the private one-component (one-centre) fit at the same (ε, δ = 1e-5) and relation
  (replace-one, the default),
* ``exact`` — the non-private K-component fit (ε = ∞),

plus ``live`` (components / centres the private K-fit released), ``tiny`` (released mixture
weights below 1 %, the issue's count of noise components), ``warn`` (NoiseDominatedWarning or
any other UserWarning raised by the fit) and ``refused`` (a ValueError before the fit: replace-one
makes n public, and a hopeless plan is refused before the budget is charged).  Scores: held-out
mean log-likelihood per row (mixtures), minus the mean squared distance to the nearest centre
(k-means); higher is better.

Models and data (all shipped with scikit-learn, nothing downloaded):

* Bernoulli mixture, K = 10, on ``load_digits`` binarised at ``x > 7`` (1797 × 64);
* Poisson mixture, K = 10, ``max_count = 16`` (the digits' public range), on ``load_digits``;
* Gaussian mixture (K = 3) and k-means (K = 3) on ``load_wine`` (178 × 13) and
  ``load_breast_cancer`` (569 × 30).  **Declared bounds**: each column's min / max over the
  whole table, widened by 10 % of its range on both sides.  They are read from the data here
  (a stand-in for bounds a user would know from the measurement's documentation), so these
  fits are *not* private end to end; the same bounds serve every method, so the comparison is
  fair.

Run: ``python bench/utility_mixtures.py --label after`` writes ``bench/out/utility_mixtures_after.csv``;
``python bench/utility_mixtures.py --compare before after`` prints the markdown table of two runs
(e.g. ``before`` run on the main branch's code).
"""
from __future__ import annotations

import argparse
import csv
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

import dpem_fast
from dpem_fast import DPBernoulliMixture, DPGaussianMixture, DPKMeans, DPPoissonMixture

EPSILONS = (0.3, 1.0, 3.0, 10.0)
SEEDS = (0, 1, 2)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
FIELDS = ("model", "data", "epsilon", "seed", "K", "one", "exact", "live", "tiny", "warn", "refused")


def _declared_bounds(X):
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = 0.1 * np.where(hi > lo, hi - lo, 1.0)
    return lo - pad, hi + pad


def _tables():
    digits = load_digits().data
    wine, cancer = load_wine().data, load_breast_cancer().data
    return [
        ("bernoulli", "digits>7", (digits > 7).astype(np.float64), 10,
         lambda K, **kw: DPBernoulliMixture(K, **kw)),
        ("poisson", "digits", digits, 10, lambda K, **kw: DPPoissonMixture(K, max_count=16.0, **kw)),
        ("gmm", "wine", wine, 3, lambda K, b=_declared_bounds(wine), **kw: DPGaussianMixture(K, bounds=b, **kw)),
        ("gmm", "cancer", cancer, 3,
         lambda K, b=_declared_bounds(cancer), **kw: DPGaussianMixture(K, bounds=b, **kw)),
        ("kmeans", "wine", wine, 3, lambda K, b=_declared_bounds(wine), **kw: DPKMeans(K, bounds=b, **kw)),
        ("kmeans", "cancer", cancer, 3, lambda K, b=_declared_bounds(cancer), **kw: DPKMeans(K, bounds=b, **kw)),
    ]


def _score(est, X):
    s = est.score(X)
    return s / X.shape[0] if isinstance(est, DPKMeans) else s


def _fit(make, K, X, **kw):
    """(fitted model or None if refused, warned?)"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est = make(K, **kw).fit(X)
        except ValueError:
            return None, False
    return est, any(issubclass(w.category, UserWarning) for w in caught)


def _live(est):
    if isinstance(est, DPKMeans):
        return est.cluster_centers_.shape[0]
    return int(np.shape(est.weights_)[0])


def run(label):
    rows = []
    for model, data, X, K, make in _tables():
        for seed in SEEDS:
            p = np.random.default_rng(seed).permutation(X.shape[0])
            cut = int(0.75 * X.shape[0])
            tr, te = X[p[:cut]], X[p[cut:]]
            exact, _ = _fit(make, K, tr, epsilon=float("inf"), random_state=seed)
            exact_score = _score(exact, te) if exact is not None else float("nan")
            for eps in EPSILONS:
                t0 = time.perf_counter()
                est, warned = _fit(make, K, tr, epsilon=eps, random_state=seed)
                one, _ = _fit(make, 1, tr, epsilon=eps, random_state=seed)
                row = dict(model=model, data=data, epsilon=eps, seed=seed, exact=exact_score,
                           one=_score(one, te) if one is not None else float("nan"),
                           K=_score(est, te) if est is not None else float("nan"),
                           live=_live(est) if est is not None else 0,
                           tiny=int(np.sum(est.weights_ < 0.01)) if est is not None and hasattr(est, "weights_")
                           else 0,
                           warn=int(warned), refused=int(est is None))
                rows.append(row)
                print(f"{model:9s} {data:9s} eps={eps:<4} seed={seed} K={row['K']:10.3f} one={row['one']:10.3f} "
                      f"exact={exact_score:10.3f} live={row['live']} tiny={row['tiny']} warn={row['warn']} "
                      f"refused={row['refused']}  ({time.perf_counter() - t0:.1f} s)", flush=True)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"utility_mixtures_{label}.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    print("wrote", path, "with dpem_fast", dpem_fast.__version__)


def _read(label):
    with open(os.path.join(OUT, f"utility_mixtures_{label}.csv")) as f:
        return list(csv.DictReader(f))


def _cell(rows):
    """Mean over seeds of K, one, exact (nan-aware) and the counts."""
    def mean(key):
        v = np.array([float(r[key]) for r in rows])
        v = v[np.isfinite(v)]
        return f"{v.mean():.2f}" if v.size else "—"
    fin = [r for r in rows if np.isfinite(float(r["K"])) and np.isfinite(float(r["one"]))]
    below = sum(float(r["K"]) < float(r["one"]) for r in fin)
    return (mean("K"), mean("one"), mean("exact"), f"{np.mean([float(r['live']) for r in rows]):.1f}",
            str(sum(int(r["tiny"]) for r in rows)), str(sum(int(r["warn"]) for r in rows)),
            str(sum(int(r["refused"]) for r in rows)), f"{below}/{len(fin)}")


def compare(before, after):
    b, a = _read(before), _read(after)
    keys = []
    for r in a:
        k = (r["model"], r["data"], r["epsilon"])
        if k not in keys:
            keys.append(k)
    print(f"| model | data | ε | K ({before}) | one ({before}) | K ({after}) | one ({after}) | exact | live {before}→{after} "
          f"| <1 % weights {before}→{after} | warned {before}→{after} | refused {after} | K<one {before}→{after} |")
    print("|" + "---|" * 14)
    for k in keys:
        cb = _cell([r for r in b if (r["model"], r["data"], r["epsilon"]) == k])
        ca = _cell([r for r in a if (r["model"], r["data"], r["epsilon"]) == k])
        print(f"| {k[0]} | {k[1]} | {float(k[2]):g} | {cb[0]} | {cb[1]} | {ca[0]} | {ca[1]} | {ca[2]} | "
              f"{cb[3]}→{ca[3]} | {cb[4]}→{ca[4]} | {cb[5]}→{ca[5]} | {ca[6]} | {cb[7]}→{ca[7]} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="after")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        run(args.label)
